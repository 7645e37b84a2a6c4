// swapcontext()/setcontext() interposers: a thread that switches to a user context
// (makecontext) runs on that context's stack, and hooked frames live on several stacks at
// once. The stack of each context switched to is recorded (shadow_note_stack), so that the
// shadow stack tells frames of a suspended stack (kept) from frames left by a longjmp on
// the current one (dropped). See core/shadow_stack.h.
#include "arch/x86_64/uctx.h"
#include "core/interpose_next.h"
#include "core/shadow_stack.h"

#include <cerrno>
#include <dlfcn.h>
#include <ucontext.h>

namespace
{

// The stack of UCP if it was made by makecontext: its stack pointer lies in uc_stack.
void note_target_stack(const ucontext_t *ucp)
{
    if (!ucp) return;
    const auto lo = reinterpret_cast<uintptr_t>(ucp->uc_stack.ss_sp);
    const uintptr_t hi = lo + ucp->uc_stack.ss_size;
    const uintptr_t sp = dprobe::arch::uc_sp(ucp);
    if (ucp->uc_stack.ss_size && sp > lo && sp <= hi) dprobe::shadow_note_stack(lo, hi);
}

using swapcontext_fn = int (*)(ucontext_t *, const ucontext_t *);
using setcontext_fn = int (*)(const ucontext_t *);
std::atomic<swapcontext_fn> next_swapcontext{nullptr};
std::atomic<setcontext_fn> next_setcontext{nullptr};

// Looked up at load (core/interpose_next.h).
__attribute__((constructor)) void find_next_context_functions()
{
    dprobe::interpose_next(next_swapcontext, "swapcontext");
    dprobe::interpose_next(next_setcontext, "setcontext");
}

} // namespace

extern "C" __attribute__((visibility("default"))) int swapcontext(ucontext_t *oucp,
                                                                  const ucontext_t *ucp)
{
    swapcontext_fn next = dprobe::interpose_next(next_swapcontext, "swapcontext");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    note_target_stack(ucp);
    return next(oucp, ucp);
}

extern "C" __attribute__((visibility("default"))) int setcontext(const ucontext_t *ucp)
{
    setcontext_fn next = dprobe::interpose_next(next_setcontext, "setcontext");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    note_target_stack(ucp);
    return next(ucp);
}
