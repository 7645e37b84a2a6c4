/* Ways a program ends without returning from main: _exit, exit() called from another
 * thread, abort, SIGKILL, and daemon() (the parent leaves, the child carries on). What
 * `dprobe record` recorded before the end must reach the trace file in every case, as the
 * kernel's ring buffer outlives its tasks. Usage: ending _exit|thread-exit|abort|kill|daemon */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile int sink;

NOINLINE int work(int n)
{
    sink += n;
    return n * 2;
}

NOINLINE void before_end(void)
{
    for (int i = 0; i < 3; i++)
        work(i);
}

NOINLINE void *exiting_thread(void *arg)
{
    (void)arg;
    before_end();
    exit(4);
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "";
    before_end();
    if (strcmp(how, "_exit") == 0) _exit(3);
    if (strcmp(how, "thread-exit") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, exiting_thread, NULL) != 0) return 1;
        for (;;)
            pause(); /* the other thread ends the process */
    }
    if (strcmp(how, "abort") == 0) abort();
    if (strcmp(how, "kill") == 0) raise(SIGKILL);
    if (strcmp(how, "daemon") == 0) {
        if (daemon(1, 1) != 0) return 1;
        /* the child, on its own: the parent has left */
        before_end();
        usleep(100 * 1000);
        work(42);
        return 0;
    }
    fprintf(stderr, "usage: ending _exit|thread-exit|abort|kill|daemon\n");
    return 2;
}
