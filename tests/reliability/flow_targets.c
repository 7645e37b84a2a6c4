/* Targets of the control-flow tests, built in the test's site flavour: longjmp and siglongjmp
 * across hooked frames, and swapcontext coroutines whose stacks hold hooked frames while
 * other stacks run. */
#include "flow_targets.h"

#include <setjmp.h>
#include <stddef.h>
#include <ucontext.h>

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

/* --- longjmp ------------------------------------------------------------------------------ */

NOINLINE long lj_leaf(jmp_buf *buf, long v)
{
    BARRIER();
    if (v > 0) longjmp(*buf, (int)v);
    return v + 1;
}

NOINLINE long lj_middle(jmp_buf *buf, long v)
{
    long r = lj_leaf(buf, v);
    BARRIER();
    return r * 2;
}

/* setjmp in a probed function, longjmp from two hooked frames below it. */
NOINLINE long lj_outer(long v)
{
    jmp_buf buf;
    volatile long r = setjmp(buf);
    if (r) return -r;
    r = lj_middle(&buf, v);
    BARRIER();
    return r + 3;
}

NOINLINE long lj_sig_leaf(sigjmp_buf *buf, long v)
{
    BARRIER();
    if (v > 0) siglongjmp(*buf, (int)v);
    return v + 1;
}

NOINLINE long lj_sig_middle(sigjmp_buf *buf, long v)
{
    long r = lj_sig_leaf(buf, v);
    BARRIER();
    return r * 2;
}

NOINLINE long lj_sig_outer(long v)
{
    sigjmp_buf buf;
    volatile long r = sigsetjmp(buf, 1);
    if (r) return -r;
    r = lj_sig_middle(&buf, v);
    BARRIER();
    return r + 3;
}

/* --- swapcontext coroutines ---------------------------------------------------------------- */

ucontext_t uco_main_ctx;
struct coroutine uco[2];

/* The switch the coroutines use: libc's swapcontext, or one dprobe does not see (a test
 * sets it to libc's own, bypassing dprobe's interposer, like a hand-written switch). */
int (*uco_switch)(ucontext_t *, const ucontext_t *) = swapcontext;

/* Runs on coroutine I's stack: gives control back to the main context. */
NOINLINE long uco_yield(int i, long v)
{
    uco_switch(&uco[i].ctx, &uco_main_ctx);
    BARRIER();
    return v + 1;
}

NOINLINE long uco_work(int i, long v)
{
    long r = uco_yield(i, v);
    BARRIER();
    return r * 2;
}

/* The body of coroutine I: ROUNDS hooked calls, each suspended in the middle. */
static void uco_body(int i)
{
    for (long n = 0; n < uco[i].rounds; ++n)
        uco[i].sum += uco_work(i, n);
    uco[i].done = 1;
}

/* Runs on the main context's stack: switches to coroutine I until it yields or ends. */
NOINLINE long uco_resume(int i)
{
    uco_switch(&uco_main_ctx, &uco[i].ctx);
    BARRIER();
    return uco[i].done ? 100 + i : i;
}

void uco_setup(int i, void *stack, size_t size, long rounds)
{
    getcontext(&uco[i].ctx);
    uco[i].ctx.uc_stack.ss_sp = stack;
    uco[i].ctx.uc_stack.ss_size = size;
    uco[i].ctx.uc_link = &uco_main_ctx;
    uco[i].rounds = rounds;
    uco[i].sum = 0;
    uco[i].done = 0;
    makecontext(&uco[i].ctx, (void (*)(void))uco_body, 1, i);
}
