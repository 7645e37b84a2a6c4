// Functions the jprobe tests probe, built plain (jump site or int3 entry) and with patch
// sites (-pg -mfentry, -fpatchable-function-entry=5). Their results depend on every argument,
// so a handler that changed what the function receives shows in the result.
#include "jprobe_targets.h"

#define T __attribute__((noinline, used))

T uint32_t jp_target(uint32_t value)
{
    return value / 3 + 1;
}

T uint32_t jp_target2(uint32_t value)
{
    return value * 7 + 2;
}

T long jp_int6(long a, long b, long c, long d, long e, long f)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
}

T long jp_int8(long a, long b, long c, long d, long e, long f, long g, long h)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}

T double jp_dbl10(double a, double b, double c, double d, double e, double f, double g, double h,
                  double i, double j)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j;
}

T double jp_mixed(int a, double b, long c, float d, const char *e, double f)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e[0] + 6 * f;
}

T long jp_struct(struct jp_big big, struct jp_small small, const int *p)
{
    return big.a + 2 * big.b + 3 * big.c + 4 * big.d + 5 * small.x + (long)(6 * small.y) + 7 * *p;
}

T long jp_modify(long a, long b, long c, long d, long e, long f, long g, double x)
{
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + (long)(8 * x);
}

T long jp_too_many(long a, long b, long c, long d, long e, long f, long g, long h, long i, long j,
                   long k, long l, long m, long n, long o, long p)
{
    return a + b + c + d + e + f + g + h + i + j + k + l + m + n + o + p;
}

T long jp_varargs(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    long s = 0;
    for (int i = 0; i < n; ++i)
        s += (i + 1) * va_arg(ap, long);
    va_end(ap);
    return s;
}

T long jp_thread_target(long x, long y)
{
    return x * 3 + y;
}

T long jp_recursive(long x)
{
    return x + 1;
}
