/*
 * End-to-end target for the tracefs bindings: starts the tracefs of this process (FUSE mount
 * and socket), prints where, and calls a few functions with patch sites (built with
 * -pg -mfentry) until SIGTERM/SIGINT. Values are chosen so a script can check them:
 *   e2e_compute(a, 2a) returns 3a;  e2e_greet("world", n) returns n + 5.
 */
#include "e2e_serve.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) int e2e_compute(int a, int b)
{
    __asm__ volatile("" ::: "memory");
    return a + b;
}

__attribute__((noinline)) long e2e_greet(const char *name, long n)
{
    __asm__ volatile("" ::: "memory");
    return (long)strlen(name) + n;
}

int main(void)
{
    int r = prog_serve_start();
    prog_say_where(r);

    struct timespec ts = {0, 5 * 1000 * 1000};
    for (int i = 1; !stop; i++) {
        if (e2e_compute(i, 2 * i) != 3 * i) return 2;
        if (e2e_greet("world", i) != i + 5) return 3;
        nanosleep(&ts, NULL);
    }
    return 0; /* exit() runs the atexit handler that unmounts */
}
