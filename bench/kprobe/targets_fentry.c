/* Built with -pg -mfentry: each function has a patch site. */
#define BENCH_FN(name)                                                                             \
    __attribute__((noinline)) long name(long x)                                                    \
    {                                                                                              \
        __asm__ volatile("" : "+r"(x));                                                            \
        return x + 1;                                                                              \
    }
BENCH_FN(kp_bench_site0)
BENCH_FN(kp_bench_site1)
BENCH_FN(kp_bench_site2)
BENCH_FN(kp_bench_site3)
BENCH_FN(kp_bench_site4)
BENCH_FN(kp_bench_site5)
