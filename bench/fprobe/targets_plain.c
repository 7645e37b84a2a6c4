#include "targets.h"
__attribute__((noinline)) unsigned long bench_plain(unsigned long x)
{
    __asm__ volatile("" : "+r"(x));
    return x + 1;
}

__attribute__((noinline)) unsigned long bench_mid(unsigned long x)
{
    unsigned long y = x * 3;
    __asm__ volatile("" : "+r"(y));
    return y + (x >> 2) + 1;
}
