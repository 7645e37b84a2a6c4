// swapcontext()/setcontext() interposers: a thread that switches to a user context
// (makecontext) runs on that context's stack, and hooked frames live on several stacks at
// once. The stack of each context switched to is recorded (shadow_note_stack), so that the
// shadow stack tells frames of a suspended stack (kept) from frames left by a longjmp on
// the current one (dropped). See core/shadow_stack.h.
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
    const auto sp = static_cast<uintptr_t>(ucp->uc_mcontext.gregs[REG_RSP]);
    if (ucp->uc_stack.ss_size && sp > lo && sp <= hi) dprobe::shadow_note_stack(lo, hi);
}

template <typename F> F next_fn(const char *name)
{
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

} // namespace

extern "C" __attribute__((visibility("default"))) int swapcontext(ucontext_t *oucp,
                                                                  const ucontext_t *ucp)
{
    using fn_t = int (*)(ucontext_t *, const ucontext_t *);
    static fn_t next = next_fn<fn_t>("swapcontext");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    note_target_stack(ucp);
    return next(oucp, ucp);
}

extern "C" __attribute__((visibility("default"))) int setcontext(const ucontext_t *ucp)
{
    using fn_t = int (*)(const ucontext_t *);
    static fn_t next = next_fn<fn_t>("setcontext");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    note_target_stack(ucp);
    return next(ucp);
}
