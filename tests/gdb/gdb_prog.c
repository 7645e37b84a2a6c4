/*
 * The program gdb looks at in tests/gdb/unwind_check.py: main -> outer -> middle ->
 * recurse(3) -> recurse(2) -> recurse(1) -> recurse(0) -> via_tail => inner -> stop_here(),
 * where the debugger has a breakpoint (=>: a tail call). Built in each site flavour (-pg -mfentry,
 * -fpatchable-function-entry=5, plain) and linked with libdprobe.so or the static archive.
 *
 * argv[1] says what probes the chain and where it stops:
 *   none       no probe: the backtrace every other mode must match
 *   fprobe     one fprobe with entry and exit handlers on the five functions
 *   kretprobe  one kretprobe on each of them
 *   exit       as fprobe, stopped in the exit handler of inner (its return is dispatched)
 *   kretexit   as kretprobe, stopped in the kretprobe handler of inner
 *   entry      as fprobe, stopped in the entry handler of inner
 *   threads    as fprobe, with a second thread parked in inner (in read()) while the main
 *              thread stops
 * The functions keep values in callee-saved registers across their calls, so that the
 * registers the debugger unwinds to can be checked against what the CPU has when each
 * call returns.
 */
#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noipa))

static const char *mode = "none";
static int stop_at_exit, stop_at_entry, park_fds[2] = {-1, -1};
static volatile int inner_returning, parked;
static pthread_t worker;

NOINLINE void stop_here(void)
{
    __asm__ volatile("" ::: "memory");
}
/* A call to stop_here() that is not a tail call: the caller stays in the backtrace. */
#define STOP()                                                                                     \
    do {                                                                                           \
        stop_here();                                                                               \
        __asm__ volatile("" ::: "memory");                                                         \
    } while (0)

/* The worker thread waits here, inside inner, until the debugger kills the program. */
NOINLINE static void park(void)
{
    char c;
    parked = 1;
    while (read(park_fds[0], &c, 1) < 0)
        ;
}

NOINLINE int inner(int x)
{
    if (pthread_equal(pthread_self(), worker))
        park();
    else if (!stop_at_exit && !stop_at_entry)
        STOP();
    inner_returning = 1;
    return x + 1;
}

/* Tail-calls inner (a jmp at -O2): both probed, their hooked returns share one slot, and
 * inner's shadow frame has the trampoline as its return address (its caller's has the
 * real one). Like any tail-calling function, it is not in the backtrace. */
NOINLINE int via_tail(int x)
{
    return inner(x + 1);
}

NOINLINE int recurse(int n)
{
    long keep = n * 7 + 1; /* live across the call: a callee-saved register at -O2 */
    int r = n == 0 ? via_tail(n - 1) : recurse(n - 1);
    __asm__ volatile("" : "+r"(r)); /* not a tail call, no accumulator loop */
    return r + (int)keep;
}

NOINLINE int middle(int x)
{
    long a = x * 13L + 5, b = x * 29L + 3, c = x ^ 0x5a5a;
    int r = recurse(x);
    __asm__ volatile("" : "+r"(r));
    return (int)(r + a + b + c);
}

NOINLINE int outer(int x)
{
    long a = x * 3L + 11, b = x * 17L + 7;
    int r = middle(x + 1);
    __asm__ volatile("" : "+r"(r));
    return (int)(r + a * b);
}

static int on_entry(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                    struct ftrace_regs *regs, void *data)
{
    (void)fp, (void)ret_ip, (void)regs, (void)data;
    /* The entry ip is inner's patch site: its first instruction, or the one after endbr64. */
    if (stop_at_entry && ip - (unsigned long)inner < 16) STOP();
    return 0;
}

static void on_exit_(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                     struct ftrace_regs *regs, void *data)
{
    (void)fp, (void)ip, (void)ret_ip, (void)regs, (void)data;
    if (stop_at_exit && inner_returning) {
        inner_returning = 0;
        STOP();
    }
}

static int on_kret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    (void)ri, (void)regs;
    if (stop_at_exit && inner_returning) {
        inner_returning = 0;
        STOP();
    }
    return 0;
}

static const char *funcs[] = {"outer", "middle", "recurse", "via_tail", "inner"};
#define NFUNCS (int)(sizeof(funcs) / sizeof(funcs[0]))
static struct fprobe fp = {.entry_handler = on_entry, .exit_handler = on_exit_};
static struct kretprobe krps[NFUNCS];

static void *worker_main(void *arg)
{
    (void)arg;
    outer(2);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) mode = argv[1];
    int use_fprobe = !strcmp(mode, "fprobe") || !strcmp(mode, "exit") || !strcmp(mode, "entry") ||
                     !strcmp(mode, "threads");
    int use_kretprobe = !strcmp(mode, "kretprobe") || !strcmp(mode, "kretexit");
    if (!use_fprobe && !use_kretprobe && strcmp(mode, "none")) {
        fprintf(stderr, "gdb_prog: unknown mode %s\n", mode);
        return 2;
    }
    stop_at_exit = !strcmp(mode, "exit") || !strcmp(mode, "kretexit");
    stop_at_entry = !strcmp(mode, "entry");
    if (use_fprobe) {
        const char *syms[NFUNCS];
        memcpy(syms, funcs, sizeof(syms));
        int err = register_fprobe_syms(&fp, syms, NFUNCS);
        if (err) {
            fprintf(stderr, "gdb_prog: register_fprobe_syms: %d\n", err);
            return 1;
        }
    }
    for (int i = 0; use_kretprobe && i < NFUNCS; ++i) {
        krps[i].kp.symbol_name = funcs[i];
        krps[i].handler = on_kret;
        krps[i].maxactive = 16;
        int err = register_kretprobe(&krps[i]);
        if (err) {
            fprintf(stderr, "gdb_prog: register_kretprobe(%s): %d\n", funcs[i], err);
            return 1;
        }
    }
    if (!strcmp(mode, "threads")) {
        if (pipe(park_fds) || pthread_create(&worker, NULL, worker_main, NULL)) {
            perror("gdb_prog");
            return 1;
        }
        /* Wait until the worker is parked in inner: its hooked calls are in flight. */
        while (!parked)
            usleep(1000);
    }
    printf("%d\n", outer(2));
    return 0;
}
