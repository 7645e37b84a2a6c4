/*
 * The functions the libtracefs client test traces, built with patch sites (-pg -mfentry)
 * so that they are in available_filter_functions, as kernel functions are.
 * lt_run(n) calls lt_work(i, 100 + i) for i in [0, n), which returns 2 * lt_leaf(i, 100 + i);
 * lt_leaf(a, b) returns a + b.
 */
#include "workload.h"

__attribute__((noinline)) int lt_leaf(int a, long b)
{
    __asm__ volatile("" ::: "memory");
    return a + (int)b;
}

__attribute__((noinline)) int lt_work(int a, long b)
{
    int r = lt_leaf(a, b);
    __asm__ volatile("" ::: "memory");
    return 2 * r;
}

int lt_run(int n)
{
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += lt_work(i, 100 + i);
    return sum;
}
