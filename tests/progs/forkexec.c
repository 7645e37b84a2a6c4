/* fork + exec: the child re-runs this program with an argument; each process image gets
 * its own session in the trace file. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int in_parent(int x)
{
    __asm__ volatile("" ::: "memory");
    return x + 1;
}
NOINLINE int in_child(int x)
{
    __asm__ volatile("" ::: "memory");
    return x + 2;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        printf("child %d\n", in_child(1));
        return 0;
    }
    printf("parent %d\n", in_parent(1));
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
