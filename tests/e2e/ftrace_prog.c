/*
 * End-to-end target for ftrace's tracers through the tracefs bindings: serves its tracefs
 * (FUSE mount and socket), prints where, then until SIGTERM calls a small parser every 2 ms
 * on the main thread and on a worker thread named "e2e-worker":
 *   parse_line() { parse_token() { parse_number(); } x 3 }      (parse_line returns 6)
 * Built with -pg -mfentry: every function has a patch site.
 */
#define _GNU_SOURCE
#include "e2e_serve.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) int parse_number(int i)
{
    __asm__ volatile("" ::: "memory");
    return i;
}

__attribute__((noinline)) int parse_token(int i)
{
    return parse_number(i) + 1;
}

__attribute__((noinline)) int parse_line(void)
{
    int n = 0;
    for (int i = 0; i < 3; i++)
        n += parse_token(i) - i;
    return n * 2;
}

static void *worker(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 2 * 1000 * 1000};
    while (!stop) {
        if (parse_line() != 6) return (void *)1;
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(void)
{
    int r = prog_serve_start();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 4;
    pthread_setname_np(t, "e2e-worker");
    prog_say_where(r);

    struct timespec ts = {0, 2 * 1000 * 1000};
    while (!stop) {
        if (parse_line() != 6) return 2;
        nanosleep(&ts, NULL);
    }
    void *ret;
    pthread_join(t, &ret);
    return ret ? 3 : 0;
}
