// Functions taking __m256d and __m512d arguments (passed whole in ymm and zmm registers), the
// callers that pass them (the test itself is not built for AVX), and handlers that record what
// they receive: a jprobe handler gets such arguments whole on every kind of entry. Built per
// site flavour, like jprobe_targets.c; each function is built for the instruction set it needs
// and run only where the CPU has it.
#include "jprobe_targets.h"

#include <dprobe/kprobes.h>

#include <immintrin.h>

#define T __attribute__((noinline, used))

double jp_vec_seen[16];
long jp_vec_seen_n;

T __attribute__((target("avx"))) double jp_m256(__m256d a, __m256d b, long n)
{
    double x[4], y[4];
    _mm256_storeu_pd(x, a);
    _mm256_storeu_pd(y, b);
    return (x[0] + 2 * x[1] + 3 * x[2] + 4 * x[3] - y[0] + y[1] - y[2] + y[3]) * (double)n;
}

T __attribute__((target("avx"))) double jp_call_m256(const double *a, const double *b, long n)
{
    return jp_m256(_mm256_loadu_pd(a), _mm256_loadu_pd(b), n);
}

T __attribute__((target("avx"))) double jp_h_m256(__m256d a, __m256d b, long n)
{
    _mm256_storeu_pd(jp_vec_seen, a);
    _mm256_storeu_pd(jp_vec_seen + 4, b);
    jp_vec_seen_n = n;
    a = b = _mm256_setzero_pd(); // a copy: the function gets the originals
    (void)a;
    (void)b;
    jprobe_return();
    return 0;
}

T __attribute__((target("avx512f"))) double jp_m512(__m512d a, __m512d b, long n)
{
    double x[8], y[8];
    _mm512_storeu_pd(x, a);
    _mm512_storeu_pd(y, b);
    double s = 0;
    for (int i = 0; i < 8; ++i)
        s += (i + 1) * x[i] - (i % 2 ? -1 : 1) * y[i];
    return s * (double)n;
}

T __attribute__((target("avx512f"))) double jp_call_m512(const double *a, const double *b, long n)
{
    return jp_m512(_mm512_loadu_pd(a), _mm512_loadu_pd(b), n);
}

T __attribute__((target("avx512f"))) double jp_h_m512(__m512d a, __m512d b, long n)
{
    _mm512_storeu_pd(jp_vec_seen, a);
    _mm512_storeu_pd(jp_vec_seen + 8, b);
    jp_vec_seen_n = n;
    jprobe_return();
    return 0;
}
