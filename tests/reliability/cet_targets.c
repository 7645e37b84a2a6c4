/* Targets of the -fcf-protection tests: built with -fcf-protection=full (every function
 * starts with the endbr64 landing pad, as Debian's own libraries are built) in the test's
 * site flavour, called directly and through function pointers. */
#include "cet_targets.h"

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

NOINLINE long cet_leaf(long x)
{
    BARRIER();
    return x * 7 + 3;
}

NOINLINE long cet_outer(long x)
{
    long r = cet_leaf(x);
    BARRIER();
    return r - 1;
}

/* An indirect call, which with IBT enforced must land on an endbr64. */
NOINLINE long cet_call_indirect(long (*fn)(long), long x)
{
    long (*volatile f)(long) = fn;
    return f(x) + 1;
}
