/* A user's first program against an installed dprobe: an fprobe on a glob of its own
 * functions (built with -pg -mfentry). Exit status 0 when every call was seen. */
#include <dprobe/fprobe.h>
#include <stdio.h>

__attribute__((noinline)) long app_work(long x)
{
    return x * 2 + 1;
}

static long entries, exits;
static int on_entry(struct fprobe *fp, unsigned long ip, unsigned long ret, struct ftrace_regs *r,
                    void *d)
{
    ++entries;
    return 0;
}
static void on_exit_(struct fprobe *fp, unsigned long ip, unsigned long ret, struct ftrace_regs *r,
                     void *d)
{
    ++exits;
}

int main(void)
{
    struct fprobe fp = {.entry_handler = on_entry, .exit_handler = on_exit_};
    int err = register_fprobe(&fp, "app_*", NULL);
    if (err) {
        fprintf(stderr, "register_fprobe: %d\n", err);
        return 1;
    }
    long s = 0;
    for (long i = 0; i < 100; ++i)
        s += app_work(i);
    unregister_fprobe(&fp);
    printf("app: %ld entries, %ld exits (sum %ld)\n", entries, exits, s);
    return entries == 100 && exits == 100 && s == 10000 ? 0 : 1;
}
