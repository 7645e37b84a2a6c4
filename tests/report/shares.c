/*
 * shares: a program whose calls take known shares of its time, for the report formats'
 * end-to-end tests (report_test.py). main spends about 300 ms in spin_a, 200 ms in spin_b
 * (100 of them in spin_c, which spin_b calls) and calls tiny 97 times: by inclusive time
 * main 100%, spin_a 60%, spin_b 40%, spin_c 20%; by calls tiny 97 of main's 102 (main,
 * spin_a, spin_b, spin_c, named and 97 tiny). A busy machine preempts the thread and moves
 * time between the frames, so the program notes when each of them began and ended
 * (CLOCK_MONOTONIC, what the tests record with) and prints it on stderr,
 * "stamps main=BEGIN,END spin_a=... spin_b=... spin_c=..." in ns: the reports must agree
 * with that. An argument sets how many times tiny is called (many calls, for the size of
 * the trace formats). named("shares", 6) returns 12: arguments and a return value to
 * record.
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
 * Spins for MS ms from its call. */
static void busy_for(unsigned ms)
{
    const unsigned long long end = now_ns() + ms * 1000000ull;
    while (now_ns() < end) {
    }
}

/* When each frame began and ended (ns). */
enum { MAIN, SPIN_A, SPIN_B, SPIN_C, FRAMES };
static unsigned long long stamp[FRAMES][2];
static const char *const frame_name[FRAMES] = {"main", "spin_a", "spin_b", "spin_c"};

__attribute__((noinline)) int tiny(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 3 + 1;
}

__attribute__((noinline)) void spin_c(void)
{
    stamp[SPIN_C][0] = now_ns();
    busy_for(100);
    stamp[SPIN_C][1] = now_ns();
}

__attribute__((noinline)) void spin_b(void)
{
    stamp[SPIN_B][0] = now_ns();
    busy_for(100);
    spin_c();
    stamp[SPIN_B][1] = now_ns();
}

__attribute__((noinline)) void spin_a(void)
{
    stamp[SPIN_A][0] = now_ns();
    busy_for(300);
    stamp[SPIN_A][1] = now_ns();
}

__attribute__((noinline)) int named(const char *word, int len)
{
    __asm__ volatile("" ::: "memory");
    return word[0] ? len * 2 : 0;
}

/* After main returned: the printing is no frame's time. */
static int result;
static void print_stamps(void)
{
    printf("shares %d\n", result);
    fflush(stdout);
    fprintf(stderr, "stamps");
    for (int f = 0; f < FRAMES; f++)
        fprintf(stderr, " %s=%llu,%llu", frame_name[f], stamp[f][0], stamp[f][1]);
    fprintf(stderr, "\n");
}

int main(int argc, char **argv)
{
    stamp[MAIN][0] = now_ns();
    const int n = argc > 1 ? atoi(argv[1]) : 97;
    int acc = 0;
    spin_a();
    spin_b();
    for (int i = 0; i < n; i++)
        acc += tiny(i);
    acc += named("shares", 6);
    result = acc;
    atexit(print_stamps);
    stamp[MAIN][1] = now_ns();
    return 0;
}
