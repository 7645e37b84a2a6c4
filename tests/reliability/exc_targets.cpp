// Targets of the exception tests, built in the test's site flavour: C++ exceptions thrown,
// rethrown and caught through functions whose exits are hooked, destructors that run during
// unwinding (calling probed functions, backtrace(), throwing and catching their own), and
// code that walks its own stack under hooked frames.
#include "exc_targets.h"

#include <exception>
#include <execinfo.h>
#include <stdexcept>
#include <unwind.h>

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

extern "C" {

int exc_rethrows;
int exc_dtor_runs;
int exc_dtor_backtrace_frames;

NOINLINE long exc_leaf(long x)
{
    BARRIER();
    return x * 3 + 1;
}

NOINLINE long exc_thrower(long v)
{
    BARRIER();
    if (v > 0) throw std::runtime_error("boom");
    return v - 1;
}

NOINLINE long exc_middle(long v)
{
    long r = exc_thrower(v);
    BARRIER();
    return r * 2;
}

// Caught in a probed function.
NOINLINE long exc_catcher(long v)
{
    try {
        long r = exc_middle(v);
        BARRIER();
        return r + 3;
    } catch (const std::runtime_error &) {
        return -100;
    }
}

// Caught, then rethrown with `throw;` (the unwinder is entered through
// _Unwind_Resume_or_Rethrow, not _Unwind_RaiseException).
NOINLINE long exc_rethrower(long v)
{
    try {
        long r = exc_middle(v);
        BARRIER();
        return r + 5;
    } catch (...) {
        ++exc_rethrows;
        throw;
    }
}

NOINLINE long exc_rethrow_outer(long v)
{
    try {
        long r = exc_rethrower(v);
        BARRIER();
        return r + 7;
    } catch (const std::runtime_error &) {
        return -200;
    }
}

namespace
{
struct calls_leaf_on_destruction {
    ~calls_leaf_on_destruction()
    {
        ++exc_dtor_runs;
        exc_leaf(5);
    }
};
struct backtrace_on_destruction {
    ~backtrace_on_destruction()
    {
        void *frames[64];
        exc_dtor_backtrace_frames = backtrace(frames, 64);
    }
};
struct throws_and_catches_on_destruction {
    ~throws_and_catches_on_destruction()
    {
        try {
            exc_middle(1);
        } catch (const std::runtime_error &) {
            ++exc_dtor_runs;
        }
    }
};
} // namespace

// A cleanup (destructor) calls a probed function during unwinding; _Unwind_Resume continues.
NOINLINE long exc_dtor_calls_probed(long v)
{
    calls_leaf_on_destruction g;
    long r = exc_middle(v);
    BARRIER();
    return r + 11;
}

// A cleanup walks the stack with backtrace() during unwinding, then unwinding goes on.
NOINLINE long exc_dtor_backtrace(long v)
{
    backtrace_on_destruction g;
    long r = exc_middle(v);
    BARRIER();
    return r + 13;
}

// A cleanup throws and catches an exception of its own during unwinding.
NOINLINE long exc_dtor_nested(long v)
{
    throws_and_catches_on_destruction g;
    long r = exc_middle(v);
    BARRIER();
    return r + 17;
}

NOINLINE long exc_catch_all_outer(long which, long v)
{
    try {
        switch (which) {
        case 0:
            return exc_dtor_calls_probed(v);
        case 1:
            return exc_dtor_backtrace(v);
        default:
            return exc_dtor_nested(v);
        }
    } catch (const std::runtime_error &) {
        return -300;
    }
}

// std::exception_ptr: captured in one call, rethrown (std::rethrow_exception) in another.
static std::exception_ptr stored;
NOINLINE long exc_capture(long v)
{
    try {
        return exc_middle(v);
    } catch (...) {
        stored = std::current_exception();
        return -1;
    }
}
NOINLINE long exc_rethrow_stored(long v)
{
    BARRIER();
    if (stored && v > 0) {
        std::exception_ptr p = stored;
        stored = nullptr;
        std::rethrow_exception(p);
    }
    return v;
}
NOINLINE long exc_rethrow_stored_outer(long v)
{
    try {
        long r = exc_rethrow_stored(v);
        BARRIER();
        return r + 19;
    } catch (const std::runtime_error &) {
        return -400;
    }
}

// Stack walks from code running under hooked frames (not from a handler).
NOINLINE int exc_bt_leaf(void **frames, int max)
{
    int n = backtrace(frames, max);
    BARRIER();
    return n;
}
NOINLINE int exc_bt_middle(void **frames, int max)
{
    int n = exc_bt_leaf(frames, max);
    BARRIER();
    return n;
}
NOINLINE int exc_bt_outer(void **frames, int max)
{
    int n = exc_bt_middle(frames, max);
    BARRIER();
    return n;
}

namespace
{
struct walk {
    void **frames;
    int max, n;
};
_Unwind_Reason_Code collect(struct _Unwind_Context *ctx, void *arg)
{
    auto *w = static_cast<walk *>(arg);
    if (w->n >= w->max) return _URC_END_OF_STACK;
    w->frames[w->n++] = reinterpret_cast<void *>(_Unwind_GetIP(ctx));
    return _URC_NO_REASON;
}
} // namespace

NOINLINE int exc_uw_leaf(void **frames, int max)
{
    walk w{frames, max, 0};
    _Unwind_Backtrace(collect, &w);
    BARRIER();
    return w.n;
}
NOINLINE int exc_uw_middle(void **frames, int max)
{
    int n = exc_uw_leaf(frames, max);
    BARRIER();
    return n;
}
NOINLINE int exc_uw_outer(void **frames, int max)
{
    int n = exc_uw_middle(frames, max);
    BARRIER();
    return n;
}

} // extern "C"
