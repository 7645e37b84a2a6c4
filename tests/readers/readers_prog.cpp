// The program tests/readers/readers_test.py traces, built -O2 -g without patch sites (every
// traced function gets a jump site), as users build theirs:
//   readers_prog run SECONDS   calls work() every 2 ms (which calls a C++ member function,
//                              a function in an anonymous namespace and sc_compute(), which
//                              calls sc_step()) for SECONDS, or until SIGUSR1
//   readers_prog crash         dies of SIGSEGV two calls deep
//   readers_prog late LIB SECONDS   as run, and once SIGUSR2 comes, dlopens LIB (a library
//                              with a USDT probe, tests/sdt/sdt_lib.c) and calls its
//                              sdtl_fire() in every round
// Arguments change from call to call, so that the compiler keeps every call.
#include <dlfcn.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#define NOINLINE __attribute__((noinline))

namespace app
{
struct worker {
    NOINLINE int run(int x);
};
int worker::run(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 3 + 1;
}
} // namespace app

namespace
{
// A name with a space in it when demangled: "(anonymous namespace)::scale".
NOINLINE int scale(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 2;
}
} // namespace

extern "C" {

NOINLINE int sc_step(int x)
{
    __asm__ volatile("" ::: "memory");
    return x + 1;
}

NOINLINE int sc_compute(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += sc_step(i);
    return s;
}

NOINLINE int work(int i)
{
    app::worker w;
    return w.run(i) + sc_compute(i % 4 + 1) + scale(i);
}

NOINLINE int crash_inner(volatile int *p)
{
    return *p; // p is null
}

NOINLINE int crash_outer(volatile int *p)
{
    return crash_inner(p) + 1;
}
}

namespace
{
volatile sig_atomic_t g_stop = 0, g_load = 0;
void on_usr1(int)
{
    g_stop = 1;
}
void on_usr2(int)
{
    g_load = 1;
}
} // namespace

int main(int argc, char **argv)
{
    std::signal(SIGUSR1, on_usr1);
    std::signal(SIGUSR2, on_usr2);
    if (argc > 1 && std::strcmp(argv[1], "crash") == 0) {
        std::printf("%d\n", work(1));
        std::fflush(stdout);
        return crash_outer(nullptr);
    }
    const bool late = argc > 3 && std::strcmp(argv[1], "late") == 0;
    const char *secs_arg = late ? argv[3] : argc > 2 ? argv[2] : nullptr;
    const double secs = secs_arg ? std::atof(secs_arg) : 3;
    int (*fire)(int) = nullptr;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long acc = 0, calls = 0;
    do {
        if (late && g_load && !fire) {
            void *h = dlopen(argv[2], RTLD_NOW);
            if (!h || !(fire = reinterpret_cast<int (*)(int)>(dlsym(h, "sdtl_fire")))) {
                std::fprintf(stderr, "%s\n", dlerror());
                return 2;
            }
        }
        if (fire) acc += fire(int(calls));
        acc += work(int(calls++));
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, nullptr);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (!g_stop && (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) * 1e-9 < secs);
    std::printf("%ld calls\n", calls);
    return acc == 0; // never: keeps acc
}
