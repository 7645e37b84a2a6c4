#include "core/stop_machine.h"

#include "arch/x86_64/raw_syscall.h"
#include "core/ring_buffer.h"

#include <cerrno>
#include <csignal>
#include <pthread.h>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dprobe
{
namespace
{

// State shared with the vfork child (same memory). Static: the child must not allocate.
struct stop_state {
    pid_t tgid, self;
    stopped_thread threads[stop_machine_max_threads];
    size_t n;
    stop_machine_fn fn;
    void *arg;
    int error;
};
stop_state st;

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

// The child calls no libc function: any of them could be a probed function.
using arch::raw_syscall;

long pt(long req, pid_t tid, void *data = nullptr)
{
    return raw_syscall(SYS_ptrace, req, tid, 0, reinterpret_cast<long>(data));
}

bool known(pid_t tid)
{
    for (size_t i = 0; i < st.n; ++i)
        if (st.threads[i].tid == tid) return true;
    return false;
}

// Whether a SIGTRAP is queued for TID alone (an int3 it executed: the kernel sends that
// signal to the thread, and a PTRACE_INTERRUPT stop can come before its delivery).
bool trap_queued(pid_t tid)
{
    siginfo_t queued[8];
    for (uint64_t off = 0;; off += 8) {
        __ptrace_peeksiginfo_args a = {off, 0, 8};
        long n = raw_syscall(SYS_ptrace, PTRACE_PEEKSIGINFO, tid, reinterpret_cast<long>(&a),
                             reinterpret_cast<long>(queued));
        if (n <= 0) return false;
        for (long i = 0; i < n; ++i)
            if (queued[i].si_signo == SIGTRAP) return true;
        if (n < 8) return false;
    }
}

// Seizes and interrupts every thread not yet stopped; returns how many were added, or -1.
long stop_new_threads(int dirfd)
{
    char buf[4096];
    long added = 0;
    raw_syscall(SYS_lseek, dirfd, 0, SEEK_SET);
    for (;;) {
        long nread = raw_syscall(SYS_getdents64, dirfd, reinterpret_cast<long>(buf), sizeof buf);
        if (nread < 0) {
            st.error = static_cast<int>(nread);
            return -1;
        }
        if (nread == 0) break;
        for (long off = 0; off < nread;) {
            auto *d = reinterpret_cast<linux_dirent64 *>(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
            pid_t tid = 0;
            for (const char *p = d->d_name; *p; ++p)
                tid = tid * 10 + (*p - '0');
            if (tid == st.self || known(tid)) continue;
            if (st.n == stop_machine_max_threads) {
                st.error = -E2BIG;
                return -1;
            }
            if (long e = pt(PTRACE_SEIZE, tid)) {
                if (e == -ESRCH) continue; // exited meanwhile
                st.error = static_cast<int>(e);
                return -1;
            }
            stopped_thread &t = st.threads[st.n++];
            t.tid = tid;
            t.changed = false;
            t.in_trap = false;
            if (long e = pt(PTRACE_INTERRUPT, tid)) {
                st.error = static_cast<int>(e);
                return -1;
            }
            int status = 0;
            long w;
            do {
                w = raw_syscall(SYS_wait4, tid, reinterpret_cast<long>(&status), __WALL, 0);
            } while (w == -EINTR);
            if (w != tid || !WIFSTOPPED(status)) {
                // The thread exited before stopping: forget it.
                --st.n;
                continue;
            }
            // A signal-delivery stop (status >> 16 == 0) reports a signal that was on its
            // way to the thread (an int3 it just hit, say): it must be delivered on detach.
            t.pending_sig = (status >> 16) == 0 ? WSTOPSIG(status) : 0;
            if (long e = pt(PTRACE_GETREGS, tid, &t.regs)) {
                st.error = static_cast<int>(e);
                return -1;
            }
            t.in_trap = t.pending_sig == SIGTRAP || trap_queued(tid);
            ++added;
        }
    }
    return added;
}

void release_all()
{
    for (size_t i = 0; i < st.n; ++i) {
        stopped_thread &t = st.threads[i];
        if (t.changed) pt(PTRACE_SETREGS, t.tid, &t.regs);
        raw_syscall(SYS_ptrace, PTRACE_DETACH, t.tid, 0, t.pending_sig);
    }
}

[[noreturn]] void child_main()
{
    char path[64];
    // "/proc/<tgid>/task" without snprintf (not async-signal-safe in theory).
    const char prefix[] = "/proc/";
    size_t len = sizeof prefix - 1;
    for (size_t i = 0; i < len; ++i)
        path[i] = prefix[i];
    char digits[16];
    int nd = 0;
    for (pid_t v = st.tgid; v; v /= 10)
        digits[nd++] = static_cast<char>('0' + v % 10);
    while (nd)
        path[len++] = digits[--nd];
    const char task[] = "/task";
    for (size_t i = 0; i < sizeof task; ++i)
        path[len + i] = task[i];
    int dirfd = static_cast<int>(
        raw_syscall(SYS_open, reinterpret_cast<long>(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dirfd < 0) {
        st.error = dirfd;
        raw_syscall(SYS_exit, 1);
    }
    // Threads may be created while we stop the others: list again until nothing is new.
    long added;
    do {
        added = stop_new_threads(dirfd);
    } while (added > 0);
    raw_syscall(SYS_close, dirfd);
    if (added < 0) {
        release_all();
        raw_syscall(SYS_exit, 1);
    }
    st.fn(st.threads, st.n, st.arg);
    release_all();
    raw_syscall(SYS_exit, 0);
    __builtin_unreachable();
}

} // namespace

int stop_machine(stop_machine_fn fn, void *arg)
{
    st.tgid = getpid();
    st.self = static_cast<pid_t>(syscall(SYS_gettid));
    st.n = 0;
    st.fn = fn;
    st.arg = arg;
    st.error = 0;
    // Under Yama ptrace_scope=1 only an ancestor may attach, unless we allow it.
    int old_ptracer_ok = prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    // A child without exit signal: the program's SIGCHLD handler and wait() never see it.
    // Its own signals blocked: it inherits the program's handlers, and the kernel tells a
    // tracer of each thread it stops with a SIGCHLD, which would run the program's handler
    // in the child. (This thread is suspended until the child ends anyway.)
    sigset_t all, old_mask;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_mask);
    // The child shares this thread's memory and thread pointer, so its thread-local state:
    // muted here, it records nothing from probes of the code it runs (a kprobe on libc's
    // strlen while ST.FN works), as an event from a thread the process does not have.
    ring_buffer_thread_mute(true);
    pid_t child = dprobe_vfork_quiet();
    if (child == 0) child_main();
    ring_buffer_thread_mute(false);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    int err = 0;
    if (child < 0) {
        err = child;
    } else {
        int status;
        while (waitpid(child, &status, __WALL) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) err = st.error ? st.error : -EPERM;
    }
    if (old_ptracer_ok == 0) prctl(PR_SET_PTRACER, 0, 0, 0, 0);
    return err;
}

} // namespace dprobe
