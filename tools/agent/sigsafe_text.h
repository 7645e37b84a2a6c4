// Text written without libc, for agent code that runs where only async-signal-safe calls
// may (the exec and posix_spawn wrappers, a vfork child): the environment entries it builds
// for a new image. Each writes at P and returns the end.
#pragma once

namespace dprobe::agent
{

inline char *put_str(char *p, const char *s) noexcept
{
    while (*s)
        *p++ = *s++;
    return p;
}

inline char *put_ulong(char *p, unsigned long u) noexcept
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = static_cast<char>('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        *p++ = digits[--n];
    return p;
}

} // namespace dprobe::agent
