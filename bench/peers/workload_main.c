/* The common workload as a program of its own, for the tools that run a whole program
 * (dprobe record, uftrace record): `peers_workload CALLS` calls caller_pfe(CALLS) once and
 * prints {"calls": CALLS, "ns_per_call": T} for the loop alone, start-up and exit left out:
 * the main thread's CPU time (user and kernel), so preemption by other load does not count. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

unsigned long caller_pfe(unsigned long n);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    unsigned long calls = argc > 1 ? strtoul(argv[1], NULL, 0) : 1000000;
    unsigned long want = 0;
    for (unsigned long i = 0; i < calls; i++)
        want = want * 5 + 1;
    double t0 = now_ns();
    unsigned long x = caller_pfe(calls);
    double t = now_ns() - t0;
    if (x != want) {
        fprintf(stderr, "peers_workload: computed %#lx, expected %#lx\n", x, want);
        return 1;
    }
    printf("{\"calls\": %lu, \"ns_per_call\": %.3f}\n", calls, t / (double)calls);
    return 0;
}
