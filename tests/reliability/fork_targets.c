/* Targets of the fork/exec tests, built in the test's site flavour: fork, vfork and
 * posix_spawn called from inside probed functions, with hooked frames live across the call
 * (and, for vfork, a child that shares them). */
#include "fork_targets.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

extern char **environ;

NOINLINE long fk_leaf(long x)
{
    BARRIER();
    return x * 5 + 2;
}

/* Child: fk_leaf(x); parent: minus the child's pid. */
NOINLINE long fk_fork(long x)
{
    pid_t p = fork();
    BARRIER();
    if (p < 0) return -1;
    return p == 0 ? fk_leaf(x) : -(long)p;
}

NOINLINE long fk_fork_outer(long x)
{
    long r = fk_fork(x);
    BARRIER();
    return r + 1;
}

/* vfork + exec of PATH; the child first calls a probed function when CALL_FIRST. Returns
 * the child's exit status. */
NOINLINE long fk_vfork_exec(const char *path, int call_first)
{
    pid_t p = vfork();
    if (p == 0) {
        if (call_first) fk_leaf(1);
        execl(path, path, (char *)0);
        _exit(127);
    }
    if (p < 0) return -1;
    int status;
    if (waitpid(p, &status, 0) != p) return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A vfork child that leaves from inside a probed function (_exit in fk_vfork_child). */
NOINLINE long fk_vfork_child(long code)
{
    BARRIER();
    _exit((int)code);
}
NOINLINE long fk_vfork_exit_inside(long code)
{
    pid_t p = vfork();
    if (p == 0) fk_vfork_child(code);
    if (p < 0) return -1;
    int status;
    if (waitpid(p, &status, 0) != p) return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

NOINLINE long fk_spawn(const char *path)
{
    pid_t p;
    char *argv[] = {(char *)path, 0};
    if (posix_spawn(&p, path, 0, 0, argv, environ) != 0) return -1;
    int status;
    if (waitpid(p, &status, 0) != p) return -2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

NOINLINE long fk_spawn_outer(const char *path)
{
    long r = fk_spawn(path);
    BARRIER();
    return r + 10;
}
