#include "targets.h"

/* A global the optimiser cannot see through, so the divisions stay divisions. */
volatile unsigned div_factor = DIV_FACTOR;

__attribute__((noinline)) unsigned fprobe_selftest_target(unsigned value)
{
    return value / div_factor;
}

__attribute__((noinline)) unsigned fprobe_selftest_target2(unsigned value)
{
    return value / div_factor + 1;
}

__attribute__((noinline)) unsigned fprobe_recursed_target(unsigned value)
{
    return value / div_factor;
}

__attribute__((noinline)) unsigned long hot_target(unsigned long tag)
{
    __asm__ volatile("" ::: "memory");
    return tag * 2 + 1;
}

__attribute__((noinline)) double fp_target(float f, double d, long double ld, double extra)
{
    return (double)((long double)f * 3 + (long double)d / 7 + ld * ld + extra);
}

__attribute__((noinline)) long double ld_target(long double a, long double b)
{
    return a * b - a / b;
}

__attribute__((noinline)) __m256 m256_target(__m256 a, __m256 b)
{
    return _mm256_add_ps(_mm256_mul_ps(a, b), a);
}

__attribute__((noinline)) float float_target(float a)
{
    return a * 1.5f + 0.25f;
}

/* Calls itself DEPTH times (through a volatile pointer: no inlining, no tail call) and
 * returns DEPTH: nested activations of one probed function. */
unsigned direct_nest_target(unsigned depth);
static unsigned (*volatile nest_self)(unsigned) = direct_nest_target;
unsigned long direct_nest_return; /* the innermost call's return address */
__attribute__((noinline)) unsigned direct_nest_target(unsigned depth)
{
    if (!depth) direct_nest_return = (unsigned long)__builtin_return_address(0);
    if (depth) {
        unsigned inner = nest_self(depth - 1);
        __asm__ volatile("" : "+r"(inner));
        if (inner != depth - 1) return 0;
    }
    return depth;
}
