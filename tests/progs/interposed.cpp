/* A program calling the functions dprobe interposes: signal() and sigaction() (which dprobe
 * watches for the signals it owns), swapcontext (whose stack it notes), a C++ throw and catch
 * (the unwinder's entry points), fork and execl (the agent's session follows the new image).
 * Traced with every function of every object, it must be seen calling what it calls
 * untraced: none of dprobe's own work inside those functions (its look-ups, locks, timers,
 * environment) may show under the program's calls. */
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

/* hits = hits + 1, not ++: C++20 deprecates ++ on a volatile */
static volatile sig_atomic_t hits;
static ucontext_t main_ctx, side_ctx;
static char side_stack[64 * 1024];

NOINLINE void on_signal(int sig)
{
    (void)sig;
    hits = hits + 1;
}

/* Runs on side_stack; returning goes back to main through uc_link. */
NOINLINE void on_side(void)
{
    hits = hits + 1;
}

NOINLINE void thrower(int n)
{
    if (n > 0) throw n;
}

int main(int argc, char **argv)
{
    if (argc > 1) return 0; /* the image the child execs */

    signal(SIGUSR1, on_signal);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGUSR2, &sa, nullptr);
    raise(SIGUSR1);
    raise(SIGUSR2);

    getcontext(&side_ctx);
    side_ctx.uc_stack.ss_sp = side_stack;
    side_ctx.uc_stack.ss_size = sizeof side_stack;
    side_ctx.uc_link = &main_ctx;
    makecontext(&side_ctx, on_side, 0);
    swapcontext(&main_ctx, &side_ctx);

    try {
        thrower(1);
    } catch (int v) {
        hits = hits + v;
    }

    pid_t pid = fork();
    if (pid == 0) {
        execl(argv[0], argv[0], "child", (char *)nullptr);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    std::printf("%d %d\n", hits, WEXITSTATUS(status));
    return 0;
}
