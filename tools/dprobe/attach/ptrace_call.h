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
// borrow() saves the registers. Each call() sets the argument registers, orig_rax = -1 (so
// the kernel does not "restart" the call into the middle of the function), and pushes a
// return address of 0: the return faults, which ptrace reports before any handler runs. An
// asynchronous signal arriving meanwhile is held back (its handler must not run on top of
// the call); faults are delivered (dprobe's own hooks use them). give_back() restores the
// registers — with orig_rax and the -ERESTART* code of an interrupted system call, which
// the kernel then restarts as if nothing happened, temporary signal mask included — and
// detaches, delivering the signals held back.
#pragma once

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
    uint64_t saved_ip() const { return saved_.rip; }
    uint64_t saved_sp() const { return saved_.rsp; }
    // Where the borrowed thread was parked: "blocked in read", "running", ...
    const std::string &parked() const { return parked_; }
    const std::string &message() const { return msg_; }

  private:
    int seize(pid_t tid, int *pending);
    int wait_stop(int *status);
    int release(int sig);
    int fail(int err, const std::string &msg);

    pid_t pid_;
    pid_t tid_ = 0;
    bool held_ = false;
    struct user_regs_struct saved_ {
    };
    std::vector<int> deferred_; // asynchronous signals that arrived during a call
    int mem_fd_ = -1;
    std::string msg_, parked_;
};

} // namespace dprobe::tools
