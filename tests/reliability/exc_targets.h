// Targets of the exception tests (exc_targets.cpp).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

extern int exc_rethrows;
extern int exc_dtor_runs;
extern int exc_dtor_backtrace_frames;

long exc_leaf(long x);
long exc_thrower(long v);
long exc_middle(long v);
long exc_catcher(long v);
long exc_rethrower(long v);
long exc_rethrow_outer(long v);
long exc_dtor_calls_probed(long v);
long exc_dtor_backtrace(long v);
long exc_dtor_nested(long v);
long exc_catch_all_outer(long which, long v);
long exc_capture(long v);
long exc_rethrow_stored(long v);
long exc_rethrow_stored_outer(long v);
int exc_bt_leaf(void **frames, int max);
int exc_bt_middle(void **frames, int max);
int exc_bt_outer(void **frames, int max);
int exc_uw_leaf(void **frames, int max);
int exc_uw_middle(void **frames, int max);
int exc_uw_outer(void **frames, int max);

#ifdef __cplusplus
}
#endif
