/* The program exec_parent runs: prints a line (and how it was started) and exits 7. */
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int child_work(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 3;
}

int main(int argc, char **argv)
{
    printf("child %d (%s)\n", child_work(2), argc > 1 ? argv[1] : "?");
    return 7;
}
