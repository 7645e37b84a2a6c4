/* Targets of the signal tests, built in the test's site flavour: probed functions called
 * both by the interrupted code and by signal handlers, and a function that traps on its own
 * (int3) for the program's SIGTRAP handler. */
#include "signal_targets.h"

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

NOINLINE long sig_leaf(long x)
{
    BARRIER();
    return x * 3 + 1;
}

NOINLINE long sig_middle(long x)
{
    long r = sig_leaf(x);
    BARRIER();
    return r + 2;
}

/* The program's own breakpoint instruction. */
NOINLINE long sig_own_int3(long x)
{
    __asm__ volatile("int3" ::: "memory");
    return x + 1;
}
