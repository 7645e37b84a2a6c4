/* Functions built with no patch site at all: reached through jump sites. */
#include <string.h>

__attribute__((noinline)) unsigned long plain_mix(unsigned long a, unsigned long b)
{
    unsigned long r = a;
    for (int i = 0; i < 4; i++)
        r = r * 31 + (b >> i);
    return r;
}

__attribute__((noinline)) double plain_scale(double x, int n)
{
    double r = x;
    while (n-- > 0)
        r *= 1.5;
    return r;
}

__attribute__((noinline)) unsigned long plain_strsum(const char *s)
{
    unsigned long sum = 0;
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        sum += (unsigned char)s[i];
    return sum;
}

/* Calls its siblings: a probed function calling probed functions. */
__attribute__((noinline)) unsigned long plain_outer(unsigned long a)
{
    return plain_mix(a, 7) + plain_strsum("dprobe") + (unsigned long)plain_scale((double)a, 3);
}
