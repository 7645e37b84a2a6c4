/* USDT probes with semaphores (as dtrace -G defines them): a tracer increments a probe's
 * semaphore while the probe is enabled, and the program evaluates the probe's arguments and
 * prints its line only then, with the semaphore's value. */
#define _SDT_HAS_SEMAPHORES 1
#include "sdt_prog.h"

#include <stdio.h>
#include <sys/sdt.h>

unsigned short dpt_work_semaphore __attribute__((section(".probes"), used));
unsigned short dpt_global_semaphore __attribute__((section(".probes"), used));

long dpt_counter = 1000;          /* .data */
static int dpt_zeroed;            /* .bss */
const char dpt_label[] = "label"; /* .rodata */
struct {
    int x, y;
} dpt_point = {3, 4}; /* a member of a global: sym+4(%rip) */
int dpt_table[8] = {10, 11, 12, 13, 14, 15, 16, 17};

__attribute__((noinline)) long work(struct dpt_item *it, int k)
{
    long sum = it->id * k;
    int neg = -k;
    unsigned char uc = (unsigned char)(200 + k);
    /* Registers or stack slots: an int, a negative int, a long, a pointer, an unsigned char. */
    if (__builtin_expect(dpt_work_semaphore, 0)) {
        STAP_PROBE5(dpt, work, k, neg, sum, it, uc);
        printf("probe:work k=%d neg=%d sum=%ld it=%p uc=%u sem=%u\n", k, neg, sum, (void *)it, uc,
               dpt_work_semaphore);
    }
    return sum + neg;
}

__attribute__((noinline)) void globals(int k)
{
    dpt_zeroed += k;
    /* Globals (rip-relative in .data and .bss), a constant, a string's address. */
    if (__builtin_expect(dpt_global_semaphore, 0)) {
        STAP_PROBE6(dpt, global, dpt_counter, dpt_zeroed, 42, dpt_label, dpt_point.y,
                    dpt_table[k & 7]);
        printf("probe:global counter=%ld zeroed=%d answer=42 label=%p y=%d elem=%d sem=%u\n",
               dpt_counter, dpt_zeroed, (void *)dpt_label, dpt_point.y, dpt_table[k & 7],
               dpt_global_semaphore);
    }
    dpt_counter += k;
}
