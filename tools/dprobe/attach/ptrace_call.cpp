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
#include <elf.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
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
// stopped inside them is not borrowed. dprobe's agent too: a thread running its code may hold
// its locks, or be running its constructors inside a dlopen that a killed attach left going
// (a dlopen or an entry point of the agent called on it would find the object half made).
const std::vector<std::string> k_runtime_libs = {
    "libc.so", "libc-2.", "ld-linux", "ld-2.", "libpthread", "libdl", "libdprobe-preload"};

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
    // System-call stops tell themselves apart from a SIGTRAP (the end of a call is one).
    if (pt(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void *>(PTRACE_O_TRACESYSGOOD)) != 0)
        return -errno;
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
            if (pt(PTRACE_GETREGS, tid_, nullptr, &saved_.regs) != 0) {
                release(0);
                continue;
            }
            long nr = static_cast<long>(saved_.regs.orig_rax);
            if (nr >= 0) {
                if (fails_with_eintr(nr) && round < k_rounds / 2) {
                    release(0); // it came to that syscall since it was listed
                    continue;
                }
                parked_ = "blocked in system call " + std::to_string(nr);
                for (const auto &[n, name] : k_syscall_names)
                    if (n == nr) parked_ = std::string("blocked in ") + name;
                return save_state(); // parked at a system call: restarted on give_back
            }
            // Running code: not inside the C library or the loader, and not inside a sled.
            auto maps = read_proc_maps(pid_);
            if (addr_in_object(maps, saved_.regs.rip, k_runtime_libs)) {
                release(0);
                continue;
            }
            bool ok = true;
            parked_ = "running";
            for (int step = 0; step < 16 && ok; step++) {
                uint8_t b = 0;
                if (read_memory(saved_.regs.rip, &b, 1) != 0 || !arch::is_nop(&b, 1)) break;
                int status = 0;
                ok = pt(PTRACE_SINGLESTEP, tid_) == 0 && wait_stop(&status) == 0 &&
                     WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP &&
                     pt(PTRACE_GETREGS, tid_, nullptr, &saved_.regs) == 0;
                parked_ = "running (stepped out of a NOP sled)";
            }
            if (ok) return save_state();
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

// The vector state and the signal mask, beside the registers borrow() read.
int thread_borrow::save_state()
{
    at_syscall_ = false;
    saved_.fpu.assign(64 * 1024, 0);
    struct iovec iov = {saved_.fpu.data(), saved_.fpu.size()};
    saved_.xsave = pt(PTRACE_GETREGSET, tid_, reinterpret_cast<void *>(NT_X86_XSTATE), &iov) == 0;
    if (!saved_.xsave &&
        (iov = {saved_.fpu.data(), saved_.fpu.size()},
         pt(PTRACE_GETREGSET, tid_, reinterpret_cast<void *>(NT_PRFPREG), &iov) != 0)) {
        int e = errno;
        release(0);
        return fail(-e, "cannot read the floating-point state of thread " + std::to_string(tid_) +
                            ": " + std::strerror(e));
    }
    saved_.fpu.resize(iov.iov_len);
    if (pt(PTRACE_GETSIGMASK, tid_, reinterpret_cast<void *>(sizeof saved_.sigmask),
           &saved_.sigmask) != 0) {
        int e = errno;
        release(0);
        return fail(-e, "cannot read the signal mask of thread " + std::to_string(tid_) + ": " +
                            std::strerror(e));
    }
    return 0;
}

// The C library's `mov $15,%rax; syscall` (__restore_rt) and a `syscall; ret`, in the
// program's own copy of it (not that of dprobe's private namespace, which an unload takes
// away), else in the dynamic loader.
int thread_borrow::find_gadgets()
{
    auto maps = read_proc_maps(pid_);
    for (const std::vector<std::string> &names :
         {std::vector<std::string>{"libc.so.6", "libc-2."},
          std::vector<std::string>{"ld-linux-x86-64.so", "ld-2."}}) {
        auto o = find_remote_object(pid_, maps, names);
        if (!o) continue;
        const uint64_t lo = o->bias + o->syms->segments.front().start,
                       hi = o->bias + o->syms->segments.back().end;
        std::vector<uint8_t> text;
        for (const proc_map &m : maps) {
            if (!m.executable() || m.path != o->path || m.start < lo || m.end > hi) continue;
            text.resize(m.end - m.start);
            if (read_memory(m.start, text.data(), text.size()) != 0) continue;
            long r = restore_rt_ ? -1 : arch::find_insns(text, arch::RESTORE_RT_INSNS);
            long s = syscall_ret_ ? -1 : arch::find_insns(text, arch::SYSCALL_RET_INSNS);
            if (r >= 0) restore_rt_ = m.start + static_cast<uint64_t>(r);
            if (s >= 0) syscall_ret_ = m.start + static_cast<uint64_t>(s);
            if (restore_rt_ && syscall_ret_) return 0;
        }
    }
    return fail(-ENOEXEC, "process " + std::to_string(pid_) +
                              ": no signal-return code (glibc's __restore_rt) found in its C "
                              "library; calls into it would not be safe");
}

// Writes the frame that returns the thread to the state borrow() saved, below TOP, and sets
// *SP to its return-address slot.
int thread_borrow::put_frame(uint64_t top, uint64_t restorer, uint64_t *sp)
{
    arch::sigframe_image f = arch::build_rt_sigframe(saved_, top, restorer);
    if (int e = write_memory(f.sp, f.bytes.data(), f.bytes.size()))
        return fail(e, std::string("cannot write the stack of thread ") + std::to_string(tid_) +
                           ": " + std::strerror(-e));
    *sp = f.sp;
    return 0;
}

// Sets R, resumes the thread and runs it until the system call WANT_NR at WANT_IP: its exit
// (*RET = rax) when WANT_NR is not rt_sigreturn, else its entry (*RET = rdx, the value the
// return trampoline saved). Faults are delivered, asynchronous signals held back.
int thread_borrow::resume(const struct user_regs_struct &r, long want_nr, uint64_t want_ip,
                          uint64_t *ret)
{
    if (pt(PTRACE_SETREGS, tid_, nullptr, const_cast<user_regs_struct *>(&r)) != 0)
        return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
    at_syscall_ = true; // from here on the thread returns through the frame
    long deliver = 0;
    bool in_wanted = false;
    struct timespec start {
    };
    clock_gettime(CLOCK_MONOTONIC, &start);
    bool told = false;
    for (;;) {
        if (pt(PTRACE_SYSCALL, tid_, nullptr, reinterpret_cast<void *>(deliver)) != 0 &&
            errno == ESRCH) {
            held_ = false;
            return fail(-ESRCH, "process " + std::to_string(pid_) + " exited");
        }
        deliver = 0;
        int status = 0;
        pid_t w;
        while ((w = waitpid(tid_, &status, __WALL | WNOHANG)) == 0) {
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
        if (sig == (SIGTRAP | 0x80)) {
            struct __ptrace_syscall_info info {
            };
            struct user_regs_struct now {
            };
            if (pt(PTRACE_GET_SYSCALL_INFO, tid_, reinterpret_cast<void *>(sizeof info), &info) <=
                    0 ||
                pt(PTRACE_GETREGS, tid_, nullptr, &now) != 0)
                continue;
            bool here = now.rip == want_ip;
            if (info.op == PTRACE_SYSCALL_INFO_ENTRY && here &&
                static_cast<long>(info.entry.nr) == want_nr) {
                if (want_nr == arch::NR_RT_SIGRETURN) {
                    *ret = now.rdx;
                    return 0;
                }
                in_wanted = true;
            } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && here && in_wanted) {
                *ret = now.rax;
                return 0;
            }
            continue;
        }
        if (event == 0 && (sig == SIGSEGV || sig == SIGTRAP || sig == SIGBUS || sig == SIGILL ||
                           sig == SIGFPE || sig == SIGSYS)) {
            deliver = sig; // a fault inside the call: its handler (or the default) decides
        } else if (event == 0) {
            // An asynchronous signal: its handler must not run on top of the call. It is
            // delivered when the thread is given back.
            if (std::find(deferred_.begin(), deferred_.end(), sig) == deferred_.end())
                deferred_.push_back(sig);
        }
    }
}

// The registers for running something on the thread, from those borrow() saved.
static struct user_regs_struct call_regs(const struct user_regs_struct &saved, uint64_t ip,
                                         uint64_t sp)
{
    struct user_regs_struct r = saved;
    r.rsp = sp;
    r.rip = ip;
    r.rax = 0;
    r.orig_rax = ~0ull; // no system call to restart (and the rt_sigreturn stopped at is skipped)
    r.eflags &= ~(k_tf | k_df);
    return r;
}

// System call NR with ARGS, run by the `syscall; ret` of the C library with the frame as its
// return: used before the return trampoline exists, and to unmap it.
int thread_borrow::syscall_raw(long nr, std::initializer_list<uint64_t> args, uint64_t *ret)
{
    uint64_t sp = 0;
    if (int e = put_frame(saved_.regs.rsp - 128 - 256, restore_rt_, &sp)) return e;
    struct user_regs_struct r = call_regs(saved_.regs, syscall_ret_, sp);
    unsigned long long *argreg[] = {&r.rdi, &r.rsi, &r.rdx, &r.r10, &r.r8, &r.r9};
    size_t i = 0;
    for (uint64_t a : args)
        if (i < 6) *argreg[i++] = a;
    r.rax = static_cast<uint64_t>(nr);
    return resume(r, nr, syscall_ret_ + arch::SYSCALL_INSN_SIZE, ret);
}

// Maps the page of the return trampoline: once, before the first call.
int thread_borrow::arm()
{
    if (tramp_) return 0;
    if (!restore_rt_ || !syscall_ret_)
        if (int e = find_gadgets()) return e;
    uint64_t page = 0;
    if (int e = syscall_raw(SYS_mmap,
                            {0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, ~0ull, 0},
                            &page))
        return e;
    if (page >= ~4095ull)
        return fail(-ENOMEM, "process " + std::to_string(pid_) + ": mmap of a page failed: " +
                                 std::strerror(static_cast<int>(-static_cast<int64_t>(page))));
    tramp_ = page; // unmapped by give_back, whatever happens next
    if (int e = write_memory(page, arch::RETURN_TRAMPOLINE, sizeof arch::RETURN_TRAMPOLINE))
        return fail(e, std::string("cannot write the call's return code: ") + std::strerror(-e));
    return 0;
}

int thread_borrow::call(uint64_t fn, std::initializer_list<uint64_t> args, uint64_t stack,
                        uint64_t *ret)
{
    if (!held_) return fail(-ESRCH, "no thread borrowed");
    if (int e = arm()) return e;
    uint64_t sp = 0;
    if (int e = put_frame(stack ? stack : saved_.regs.rsp - 128 - 256, tramp_, &sp)) return e;
    struct user_regs_struct r = call_regs(saved_.regs, fn, sp);
    unsigned long long *argreg[] = {&r.rdi, &r.rsi, &r.rdx, &r.rcx, &r.r8, &r.r9};
    size_t i = 0;
    for (uint64_t a : args)
        if (i < 6) *argreg[i++] = a;
    int e = resume(r, arch::NR_RT_SIGRETURN, tramp_ + sizeof arch::RETURN_TRAMPOLINE, ret);
    // A thread borrowed inside sigsuspend or ppoll had their temporary mask: the first return
    // to user space put its own back, the one the frame must restore.
    if (!e)
        pt(PTRACE_GETSIGMASK, tid_, reinterpret_cast<void *>(sizeof saved_.sigmask),
           &saved_.sigmask);
    return e;
}

// From a system-call stop to the kind of stop borrow() made (PTRACE_EVENT_STOP), where the
// kernel restarts the interrupted system call when the thread goes on. The thread is at a
// point from which it returns through the frame.
int thread_borrow::to_interrupt_stop()
{
    struct user_regs_struct r {
    };
    if (pt(PTRACE_GETREGS, tid_, nullptr, &r) != 0) return -ESRCH;
    if (r.rip == tramp_ + sizeof arch::RETURN_TRAMPOLINE) {
        r.rip = tramp_; // run the trampoline again rather than fall off its end
        r.orig_rax = ~0ull;
        if (pt(PTRACE_SETREGS, tid_, nullptr, &r) != 0) return -ESRCH;
    }
    if (pt(PTRACE_INTERRUPT, tid_) != 0) return -ESRCH;
    long deliver = 0;
    for (;;) {
        if (pt(PTRACE_CONT, tid_, nullptr, reinterpret_cast<void *>(deliver)) != 0) return -ESRCH;
        deliver = 0;
        int status = 0;
        if (wait_stop(&status) != 0 || !WIFSTOPPED(status)) return -ESRCH;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (event == PTRACE_EVENT_STOP) {
            at_syscall_ = false;
            return 0;
        }
        if (event == 0 && sig != (SIGTRAP | 0x80) &&
            std::find(deferred_.begin(), deferred_.end(), sig) == deferred_.end())
            deferred_.push_back(sig);
    }
}

int thread_borrow::give_back()
{
    if (!held_) return 0;
    int err = 0;
    if (tramp_) {
        uint64_t r = 0;
        syscall_raw(SYS_munmap, {tramp_, 4096}, &r);
    }
    // (tramp_ still set: a thread the munmap could not run on is still at its end.)
    if (held_ && at_syscall_ && to_interrupt_stop() != 0) {
        // Gone, or not stoppable: left to return through the frame by itself.
        held_ = false;
        tramp_ = 0;
        return -ESRCH;
    }
    tramp_ = 0;
    if (!held_) return -ESRCH;
    if (pt(PTRACE_SETREGS, tid_, nullptr, &saved_.regs) != 0) err = -errno;
    struct iovec iov = {saved_.fpu.data(), saved_.fpu.size()};
    if (!saved_.fpu.empty() &&
        pt(PTRACE_SETREGSET, tid_,
           reinterpret_cast<void *>(saved_.xsave ? NT_X86_XSTATE : NT_PRFPREG), &iov) != 0 &&
        !err)
        err = -errno;
    // Signals held back during the calls: sent again, delivered once it runs untraced.
    for (int sig : deferred_)
        syscall(SYS_tgkill, pid_, tid_, sig);
    deferred_.clear();
    pt(PTRACE_DETACH, tid_, nullptr, nullptr);
    held_ = false;
    return err;
}

} // namespace dprobe::tools
