// stop_machine: run a function while every other thread of the process is stopped, with
// their registers visible and fixable (the kernel's stop_machine, for one process).
//
// Needed where the int3 protocol is not enough: replacing several instructions by one
// (an optimized probe's jmp over a function's first instructions, gcc's one-byte NOP sled
// turned into one NOP). A thread stopped between two of the old instructions would resume
// in the middle of the new one; with the threads stopped, such a thread's RIP is moved to
// the equivalent place first.
//
// How: a vfork()ed child shares the address space, PTRACE_SEIZEs and PTRACE_INTERRUPTs every
// other thread (invisible to them: no signal handler runs and interrupted system calls
// restart), runs FN, writes back changed registers and detaches. FN runs in the child, on
// the caller's stack, while the caller is suspended: it must not allocate or take locks (a
// stopped thread may hold them) — prepare everything before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>
#include <sys/user.h>

namespace dprobe
{

struct stopped_thread {
    pid_t tid;
    struct user_regs_struct regs;
    bool changed;    // set by FN when it modified regs
    int pending_sig; // the thread stopped while a signal was being delivered to it (it is
                     // delivered when the thread resumes); 0 for a plain stop
    // The thread has executed an int3 whose SIGTRAP it has not handled yet (being delivered
    // or still queued): its RIP is one past the int3, not an instruction boundary it is about
    // to execute, and its SIGTRAP handler will decide where it goes from the trap address.
    bool in_trap;
};

// Upper bound of threads handled; a process with more makes stop_machine fail.
constexpr size_t stop_machine_max_threads = 1024;

using stop_machine_fn = void (*)(stopped_thread *threads, size_t n, void *arg);

// Runs FN(threads, n, arg) with all other threads stopped. Returns 0, or -errno when the
// threads could not be stopped (ptrace not permitted, the process is being traced, ...);
// FN did not run then.
int stop_machine(stop_machine_fn fn, void *arg);

} // namespace dprobe
