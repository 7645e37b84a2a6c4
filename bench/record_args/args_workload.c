/* The workload of bench/record_args/run: `args_workload FUNC CALLS` calls FUNC (leaf0,
 * leaf1, leaf2 or leaf4: a non-inlined leaf taking that many integer arguments, each call
 * feeding the next) CALLS times and prints {"ns_per_call": T}: the loop's CPU time on the
 * main thread (user and kernel) per call, start-up and exit left out. One more call of FUNC
 * comes before the clock starts: under `dprobe record` the thread's first event sets up its
 * ring buffer (for the bench's 256 MB buffer, some 200 ms: more than the whole loop), which
 * is not a call's cost. Built with patch sites (-pg -mfentry) and -g, so `dprobe record -a`
 * finds the parameters in its DWARF. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline)) long leaf0(void)
{
    __asm__ volatile("" ::: "memory");
    return 1;
}

__attribute__((noinline)) long leaf1(long a)
{
    return a * 3 + 1;
}

__attribute__((noinline)) long leaf2(long a, long b)
{
    return a * 3 + b;
}

__attribute__((noinline)) long leaf4(long a, long b, long c, long d)
{
    return a * 3 + b + (c ^ d);
}

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: args_workload leaf0|leaf1|leaf2|leaf4 CALLS\n");
        return 2;
    }
    const char *f = argv[1];
    unsigned long n = strtoul(argv[2], NULL, 0);
    long x = 0;
    if (!strcmp(f, "leaf0")) /* the call before the clock starts */
        x = leaf0() - 1;
    else if (!strcmp(f, "leaf1"))
        x = leaf1(x) - 1;
    else if (!strcmp(f, "leaf2"))
        x = leaf2(x, 0);
    else if (!strcmp(f, "leaf4"))
        x = leaf4(x, 0, 7, x) - 7;
    else
        return 2;
    double t0 = cpu_ns();
    if (!strcmp(f, "leaf0"))
        for (unsigned long i = 0; i < n; i++)
            x += leaf0();
    else if (!strcmp(f, "leaf1"))
        for (unsigned long i = 0; i < n; i++)
            x = leaf1(x);
    else if (!strcmp(f, "leaf2"))
        for (unsigned long i = 0; i < n; i++)
            x = leaf2(x, (long)i);
    else if (!strcmp(f, "leaf4"))
        for (unsigned long i = 0; i < n; i++)
            x = leaf4(x, (long)i, 7, x);
    else
        return 2;
    double t = cpu_ns() - t0;
    printf("{\"ns_per_call\": %.3f, \"x\": %ld}\n", t / (double)n, x);
    return 0;
}
