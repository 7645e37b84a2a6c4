// The agent across the program's life: fatal signals (flush, then die as before), fork
// (the child gets its own session in the same file), exec (flush before the image goes).
#include "tools/agent/agent.h"

#include "core/kthread.h"
#include "core/ring_buffer.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace dprobe::agent {

namespace {

constexpr int k_async_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
constexpr int k_fault_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

std::atomic<int> g_fatal{0};      // the signal being handled
std::atomic<bool> g_flushed{false};
void flush_for_signal(int sig)
{
    finish("signal", sig);
    g_flushed.store(true, std::memory_order_release);
}

std::atomic<bool> g_watch_stop{false};
std::atomic<bool> g_watch_running{false};

// The watcher thread: flushes and re-raises when an asynchronous fatal signal arrived.
void signal_watch()
{
    agent_state &st = state();
    st.add_own_tid(static_cast<int32_t>(gettid()));
    struct running_flag {
        ~running_flag() { g_watch_running.store(false, std::memory_order_release); }
    } running;
    while (!st.stop.load(std::memory_order_acquire) &&
           !g_watch_stop.load(std::memory_order_acquire)) {
        int sig = g_fatal.load(std::memory_order_acquire);
        if (sig) {
            flush_for_signal(sig);
            bool async = false;
            for (int s : k_async_signals)
                async |= s == sig;
            if (async) {
                // Die the way the signal would have killed the program.
                signal(sig, SIG_DFL);
                sigset_t set;
                sigemptyset(&set);
                sigaddset(&set, sig);
                pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
                kill(getpid(), sig);
            }
            return;
        }
        struct timespec ts {0, 20 * 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
}

std::thread g_watch;

void fatal_handler(int sig, siginfo_t *, void *)
{
    int expected = 0;
    bool first = g_fatal.compare_exchange_strong(expected, sig);
    bool async = false;
    for (int s : k_async_signals)
        async |= s == sig;
    // The watcher flushes and re-raises. A second Ctrl-C (the terminal's and the one
    // `dprobe record` forwards) must not cut the flush short; a third one does.
    static std::atomic<int> repeats{0};
    if (async && (first || repeats.fetch_add(1) < 2))
        return;
    if (first && state().active) {
        // A fault: wait (bounded) while the watcher thread flushes, then die.
        for (int i = 0; i < 150 && !g_flushed.load(std::memory_order_acquire); i++) {
            struct timespec ts {0, 20 * 1000 * 1000};
            nanosleep(&ts, nullptr);
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

// vfork children and forked children before their handler ran share or copy our state
// without owning the file position: only the process that opened the session writes.
bool owns_session() { return state().active && state().pid == getpid(); }

// Who opens a fork child's session: the helper (fork_open -> fork_opening -> fork_done),
// or an exit that comes first (fork_open -> fork_done). An exit or exec that finds the
// helper half-way waits for it: closing a session while it is being opened lost the
// child's flush.
enum fork_session : int { fork_done, fork_open, fork_opening };
std::atomic<int> g_fork_session{fork_done};
pid_t g_fork_pid;         // the fork child those states are about (a vfork child shares them)
bool g_exec_took_session; // before_exec kept the helper from opening it under the exec

void wait_fork_session_opened()
{
    // Bounded: a helper stuck for seconds must not hold the program's exit.
    for (int i = 0; i < 2000 && g_fork_session.load() == fork_opening; ++i) {
        struct timespec ts {0, 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
}

void before_exec()
{
    // A fork child exec'ing before its helper opened its session: the helper must not open
    // it now (the exec would kill it half-way, leaving a session that never ends).
    int expect = fork_open;
    g_exec_took_session = getpid() == g_fork_pid &&
                          g_fork_session.compare_exchange_strong(expect, fork_done);
    wait_fork_session_opened();
    if (!owns_session())
        return;
    finish("exec", 0);
    tracefs_down(); // the new image mounts its own at the same place
}

void after_failed_exec()
{
    if (g_exec_took_session) { // still the same process: its session can open as before
        g_exec_took_session = false;
        g_fork_session.store(fork_open);
    }
    agent_state &st = state();
    if (!owns_session() || !st.finished.load())
        return;
    st.finished.store(false);
    start_consumer();
    tracefs_up();
    ring_buffer_set_tracing_on(true);
}

template <class F> F real(const char *name)
{
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void atfork_prepare() { state().lock.lock(); }
void atfork_parent() { state().lock.unlock(); }
// The child of a fork. It may only be on its way to exec (libfuse forks fusermount3, a
// shell forks every command), and locks other parent threads held are still held here: do
// nothing heavy now. A helper thread opens the child's session a little later unless the
// child has exec'd by then, and an exit before that opens and closes it at once.
void fork_session_start()
{
    int expect = fork_open;
    if (!g_fork_session.compare_exchange_strong(expect, fork_opening))
        return;
    start_session("fork"); // sets st.pid: the child owns its session from here on
    start_consumer();
    ring_buffer_set_tracing_on(true);
    g_watch_running.store(true);
    if (kthread_run(g_watch, signal_watch))
        g_watch.detach();
    else
        g_watch_running.store(false);
    g_fork_session.store(fork_done);
}

void atfork_child()
{
    agent_state &st = state();
    st.lock.unlock();
    if (!st.active)
        return;
    for (auto &t : st.own_tids)
        t.store(0);
    funcgraph_forget_tid();
    // The threads did not come along: forget them without touching their handles.
    new (&st.consumer) std::thread();
    new (&g_watch) std::thread();
    st.pid = 0;
    st.records = st.lost = st.bytes = 0;
    st.finished.store(false);
    g_fatal.store(0);
    g_flushed.store(false);
    g_fork_pid = getpid();
    g_exec_took_session = false;
    g_fork_session.store(fork_open);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_create(
        &t, &attr,
        [](void *) -> void * {
            struct timespec ts {0, 20 * 1000 * 1000};
            nanosleep(&ts, nullptr);
            fork_session_start();
            return nullptr;
        },
        nullptr);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    pthread_attr_destroy(&attr);
}

} // namespace

void install_signal_handlers()
{
    struct sigaction sa {};
    sa.sa_sigaction = fatal_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    auto install = [&](int sig) {
        struct sigaction old {};
        if (sigaction(sig, nullptr, &old) != 0)
            return;
        // Only where the program would die anyway: its own handlers stay in charge.
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
            sigaction(sig, &sa, nullptr);
    };
    for (int s : k_async_signals)
        install(s);
    for (int s : k_fault_signals)
        install(s);
    // The watcher must not take the signals it handles.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    g_watch_stop.store(false);
    g_watch_running.store(true);
    if (kthread_run(g_watch, signal_watch)) {
        pthread_setname_np(g_watch.native_handle(), "dprobe-signal");
        g_watch.detach();
    } else {
        g_watch_running.store(false);
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void remove_signal_handlers()
{
    for (const int *set : {k_async_signals, k_fault_signals})
        for (size_t i = 0; i < 5; i++) {
            int sig = set[i];
            struct sigaction cur {};
            if (sigaction(sig, nullptr, &cur) != 0)
                continue;
            if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fatal_handler) {
                struct sigaction dfl {};
                dfl.sa_handler = SIG_DFL;
                sigemptyset(&dfl.sa_mask);
                sigaction(sig, &dfl, nullptr);
            }
        }
    // The watcher is detached (a joinable std::thread would abort the program at exit):
    // wait for it to notice, at most a few of its 20 ms rounds.
    g_watch_stop.store(true, std::memory_order_release);
    for (int i = 0; i < 100 && g_watch_running.load(std::memory_order_acquire); i++) {
        struct timespec ts {0, 5 * 1000 * 1000};
        nanosleep(&ts, nullptr);
    }
}

void install_fork_handlers() { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

void exit_in_fork_child()
{
    // A forked child exiting before its helper opened its session: open and close it here.
    int expect = fork_open;
    if (state().pid != getpid() &&
        g_fork_session.compare_exchange_strong(expect, fork_done)) {
        start_session("fork");
        finish("exit", 0);
        return;
    }
    wait_fork_session_opened(); // then the caller closes it
}

} // namespace dprobe::agent

// ---- exec interposers: flush before the image is replaced ----
using namespace dprobe::agent;

extern "C" {

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[],
                                                  char *const envp[])
{
    static auto fn = real<int (*)(const char *, char *const[], char *const[])>("execve");
    before_exec();
    int r = fn(path, argv, envp);
    int e = errno;
    after_failed_exec();
    errno = e;
    return r;
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[],
                                                   char *const envp[])
{
    static auto fn = real<int (*)(const char *, char *const[], char *const[])>("execvpe");
    before_exec();
    int r = fn(file, argv, envp);
    int e = errno;
    after_failed_exec();
    errno = e;
    return r;
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[], char *const envp[])
{
    static auto fn = real<int (*)(int, char *const[], char *const[])>("fexecve");
    before_exec();
    int r = fn(fd, argv, envp);
    int e = errno;
    after_failed_exec();
    errno = e;
    return r;
}

static std::vector<char *> collect_args(const char *arg0, va_list ap, char ***envp)
{
    std::vector<char *> v{const_cast<char *>(arg0)};
    if (arg0)
        while (char *a = va_arg(ap, char *))
            v.push_back(a);
    v.push_back(nullptr);
    if (envp)
        *envp = va_arg(ap, char **);
    return v;
}

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    auto v = collect_args(arg, ap, nullptr);
    va_end(ap);
    return execve(path, v.data(), environ);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    auto v = collect_args(arg, ap, nullptr);
    va_end(ap);
    return execvpe(file, v.data(), environ);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    char **envp = nullptr;
    auto v = collect_args(arg, ap, &envp);
    va_end(ap);
    return execve(path, v.data(), envp);
}

} // extern "C"
