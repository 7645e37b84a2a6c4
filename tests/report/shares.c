/*
 * shares: a program whose calls take known shares of its time, for the report formats'
 * end-to-end tests (report_test.py). main spends 300 ms in spin_a, 200 ms in spin_b (100
 * of them in spin_c, which spin_b calls) and calls tiny 97 times. Each spin waits for a
 * deadline on CLOCK_MONOTONIC, so the wall times (what the graph measures) are what they
 * should be however the machine is loaded, but for the moments a preempted thread spends
 * between two calls. By inclusive time: main 100%, spin_a 60%, spin_b 40%,
 * spin_c 20%; by calls: tiny 97 of main's 102 (main, spin_a, spin_b, spin_c, named and 97
 * tiny). An argument sets how many times tiny is called (many calls, for the size of the
 * trace formats). named("shares", 6) returns 12: arguments and a return value to record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Not traced (the tests' -F names only the functions below): its time is its caller's.
 * Spins until an absolute deadline, AT ms after main started: a spin cut short or delayed
 * by preemption moves time between neighbouring frames but never adds to the whole. */
static unsigned long long t0;
static void busy_until(unsigned at_ms)
{
    const unsigned long long end = t0 + at_ms * 1000000ull;
    while (now_ns() < end) {
    }
}

__attribute__((noinline)) int tiny(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 3 + 1;
}

__attribute__((noinline)) void spin_c(void)
{
    busy_until(500);
}

__attribute__((noinline)) void spin_b(void)
{
    busy_until(400);
    spin_c();
}

__attribute__((noinline)) void spin_a(void)
{
    busy_until(300);
}

__attribute__((noinline)) int named(const char *word, int len)
{
    __asm__ volatile("" ::: "memory");
    return word[0] ? len * 2 : 0;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 97;
    int acc = 0;
    t0 = now_ns();
    spin_a();
    spin_b();
    for (int i = 0; i < n; i++)
        acc += tiny(i);
    acc += named("shares", 6);
    printf("shares %d\n", acc);
    return 0;
}
