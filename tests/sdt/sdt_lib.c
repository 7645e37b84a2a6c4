/* A library with a USDT probe guarded by its semaphore, loaded by sdt_probe_test only after
 * the probe's uprobe-style line is written: the event waits for the file (pending), and
 * while it is enabled the semaphore of each load of the library is counted up (the kernel's
 * uprobe reference counter, set in whatever maps the file later). */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

unsigned short sdtl_fire_semaphore __attribute__((section(".probes"), used));

__attribute__((noinline)) int sdtl_fire(int v)
{
    int r = v + 1;
    if (__builtin_expect(sdtl_fire_semaphore, 0)) STAP_PROBE2(sdtl, fire, v, r);
    return r;
}
