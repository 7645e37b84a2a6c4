/* The same tiny function as targets_fentry.c, without a patch site, one copy per probe. */
#define BENCH_FN(name)                                                                             \
    __attribute__((noinline)) long name(long x)                                                    \
    {                                                                                              \
        __asm__ volatile("" : "+r"(x));                                                            \
        return x + 1;                                                                              \
    }
BENCH_FN(kp_bench_plain0)
BENCH_FN(kp_bench_plain1)
BENCH_FN(kp_bench_plain2)
BENCH_FN(kp_bench_plain3)
