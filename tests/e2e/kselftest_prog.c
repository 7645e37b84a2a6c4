/*
 * Target for the kernel's ftrace selftests (scripts/kselftest-ftrace): serves its tracefs,
 * prints where, and until SIGTERM runs, every millisecond on the main thread and on a
 * worker named "kst-worker", one round of user-space functions shaped like the kernel
 * functions those tests probe, so that `kselftest-ftrace -s vfs_read=kst_read ...` can run
 * the same test on a real function of this process:
 *   kst_clone(flags)            kernel_clone / _do_fork: called on every round, returns a value
 *   kst_read(file, buf, n, pos) vfs_read: a pointer to a struct, a buffer, a count, a position
 *   kst_free(object)          kfree: one parameter, returns nothing
 *   kst_exit(code)              do_exit: another function without a return value
 *   kst_schedule()              schedule: the function the function-tracer tests filter on
 *   kst_softirq()               do_softirq
 *   kst_create_dir(name, parent) tracefs_create_dir: called with "test", the directory the
 *                               kernel makes when kprobe_args_{char,string}.tc add event "test"
 *   kst_open(path, file)        vfs_open: two struct pointers (kretprobe/fprobe entry args)
 *   kst_sys_open(dfd, filename, flags, mode), kst_sys_openat2(dfd, filename, how)
 *                               do_sys_open / do_sys_openat2: open (and close) /dev/null for
 *                               real, the file the kernel's `echo > /dev/null` opens
 *   kst_sched_wakeup(p), kst_sched_switch(prev, next)
 *                               the scheduler's sched_waking/sched_wakeup and sched_switch
 *                               tracepoints, for f events of those names (the inter-event
 *                               cases): a struct kst_task of the running thread (pid = its
 *                               tid, prio, state 1 as a task that slept, comm[16] its name),
 *                               woken then switched in (prev = next = the thread)
 * Tracepoints (USDT probes, static events kst:NAME of the tracefs) for the t: cases, named
 * as the stand-ins of the kernel's tracepoints they replace (`-s kfree=kst_free
 * -s sched_switch=kst_schedule -s kmem_cache_alloc=kst_cache_alloc
 * -s kmem_cache_free=kst_cache_free`):
 *   kst:kst_free(object)        in kst_free
 *   kst:kst_schedule()          in kst_schedule
 *   kst:kst_cache_alloc(ptr, size), kst:kst_cache_free(ptr)   in kst_clone, around its buffer
 *   kst:kst_sched_switch(prev_pid, prev_state, next_pid)   in kst_sched_switch: a
 *                               sched_switch that survives `echo > dynamic_events` (the
 *                               synthetic-event-stack cases empty it), as the kernel's does
 *   kst:kst_sys_enter_openat(dfd, filename, flags), kst:kst_sys_exit_openat(fd)
 *                               in kst_sys_openat2, around its openat: the syscalls:
 *                               sys_enter_openat / sys_exit_openat of trigger-synthetic-eprobe.tc
 *                               (filename is a pointer, as the kernel's field; fd a long)
 * Built with -pg -mfentry -g: every function has a patch site and debug info for names.
 */
#define _GNU_SOURCE
#include "e2e_serve.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/sdt.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

struct kst_file {
    const char *name;
    long size;
    int flags;
};

static volatile long sink;

__attribute__((noinline)) void kst_free(const void *object)
{
    STAP_PROBE1(kst, kst_free, object);
    sink += object != NULL;
}

__attribute__((noinline)) void kst_exit(long code)
{
    sink += code;
}

__attribute__((noinline)) ssize_t kst_read(struct kst_file *file, char *buf, size_t count,
                                           long *pos)
{
    size_t n = 0;
    while (n < count && *pos + (long)n < file->size) {
        buf[n] = file->name[(*pos + (long)n) % 4];
        n++;
    }
    *pos += (long)n;
    return (ssize_t)n;
}

__attribute__((noinline)) void kst_schedule(void)
{
    STAP_PROBE(kst, kst_schedule);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void kst_softirq(void)
{
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void *kst_create_dir(const char *name, void *parent)
{
    sink += name[0];
    return parent;
}

struct kst_path {
    void *mnt;
    void *dentry;
};

__attribute__((noinline)) int kst_open(const struct kst_path *path, struct kst_file *file)
{
    sink += path->mnt != NULL;
    return file->flags;
}

struct kst_open_how {
    unsigned long long flags, mode, resolve;
};

__attribute__((noinline)) long kst_sys_openat2(int dfd, const char *filename,
                                               struct kst_open_how *how)
{
    STAP_PROBE3(kst, kst_sys_enter_openat, dfd, filename, (long)how->flags);
    long fd = openat(dfd, filename, (int)how->flags, (mode_t)how->mode);
    STAP_PROBE1(kst, kst_sys_exit_openat, fd);
    if (fd >= 0) close((int)fd);
    return fd;
}

__attribute__((noinline)) long kst_sys_open(int dfd, const char *filename, int flags,
                                            unsigned short mode)
{
    struct kst_open_how how = {(unsigned long long)flags, mode, 0};
    return kst_sys_openat2(dfd, filename, &how);
}

struct kst_task {
    int pid;
    int prio;
    long state;
    char comm[16];
};

__attribute__((noinline)) void kst_sched_wakeup(struct kst_task *p)
{
    sink += p->pid;
}

__attribute__((noinline)) void kst_sched_switch(struct kst_task *prev, struct kst_task *next)
{
    STAP_PROBE3(kst, kst_sched_switch, prev->pid, prev->state, next->pid);
    sink += prev->state + next->prio;
}

static void kst_task_init(struct kst_task *t)
{
    memset(t, 0, sizeof *t);
    t->pid = (int)gettid();
    t->prio = 120;
    t->state = 1;
    prctl(PR_GET_NAME, t->comm, 0, 0, 0);
}

__attribute__((noinline)) long kst_clone(unsigned long flags)
{
    struct kst_file f = {"kst!", 64, (int)flags};
    char buf[16];
    long pos = 0;
    STAP_PROBE2(kst, kst_cache_alloc, buf, sizeof buf);
    struct kst_path path = {&f, buf};
    long got = kst_read(&f, buf, sizeof buf, &pos);
    kst_create_dir("test", &f);
    kst_open(&path, &f);
    if (kst_sys_open(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 0) < 0) return -1;
    kst_free(buf);
    STAP_PROBE1(kst, kst_cache_free, buf);
    kst_exit(0);
    return got + (long)flags;
}

static int round_once(unsigned long flags, struct kst_task *self)
{
    kst_sched_wakeup(self);
    kst_sched_switch(self, self);
    kst_schedule();
    kst_softirq();
    return kst_clone(flags) == 16 + (long)flags;
}

static void *worker(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 1000 * 1000};
    struct kst_task self;
    prctl(PR_SET_NAME, "kst-worker", 0, 0, 0); /* its name from its first round on */
    kst_task_init(&self);
    while (!stop) {
        if (!round_once(1, &self)) return (void *)1;
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(void)
{
    int r = prog_serve_start();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 4;
    pthread_setname_np(t, "kst-worker");
    prog_say_where(r);

    struct timespec ts = {0, 1000 * 1000};
    struct kst_task self;
    kst_task_init(&self);
    while (!stop) {
        if (!round_once(0, &self)) return 2;
        nanosleep(&ts, NULL);
    }
    void *ret;
    pthread_join(t, &ret);
    return ret ? 3 : 0;
}
