/* strlen and memcpy, whose libc symbols are IFUNCs (the loader picks an implementation for
 * the CPU): `dprobe record -F 'libc.so.6:strlen'` must trace every call of the implementation
 * the program actually runs, not the resolver the loader ran once. */
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static char text[64] = "hello, ifunc";
static char copy[64];
static volatile size_t len = 12;

NOINLINE size_t count_loop(int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        total += strlen(text);
        memcpy(copy, text, len);
    }
    return total;
}

int main(void)
{
    printf("%zu %s\n", count_loop(1000), copy);
    return 0;
}
