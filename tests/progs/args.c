/* Probe events with arguments, return values and strings, single-threaded so the text
 * report has one order. */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE long add(int a, int b)
{
    __asm__ volatile("" ::: "memory");
    return (long)a + b;
}

NOINLINE unsigned long slen(const char *s)
{
    unsigned long n = 0;
    while (s[n])
        n++;
    return n;
}

int main(void)
{
    long t = 0;
    for (int i = 0; i < 3; i++)
        t += add(i, -10 * i);
    t += (long)slen("hello");
    t += (long)slen("dprobe");
    printf("%ld\n", t);
    return 0;
}
