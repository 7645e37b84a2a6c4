// C++ exceptions thrown through traced calls: caught one call up and several calls up, and
// rethrown from a catch block. `dprobe report --format graph` must close each call the
// exception left, at the catch, marked unwound, and draw what follows at the catcher's depth.
// (extern "C": the names are the same in every compiler's mangling.)
#include <cstdio>

#define NOINLINE __attribute__((noinline))

static volatile int sink;

extern "C" {

NOINLINE void after()
{
    sink = sink + 1;
}

NOINLINE void throw_now(int v)
{
    throw v;
}

NOINLINE void throw_deep(int n)
{
    if (n == 0) throw n;
    throw_deep(n - 1);
    sink = sink + 1;
}

// Caught by the function that called the thrower.
NOINLINE int catch_near()
{
    try {
        throw_now(1);
    } catch (int v) {
        after();
        return v;
    }
    return 0;
}

NOINLINE int pass_through(int n)
{
    throw_deep(n);
    return 0;
}

// Caught several calls up.
NOINLINE int catch_far()
{
    try {
        pass_through(3);
    } catch (int v) {
        after();
        return v + 10;
    }
    return 0;
}

// Caught, then thrown again from the catch block and caught one level further up.
NOINLINE void rethrow_from_catch()
{
    try {
        throw_now(2);
    } catch (int) {
        after();
        throw;
    }
}

NOINLINE int catch_rethrown()
{
    try {
        rethrow_from_catch();
    } catch (int v) {
        return v + 20;
    }
    return 0;
}

} // extern "C"

int main()
{
    int r = catch_near();
    r += catch_far();
    r += catch_rethrown();
    after();
    std::printf("%d %d\n", r, sink);
    return 0;
}
