// The shadow stack of hooked returns (fgraph/rethook's role), beyond the hot path's push
// and pop in ftrace_dispatch.cpp: finding the frame a return belongs to, and dropping the
// frames of functions that are gone without returning.
//
// Functions leave without returning through longjmp, C++ exceptions, thread exit and
// cancellation; a thread also runs on more than one stack (a signal handler on the
// sigaltstack, swapcontext coroutines). Rules:
//  - A return through the trampoline pops the most recent frame whose return-address slot is
//    the one returned from (not simply the top: frames of another stack may lie above it).
//  - A frame is dropped as gone when its slot lies below the current stack pointer *on the
//    same stack*; frames of another stack are kept (see shadow_same_stack()).
//  - A dropped frame is reported to its ops (ftrace_ops::unwound: counted as missed), and
//    its slot and return address are remembered in a small per-thread ring, so that a frame
//    dropped by mistake (a stack switch dprobe cannot see) still returns to its caller.
//  - Every change happens inside the dispatch read side (task_ctx::seq odd), so a signal
//    handler on the same thread never sees a half-changed shadow stack: its probe hits are
//    counted as missed meanwhile.
#pragma once

#include "core/task_ctx.h"

#include <cstdint>

namespace dprobe
{

// Number of words of the frame whose last word is at TOP - 1, and the frame.
inline unsigned long *shadow_frame_below(task_ctx *t, uint32_t top, uint32_t *nwords) noexcept
{
    uint32_t n = static_cast<uint32_t>(t->shadow[top - 1]);
    *nwords = n;
    return &t->shadow[top - n];
}

// Reports the frame F as gone without returning to each of its ops.
void shadow_frame_unwound(unsigned long *f);

// Entry with the top frame's slot at or below SP: drops the frames that are gone, keeps
// those of other stacks. Inside the read side.
void shadow_reap(task_ctx *t, uintptr_t sp);

// A return through the trampoline from SLOT whose frame is not on top: drops the gone frames
// above the frame of SLOT and returns that frame's first word index (it may stay below
// frames of other stacks) and its size in *NWORDS, or UINT32_MAX when no frame has that
// slot. Inside the read side.
uint32_t shadow_find_return(task_ctx *t, uintptr_t slot, uint32_t *nwords);

// Removes the frame at BASE of NWORDS words, moving the frames above it down.
void shadow_remove(task_ctx *t, uint32_t base, uint32_t nwords);

// The return address a dropped frame of SLOT had, from the ring of dropped frames; 0 if
// unknown. Consumes the entry.
uintptr_t shadow_dropped_return(task_ctx *t, uintptr_t slot) noexcept;

// A hooked return whose frame this thread no longer has, nor remembers among the dropped
// ones: nowhere to return to. Says so on stderr (the thread, the slot, what the shadow stack
// holds) and aborts.
[[noreturn]] void shadow_lost_return(task_ctx *t, uintptr_t slot) noexcept;

// The real return address of the frame at BASE (a hooked function tail-called by another
// hooked one has a return trampoline there: the caller's frame, same slot, holds the real
// one).
uintptr_t shadow_real_return(task_ctx *t, uint32_t base) noexcept;

// Whether stack addresses A and B belong to the same stack as far as dprobe can tell: the
// sigaltstack, each known coroutine stack (swapcontext/setcontext) and everything else.
// ALT is the result of shadow_altstack() for this thread.
struct altstack_info {
    uintptr_t lo = 0, hi = 0;
    bool on = false; // the thread runs on it now
};
altstack_info shadow_altstack() noexcept;
enum class frame_state { live, gone, other_stack };
// State of a frame with return-address slot SLOT seen from stack pointer SP.
frame_state shadow_frame_state(const altstack_info &alt, uintptr_t sp, uintptr_t slot) noexcept;

// Records [LO, HI) as the stack of a user context (makecontext), so frames on it are told
// apart from the thread's other stacks.
void shadow_note_stack(uintptr_t lo, uintptr_t hi) noexcept;

} // namespace dprobe
