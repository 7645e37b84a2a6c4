/* A program that runs another one (exec_child, next to it): by exec, by vfork + exec and by
 * posix_spawn, the latter two with an environment of their own (PATH and HOME only), and by
 * execve with such an environment. `dprobe record` must trace the child as it traces this
 * program (the same options, where they apply to it) and never stop it. exec-prof execs with
 * the profiling timer a -pg program leaves armed (gmon's 10 ms of CPU time, SIGPROF still at
 * its default action, which kills): the child must reach main as it does untraced.
 * Usage: exec_parent exec|execve-env|vfork|spawn|exec-prof */
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

extern char **environ;

NOINLINE int parent_work(int x)
{
    __asm__ volatile("" ::: "memory");
    return x + 1;
}

static char child_path[4096];
static char *const child_env[] = {"PATH=/usr/bin:/bin", "HOME=/", NULL};

static int wait_child(pid_t pid)
{
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return 1;
    printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return 0;
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "";
    ssize_t n = readlink("/proc/self/exe", child_path, sizeof child_path - 16);
    if (n <= 0) return 1;
    child_path[n] = '\0';
    strcpy(strrchr(child_path, '/') + 1, "exec_child");
    char *args[] = {child_path, (char *)how, NULL};
    printf("parent %d\n", parent_work(1));
    fflush(stdout);
    if (strcmp(how, "exec") == 0) {
        execl(child_path, child_path, how, (char *)NULL);
        return 127;
    }
    if (strcmp(how, "exec-prof") == 0) {
        struct itimerval prof = {{0, 10000}, {0, 10000}};
        setitimer(ITIMER_PROF, &prof, NULL);
        execl(child_path, child_path, how, (char *)NULL);
        return 127;
    }
    if (strcmp(how, "execve-env") == 0) {
        execve(child_path, args, child_env);
        return 127;
    }
    if (strcmp(how, "vfork") == 0) {
        pid_t pid = vfork();
        if (pid == 0) {
            execve(child_path, args, child_env);
            _exit(127);
        }
        return wait_child(pid);
    }
    if (strcmp(how, "spawn") == 0) {
        pid_t pid = -1;
        if (posix_spawn(&pid, child_path, NULL, NULL, args, child_env) != 0) return 1;
        return wait_child(pid);
    }
    fprintf(stderr, "usage: exec_parent exec|execve-env|vfork|spawn|exec-prof\n");
    return 2;
}
