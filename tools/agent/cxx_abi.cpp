// The preload's own C++ runtime and unwinder, and the program's, side by side
// (__cxa_begin_catch, _Unwind_RaiseException, _Unwind_ForcedUnwind, _Unwind_Backtrace).
//
// libdprobe-preload.so links libstdc++ in, hidden (-static-libstdc++ -Wl,--exclude-libs,ALL,
// tools/agent/CMakeLists.txt): dprobe's containers, strings and exceptions never run the
// program's operator new or C++ runtime, and the program's never run dprobe's. But dprobe
// must still see every catch, the program's and its own, as core/unwind.h explains; core's
// interposer (a weak __cxa_begin_catch) loses to the runtime's own definition here. So:
//   - dprobe's catches: -Wl,--wrap=__cxa_begin_catch sends every call of the preload's
//     objects to __wrap___cxa_begin_catch, which runs dprobe's part, then the linked-in
//     runtime's (__real___cxa_begin_catch);
//   - the program's: exported as __cxa_begin_catch@CXXABI_1.3, the version the program's
//     references name (a versioned lookup takes a definition of that version even where it
//     is not the default one, and the unversioned name stays the hidden runtime's), which
//     runs dprobe's part, then the program's C++ runtime (the next definition, libstdc++.so.6).
// The unwinder the same way: libgcc_eh is linked in, hidden (-static-libgcc), so that nothing
// the preload brings in depends on it — libgcc_s.so.1 loaded as the preload's dependency bound
// its own calls of _Unwind_RaiseException to the preload's interposer, and once the C library
// had opened it too (for backtrace or cancellation) the preload could never be unloaded. The
// preload's own calls of the three unwinder functions are wrapped (--wrap) into dprobe's part
// and the linked-in unwinder; the program's are the versioned exports GCC_3.0 / GCC_3.3 (the
// versions of libgcc_s.so.1), which run dprobe's part and the program's unwinder.
// Kernel counterpart: none.
#include "core/unwind.h"

#include <cstdint>

// The catch block's stack pointer: this function's CFA (frame pointers are kept).
#define CALLER_SP() (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) + 16)

extern "C" void *__real___cxa_begin_catch(void *exc) noexcept;

extern "C" __attribute__((noinline)) void *__wrap___cxa_begin_catch(void *exc) noexcept
{
    dprobe::unwind_catch(CALLER_SP());
    return __real___cxa_begin_catch(exc);
}

extern "C" __attribute__((visibility("default"), noinline)) void *
dprobe_program_begin_catch(void *exc) noexcept
{
    dprobe::unwind_catch(CALLER_SP());
    return dprobe::unwind_next_begin_catch(exc);
}
__asm__(".symver dprobe_program_begin_catch, __cxa_begin_catch@CXXABI_1.3, remove");

// ---- the unwinder ----

extern "C" _Unwind_Reason_Code __real__Unwind_RaiseException(struct _Unwind_Exception *exc);
extern "C" _Unwind_Reason_Code __real__Unwind_ForcedUnwind(struct _Unwind_Exception *exc,
                                                           _Unwind_Stop_Fn stop, void *arg);
extern "C" _Unwind_Reason_Code __real__Unwind_Backtrace(_Unwind_Trace_Fn fn, void *arg);

// The preload's own calls.
extern "C" __attribute__((noinline)) _Unwind_Reason_Code
__wrap__Unwind_RaiseException(struct _Unwind_Exception *exc)
{
    return dprobe::unwind_raise(__real__Unwind_RaiseException, exc, CALLER_SP());
}
extern "C" __attribute__((noinline)) _Unwind_Reason_Code
__wrap__Unwind_ForcedUnwind(struct _Unwind_Exception *exc, _Unwind_Stop_Fn stop, void *arg)
{
    return dprobe::unwind_forced(__real__Unwind_ForcedUnwind, exc, stop, arg, CALLER_SP());
}
extern "C" __attribute__((noinline)) _Unwind_Reason_Code
__wrap__Unwind_Backtrace(_Unwind_Trace_Fn fn, void *arg)
{
    return dprobe::unwind_backtrace(__real__Unwind_Backtrace, fn, arg, CALLER_SP());
}

// backtrace() of a program that has no unwinder loaded walks with this one (core/unwind.cpp).
extern "C" __attribute__((visibility("hidden"))) dprobe::unwind_backtrace_fn
dprobe_unwind_backtrace_own()
{
    return __real__Unwind_Backtrace;
}

// The program's calls (only a program that has an unwinder calls these).
extern "C" __attribute__((visibility("default"), noinline)) _Unwind_Reason_Code
dprobe_program_unwind_raise(struct _Unwind_Exception *exc)
{
    return dprobe::unwind_raise(dprobe::unwind_next_raise(), exc, CALLER_SP());
}
__asm__(".symver dprobe_program_unwind_raise, _Unwind_RaiseException@GCC_3.0, remove");

extern "C" __attribute__((visibility("default"), noinline)) _Unwind_Reason_Code
dprobe_program_unwind_forced(struct _Unwind_Exception *exc, _Unwind_Stop_Fn stop, void *arg)
{
    return dprobe::unwind_forced(dprobe::unwind_next_forced(), exc, stop, arg, CALLER_SP());
}
__asm__(".symver dprobe_program_unwind_forced, _Unwind_ForcedUnwind@GCC_3.0, remove");

extern "C" __attribute__((visibility("default"), noinline)) _Unwind_Reason_Code
dprobe_program_unwind_backtrace(_Unwind_Trace_Fn fn, void *arg)
{
    dprobe::unwind_backtrace_fn walker = dprobe::unwind_next_backtrace();
    if (!walker) return _URC_END_OF_STACK;
    return dprobe::unwind_backtrace(walker, fn, arg, CALLER_SP());
}
__asm__(".symver dprobe_program_unwind_backtrace, _Unwind_Backtrace@GCC_3.3, remove");
