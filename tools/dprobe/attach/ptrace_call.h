// Calling functions inside another running process, on one of its threads (what gdb's
// `call` does), for `dprobe attach` and `dprobe detach`.
//
// borrow() picks a thread at a safe point and stops it with ptrace (PTRACE_SEIZE +
// PTRACE_INTERRUPT: no signal is sent, nothing is visible to the program); the other
// threads keep running. A safe point is, in order of preference:
//  - blocked in a system call that the kernel restarts transparently (read, poll, wait4,
//    accept, futex, ppoll, sigsuspend...; then nanosleep-style calls, whose restart state
//    lives in the kernel's thread and is only reused),
//  - running outside the C library and the dynamic linker (whose locks the call may need),
//    after single-stepping out of a run of one-byte NOPs (a -fpatchable-function-entry
//    sled the runtime may rewrite while the thread is parked),
//  - last, blocked in a call that fails with EINTR once interrupted (epoll_wait,
//    sigtimedwait: signal(7)), as it does when a debugger attaches;
// never a thread of dprobe's agent, nor one with a signal arriving.
//
// borrow() saves the registers, the vector state and the signal mask. Each call() returns
// through a signal frame holding them (arch/x86_64/sigframe.h): ptrace stops the thread on
// that frame's rt_sigreturn and takes the return value; if this command dies first (SIGKILL,
// a crash), the thread returns from the call through the frame, back to where it was, and
// the program goes on (a sleep it was in is slept again whole). The
// code of that return is a page mapped in the process by a first system call, itself
// returning through the frame. Calls run with orig_rax = -1 (so the kernel does not
// "restart" into the middle of the function). An asynchronous signal arriving meanwhile is
// held back (its handler must not run on top of the call); faults are delivered (dprobe's own
// hooks use them). give_back() unmaps the page, stops the thread as ptrace first did and puts
// the registers and vector state back, with orig_rax and the -ERESTART* code of an
// interrupted system call, which the kernel then restarts as if nothing happened, temporary
// signal mask included; then it detaches, and the signals held back are delivered.
#pragma once

#include "arch/x86_64/sigframe.h"
#include "tools/dprobe/attach/proc_target.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <sys/types.h>
#include <sys/user.h>
#include <vector>

namespace dprobe::tools
{

class thread_borrow
{
  public:
    explicit thread_borrow(pid_t pid) : pid_(pid) {}
    ~thread_borrow();
    thread_borrow(const thread_borrow &) = delete;
    thread_borrow &operator=(const thread_borrow &) = delete;

    // Stops one thread at a safe point. 0, or -errno with message() set: -ESRCH (the
    // process is gone), -EPERM (not allowed), -EAGAIN (no thread reached a safe point).
    int borrow();
    // Calls FN(ARGS...) on the borrowed thread, on STACK (the top of memory the call may use
    // as its stack; 0: the thread's own stack, below its red zone). *RET: rax.
    int call(uint64_t fn, std::initializer_list<uint64_t> args, uint64_t stack, uint64_t *ret);
    int write_memory(uint64_t addr, const void *buf, size_t len);
    int read_memory(uint64_t addr, void *buf, size_t len);
    // Puts the thread back as it was and detaches. Idempotent.
    int give_back();

    pid_t tid() const { return tid_; }
    // Where the borrowed thread was stopped (where give_back() resumes it).
    uint64_t saved_ip() const { return saved_.regs.rip; }
    uint64_t saved_sp() const { return saved_.regs.rsp; }
    // Where the borrowed thread was parked: "blocked in read", "running", ...
    const std::string &parked() const { return parked_; }
    const std::string &message() const { return msg_; }

  private:
    int seize(pid_t tid, int *pending);
    int wait_stop(int *status);
    int release(int sig);
    int fail(int err, const std::string &msg);
    int save_state();
    int arm();
    int find_gadgets();
    int put_frame(uint64_t top, uint64_t restorer, uint64_t *sp);
    int syscall_raw(long nr, std::initializer_list<uint64_t> args, uint64_t *ret);
    int resume(const struct user_regs_struct &r, long want_nr, uint64_t want_ip, uint64_t *ret);
    int to_interrupt_stop();

    pid_t pid_;
    pid_t tid_ = 0;
    bool held_ = false;
    arch::borrowed_state saved_;
    // Where the thread is stopped: at ptrace's interrupt (as seized), or at a system call
    // (the end of a call or of a system call run by syscall_raw).
    bool at_syscall_ = false;
    uint64_t restore_rt_ = 0, syscall_ret_ = 0; // the C library's instructions the frame uses
    uint64_t tramp_ = 0;                        // the page holding arch::RETURN_TRAMPOLINE
    std::vector<int> deferred_;                 // asynchronous signals that arrived during a call
    int mem_fd_ = -1;
    std::string msg_, parked_;
};

} // namespace dprobe::tools
