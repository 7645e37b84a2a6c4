/* USDT probes (<sys/sdt.h>) in the argument forms gcc emits, without semaphores; the probes
 * with semaphores are in sdt_sem.c. Every probe site prints, on its line, the values its
 * arguments must have ("probe:NAME k=v ..."). Built at -O0 and -O2 (sdt_e2e.py). */
#include "sdt_prog.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>

__attribute__((noinline)) void members(const struct dpt_item *it)
{
    /* Members in memory, through a pointer: a long, an int, a short, a signed char. */
    STAP_PROBE4(dpt, members, it->id, it->small, it->tiny, it->c);
    printf("probe:members id=%ld small=%d tiny=%d c=%d\n", it->id, it->small, it->tiny, it->c);
}

__attribute__((noinline)) double scaled(double d, int k)
{
    /* A double (in an SSE register or memory: no fetch arg reads those as numbers). */
    double r = d * k;
    STAP_PROBE2(dpt, scaled, r, k);
    printf("probe:scaled k=%d\n", k);
    return r;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    struct dpt_item items[2] = {{7, -3, 300, -5}, {11, 70000, -2, 9}};
    long total = 0;
    for (int k = 1; k <= rounds; k++) {
        total += work(&items[k & 1], k);
        members(&items[k & 1]);
        globals(k);
        total += (long)scaled(1.5, k);
        STAP_PROBE(dpt, nosem);
        printf("probe:nosem\n");
    }
    printf("total=%ld work_sem=%u global_sem=%u\n", total, dpt_work_semaphore,
           dpt_global_semaphore);
    return 0;
}
