// Functions the jprobe tests probe (jprobe_targets.c), built in each site flavour.
#pragma once

#include <stdarg.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct jp_big { /* 32 bytes: passed in memory */
    long a, b, c, d;
};
struct jp_small { /* 16 bytes: one integer and one vector register */
    int x;
    double y;
};

uint32_t jp_target(uint32_t value);  /* the kernel's j_kprobe_target */
uint32_t jp_target2(uint32_t value); /* and its second, for the batch */
long jp_int6(long a, long b, long c, long d, long e, long f);
long jp_int8(long a, long b, long c, long d, long e, long f, long g, long h);
double jp_dbl10(double a, double b, double c, double d, double e, double f, double g, double h,
                double i, double j);
double jp_mixed(int a, double b, long c, float d, const char *e, double f);
long jp_struct(struct jp_big big, struct jp_small small, const int *p);
long jp_modify(long a, long b, long c, long d, long e, long f, long g, double x);
/* 80 bytes of stack arguments: more than a jprobe copies. */
long jp_too_many(long a, long b, long c, long d, long e, long f, long g, long h, long i, long j,
                 long k, long l, long m, long n, long o, long p);
long jp_varargs(int n, ...);
long jp_thread_target(long x, long y);
long jp_recursive(long x);

/* jprobe_vec_targets.c: __m256d and __m512d arguments (only where the CPU has AVX, AVX-512F),
 * called through jp_call_m256/jp_call_m512 (loads the vectors from A and B); the handlers
 * jp_h_m256/jp_h_m512 record them in jp_vec_seen (a, then b) and N in jp_vec_seen_n. */
double jp_call_m256(const double *a, const double *b, long n);
double jp_call_m512(const double *a, const double *b, long n);
extern double jp_vec_seen[16];
extern long jp_vec_seen_n;

#ifdef __cplusplus
}
#endif
