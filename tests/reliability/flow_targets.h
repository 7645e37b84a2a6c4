/* Targets of the control-flow tests (flow_targets.c). */
#pragma once

#include <setjmp.h>
#include <stddef.h>
#include <ucontext.h>

#ifdef __cplusplus
extern "C" {
#endif

long lj_leaf(jmp_buf *buf, long v);
long lj_middle(jmp_buf *buf, long v);
long lj_outer(long v);
long lj_sig_leaf(sigjmp_buf *buf, long v);
long lj_sig_middle(sigjmp_buf *buf, long v);
long lj_sig_outer(long v);

struct coroutine {
    ucontext_t ctx;
    long rounds;
    long sum;
    int done;
};
extern ucontext_t uco_main_ctx;
extern int (*uco_switch)(ucontext_t *, const ucontext_t *);
extern struct coroutine uco[2];
long uco_yield(int i, long v);
long uco_work(int i, long v);
long uco_resume(int i);
void uco_setup(int i, void *stack, size_t size, long rounds);

#ifdef __cplusplus
}
#endif
