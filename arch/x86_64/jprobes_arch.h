// jprobes, the x86-64 part (the kernel's setjmp_pre_handler / jprobe_return /
// longjmp_break_handler of arch/x86/kernel/kprobes/core.c, Linux 4.14): enter a handler with
// a function's argument state, and come back from it.
//
// dprobe_jprobe_call() (jprobe_tramp.S) is called from a kprobe hit (a site's dispatch or the
// SIGTRAP hook) with the registers saved at the function's entry. On its own stack, below the
// caller, it copies the stack-passed arguments, pushes a return address of its own, loads the
// argument registers (rdi rsi rdx rcx r8 r9 rax r10, xmm0-7) and jumps to the handler. The
// handler leaves through jprobe_return() (defined in jprobe_tramp.S) or by returning; either
// way the stack is cut back to the frame, the callee-saved registers restored, the
// upper vector state cleared (vzeroupper), and the call returns to the hit, whose trampoline
// or sigreturn restores the function's own registers. Nothing the handler does reaches the
// function: its registers were never handed over and its stack arguments are a copy.
#pragma once

#include <dprobe/ptrace.h>

#include <cstddef>

namespace dprobe::arch
{

// The description dprobe_jprobe_call() reads (offsets in jprobe_tramp.S).
struct jprobe_call {
    void *entry;                // the handler
    const struct pt_regs *regs; // the general registers at the function's entry
    const void *vec;            // xmm0-7 at the entry, VEC_SIZE bytes apart (or nullptr)
    unsigned long vec_size;     // 16, 32 or 64
    unsigned long wide;         // non-zero: load them at that full width (upper state live)
    const void *stack;          // the first stack-passed argument
    unsigned long stack_len;    // bytes of them to copy (<= JPROBE_STACK_MAX)
    void **frame_slot;          // the thread's slot for the frame jprobe_return() returns to
};

constexpr size_t JPROBE_STACK_MAX = 64; // the kernel's MAX_STACK_SIZE

// Where a function's stack-passed arguments start, from its registers at entry ([sp] is the
// return address).
inline const void *jprobe_stack_args(const struct pt_regs *regs) noexcept
{
    return reinterpret_cast<const void *>(regs->sp + 8);
}

// Whether the trampoline frame holding FREGS (an entry on a site) saved the vector registers
// at full width (ftrace_frame.h FR_VWIDE).
bool fregs_vec_wide(const struct ftrace_regs *fregs) noexcept;

} // namespace dprobe::arch

extern "C" {
// 0 when the handler called jprobe_return(), 1 when it returned.
int dprobe_jprobe_call(const dprobe::arch::jprobe_call *c);
// The frame of the jprobe handler running on this thread (dprobe_jprobe_call's), or null.
extern __thread void *dprobe_jprobe_frame __attribute__((tls_model("initial-exec")));
// Called by jprobe_return() before it leaves the handler's frames (ASan forgets them).
void dprobe_jprobe_no_return();
}
