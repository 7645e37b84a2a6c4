/* Calls as fast as threads can make them: BURST_THREADS threads (argv[1], default 4), each
 * calling step() BURST_CALLS times (argv[2], default 250000) from worker(), as the main
 * thread does too. `dprobe record` with its default buffers loses none of them, and the
 * graph starts with main. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOINLINE __attribute__((noinline))

static long calls = 250000;

NOINLINE long step(long i)
{
    __asm__ volatile("" ::: "memory");
    return i & 7;
}

NOINLINE void *worker(void *arg)
{
    long s = 0;
    for (long i = 0; i < calls; i++)
        s += step(i);
    *(long *)arg = s;
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) calls = atol(argv[2]);
    pthread_t t[64];
    long sums[65] = {0};
    if (n > 64) n = 64;
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], 0, worker, &sums[i]);
    worker(&sums[n]);
    long total = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], 0);
        total += sums[i];
    }
    printf("%ld\n", total + sums[n]);
    return 0;
}
