/* Targets of the -fcf-protection tests (cet_targets.c). */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

long cet_leaf(long x);  /* 7x + 3 */
long cet_outer(long x); /* 7x + 2 */
long cet_call_indirect(long (*fn)(long), long x);

#ifdef __cplusplus
}
#endif
