/* The functions graph_values_test hooks with record -A/-R's fprobes (built with patch sites,
 * -O2): one whose values are plain loads (the light fprobe), one with a string (the full
 * one). */
#define NOINLINE __attribute__((noinline))

struct gv_pair {
    long first;
    unsigned second;
};

NOINLINE long gv_regs(long a, int b, short c, unsigned char d, const struct gv_pair *p)
{
    __asm__ volatile("" ::: "memory");
    return a + b + c + d + (long)p->second;
}

NOINLINE int gv_str(const char *s, int n)
{
    __asm__ volatile("" ::: "memory");
    return n * 2 + s[0];
}
