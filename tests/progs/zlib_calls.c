/* Compresses and uncompresses a buffer with zlib (the system's libz.so.1, built without
 * patch sites): inflate dispatches its states through a switch jump table, which jump sites
 * follow. run_ops, a bytecode loop dispatched with computed gotos, has an indirect jump whose
 * targets no table tells, and no patch site in any flavour: `dprobe record -F run_ops`
 * traces it through an int3 entry, and says so. It is also called from a thread started with
 * every signal blocked (as liblzma starts its workers) and from a signal handler installed
 * with a full mask: a breakpoint that finds SIGTRAP blocked kills the process, so dprobe
 * keeps SIGTRAP out of the masks the program sets while it owns the signal. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

/* No site in any flavour: no __fentry__ call (-pg), no NOP sled (-fpatchable-function-entry). */
__attribute__((noinline, no_instrument_function, patchable_function_entry(0, 0))) int
run_ops(const unsigned char *ops, int acc)
{
    static void *const dispatch[] = {&&op_end, &&op_add, &&op_double};
    goto *dispatch[*ops++];
op_add:
    acc += 1;
    goto *dispatch[*ops++];
op_double:
    acc *= 2;
    goto *dispatch[*ops++];
op_end:
    return acc;
}

static const unsigned char program[] = {1, 2, 1, 2, 0}; /* ((0 + 1) * 2 + 1) * 2 */
static volatile int from_thread, from_handler;

static void *blocked_worker(void *arg)
{
    (void)arg;
    from_thread = run_ops(program, 0);
    return NULL;
}

static void full_mask_handler(int sig)
{
    (void)sig;
    from_handler = run_ops(program, 0);
}

int main(void)
{
    static unsigned char in[64 * 1024], packed[80 * 1024], out[64 * 1024];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)("dprobe records zlib"[i % 19]);
    int ok = 1;
    for (int round = 0; round < 3; round++) {
        uLongf plen = sizeof packed, olen = sizeof out;
        ok &= compress2(packed, &plen, in, sizeof in, 6) == Z_OK;
        ok &= uncompress(out, &olen, packed, plen) == Z_OK;
        ok &= olen == sizeof in && memcmp(in, out, olen) == 0;
    }
    for (int i = 0; i < 4; i++)
        ok &= run_ops(program, 0) == 6;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    ok &= pthread_create(&t, NULL, blocked_worker, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    ok &= pthread_join(t, NULL) == 0 && from_thread == 6;
    struct sigaction sa = {0};
    sa.sa_handler = full_mask_handler;
    sigfillset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
    ok &= from_handler == 6;
    printf("%s\n", ok ? "round trip ok" : "round trip FAILED");
    return ok ? 0 : 1;
}
