/* Benchmark targets with a patch site (-pg -mfentry): one function per variant so that each
 * variant's probe sits on its own site. */
#define TARGET(name)                                                                               \
    __attribute__((noinline)) unsigned long name(unsigned long x, unsigned long y)                 \
    {                                                                                              \
        __asm__ volatile("" ::: "memory");                                                         \
        return x + y + 1;                                                                          \
    }

TARGET(hist_bench_bare)
TARGET(hist_bench_event)
TARGET(hist_bench_event_pid)
TARGET(hist_bench_event_log2)
TARGET(hist_bench_pid)
TARGET(hist_bench_log2)
TARGET(hist_bench_entexit)
TARGET(hist_bench_synth)
