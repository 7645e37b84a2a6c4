#include "core/unwind.h"

#include "arch/x86_64/ftrace_arch.h"
#include "core/compiler.h"
#include "core/interpose_next.h"
#include "core/shadow_stack.h"
#include "core/task_ctx.h"

#include <cstdlib>

#include <dlfcn.h>
#include <unwind.h>

namespace dprobe
{

DPROBE_NOPROBE void shadow_unhook_all(task_ctx *t, uintptr_t sp)
{
    const altstack_info alt = shadow_altstack();
    uintptr_t last_slot = 0;
    uint32_t top = t->shadow_top;
    while (top) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        top -= n;
        // Frames of a tail-call chain share one slot: the newest decides what it holds.
        if (f[sf_retp] == last_slot) continue;
        last_slot = f[sf_retp];
        // A gone frame's slot is not touched: its stack may be unmapped (the stack of a
        // posix_spawn child that hit a probe before exec, a freed coroutine stack).
        // One on another stack may be gone too, its slot now part of a newer frame.
        if (shadow_frame_state(alt, sp, f[sf_retp]) != frame_state::gone &&
            stack_slot_read(f[sf_retp]) == f[sf_hook])
            stack_slot_write(f[sf_retp], shadow_real_return(t, top));
    }
}

DPROBE_NOPROBE void shadow_rehook(task_ctx *t, uintptr_t sp, bool drop_gone)
{
    // Inside the read side: dropped frames are reported to their ops, and a signal handler
    // on this thread does not hook a frame meanwhile. (A handler catching or walking its own
    // stack is inside already.)
    const bool entered = dispatch_enter(t, sp);
    if (drop_gone && t->shadow_top) shadow_reap(t, sp);
    const altstack_info alt = shadow_altstack();
    uintptr_t last_slot = 0;
    uint32_t top = t->shadow_top;
    while (top) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        top -= n;
        if (f[sf_retp] == last_slot) continue;
        last_slot = f[sf_retp];
        // A slot that no longer holds the real address belongs to a frame that is gone
        // (its stack was reused); leave it alone, the frame will be reaped.
        if (shadow_frame_state(alt, sp, f[sf_retp]) == frame_state::gone) continue;
        const uintptr_t real = shadow_real_return(t, top);
        if (stack_slot_read(f[sf_retp]) == real && !arch::is_return_hook(real))
            stack_slot_write(f[sf_retp], f[sf_hook]);
    }
    if (entered) dispatch_exit(t);
}

} // namespace dprobe

using namespace dprobe;

namespace
{

// The unwinder's and libstdc++'s definitions the wrappers below forward to, looked up at
// load (core/interpose_next.h: a lookup on first use showed under the program's first throw).
using begin_catch_fn = void *(*)(void *);
std::atomic<unwind_raise_fn> next_raise{nullptr};
std::atomic<unwind_forced_fn> next_forced{nullptr};
std::atomic<unwind_backtrace_fn> next_backtrace{nullptr};
std::atomic<begin_catch_fn> next_begin_catch{nullptr};
std::atomic<void (*)()> next_terminate{nullptr}; // std::terminate()

__attribute__((constructor)) void find_next_unwind_functions()
{
    interpose_next(next_raise, "_Unwind_RaiseException");
    interpose_next(next_forced, "_Unwind_ForcedUnwind");
    interpose_next(next_backtrace, "_Unwind_Backtrace");
    interpose_next(next_begin_catch, "__cxa_begin_catch");
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

_Unwind_Reason_Code dprobe::unwind_raise(unwind_raise_fn next, struct _Unwind_Exception *exc,
                                         uintptr_t caller_sp)
{
    if (task_ctx *t = hooked_ctx()) shadow_unhook_all(t, caller_sp);
    _Unwind_Reason_Code r = next(exc);
    // Only returns on failure (no handler): the frames are all still there.
    if (task_ctx *t = hooked_ctx()) shadow_rehook(t, caller_sp, false);
    return r;
}

_Unwind_Reason_Code dprobe::unwind_forced(unwind_forced_fn next, struct _Unwind_Exception *exc,
                                          _Unwind_Stop_Fn stop, void *arg, uintptr_t caller_sp)
{
    if (task_ctx *t = hooked_ctx()) shadow_unhook_all(t, caller_sp);
    return next(exc, stop, arg);
}

// None here: libdprobe.so uses the process's unwinder. libdprobe-preload.so has one of its own
// (tools/agent/cxx_abi.cpp), for a program that has none loaded.
extern "C" __attribute__((weak, visibility("hidden"))) dprobe::unwind_backtrace_fn
dprobe_unwind_backtrace_own()
{
    return nullptr;
}

namespace
{

// The caller's walk, without the frames of dprobe's wrappers (those the unwinder reports
// first), so the walk starts where it would without dprobe. During a walk the unwinder's
// CFA for a frame is that frame's stack pointer at its call of the next frame inward: for
// the caller of the interposer it is CALLER_SP, for dprobe's frames less.
struct skip_wrapper {
    _Unwind_Trace_Fn fn;
    void *arg;
    uintptr_t caller_sp;
};
_Unwind_Reason_Code skip_wrapper_frame(struct _Unwind_Context *ctx, void *p)
{
    auto *s = static_cast<skip_wrapper *>(p);
    if (_Unwind_GetCFA(ctx) < s->caller_sp) return _URC_NO_REASON;
    return s->fn(ctx, s->arg);
}

// glibc's backtrace() over _Unwind_Backtrace, with the same rules: the first frame is the
// caller of backtrace(), the walk stops when it makes no progress, a NULL last entry (above
// _start) is dropped.
struct backtrace_state {
    void **buffer;
    int size, count;
    _Unwind_Word cfa;
};
_Unwind_Reason_Code backtrace_frame(struct _Unwind_Context *ctx, void *p)
{
    auto *s = static_cast<backtrace_state *>(p);
    s->buffer[s->count] = reinterpret_cast<void *>(_Unwind_GetIP(ctx));
    const _Unwind_Word cfa = _Unwind_GetCFA(ctx);
    if (s->count > 0 && s->buffer[s->count - 1] == s->buffer[s->count] && cfa == s->cfa)
        return _URC_END_OF_STACK;
    s->cfa = cfa;
    return ++s->count == s->size ? _URC_END_OF_STACK : _URC_NO_REASON;
}

// The unwinder backtrace() walks with: the program's (the next definition), else the one this
// object was linked with (libdprobe-preload.so has its own: a program without libgcc_s).
unwind_backtrace_fn backtrace_walker()
{
    if (unwind_backtrace_fn f = interpose_next(next_backtrace, "_Unwind_Backtrace")) return f;
    return dprobe_unwind_backtrace_own();
}

} // namespace

// While any frame of this thread is hooked, the walk sees the real return addresses: they
// are written back for the walk and hooked again afterwards.
_Unwind_Reason_Code dprobe::unwind_backtrace(unwind_backtrace_fn real, _Unwind_Trace_Fn fn,
                                             void *arg, uintptr_t caller_sp)
{
    task_ctx *t = hooked_ctx();
    if (t) shadow_unhook_all(t, caller_sp);
    skip_wrapper s{fn, arg, caller_sp};
    _Unwind_Reason_Code r = real(skip_wrapper_frame, &s);
    if (t) shadow_rehook(t, caller_sp, false);
    return r;
}

// The unwinder's functions, interposed. Weak: libdprobe-preload.so links an unwinder in
// (-static-libgcc), whose definitions then serve the preload's own calls and keep these out;
// the preload exports the program's interposers under their versioned names instead
// (tools/agent/cxx_abi.cpp).
#define DPROBE_EXPORT_WEAK extern "C" __attribute__((visibility("default"), noinline, weak))

DPROBE_EXPORT_WEAK _Unwind_Reason_Code _Unwind_RaiseException(struct _Unwind_Exception *exc)
{
    return unwind_raise(interpose_next(next_raise, "_Unwind_RaiseException"), exc, CALLER_SP());
}

DPROBE_EXPORT_WEAK _Unwind_Reason_Code _Unwind_ForcedUnwind(struct _Unwind_Exception *exc,
                                                            _Unwind_Stop_Fn stop, void *arg)
{
    return unwind_forced(interpose_next(next_forced, "_Unwind_ForcedUnwind"), exc, stop, arg,
                         CALLER_SP());
}

DPROBE_EXPORT_WEAK _Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn fn, void *arg)
{
    unwind_backtrace_fn walker = backtrace_walker();
    if (!walker) return _URC_END_OF_STACK;
    return unwind_backtrace(walker, fn, arg, CALLER_SP());
}

DPROBE_EXPORT int backtrace(void **buffer, int size)
{
    if (size <= 0 || !backtrace_walker()) return 0;
    backtrace_state bs{buffer, size, 0, 0};
    unwind_backtrace(backtrace_walker(), backtrace_frame, &bs, CALLER_SP());
    if (bs.count > 1 && buffer[bs.count - 1] == nullptr) --bs.count;
    return bs.count;
}

unwind_raise_fn dprobe::unwind_next_raise()
{
    return interpose_next(next_raise, "_Unwind_RaiseException");
}

unwind_forced_fn dprobe::unwind_next_forced()
{
    return interpose_next(next_forced, "_Unwind_ForcedUnwind");
}

unwind_backtrace_fn dprobe::unwind_next_backtrace()
{
    return backtrace_walker();
}

void dprobe::unwind_catch(uintptr_t catch_sp)
{
    // The frames between the throw and this catch are gone.
    if (task_ctx *t = hooked_ctx()) shadow_rehook(t, catch_sp, true);
}

void *dprobe::unwind_next_begin_catch(void *exc)
{
    begin_catch_fn next = interpose_next(next_begin_catch, "__cxa_begin_catch");
    return next ? next(exc) : nullptr;
}

// Weak: libdprobe-preload.so links the C++ runtime in (-static-libstdc++), whose own
// definition then serves the preload's catches and keeps this one out; the preload exports
// the program's interposer under its versioned name instead (tools/agent/cxx_abi.cpp).
extern "C" __attribute__((visibility("default"), noinline, weak)) void *
__cxa_begin_catch(void *exc) noexcept
{
    unwind_catch(CALLER_SP());
    return unwind_next_begin_catch(exc);
}

// --- The return trampolines' own frame (see RETURN_HANDLER in ftrace_tramp.S) ---------------

extern "C" void dprobe_return_reraise();

// An unwinder stepping out of a hooked function finds the return trampoline as its return
// address and runs this for that frame, before it reads the caller's address from the
// slot. Search phase: claim the frame as a handler (the unwinder cannot step further without
// changing memory, which the search must not do: the cleanup phase has to see the same
// frames). Cleanup phase at that frame: go on as if the frame were the real caller's, by
// restarting the exception from there (dprobe_return_reraise). Cleanup phase passing by (a
// forced unwind: thread exit or cancellation; or a handler higher up): put the real address
// into the slot and let the unwinder continue to the real caller.
extern "C" DPROBE_NOPROBE _Unwind_Reason_Code
dprobe_return_personality(int, _Unwind_Action actions, _Unwind_Exception_Class,
                          struct _Unwind_Exception *exc, struct _Unwind_Context *ctx)
{
    auto *slot = reinterpret_cast<uintptr_t *>(_Unwind_GetCFA(ctx) - 8);
    uintptr_t real = *slot;
    if (arch::is_return_hook(real)) {
        real = 0;
        if (task_ctx *t = peek_task_ctx()) {
            for (uint32_t top = t->shadow_top; top;) {
                uint32_t n;
                unsigned long *f = shadow_frame_below(t, top, &n);
                if (f[sf_retp] == reinterpret_cast<uintptr_t>(slot)) {
                    real = shadow_real_return(t, top - n);
                    break;
                }
                top -= n;
            }
        }
    }
    if (!real || arch::is_return_hook(real))
        return actions & _UA_SEARCH_PHASE ? _URC_FATAL_PHASE1_ERROR : _URC_FATAL_PHASE2_ERROR;
    if (actions & _UA_SEARCH_PHASE) return _URC_HANDLER_FOUND;
    if (actions & _UA_HANDLER_FRAME) {
        _Unwind_SetGR(ctx, __builtin_eh_return_data_regno(0), reinterpret_cast<uintptr_t>(exc));
        _Unwind_SetGR(ctx, __builtin_eh_return_data_regno(1), real);
        _Unwind_SetIP(ctx, reinterpret_cast<uintptr_t>(dprobe_return_reraise));
        return _URC_INSTALL_CONTEXT;
    }
    *slot = real;
    return _URC_CONTINUE_UNWIND;
}

// Called by dprobe_return_reraise from the real caller's frame.
extern "C" [[noreturn]] void dprobe_reraise(struct _Unwind_Exception *exc)
{
    _Unwind_RaiseException(exc);
    // No handler after all: what __cxa_throw does then (std::terminate for a C++
    // exception; the raise of a foreign one has nowhere to return to).
    // The program's C++ runtime's, not one linked into dprobe's object.
    constexpr uint64_t gnu_cxx = 0x474e5543432b2b00; // "GNUCC++\0", "\1": dependent
    if ((exc->exception_class & ~uint64_t{1}) == gnu_cxx) {
        using terminate_fn = void (*)();
        terminate_fn terminate = interpose_next(next_terminate, "_ZSt9terminatev");
        if (unwind_next_begin_catch(exc) && terminate) terminate();
    }
    std::abort();
}
