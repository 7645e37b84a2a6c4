/* Benchmark targets with a patch site (-pg -mfentry), built with -g (for the events that name
 * arguments): one function per variant so that each variant's probe sits on its own site. */
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

/* Events with a trigger (tracefs/event_trigger.h): each on its own site. */
__attribute__((noinline)) unsigned long tfs_bench_trig_on(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

__attribute__((noinline)) unsigned long tfs_bench_trig_off(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

__attribute__((noinline)) unsigned long tfs_bench_trig_filter(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

__attribute__((noinline)) unsigned long tfs_bench_trig_stack(unsigned long x, unsigned long y)
{
    __asm__ volatile("" ::: "memory");
    return x + y + 1;
}

/* A parameter by name and members through a pointer, from DWARF (`it->len n`), against the
 * same fetch written out (`+8($arg1):u64 $arg2:u64`), one after the other on this site. */
struct tfs_bench_item {
    const char *name;
    unsigned long len;
};

__attribute__((noinline)) unsigned long tfs_bench_named(const struct tfs_bench_item *it,
                                                        unsigned long n)
{
    __asm__ volatile("" ::: "memory");
    return it->len + n;
}
