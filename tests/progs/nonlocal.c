/* Calls left without returning: longjmp out of one frame and out of several, siglongjmp out
 * of a signal handler (one frame below it, and several), and a thread ending inside calls
 * (pthread_exit). `dprobe report --format graph` must close each call where it was left,
 * marked unwound, and draw the calls that follow at their caller's depth. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static jmp_buf jb;
static sigjmp_buf sjb;
static volatile int sink;

NOINLINE void after(void)
{
    sink++;
}

/* longjmp out of the function that calls it */
NOINLINE void jump_out(void)
{
    longjmp(jb, 1);
}

/* longjmp out of N + 1 nested calls */
NOINLINE void jump_deep(int n)
{
    if (n > 0)
        jump_deep(n - 1);
    else if (n == 0)
        longjmp(jb, 2);
    sink++;
}

NOINLINE void on_usr1(int sig)
{
    (void)sig;
    siglongjmp(sjb, 1);
}

/* raises SIGUSR1 below N + 1 nested calls; its handler jumps back to main */
NOINLINE void raise_deep(int n)
{
    if (n == 0)
        raise(SIGUSR1);
    else
        raise_deep(n - 1);
    sink++;
}

/* a thread ending N + 1 calls deep */
NOINLINE void exit_deep(int n)
{
    if (n > 0)
        exit_deep(n - 1);
    else if (n == 0)
        pthread_exit(NULL);
    sink++;
}

NOINLINE void *thread_main(void *arg)
{
    (void)arg;
    exit_deep(2);
    return NULL;
}

int main(void)
{
    if (!setjmp(jb)) jump_out();
    after();
    if (!setjmp(jb)) jump_deep(3);
    after();
    signal(SIGUSR1, on_usr1);
    if (!sigsetjmp(sjb, 1)) raise_deep(0);
    after();
    if (!sigsetjmp(sjb, 1)) raise_deep(2);
    after();
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0) return 1;
    pthread_join(t, NULL);
    after();
    printf("%d\n", sink);
    return 0;
}
