/*
 * A program running under a CET shadow stack (Linux 6.6+, CPUs with user_shstk): every
 * return is checked against the copy of its return address the CPU pushed at the call, and
 * a mismatch ends the program with SIGSEGV (#CP). dprobe's balanced returns keep calls and
 * returns paired, so fprobes with exit handlers on patch sites and jump sites work there.
 *
 * The shadow stack is enabled with arch_prctl(ARCH_SHSTK_ENABLE) (this Debian's glibc does
 * not enable it itself): from then on the function that enabled it may never return (its
 * caller's return address is not on the new shadow stack), so everything happens inside it
 * and the program ends with exit_group. Exit status: 0 passed, 1 failed, 77 skipped (no
 * shadow stack from the kernel).
 */
#include <dprobe/fprobe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_SHSTK_ENABLE 0x5001
#define ARCH_SHSTK_SHSTK (1ULL << 0)

#define DECLARE(fl)                                                                                \
    long fl##_leaf(long);                                                                          \
    long fl##_mid(long);                                                                           \
    long fl##_tail(long);
DECLARE(shstk_fentry)
DECLARE(shstk_pfe)
DECLARE(shstk_plain)

static long entries, exits, bad;

static int on_entry(struct fprobe *fp, unsigned long ip, unsigned long ret, struct ftrace_regs *r,
                    void *data)
{
    ++entries;
    *(unsigned long *)data = ret;
    return 0;
}

static void on_exit_(struct fprobe *fp, unsigned long ip, unsigned long ret, struct ftrace_regs *r,
                     void *data)
{
    ++exits;
    if (*(unsigned long *)data != ret) ++bad;
}

static void finish(int status)
{
    fflush(stdout);
    syscall(SYS_exit_group, status);
}

static long (*const volatile fns[][3])(long) = {
    {shstk_fentry_leaf, shstk_fentry_mid, shstk_fentry_tail},
    {shstk_pfe_leaf, shstk_pfe_mid, shstk_pfe_tail},
    {shstk_plain_leaf, shstk_plain_mid, shstk_plain_tail},
};

__attribute__((noinline)) static void run(void)
{
    struct fprobe fp;
    memset(&fp, 0, sizeof fp);
    fp.entry_handler = on_entry;
    fp.exit_handler = on_exit_;
    fp.entry_data_size = sizeof(unsigned long);
    if (register_fprobe(&fp, "shstk_*", NULL) != 0) {
        printf("register_fprobe failed\n");
        finish(1);
    }
    long calls = 0;
    for (long i = 0; i < 1000; ++i) {
        for (int f = 0; f < 3; ++f) {
            if (fns[f][0](i) != i * 3 + 1 || fns[f][1](i) != i * 3 + 2 ||
                fns[f][2](i) != (i + 1) * 3 + 1) {
                printf("wrong result\n");
                finish(1);
            }
            calls += 5; /* leaf, mid + leaf, tail + leaf */
        }
    }
    unregister_fprobe(&fp);
    printf("shadow stack: %ld calls, %ld entries, %ld exits, %ld wrong return addresses, %lu "
           "missed\n",
           calls, entries, exits, bad, fp.nmissed);
    finish(entries == calls && exits == calls && !bad && !fp.nmissed ? 0 : 1);
}

int main(void)
{
    /* SHSTK_OFF=1 runs the same checks without the shadow stack (to tell a dprobe failure
     * from a shadow-stack one). */
    const char *off = getenv("SHSTK_OFF");
    if (off && *off == '1') run();
    if (syscall(SYS_arch_prctl, ARCH_SHSTK_ENABLE, ARCH_SHSTK_SHSTK) != 0) {
        printf("no user shadow stack from the kernel (arch_prctl: %m): skipped\n");
        return 77;
    }
    run(); /* never returns: main's return address is not on the shadow stack */
    return 1;
}
