/* Benchmark targets with a patch site (-pg -mfentry): one function per variant so that each
 * variant's probe sits on its own site. */
__attribute__((noinline)) unsigned long tfs_bench_bare(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

__attribute__((noinline)) unsigned long tfs_bench_event(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

__attribute__((noinline)) unsigned long tfs_bench_filtered(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

__attribute__((noinline)) unsigned long tfs_bench_rejected(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

__attribute__((noinline)) unsigned long tfs_bench_string(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}
