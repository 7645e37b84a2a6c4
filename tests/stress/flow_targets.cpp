// The probed functions of the flow stress test (flow_stress_test.cpp), built once per site
// flavour with FLOW(name) naming them flow_<flavour>_<name>: C++ exceptions thrown through
// recursive frames, longjmp out of recursive frames, stack walks (backtrace, _Unwind_Backtrace,
// dladdr) from inside probed frames, a recursion whose body a signal handler may leave with
// siglongjmp, and functions that end their thread (pthread_exit) or wait to be cancelled.
//
// Every function is noipa and keeps its recursion (an empty asm on the result): the test
// needs each level to be a real call, which GCC would otherwise turn into a loop or, seeing
// that the recursion always throws, into a single throw.
#include "tests/stress/flow_targets.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdexcept>
#include <unistd.h>
#include <unwind.h>

// jumper() and exiter() end every recursion in longjmp or pthread_exit, which GCC takes for
// recursion without end.
#pragma GCC diagnostic ignored "-Winfinite-recursion"

#define NOIPA __attribute__((noipa))
#define KEEP(v) __asm__ volatile("" : "+r"(v))

// Never set: canceller() waits until its thread is cancelled.
static volatile int flow_wait_over;

namespace
{
_Unwind_Reason_Code count_frame(struct _Unwind_Context *ctx, void *arg)
{
    auto *n = static_cast<long *>(arg);
    if (_Unwind_GetIP(ctx)) ++*n;
    return _URC_NO_REASON;
}
} // namespace

extern "C" {

NOIPA long FLOW(thrower)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_thrower);
    if (d == 0) throw std::runtime_error("flow");
    long r = FLOW(thrower)(d - 1);
    KEEP(r);
    return r + 1;
}

NOIPA long FLOW(catcher)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_catcher);
    try {
        return FLOW(thrower)(d);
    } catch (const std::runtime_error &) {
        return -1;
    }
}

NOIPA long FLOW(jumper)(int d, jmp_buf *jb)
{
    flow_note_call(FLOW_FLAVOUR, flow_jumper);
    if (d == 0) longjmp(*jb, 1);
    long r = FLOW(jumper)(d - 1, jb);
    KEEP(r);
    return r + 1;
}

NOIPA long FLOW(setjmper)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_setjmper);
    jmp_buf jb;
    if (setjmp(jb)) return -2;
    return FLOW(jumper)(d, &jb);
}

// Walks its own stack with backtrace() (naming the frames with dladdr) and with
// _Unwind_Backtrace: 1 if backtrace() found both probed callers by name and the other walk
// as many frames, 0 otherwise.
NOIPA long FLOW(inner)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_inner);
    void *pcs[64];
    const int n = backtrace(pcs, 64);
    int named = 0;
    for (int i = 0; i < n; ++i) {
        Dl_info info;
        if (dladdr(pcs[i], &info) && info.dli_sname &&
            (std::strstr(info.dli_sname, "_middle") || std::strstr(info.dli_sname, "_outer")))
            ++named;
    }
    long frames = 0;
    _Unwind_Backtrace(count_frame, &frames);
    long ok = named == 2 && frames + 1 >= n ? 1 : 0;
    KEEP(ok);
    return ok + d - d;
}

NOIPA long FLOW(middle)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_middle);
    long r = FLOW(inner)(d);
    KEEP(r);
    return r;
}

NOIPA long FLOW(outer)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_outer);
    long r = FLOW(middle)(d);
    KEEP(r);
    return r;
}

NOIPA long FLOW(leaf)(long x)
{
    flow_note_call(FLOW_FLAVOUR, flow_leaf);
    return x * 3 + 1;
}

// Recursion to depth D, then leaf(D): a signal handler may leave any level of it with
// siglongjmp (its code is in the flow_jumpable section, which the handler recognises).
__attribute__((section("flow_jumpable"))) NOIPA long FLOW(deep)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_deep);
    for (int i = 0; i < 32; ++i) // time in the body, where signals may land and jump out
        KEEP(i);
    if (d == 0) return FLOW(leaf)(7);
    long r = FLOW(deep)(d - 1);
    KEEP(r);
    return r + 1;
}

// Ends the calling thread from D levels of probed frames.
NOIPA long FLOW(exiter)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_exiter);
    if (d == 0) pthread_exit(nullptr);
    long r = FLOW(exiter)(d - 1);
    KEEP(r);
    return r + 1;
}

// Waits, D levels of probed frames down, at a cancellation point until cancelled.
NOIPA long FLOW(canceller)(int d)
{
    flow_note_call(FLOW_FLAVOUR, flow_canceller);
    if (d == 0) {
        while (!flow_wait_over)
            usleep(1000);
        return 0;
    }
    long r = FLOW(canceller)(d - 1);
    KEEP(r);
    return r + 1;
}

} // extern "C"
