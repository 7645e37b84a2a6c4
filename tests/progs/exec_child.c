/* The program exec_parent runs: prints a line (and how it was started) and exits 7. Started
 * by exec-prof, it first stops the profiling timer its parent left armed, as a -pg program's
 * own gmon set-up takes it over. */
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int child_work(int x)
{
    __asm__ volatile("" ::: "memory");
    return x * 3;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-prof") == 0) {
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_PROF, &off, NULL);
    }
    printf("child %d (%s)\n", child_work(2), argc > 1 ? argv[1] : "?");
    return 7;
}
