/* Handlers in a library linked with -z lazy (the default of a plain gcc build): its calls of
 * the C library go through PLT entries that lead to the dynamic linker's resolver until their
 * first call. ext_state_test scans them before any call: the scan must find the functions the
 * resolver will bind (arch/x86_64/plt_bind.cpp), and judge those. */
#include <math.h>
#include <unistd.h>

/* Integer only, down to the system call. */
long lazy_integer(void)
{
    return (long)getppid() + (long)getpgrp();
}

/* libm's expl computes on the x87 stack. */
long double lazy_x87(long double x)
{
    return expl(x);
}

/* Switches dispatched through jump tables (gcc -O2 makes one for this many dense cases): the
 * scan follows every entry. One case of lazy_switch_x87 computes on the x87 stack. */
long lazy_switch(int k, long x)
{
    switch (k) {
    case 0:
        return x + 1;
    case 1:
        return x * 3 + getppid();
    case 2:
        return x - 7;
    case 3:
        return x ^ 5;
    case 4:
        return x << 2;
    case 5:
        return x / 3;
    case 6:
        return x % 11;
    case 7:
        return x | 64;
    default:
        return 0;
    }
}

long lazy_switch_x87(int k, long x)
{
    switch (k) {
    case 0:
        return x + 1;
    case 1:
        return x * 3 + getppid();
    case 2:
        return x - 7;
    case 3:
        return (long)((long double)x * 1.5L);
    case 4:
        return x << 2;
    case 5:
        return x / 3;
    case 6:
        return x % 11;
    case 7:
        return x | 64;
    default:
        return 0;
    }
}
