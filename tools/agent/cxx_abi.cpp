// The preload's own C++ runtime, and the program's, side by side (__cxa_begin_catch).
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
