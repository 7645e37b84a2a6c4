// Per-thread context: the shadow stack of hooked returns (fgraph/rethook's role), the
// recursion guard, kprobe state, and the read-side marker for quiescence.
//
// One initial-exec TLS pointer per thread leads to a block mmap'd on the thread's first
// probe hit (mmap is async-signal-safe, malloc is not). Blocks of exited threads are
// recycled, never unmapped, so a quiescence waiter can always read them.
#pragma once

#include "arch/x86_64/cpu.h"
#include "arch/x86_64/ext_state.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <sys/types.h>

struct kprobe;

namespace dprobe
{

struct ftrace_ops;

constexpr size_t shadow_stack_words = 32768; // 256 KiB of address space, touched on demand
constexpr size_t shadow_dropped_ring = 128;

// Layout of one shadow frame, bottom to top, in words:
//   [0] real return address  [1] entry ip  [2] retp (address of the return-address slot)
//   [3] what the slot holds while the function is hooked (arch::fgraph_return_addr when the
//       trampoline called the function's body, arch::return_to_handler_addr when dprobe
//       replaced the return address)
//   [4] number of users N, then per user: ops pointer, ops generation, data words...
//   [top] total words of the frame (so the frame can be popped from the top)
enum : unsigned { sf_ret = 0, sf_ip = 1, sf_retp = 2, sf_hook = 3, sf_nusers = 4, sf_users = 5 };

struct task_ctx {
    // Bits 0-15, odd while this thread runs dprobe dispatch code: the recursion guard, and
    // what a quiescence waiter watches. Bits 16-63: where the code dprobe ran for was when
    // this thread last entered dispatch code (the probed function's return-address slot):
    // tells a signal handler nested in that code (below it, or on another stack) from code
    // running after a handler left it with siglongjmp (at or above it), see
    // dispatch_enter(). Written only by the owning thread, with one store (seq_word()).
    std::atomic<uint64_t> seq;
    std::atomic<uint32_t> in_use; // 0: free for reuse by a new thread
    pid_t tid;
    // current_kprobe and kprobe_busy then, restored if the section was left.
    struct kprobe *dispatch_kp;
    uint32_t dispatch_kprobe_busy;
    // Set while posix_spawn runs: its child shares this context (see spawn_interpose.cpp).
    uint32_t spawning;
    // The hooked entry being dispatched, while its frame is built above shadow_top: the
    // frame's first word + 1 (0: none), and the ops whose entry() runs. A section left by a
    // jump in the middle of an entry is cleaned up from these (dispatch_recover()).
    uint32_t entry_pending;
    struct ftrace_ops *entry_ops;
    uint32_t shadow_top; // words in use
    unsigned long shadow_overflows;
    // The kernel's per-CPU current_kprobe and kprobe_ctlblk.kprobe_status: the kprobe whose
    // handlers run on this thread. Here rather than in kprobe/ because dispatch_enter()
    // restores them when a section was abandoned.
    struct kprobe *current_kprobe;
    unsigned long kprobe_status;
    // Nonzero while a handler that behaves as a kprobe handler runs without being one (the
    // kernel's kprobe_busy_begin(): fprobe's handlers shared with kprobes): a kprobe hit
    // under it is missed, as one under current_kprobe (kprobe_busy_on()).
    uint32_t kprobe_busy;
    // kprobe/'s counters, read and written with std::atomic_ref: the int3 hook's read-side
    // sequence (odd while this thread is inside the hook), and this thread's hits of
    // optimized probes (summed over every context; a shared counter would cost a locked add
    // on every hit). Kept when the context is recycled.
    unsigned long kprobe_int3_seq;
    unsigned long kprobe_opt_hits;
    task_ctx *next; // global list, append-only
    // Frames dropped from the shadow stack (gone without returning), newest at
    // dropped_next - 1: {slot, real return address}. A frame dropped by mistake still
    // returns to its caller through them (core/shadow_stack.cpp).
    uint32_t dropped_next;
    uintptr_t dropped[shadow_dropped_ring][2];
    unsigned long shadow[shadow_stack_words];
};

// task_ctx::seq: the count (its low 16 bits; wrapping only makes a waiter wait longer) and
// the base (a user-space stack address, below 2^48).
inline uint64_t seq_word(uintptr_t base, uint64_t count) noexcept
{
    return (static_cast<uint64_t>(base) << 16) | (count & 0xffff);
}
inline uintptr_t seq_base(uint64_t seq) noexcept
{
    return static_cast<uintptr_t>(seq >> 16);
}

// Named for the trampolines (arch/x86_64/ftrace_direct.inc, TASK_CTX_LOAD), which read it.
extern __thread task_ctx *tls_task_ctx __asm__("dprobe_tls_task_ctx")
    __attribute__((tls_model("initial-exec")));
task_ctx *alloc_task_ctx() noexcept;

// The calling thread's context, allocated on first use; nullptr only if mmap fails.
inline task_ctx *current_task_ctx() noexcept
{
    task_ctx *t = tls_task_ctx;
    return __builtin_expect(t != nullptr, 1) ? t : alloc_task_ctx();
}
// The calling thread's context if it has one.
inline task_ctx *peek_task_ctx() noexcept
{
    return tls_task_ctx;
}

// Unmaps every context and deletes the thread-exit key: the end of dprobe in the process
// (core/unload.h), when no thread can run dispatch code any more.
void task_ctx_release_all() noexcept;

// Head of the list of all contexts ever allocated (for quiescence and unwinding helpers).
task_ctx *task_ctx_list() noexcept;
extern std::atomic<task_ctx *> ctx_head; // the same, for task_ctx.cpp and debuggers

// Whether the dispatch code this thread entered for code at the base in t->seq was left for
// good: a signal handler that interrupted it jumped out (siglongjmp). Called with the
// sequence odd, for code at BASE (core/shadow_stack.cpp).
bool dispatch_abandoned(task_ctx *t, uintptr_t base) noexcept;
// Cleans up after a section that will never end (left by a jump out of a signal handler,
// or its thread ended in it): the activations its entry had accepted and not yet
// published get ftrace_ops::unwound, the entry() it was running ftrace_ops::abandoned.
// Called in the section that takes over (core/shadow_stack.cpp).
void dispatch_recover(task_ctx *t) noexcept;

// Whether a kprobe handler, or a handler that counts as one, runs on this thread: a kprobe
// hit now is missed (the kernel's kprobe_running() test).
inline bool kprobe_busy_on(const task_ctx *t) noexcept
{
    return t->current_kprobe || t->kprobe_busy;
}

using arch::current_stack_pointer;

// Read side: dispatch code brackets handler calls with these. BASE is where the code dprobe
// runs for is (the probed function's return-address slot, or the caller's stack pointer).
// Returns false if this thread is already inside (a handler calling a probed function, a
// signal handler that interrupted dispatch code); then nothing was changed.
inline bool dispatch_enter(task_ctx *t, uintptr_t base) noexcept
{
    const uint64_t s = t->seq.load(std::memory_order_relaxed);
    bool abandoned = false;
    if (__builtin_expect(s & 1, 0)) {
        if (!dispatch_abandoned(t, base)) return false;
        abandoned = true; // that section is over: its odd count is replaced below
    }
    if (!abandoned) {
        t->dispatch_kp = t->current_kprobe;
        t->dispatch_kprobe_busy = t->kprobe_busy;
    }
    // One plain store, atomic against this thread's signal handlers, publishes the odd
    // count and the base together. A handler that ran a whole section of its own since the
    // load moved the count on by two; going back by one is harmless: a quiescence waiter
    // only waits for an odd count it saw to change, and this section reads what is
    // published after that waiter's barrier.
    t->seq.store(seq_word(base, s + (abandoned ? 2 : 1)), std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (abandoned) {
        t->current_kprobe = t->dispatch_kp;
        t->kprobe_busy = t->dispatch_kprobe_busy;
        t->kprobe_status = 0;
        // Light handlers run only inside a section, and sections do not nest: a count left
        // by one that was cut short would make every later hit save the whole extended state.
        dprobe_ext_unsaved = 0;
        if (t->entry_pending) dispatch_recover(t);
    }
    return true;
}
// dispatch_enter() for the light path (core/ftrace_dispatch.cpp), which must not call out:
// false, with nothing changed, when the thread is inside dispatch code or left a section
// without ending it (dispatch_enter() sorts that out).
inline bool dispatch_enter_clean(task_ctx *t, uintptr_t base) noexcept
{
    const uint64_t s = t->seq.load(std::memory_order_relaxed);
    if (__builtin_expect(s & 1, 0)) return false;
    // Stores cost more than loads here (a hit is bound by them): mostly these hold already.
    if (__builtin_expect(t->dispatch_kp != t->current_kprobe, 0))
        t->dispatch_kp = t->current_kprobe;
    if (__builtin_expect(t->dispatch_kprobe_busy != t->kprobe_busy, 0))
        t->dispatch_kprobe_busy = t->kprobe_busy;
    t->seq.store(seq_word(base, s + 1), std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return true;
}

inline void dispatch_exit(task_ctx *t) noexcept
{
    std::atomic_signal_fence(std::memory_order_seq_cst);
    const uint64_t s = t->seq.load(std::memory_order_relaxed);
    t->seq.store(seq_word(seq_base(s), s + 1), std::memory_order_release);
}

// Write side: returns when every thread that was inside dispatch code when this was called
// has left it. Data unpublished before the call can then be freed or reused.
void synchronize_dispatch();

} // namespace dprobe
