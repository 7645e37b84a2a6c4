/*
 * End-to-end target of the kernel's "latency histogram from two events" recipe on a user
 * function: serves its tracefs, then on SIGUSR1 calls lat_work() with known sleeps and
 * prints "done=N" (N: the number of calls). Built with patch sites (-pg -mfentry) and plain
 * (no site: the fprobe goes through a jump site), so both paths are exercised.
 *   lat_work(ms) sleeps MS milliseconds: 8 calls of 2 ms, 4 calls of 25 ms.
 */
#include "e2e_serve.h"

#include <signal.h>
#include <stdio.h>
#include <time.h>

static volatile sig_atomic_t go;

static void on_go(int sig)
{
    (void)sig;
    go = 1;
}

__attribute__((noinline)) long lat_work(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
    __asm__ volatile("" ::: "memory");
    return ms;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_go;
    sigaction(SIGUSR1, &sa, NULL);
    int r = prog_serve_start();
    prog_say_where(r);
    int rounds = 0;
    while (!stop) {
        if (go) {
            go = 0;
            int n = 0;
            for (int i = 0; i < 8; i++, n++)
                lat_work(2);
            for (int i = 0; i < 4; i++, n++)
                lat_work(25);
            rounds++;
            printf("done=%d\n", n * rounds);
            fflush(stdout);
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
