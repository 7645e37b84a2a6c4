/* Benchmark targets with a patch site (-pg -mfentry), one per variant so that each
 * variant's ops sit alone on their site. */
#define TARGET(name)                                                                               \
    __attribute__((noinline)) unsigned long name(unsigned long x, unsigned long y)                 \
    {                                                                                              \
        __asm__ volatile("" ::: "memory");                                                         \
        return x + y + 1;                                                                          \
    }

TARGET(ftb_untraced)
TARGET(ftb_fprobe_entry)
TARGET(ftb_function)
TARGET(ftb_fprobe_graph)
TARGET(ftb_graph)
