// System calls without libc, for code that runs while probes fire or while other threads
// are stopped: any libc function (mmap, syscall, gettid ...) may itself be probed, or be
// half-way through a lock another thread holds.
#pragma once

#include <sys/types.h>

// vfork() whose child ends without a signal to its parent (arch/x86_64/vfork_quiet.S): the
// child's pid, 0 in the child, or a negative errno. Wait for it with __WALL.
extern "C" pid_t dprobe_vfork_quiet() noexcept;

namespace dprobe::arch
{

inline long raw_syscall(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0,
                        long f = 0) noexcept
{
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

} // namespace dprobe::arch
