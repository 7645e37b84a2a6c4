// jprobes, the x86-64 part (the kernel's setjmp_pre_handler / jprobe_return /
// longjmp_break_handler of arch/x86/kernel/kprobes/core.c, Linux 4.14): enter a handler with
// a function's argument state, and come back from it.
//
// dprobe_jprobe_call() (jprobe_tramp.S) is called from a kprobe hit (a site's full dispatch
// or the SIGTRAP hook) with the registers saved at the function's entry. On its own stack,
// below the caller, it copies the stack-passed arguments, loads the argument registers
// (rdi rsi rdx rcx r8 r9 rax r10, xmm0-7 at the width they were saved) and calls the handler.
// The handler leaves through jprobe_return() (defined in jprobe_tramp.S) or by returning;
// either way the stack is cut back to the frame, the callee-saved registers restored, the
// upper vector state cleared (vzeroupper), and the call returns to the hit, whose trampoline
// or sigreturn restores the function's own registers.
//
// dprobe_jprobe_direct() is the direct call (core's ftrace_direct::call) of a jprobe alone
// on a site: called from the entry trampoline with the general registers saved in its frame
// and nothing else, it calls the handler with the vector registers as the function got them
// (saving them around it unless the handler provably leaves the extended state alone), and
// keeps the fewest words it can (a store is what costs most there). jprobe_return() returns
// instead of jumping where that is the same (jprobe_ret.cpp): its common endings cost no
// mispredicted return.
//
// Either way nothing the handler does reaches the function: its registers are restored or
// were never handed over, and its stack arguments are a copy.
#pragma once

#include <dprobe/ptrace.h>

#include <cstddef>
#include <cstdint>
#include <ucontext.h>

struct kprobe;

namespace dprobe::arch
{

// A call of jprobe_return() in a handler after which the handler only returns (jprobe_ret.cpp):
// jprobe_return() then returns there instead of jumping out, and the handler's own `ret`
// reaches the landing, predicted, when that `ret` finds its return address in the handler's
// return-address slot: at SLOT_OFF from %rbp (FROM_RBP), or from the stack pointer after the
// call has returned.
struct jprobe_ret_site {
    uintptr_t ret; // the call's return address
    long slot_off;
    unsigned long from_rbp;
};
constexpr size_t JPROBE_RET_SITES = 4;
constexpr unsigned long JPROBE_DIRECT = 1, JPROBE_DIRECT_UNKNOWN_LEN = 2, JPROBE_DIRECT_VECTOR = 4;
constexpr unsigned JPROBE_RET_TABLE_BITS = 10; // jprobe_tramp.S's JRT_BITS

// Up to MAX such calls in the code of HANDLER (its branches followed, not its calls), into
// OUT; JPROBE_RETURN_FN is jprobe_return()'s address. Returns how many.
size_t jprobe_ret_sites(uintptr_t handler, uintptr_t jprobe_return_fn, jprobe_ret_site *out,
                        size_t max);

// The sites of every registered jprobe's handler, by return address, for jprobe_return()'s
// fast path (it finds them with no per-hit state): published when a jprobe is registered,
// withdrawn once no registered jprobe has them and none of their handlers runs (counted per
// site, under the caller's lock). A full table leaves sites out (jprobe_return() then finds
// them through the running jprobe, more slowly).
void jprobe_ret_publish(const jprobe_ret_site *sites, size_t n);
void jprobe_ret_withdraw(const jprobe_ret_site *sites, size_t n);

// Whether jprobe_return() may have to jump out of HANDLER: true unless the code reachable
// from it is all known (direct calls and jumps, bound PLT entries), and every call or jump to it
// that the code reachable from HANDLER holds is in HANDLER's own code (not in a function it
// calls), each call at one of SITES, and nothing calls HANDLER again: every call of
// jprobe_return() then happens in the handler's own frame, at a site whose epilogue returns
// from it, or as its tail call.
bool jprobe_may_jump(uintptr_t handler, uintptr_t jprobe_return_fn, const jprobe_ret_site *sites,
                     size_t nsites);

// A jprobe as the trampolines read it (offsets in jprobe_tramp.S, JD_*): what
// dprobe_jprobe_direct() finds through its ftrace_ops' priv. Filled in by the kprobe layer
// before the ops is attached, and left alone while a hit may read it.
struct jprobe_desc {
    void *entry;              // the handler
    ::kprobe *kp;             // current_kprobe while it runs; its flags say disabled or gone
    unsigned long *nreturned; // counts the handler's returns without jprobe_return()
    unsigned long stack_len;  // bytes of stack arguments (a multiple of 16), known from DWARF
    // Non-zero (JPROBE_DIRECT) while the probe is enabled: the direct entry runs the
    // handler; else it answers "not now" and the full path does. With JPROBE_DIRECT_VECTOR
    // the handler is not known to leave the extended state alone, and the vector registers
    // are saved around it. With JPROBE_DIRECT_UNKNOWN_LEN stack_len is the most a handler
    // sees, not the function's own (no DWARF): copied when it lies in the page of the return
    // address. Written while hits may read it (an aligned word).
    unsigned long direct;
    unsigned long nsites; // where jprobe_return() may return (jprobe_ret_sites)
    jprobe_ret_site sites[JPROBE_RET_SITES];
    // Non-zero unless jprobe_return() provably never has to jump out of the handler
    // (jprobe_may_jump): the direct entry then keeps the callee-saved registers it would
    // need after a jump.
    unsigned long may_jump;
};

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
    const jprobe_desc *desc;    // the jprobe's description, or null
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

// The vector argument registers of a function entered through an int3, from the signal
// frame of UC: xmm0-7, and when their upper halves are in use (an __m256 or __m512 argument)
// the whole ymm or zmm registers, assembled from the frame's XSAVE area into BUF (8 registers
// of vector_size() bytes, 64-byte aligned). For jprobe_call's vec, vec_size and wide.
struct jprobe_vectors {
    const void *vec;
    unsigned long size;
    bool wide;
};
constexpr size_t JPROBE_VEC_BUF = 8 * 64;
jprobe_vectors uc_jprobe_vectors(const ucontext_t *uc, void *buf) noexcept;

} // namespace dprobe::arch

struct ftrace_regs;

extern "C" {
// The table itself (jprobe_tramp.S reads it): JPROBE_RET_TABLE entries of {return address, or
// 0 (never used) or 1 (withdrawn); its slot offset << 1 | from_rbp}, open addressing.
extern unsigned long dprobe_jprobe_ret_table[][2];
// 0 when the handler called jprobe_return(), 1 when it returned.
int dprobe_jprobe_call(const dprobe::arch::jprobe_call *c);
// The ftrace direct call of a jprobe alone on a site (ftrace_direct::call, its ops' priv a
// jprobe_desc; the calling convention is DIRECT_CALL's, arch/x86_64/ftrace_direct.inc): 0
// when it ran the hit (or the probe is disabled), 2 when the full path must.
int dprobe_jprobe_direct(void *ops, struct ftrace_regs *fregs, void *task_ctx);
// The frame of the jprobe handler running on this thread (dprobe_jprobe_call's), or null.
extern __thread void *dprobe_jprobe_frame __attribute__((tls_model("initial-exec")));
// Called by jprobe_return() before it leaves the handler's frames (ASan forgets them).
void dprobe_jprobe_no_return();
}
