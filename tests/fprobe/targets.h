// Functions the fprobe tests probe. Built with patch sites (see CMakeLists.txt) and called
// through volatile pointers so the compiler cannot inline or fold them.
#pragma once

#include <immintrin.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DIV_FACTOR 3

unsigned fprobe_selftest_target(unsigned value);
unsigned fprobe_selftest_target2(unsigned value);
unsigned fprobe_recursed_target(unsigned value);
unsigned long hot_target(unsigned long tag);
double fp_target(float f, double d, long double ld, double extra);
long double ld_target(long double a, long double b);
__m256 m256_target(__m256 a, __m256 b);
float float_target(float a);
/* Calls itself DEPTH times and returns DEPTH; the innermost call notes its return address. */
unsigned direct_nest_target(unsigned depth);
extern unsigned long direct_nest_return;

/* Assembly (targets_asm.S): a patchable NOP at entry, then the flags as found. */
unsigned long flags_probe_target(void);
/* Calls flags_probe_target with the arithmetic flags set from FLAGS_IN; returns the flags
 * seen at entry in *AT_ENTRY and the flags after the return. */
unsigned long call_with_flags(unsigned long flags_in, unsigned long *at_entry);

#ifdef __cplusplus
}
#endif
