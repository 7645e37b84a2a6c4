#include "targets.h"

#include <dprobe/kprobes.h>

__attribute__((noinline)) unsigned kprobe_target(unsigned value)
{
    return value / DIV_FACTOR;
}

__attribute__((noinline)) unsigned kprobe_target2(unsigned value)
{
    return value / DIV_FACTOR + 1;
}

__attribute__((noinline)) unsigned kprobe_recursed_target(unsigned value)
{
    return value / DIV_FACTOR;
}

unsigned long target_return_address[2];
unsigned long (*volatile internal_target)(void);

__attribute__((noinline)) unsigned long kprobe_stacktrace_internal_target(void)
{
    if (!target_return_address[0])
        target_return_address[0] = (unsigned long)__builtin_return_address(0);
    return target_return_address[0];
}

__attribute__((noinline)) unsigned long kprobe_stacktrace_target(void)
{
    if (!target_return_address[1])
        target_return_address[1] = (unsigned long)__builtin_return_address(0);
    if (internal_target) internal_target();
    return target_return_address[1];
}

static unsigned long (*volatile stacktrace_target_fn)(void) = kprobe_stacktrace_target;

__attribute__((noinline)) unsigned long kprobe_stacktrace_driver(void)
{
    /* Not a tail call: the return address must point into this function. */
    unsigned long r = stacktrace_target_fn();
    __asm__ volatile("" ::: "memory");
    return r;
}

__attribute__((noinline)) unsigned nokprobe_target(unsigned value)
{
    return value + 7;
}
NOKPROBE_SYMBOL(nokprobe_target);

__attribute__((noinline)) unsigned long counted_target(unsigned long x)
{
    __asm__ volatile("" : "+r"(x));
    return x * 2 + 1;
}

static unsigned long (*volatile recursive_fn)(unsigned long) = kprobe_recursive_target;

__attribute__((noinline)) unsigned long kprobe_recursive_target(unsigned long depth)
{
    if (depth == 0) return 0;
    unsigned long r = recursive_fn(depth - 1) + 1;
    __asm__ volatile("" ::: "memory");
    return r;
}

void (*volatile block_hook)(void);

__attribute__((noinline)) unsigned long kprobe_blocking_target(unsigned long x)
{
    if (block_hook) block_hook();
    __asm__ volatile("" : "+r"(x));
    return x + 1;
}
