#include "tools/dprobe/attach/ptrace_call.h"

#include "arch/x86_64/insn_bytes.h"
#include "tools/attach_protocol.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dprobe::tools
{

namespace
{

constexpr uint64_t k_tf = 0x100, k_df = 0x400; // rflags: trap flag, direction flag
constexpr int k_rounds = 250;                  // selection rounds, 2 ms apart
constexpr size_t k_tries_per_round = 8;

// Objects whose internal locks a call of dlopen or pthread_create may need: a thread
// stopped inside them is not borrowed.
const std::vector<std::string> k_runtime_libs = {"libc.so", "libc-2.",    "ld-linux",
                                                 "ld-2.",   "libpthread", "libdl"};

// Blocking system calls a thread can be taken out of and put back into without the program
// noticing: the kernel restarts them from their registers (-ERESTARTSYS and friends; those
// that run with a temporary signal mask set it again when they restart).
bool restarts_plainly(long nr)
{
    switch (nr) {
    case SYS_read:
    case SYS_write:
    case SYS_readv:
    case SYS_writev:
    case SYS_pread64:
    case SYS_pwrite64:
    case SYS_select:
    case SYS_pselect6:
    case SYS_ppoll:
    case SYS_pause:
    case SYS_rt_sigsuspend:
    case SYS_connect:
    case SYS_accept:
    case SYS_accept4:
    case SYS_sendto:
    case SYS_recvfrom:
    case SYS_sendmsg:
    case SYS_recvmsg:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_fcntl:
    case SYS_flock:
    case SYS_futex:
        return true;
    default:
        return false;
    }
}

// Restarted through the kernel's per-thread restart block (the time left to sleep): fine as
// long as nothing the call does replaces that block, which it has no reason to.
bool restarts_by_block(long nr)
{
    return nr == SYS_nanosleep || nr == SYS_clock_nanosleep || nr == SYS_poll ||
           nr == SYS_restart_syscall;
}

// Fail with EINTR when the thread is stopped, even by ptrace (epoll_wait, sigtimedwait...;
// see "Interruption of system calls" in signal(7)): borrowed only when nothing else is.
bool fails_with_eintr(long nr)
{
    switch (nr) {
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_rt_sigtimedwait:
    case SYS_io_getevents:
    case SYS_semtimedop:
    case SYS_semop:
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
        return true;
    default:
        return false;
    }
}

const std::pair<long, const char *> k_syscall_names[] = {{SYS_read, "read"},
                                                         {SYS_write, "write"},
                                                         {SYS_poll, "poll"},
                                                         {SYS_select, "select"},
                                                         {SYS_nanosleep, "nanosleep"},
                                                         {SYS_clock_nanosleep, "clock_nanosleep"},
                                                         {SYS_futex, "futex"},
                                                         {SYS_wait4, "wait4"},
                                                         {SYS_accept, "accept"},
                                                         {SYS_accept4, "accept4"},
                                                         {SYS_recvfrom, "recvfrom"},
                                                         {SYS_recvmsg, "recvmsg"},
                                                         {SYS_pause, "pause"},
                                                         {SYS_waitid, "waitid"},
                                                         {SYS_ppoll, "ppoll"},
                                                         {SYS_pselect6, "pselect6"},
                                                         {SYS_rt_sigsuspend, "rt_sigsuspend"},
                                                         {SYS_restart_syscall, "restart_syscall"},
                                                         {SYS_epoll_wait, "epoll_wait"},
                                                         {SYS_epoll_pwait, "epoll_pwait"}};

struct candidate {
    pid_t tid;
    int score; // higher first: 2 * class + 1 for the main thread; class 0 fails with EINTR
    bool last_resort() const { return score / 2 == 0; }
};

std::string read_line(const std::string &path)
{
    std::ifstream in(path);
    std::string s;
    std::getline(in, s);
    return s;
}

// The threads worth trying, best first.
std::vector<candidate> candidates(pid_t pid)
{
    std::vector<candidate> out;
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR *d = opendir(dir.c_str());
    if (!d) return out;
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
        std::string base = dir + "/" + e->d_name;
        if (read_line(base + "/comm").rfind(attach::thread_name_prefix, 0) == 0)
            continue; // the agent's own threads
        proc_status ts;
        if (!read_proc_status(pid, ts, tid) || !std::strchr("RS", ts.state))
            continue; // uninterruptible, stopped, exiting
        std::string sc = read_line(base + "/syscall");
        int score = 2; // running: judged once stopped
        if (!sc.empty() && sc != "running") {
            long nr = std::strtol(sc.c_str(), nullptr, 10);
            if (nr == SYS_vfork || nr == SYS_execve || nr == SYS_exit || nr == SYS_exit_group)
                continue;
            if (nr >= 0)
                score = restarts_plainly(nr)    ? 5
                        : restarts_by_block(nr) ? 4
                        : fails_with_eintr(nr)  ? 0
                                                : 1;
        }
        if (tid == pid)
            score = score * 2 + 1; // the main thread: a big stack, no odd signal setup
        else
            score *= 2;
        out.push_back({tid, score});
    }
    closedir(d);
    std::stable_sort(out.begin(), out.end(),
                     [](const candidate &a, const candidate &b) { return a.score > b.score; });
    return out;
}

long pt(int req, pid_t tid, void *addr = nullptr, void *data = nullptr)
{
    errno = 0;
    return ptrace(static_cast<__ptrace_request>(req), tid, addr, data);
}

} // namespace

thread_borrow::~thread_borrow()
{
    give_back();
    if (mem_fd_ >= 0) ::close(mem_fd_);
}

int thread_borrow::fail(int err, const std::string &msg)
{
    msg_ = msg;
    return err;
}

int thread_borrow::wait_stop(int *status)
{
    for (;;) {
        pid_t w = waitpid(tid_, status, __WALL);
        if (w == tid_) return 0;
        if (w < 0 && errno == EINTR) continue;
        return -errno;
    }
}

int thread_borrow::release(int sig)
{
    pt(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void *>(static_cast<long>(sig)));
    held_ = false;
    return 0;
}

// Seizes and interrupts TID; 0 with the thread stopped, *PENDING the signal it was about to
// take (0 for none), or -errno.
int thread_borrow::seize(pid_t tid, int *pending)
{
    tid_ = tid;
    if (pt(PTRACE_SEIZE, tid) != 0) return -errno;
    held_ = true;
    if (pt(PTRACE_INTERRUPT, tid) != 0) {
        int e = errno;
        held_ = false;
        return -e; // gone
    }
    int status = 0;
    if (int e = wait_stop(&status)) {
        held_ = false;
        return e;
    }
    if (!WIFSTOPPED(status)) {
        held_ = false; // exited
        return -ESRCH;
    }
    int event = status >> 16;
    *pending = event == 0 ? WSTOPSIG(status) : 0;
    if (event == PTRACE_EVENT_STOP && WSTOPSIG(status) != SIGTRAP) {
        // A group stop (SIGSTOP, SIGTSTP...): the process is being stopped.
        release(0);
        return -EAGAIN;
    }
    return 0;
}

int thread_borrow::borrow()
{
    if (held_) return 0;
    if (mem_fd_ < 0) {
        mem_fd_ = ::open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
        if (mem_fd_ < 0) {
            int e = errno;
            if (e == ENOENT || e == ESRCH)
                return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
            return fail(-e, e == EACCES || e == EPERM
                                ? ptrace_permission_message(pid_)
                                : std::string("cannot open /proc/") + std::to_string(pid_) +
                                      "/mem: " + std::strerror(e));
        }
    }
    bool any = false;
    for (int round = 0; round < k_rounds; round++) {
        if (round) {
            struct timespec ts {
                0, 2 * 1000 * 1000
            };
            nanosleep(&ts, nullptr);
        }
        auto cands = candidates(pid_);
        // Threads whose system call would fail with EINTR: only after trying the others
        // for a while.
        if (round < k_rounds / 2)
            cands.erase(std::remove_if(cands.begin(), cands.end(),
                                       [](const candidate &c) { return c.last_resort(); }),
                        cands.end());
        if (cands.empty() && !process_alive(pid_))
            return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
        any |= !cands.empty();
        for (size_t i = 0; i < cands.size() && i < k_tries_per_round; i++) {
            int pending = 0;
            int r = seize(cands[i].tid, &pending);
            if (r == -EPERM) {
                proc_status ts;
                if (read_proc_status(pid_, ts, cands[i].tid) && ts.tracer > 0)
                    continue; // traced just now (the runtime stopping its threads): later
                return fail(r, ptrace_permission_message(pid_));
            }
            if (r) continue; // gone, or being stopped
            if (pending) {
                release(pending); // a signal on its way: let it through, take another
                continue;
            }
            if (pt(PTRACE_GETREGS, tid_, nullptr, &saved_) != 0) {
                release(0);
                continue;
            }
            long nr = static_cast<long>(saved_.orig_rax);
            if (nr >= 0) {
                if (fails_with_eintr(nr) && round < k_rounds / 2) {
                    release(0); // it came to that syscall since it was listed
                    continue;
                }
                parked_ = "blocked in system call " + std::to_string(nr);
                for (const auto &[n, name] : k_syscall_names)
                    if (n == nr) parked_ = std::string("blocked in ") + name;
                return 0; // parked at a system call: the kernel restarts it on give_back
            }
            // Running code: not inside the C library or the loader, and not inside a sled.
            auto maps = read_proc_maps(pid_);
            if (addr_in_object(maps, saved_.rip, k_runtime_libs)) {
                release(0);
                continue;
            }
            bool ok = true;
            parked_ = "running";
            for (int step = 0; step < 16 && ok; step++) {
                uint8_t b = 0;
                if (read_memory(saved_.rip, &b, 1) != 0 || !arch::is_nop(&b, 1)) break;
                int status = 0;
                ok = pt(PTRACE_SINGLESTEP, tid_) == 0 && wait_stop(&status) == 0 &&
                     WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP &&
                     pt(PTRACE_GETREGS, tid_, nullptr, &saved_) == 0;
                parked_ = "running (stepped out of a NOP sled)";
            }
            if (ok) return 0;
            if (held_) release(0);
        }
    }
    if (!process_alive(pid_)) return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
    return fail(-EAGAIN, any ? "no thread of process " + std::to_string(pid_) +
                                   " stopped at a point where the runtime can be loaded safely "
                                   "(each was inside the C library); try again"
                             : "process " + std::to_string(pid_) +
                                   " has no thread that can be stopped (all in uninterruptible "
                                   "sleep, or stopped)");
}

int thread_borrow::write_memory(uint64_t addr, const void *buf, size_t len)
{
    ssize_t n = pwrite(mem_fd_, buf, len, static_cast<off_t>(addr));
    return n == static_cast<ssize_t>(len) ? 0 : -(errno ? errno : EIO);
}

int thread_borrow::read_memory(uint64_t addr, void *buf, size_t len)
{
    ssize_t n = pread(mem_fd_, buf, len, static_cast<off_t>(addr));
    return n == static_cast<ssize_t>(len) ? 0 : -(errno ? errno : EIO);
}

int thread_borrow::call(uint64_t fn, std::initializer_list<uint64_t> args, uint64_t stack,
                        uint64_t *ret)
{
    if (!held_) return fail(-ESRCH, "no thread borrowed");
    struct user_regs_struct r = saved_;
    unsigned long long *argreg[] = {&r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9};
    size_t i = 0;
    for (uint64_t a : args)
        if (i < 6) *argreg[i++] = a;
    uint64_t sp = stack ? stack : saved_.rsp - 128 - 256; // below the red zone
    sp &= ~15ull;
    sp -= 8; // as if a call had pushed the return address: rsp+8 is 16-byte aligned
    uint64_t zero = 0;
    if (int e = write_memory(sp, &zero, sizeof zero))
        return fail(e, std::string("cannot write the stack of thread ") + std::to_string(tid_) +
                           ": " + std::strerror(-e));
    r.rsp = sp;
    r.rip = fn;
    r.rax = 0;
    r.orig_rax = ~0ull; // not in a system call: no restart into the middle of FN
    r.eflags &= ~(k_tf | k_df);
    if (pt(PTRACE_SETREGS, tid_, nullptr, &r) != 0 || pt(PTRACE_CONT, tid_, nullptr, nullptr) != 0)
        return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
    struct timespec start {
    };
    clock_gettime(CLOCK_MONOTONIC, &start);
    bool told = false;
    for (;;) {
        int status = 0;
        pid_t w = waitpid(tid_, &status, __WALL | WNOHANG);
        if (w == 0) {
            struct timespec now {
            };
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (!told && now.tv_sec - start.tv_sec >= 5) {
                std::fprintf(stderr,
                             "dprobe: still waiting for thread %d of process %d to "
                             "return from the call (a lock held elsewhere?)\n",
                             tid_, pid_);
                told = true;
            }
            struct timespec ts {
                0, 200 * 1000
            };
            nanosleep(&ts, nullptr);
            continue;
        }
        if (w < 0) {
            if (errno == EINTR) continue;
            held_ = false;
            return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            held_ = false;
            if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
                return fail(-ESRCH, "process " + std::to_string(pid_) + " died of signal " +
                                        std::to_string(WTERMSIG(status)) + " (" +
                                        strsignal(WTERMSIG(status)) + ")");
            return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
        }
        if (!WIFSTOPPED(status)) continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        long deliver = 0;
        if (event == 0 && sig == SIGSEGV) {
            struct user_regs_struct now {
            };
            if (pt(PTRACE_GETREGS, tid_, nullptr, &now) == 0 && now.rip == 0) {
                *ret = now.rax; // back at our return address
                return 0;
            }
            deliver = sig; // a fault inside the call: its handler (or the default) decides
        } else if (event == 0 && (sig == SIGTRAP || sig == SIGBUS || sig == SIGILL ||
                                  sig == SIGFPE || sig == SIGSYS)) {
            deliver = sig;
        } else if (event == 0) {
            // An asynchronous signal: its handler must not run on top of the call. It is
            // delivered when the thread is given back.
            if (std::find(deferred_.begin(), deferred_.end(), sig) == deferred_.end())
                deferred_.push_back(sig);
        }
        if (pt(PTRACE_CONT, tid_, nullptr, reinterpret_cast<void *>(deliver)) != 0 &&
            errno == ESRCH) {
            held_ = false;
            return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
        }
    }
}

int thread_borrow::give_back()
{
    if (!held_) return 0;
    int err = 0;
    if (pt(PTRACE_SETREGS, tid_, nullptr, &saved_) != 0) err = -errno;
    // Signals held back during the calls: one is delivered by the detach itself (as if it
    // had just arrived), any other is sent again to the thread.
    if (!deferred_.empty()) {
        int first = deferred_.front();
        for (size_t i = 1; i < deferred_.size(); i++)
            syscall(SYS_tgkill, pid_, tid_, deferred_[i]);
        pt(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void *>(static_cast<long>(first)));
        deferred_.clear();
    } else {
        pt(PTRACE_DETACH, tid_, nullptr, nullptr);
    }
    held_ = false;
    return err;
}

} // namespace dprobe::tools
