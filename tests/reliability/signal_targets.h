/* Targets of the signal tests (signal_targets.c). */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

long sig_leaf(long x);
long sig_middle(long x); /* 3x + 3 */
long sig_own_int3(long x);

#ifdef __cplusplus
}
#endif
