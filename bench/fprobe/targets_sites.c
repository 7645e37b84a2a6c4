#include "targets.h"
__attribute__((noinline)) unsigned long bench_site(unsigned long x)
{
    __asm__ volatile("" : "+r"(x));
    return x + 1;
}
