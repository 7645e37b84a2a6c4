/* A long-running program for the `dprobe attach` tests. It runs until told to stop, then
 * prints a report that is the same whether or not it was traced meanwhile, and exits with
 * status 7.
 *
 * Its threads are parked in different ways, since dprobe borrows one of them to load its
 * runtime and every one of them must carry on unharmed:
 *   reader   blocked in read() on stdin, until a line comes ("finish"); restarted by the
 *            kernel with -ERESTARTSYS after a ptrace stop
 *   sleeper  in nanosleep(); restarted through the kernel's restart block; counts a sleep
 *            that fails or ends early as an anomaly
 *   worker   calls fib() and take_string() (the probed functions) every millisecond and
 *            checks their results
 *   spinner  computes through spin_step() without any system call
 * Modes (argv[1]):
 *   (none)    reader, sleeper, worker, spinner; stdin's line ends the run
 *   busy      no thread ever blocks: worker (without sleeping), spinner, and main spinning
 *             too; SIGUSR1 ends the run
 *   sleepers  every thread sleeps: sleeper, worker, main in nanosleep too, and a thread
 *             in sigwait() (which ends the run on SIGUSR1)
 *   nodump    like (none), non-dumpable: only CAP_SYS_PTRACE may trace it
 *   forks     like (none), and each SIGUSR2 forks a child that keeps calling fib() and
 *             take_string() until SIGTERM, then writes its own report to fork-PID.out in the
 *             working directory and exits with status 9 (a session spreads to the children
 *             forked while it runs; its end must leave them as they were)
 *   storm     busy, and besides: a SIGALRM every millisecond whose handler calls
 *             spin_step() too, and a thread that forks a child every few milliseconds,
 *             which calls spin_step() and exits (its status checked); SIGUSR1 ends the run
 *             (a traced thread waiting for room in its buffer, in a signal handler, across a
 *             fork, in a child, must never hang) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static atomic_int stop;
static int busy;
static long sleep_anomalies, fib_mismatches, string_mismatches, rounds;

NOINLINE int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

NOINLINE int take_string(const char *s, int n)
{
    __asm__ volatile("" ::: "memory");
    return (int)strlen(s) + n;
}

NOINLINE long spin_step(long x)
{
    /* Wraps around: unsigned, as signed overflow is undefined. */
    return (long)((unsigned long)x * 2862933555777941757UL + 3037000493UL);
}

/* Sleeps NS; false when the sleep failed or was cut short. */
static int sleep_ns(long ns)
{
    struct timespec req = {0, ns}, t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r = nanosleep(&req, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return r == 0 && (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) >= ns;
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        if (!sleep_ns(30 * 1000 * 1000)) sleep_anomalies++;
    return NULL;
}

static void *worker(void *arg)
{
    (void)arg;
    static const char *words[] = {"alpha", "be", "gamma"};
    while (!atomic_load(&stop)) {
        int i = (int)(rounds % 3);
        if (fib(6 + i) != (i == 0 ? 8 : i == 1 ? 13 : 21)) fib_mismatches++;
        if (take_string(words[i], i) != (int)strlen(words[i]) + i) string_mismatches++;
        rounds++;
        if (busy) {
            for (int k = 0; k < 200; k++)
                if (fib(12) != 144) fib_mismatches++;
        } else if (!sleep_ns(1000 * 1000)) {
            sleep_anomalies++;
        }
    }
    return NULL;
}

static void *spinner(void *arg)
{
    long x = (long)arg;
    while (!atomic_load(&stop))
        for (int i = 0; i < 1000; i++)
            x = spin_step(x);
    return (void *)x;
}

static volatile long alarm_x = 3;
static long alarm_mismatches, fork_failures, forks;
static atomic_long alarms;

static void on_alarm(int sig)
{
    (void)sig;
    int saved = errno;
    long x = alarm_x, y = x;
    for (int i = 0; i < 100; i++)
        x = spin_step(x);
    for (int i = 0; i < 100; i++)
        y = (long)((unsigned long)y * 2862933555777941757UL + 3037000493UL);
    if (x != y) alarm_mismatches++;
    alarm_x = x;
    atomic_fetch_add(&alarms, 1);
    errno = saved;
}

static void *forker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        pid_t c = fork();
        if (c == 0) {
            long x = 5;
            for (int i = 0; i < 20000; i++)
                x = spin_step(x);
            _exit(x == 5 ? 1 : 0);
        }
        int st = 0;
        if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fork_failures++;
        forks++;
        sleep_ns(3 * 1000 * 1000);
    }
    return NULL;
}

static volatile sig_atomic_t fork_wanted, child_stop;

static void on_usr2(int sig)
{
    (void)sig;
    fork_wanted++;
}

static void on_term(int sig)
{
    (void)sig;
    child_stop = 1;
}

/* The forked child's life: one thread (the forking one), the worker's checks every
 * millisecond until SIGTERM. */
static void fork_child_run(void)
{
    static const char *words[] = {"alpha", "be", "gamma"};
    signal(SIGTERM, on_term);
    long fibs = 0, strings = 0, n = 0;
    while (!child_stop) {
        int i = (int)(n % 3);
        if (fib(6 + i) != (i == 0 ? 8 : i == 1 ? 13 : 21)) fibs++;
        if (take_string(words[i], i) != (int)strlen(words[i]) + i) strings++;
        n++;
        sleep_ns(1000 * 1000);
    }
    char name[64];
    snprintf(name, sizeof name, "fork-%d.out", (int)getpid());
    FILE *f = fopen(name, "w");
    if (f) {
        fprintf(f, "child: %ld fib mismatches, %ld string mismatches, %s\n", fibs, strings,
                n > 0 ? "ran" : "did not run");
        fclose(f);
    }
    _exit(9);
}

static void *fork_on_demand(void *arg)
{
    (void)arg;
    int done = 0;
    while (!atomic_load(&stop)) {
        if (fork_wanted > done) {
            done++;
            pid_t c = fork();
            if (c == 0) fork_child_run();
        }
        sleep_ns(1000 * 1000);
    }
    return NULL;
}

static char got[64];

static void *reader(void *arg)
{
    (void)arg;
    size_t n = 0;
    while (n < sizeof got - 1) {
        ssize_t r = read(0, got + n, sizeof got - 1 - n);
        if (r <= 0) {
            if (r < 0) snprintf(got, sizeof got, "read error: %s\n", strerror(errno));
            break;
        }
        n += (size_t)r;
        got[n] = 0;
        if (strchr(got, '\n')) break;
    }
    atomic_store(&stop, 1);
    return NULL;
}

static void *waiter(void *arg)
{
    sigset_t *set = arg;
    int sig;
    sigwait(set, &sig);
    atomic_store(&stop, 1);
    return NULL;
}

static void on_usr1(int sig)
{
    (void)sig;
    atomic_store(&stop, 1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int sleepers = !strcmp(mode, "sleepers");
    int storm = !strcmp(mode, "storm");
    int forks_mode = !strcmp(mode, "forks");
    busy = !strcmp(mode, "busy") || storm;
    if (!strcmp(mode, "nodump")) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    static sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_t th[6];
    int n = 0;
    if (busy) {
        signal(SIGUSR1, on_usr1);
    } else if (sleepers) {
        pthread_sigmask(SIG_BLOCK, &usr1, NULL); /* inherited: only sigwait() takes it */
        pthread_create(&th[n++], NULL, waiter, &usr1);
    } else {
        pthread_create(&th[n++], NULL, reader, NULL);
    }
    if (!busy) pthread_create(&th[n++], NULL, sleeper, NULL);
    pthread_create(&th[n++], NULL, worker, NULL);
    if (!sleepers) pthread_create(&th[n++], NULL, spinner, (void *)1L);
    if (forks_mode) {
        struct sigaction sa = {0};
        sa.sa_handler = on_usr2;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, NULL);
        pthread_create(&th[n++], NULL, fork_on_demand, NULL);
    }
    if (storm) {
        struct sigaction sa = {0};
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, NULL);
        struct itimerval it = {{0, 1000}, {0, 1000}};
        setitimer(ITIMER_REAL, &it, NULL);
        pthread_create(&th[n++], NULL, forker, NULL);
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    long x = 2;
    while (!atomic_load(&stop)) {
        if (busy)
            for (int i = 0; i < 1000; i++)
                x = spin_step(x);
        else if (sleepers && !sleep_ns(10 * 1000 * 1000))
            sleep_anomalies++;
        else if (!busy && !sleepers)
            break; /* join below: main parked in futex() */
    }
    if (storm) {
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    if (storm)
        printf("storm: %ld fork failures, %ld signal mismatches, %s, %s\n", fork_failures,
               alarm_mismatches, forks > 0 ? "forked" : "did not fork",
               atomic_load(&alarms) > 0 ? "signalled" : "not signalled");
    if (!busy && !sleepers) printf("reader got: %s", got);
    printf("sleep anomalies: %ld\n", sleep_anomalies);
    printf("worker: %ld fib mismatches, %ld string mismatches, %s\n", fib_mismatches,
           string_mismatches, rounds > 0 ? "ran" : "did not run");
    return 7;
}
