// Targets of the thread-exit tests, built in the test's site flavour: pthread_exit and
// cancellation (at a cancellation point, and asynchronous) while hooked frames are live,
// with C++ objects whose destructors must run as the thread unwinds.
#include "thread_targets.h"

#include <pthread.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

std::atomic<int> thr_dtor_runs;

namespace
{
struct counts_destruction {
    ~counts_destruction() { thr_dtor_runs.fetch_add(1); }
};
} // namespace

extern "C" {

NOINLINE long thr_exit_leaf(long v)
{
    BARRIER();
    if (v > 0) pthread_exit(reinterpret_cast<void *>(v));
    return v + 1;
}

NOINLINE long thr_exit_middle(long v)
{
    counts_destruction g;
    long r = thr_exit_leaf(v);
    BARRIER();
    return r * 2;
}

NOINLINE long thr_exit_outer(long v)
{
    counts_destruction g;
    long r = thr_exit_middle(v);
    BARRIER();
    return r + 3;
}

// Blocks in read(2), a cancellation point, until the thread is cancelled.
NOINLINE long thr_cancel_leaf(int fd)
{
    char c;
    long r = read(fd, &c, 1);
    BARRIER();
    return r;
}

NOINLINE long thr_cancel_middle(int fd)
{
    counts_destruction g;
    long r = thr_cancel_leaf(fd);
    BARRIER();
    return r + 1;
}

NOINLINE long thr_cancel_outer(int fd)
{
    counts_destruction g;
    long r = thr_cancel_middle(fd);
    BARRIER();
    return r + 1;
}

NOINLINE unsigned long thr_spin_leaf(unsigned long x)
{
    BARRIER();
    return x * 2654435761u + 1;
}

// (No object with a destructor here: asynchronous cancellation in a function that has
// cleanups is undefined, with or without dprobe.)
NOINLINE unsigned long thr_spin(unsigned long x)
{
    unsigned long r = thr_spin_leaf(x) ^ thr_spin_leaf(x + 1);
    BARRIER();
    return r;
}

} // extern "C"
