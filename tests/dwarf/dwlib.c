/* The shared library of the DWARF probes test: a static variable named like the program's
 * global, which a probe placed in this library must read. */
#include <stdio.h>

static int counter = 40;

__attribute__((noinline)) int lib_step(int k)
{
    counter += k + 1;
    printf("lib counter=%d k=%d\n", counter, k); /* probe:lib */
    return counter;
}
