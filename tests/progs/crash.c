/* Records up to a crash: the trace file must keep what was flushed, and report must say
 * the process did not finish cleanly. */
#include <signal.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int step(int i)
{
    __asm__ volatile("" ::: "memory");
    return i * 3;
}

int main(void)
{
    int s = 0;
    for (int i = 0; i < 5; i++)
        s += step(i);
    printf("%d\n", s);
    fflush(stdout);
    raise(SIGSEGV);
    return 0;
}
