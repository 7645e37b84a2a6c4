// Functions the kprobes tests probe (the kernel's lib/tests/test_kprobes.c fixtures). Built
// in each site flavour (see CMakeLists.txt) and called through volatile pointers so the
// compiler cannot inline or fold them.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

#define DIV_FACTOR 3

unsigned kprobe_target(unsigned value);
unsigned kprobe_target2(unsigned value);
unsigned kprobe_recursed_target(unsigned value);

/* Stack-trace fixtures: each records its own return address on its first run. */
extern unsigned long target_return_address[2];
extern unsigned long (*volatile internal_target)(void);
unsigned long kprobe_stacktrace_internal_target(void);
unsigned long kprobe_stacktrace_target(void);
unsigned long kprobe_stacktrace_driver(void);

/* A function marked with NOKPROBE_SYMBOL(). */
unsigned nokprobe_target(unsigned value);

/* Returns DEPTH after recursing DEPTH times. */
unsigned long kprobe_recursive_target(unsigned long depth);

/* Calls block_hook (when set) before returning X + 1. */
extern void (*volatile block_hook)(void);
unsigned long kprobe_blocking_target(unsigned long x);

/* A call count, for hot loops. */
unsigned long counted_target(unsigned long x);

#ifdef __cplusplus
}
#endif
