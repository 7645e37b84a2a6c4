/* The library pending_probe_test loads, unloads and loads again. Its constructor calls
 * pend_work: a probe armed at the load sees that call. pend_first and pend_second are next
 * to each other, for probes at pend_first+<distance> (the kernel resolves an offset past a
 * symbol's end to the function it lands in). */
#define NOINLINE __attribute__((noinline, used))

NOINLINE int pend_work(int x)
{
    __asm__ volatile("" : "+r"(x));
    return x * 2 + 1;
}

NOINLINE long pend_first(long a)
{
    __asm__ volatile("" : "+r"(a));
    return a + 100;
}

NOINLINE long pend_second(long a)
{
    __asm__ volatile("" : "+r"(a));
    return a + 200;
}

int pend_ctor_result;

__attribute__((constructor)) static void pend_init(void)
{
    pend_ctor_result = pend_work(20);
}
