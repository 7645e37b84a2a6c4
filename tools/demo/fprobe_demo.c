/*
 * The fprobe C API in action: linked into wordfreq (which knows nothing of it), this
 * registers one fprobe on the glob in $DEMO_FILTER (default "wf_*") before main runs and
 * prints every entry with its first two arguments and every exit with its return value
 * and duration, indented by call depth, per thread.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <dprobe/fprobe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __thread int depth;

static const char *name_of(unsigned long ip)
{
    Dl_info info;
    if (dladdr((void *)ip, &info) && info.dli_sname) return info.dli_sname;
    return "?";
}

static unsigned long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long)ts.tv_sec * 1000000000UL + (unsigned long)ts.tv_nsec;
}

static void emit(const char *line, int len)
{
    if (write(STDOUT_FILENO, line, (size_t)len) < 0) return;
}

static int on_entry(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                    struct ftrace_regs *regs, void *data)
{
    (void)fp;
    (void)ret_ip;
    char line[256];
    int n = snprintf(line, sizeof line, "%6ld | %*s%s(0x%lx, 0x%lx) {\n", syscall(SYS_gettid),
                     depth * 2, "", name_of(ip), ftrace_regs_get_argument(regs, 0),
                     ftrace_regs_get_argument(regs, 1));
    emit(line, n);
    depth++;
    *(unsigned long *)data = now_ns();
    return 0;
}

static void on_exit_(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                     struct ftrace_regs *regs, void *data)
{
    (void)fp;
    (void)ret_ip;
    unsigned long took = now_ns() - *(unsigned long *)data;
    depth--;
    char line[256];
    int n = snprintf(line, sizeof line, "%6ld | %*s} = 0x%lx  /* %s, %lu.%03lu us */\n",
                     syscall(SYS_gettid), depth * 2, "", ftrace_regs_get_return_value(regs),
                     name_of(ip), took / 1000, took % 1000);
    emit(line, n);
}

static struct fprobe demo_probe = {
    .entry_handler = on_entry,
    .exit_handler = on_exit_,
    .entry_data_size = sizeof(unsigned long),
};

__attribute__((constructor)) static void demo_start(void)
{
    const char *filter = getenv("DEMO_FILTER");
    if (!filter) filter = "wf_*";
    const char *notfilter = getenv("DEMO_NOTFILTER");
    int err = register_fprobe(&demo_probe, filter, notfilter);
    if (err) {
        fprintf(stderr, "fprobe-demo: register_fprobe(\"%s\") failed: %s\n", filter,
                strerror(-err));
        return;
    }
    fprintf(stderr, "fprobe-demo: fprobe on \"%s\"%s%s: %d functions\n", filter,
            notfilter ? " except " : "", notfilter ? notfilter : "",
            fprobe_count_ips_from_filter(filter, notfilter));
}

__attribute__((destructor)) static void demo_stop(void)
{
    if (!fprobe_is_registered(&demo_probe)) return;
    unregister_fprobe(&demo_probe);
    fprintf(stderr, "fprobe-demo: unregistered; %lu hits missed\n", demo_probe.nmissed);
}
