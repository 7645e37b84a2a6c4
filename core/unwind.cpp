#include "core/unwind.h"

#include "arch/x86_64/ftrace_arch.h"
#include "core/compiler.h"
#include "core/task_ctx.h"

#include <dlfcn.h>
#include <unwind.h>

namespace dprobe {

DPROBE_NOPROBE void shadow_unhook_all(task_ctx *t) noexcept
{
    const uintptr_t tramp = arch::return_to_handler_addr;
    uint32_t top = t->shadow_top;
    while (top) {
        uint32_t n = static_cast<uint32_t>(t->shadow[top - 1]);
        unsigned long *f = &t->shadow[top - n];
        auto *slot = reinterpret_cast<uintptr_t *>(f[sf_retp]);
        if (*slot == tramp)
            *slot = f[sf_ret];
        top -= n;
    }
}

DPROBE_NOPROBE void shadow_rehook(task_ctx *t, uintptr_t sp) noexcept
{
    const uintptr_t tramp = arch::return_to_handler_addr;
    while (t->shadow_top) {
        uint32_t n = static_cast<uint32_t>(t->shadow[t->shadow_top - 1]);
        if (t->shadow[t->shadow_top - n + sf_retp] >= sp)
            break;
        t->shadow_top -= n;
    }
    uint32_t top = t->shadow_top;
    while (top) {
        uint32_t n = static_cast<uint32_t>(t->shadow[top - 1]);
        unsigned long *f = &t->shadow[top - n];
        auto *slot = reinterpret_cast<uintptr_t *>(f[sf_retp]);
        // A slot that no longer holds the real address belongs to a frame that is gone
        // (its stack was reused); leave it alone, the frame will be reaped.
        if (*slot == f[sf_ret] && f[sf_ret] != tramp)
            *slot = tramp;
        top -= n;
    }
}

} // namespace dprobe

using namespace dprobe;

namespace {

template <typename F> F next_fn(const char *name)
{
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

inline task_ctx *hooked_ctx()
{
    task_ctx *t = peek_task_ctx();
    return t && t->shadow_top ? t : nullptr;
}

// The stack pointer of our caller at the call (this frame's CFA).
#define CALLER_SP() (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) + 16)

} // namespace

#define DPROBE_EXPORT extern "C" __attribute__((visibility("default"), noinline))

DPROBE_EXPORT _Unwind_Reason_Code _Unwind_RaiseException(struct _Unwind_Exception *exc)
{
    using fn_t = _Unwind_Reason_Code (*)(struct _Unwind_Exception *);
    static fn_t next = next_fn<fn_t>("_Unwind_RaiseException");
    if (task_ctx *t = hooked_ctx())
        shadow_unhook_all(t);
    _Unwind_Reason_Code r = next(exc);
    // Only returns on failure (no handler): the frames are all still there.
    if (task_ctx *t = hooked_ctx())
        shadow_rehook(t, CALLER_SP());
    return r;
}

DPROBE_EXPORT _Unwind_Reason_Code _Unwind_ForcedUnwind(struct _Unwind_Exception *exc,
                                                      _Unwind_Stop_Fn stop, void *arg)
{
    using fn_t = _Unwind_Reason_Code (*)(struct _Unwind_Exception *, _Unwind_Stop_Fn, void *);
    static fn_t next = next_fn<fn_t>("_Unwind_ForcedUnwind");
    if (task_ctx *t = hooked_ctx())
        shadow_unhook_all(t);
    return next(exc, stop, arg);
}

DPROBE_EXPORT _Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn fn, void *arg)
{
    using fn_t = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void *);
    static fn_t next = next_fn<fn_t>("_Unwind_Backtrace");
    task_ctx *t = hooked_ctx();
    if (t)
        shadow_unhook_all(t);
    _Unwind_Reason_Code r = next(fn, arg);
    if (t)
        shadow_rehook(t, CALLER_SP());
    return r;
}

DPROBE_EXPORT int backtrace(void **buffer, int size)
{
    using fn_t = int (*)(void **, int);
    static fn_t next = next_fn<fn_t>("backtrace");
    task_ctx *t = hooked_ctx();
    if (t)
        shadow_unhook_all(t);
    int r = next(buffer, size);
    if (t)
        shadow_rehook(t, CALLER_SP());
    return r;
}

DPROBE_EXPORT void *__cxa_begin_catch(void *exc) noexcept
{
    using fn_t = void *(*)(void *);
    static fn_t next = next_fn<fn_t>("__cxa_begin_catch");
    if (task_ctx *t = hooked_ctx())
        shadow_rehook(t, CALLER_SP());
    return next(exc);
}
