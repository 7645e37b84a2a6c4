// The definition an interposer of dprobe's forwards to (the C library's sigaction, libgcc's
// _Unwind_RaiseException, ...), and the rule that goes with it: what the interposer does on
// its own account is not the program's, so it is not recorded. Kernel counterpart: none
// (the kernel is not interposed upon).
//
// Why: dprobe replaces a few functions of the C library and of the unwinder (signal,
// sigaction, swapcontext, posix_spawn, execve, _Unwind_*). A program that calls one of them
// must be recorded calling what it would call untraced, and nothing else. A first call that
// looked the next definition up through a function-local static and dlsym showed the static's
// guard (__cxa_guard_acquire) and the loader's lock (pthread_mutex_lock) under the program's
// call, with libc functions traced (-F 'libc.so.6:*').
//
// Invariants: the slot is a namespace-scope atomic (constant-initialised: no guard); it is
// filled by a constructor of the interposing file at load, and otherwise (a call before that
// constructor ran) on first use with recording muted on the calling thread; a lookup never
// allocates on the hot path. interpose_mute is a scope of dprobe's own work on a program's
// thread (ring_buffer_thread_mute; scopes nest, async-signal-safe).
#pragma once

#include "core/ring_buffer.h"

#include <atomic>
#include <dlfcn.h>

namespace dprobe
{

class interpose_mute
{
  public:
    interpose_mute() noexcept { ring_buffer_thread_mute(true); }
    ~interpose_mute() { ring_buffer_thread_mute(false); }
    interpose_mute(const interpose_mute &) = delete;
    interpose_mute &operator=(const interpose_mute &) = delete;
};

// The next definition of NAME after dprobe's object (dlsym RTLD_NEXT: relative to the object
// this is compiled into, the interposer's), kept in SLOT.
template <typename F> F interpose_next(std::atomic<F> &slot, const char *name)
{
    F f = slot.load(std::memory_order_acquire);
    if (f) return f;
    interpose_mute quiet;
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    slot.store(f, std::memory_order_release);
    return f;
}

} // namespace dprobe
