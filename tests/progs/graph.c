/* Nested calls, a leaf called twice, recursion and a worker thread: the function graph of
 * `dprobe record` must show each call with its nesting, per thread. */
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int leaf(int x)
{
    __asm__ volatile("" ::: "memory");
    return x + 1;
}

NOINLINE int middle(int x)
{
    return leaf(x) + leaf(x + 1);
}

NOINLINE int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

NOINLINE void *worker(void *arg)
{
    int *v = arg;
    *v = middle(*v);
    return NULL;
}

int main(void)
{
    int r = middle(1);
    r += fib(3);
    int v = 10;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, &v) != 0) return 1;
    pthread_join(t, NULL);
    printf("%d %d\n", r, v);
    return 0;
}
