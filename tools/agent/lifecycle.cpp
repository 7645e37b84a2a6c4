// The agent across the program's life: fork (the child gets its own session and ring
// buffers), exec (the old image's session ends, the new image starts its own), exit (the
// status noted for the CLI). With `dprobe record` nothing has to be flushed on the way out:
// the CLI copies the ring buffers, which outlive the process. With `dprobe attach` the
// agent's streamer copies them, so an exit or a fatal signal waits for its last copy.
#include "tools/agent/agent.h"
#include "tools/agent/cpu_timers.h"
#include "tools/agent/exec_env.h"
#include "tools/agent/private_alloc.h"

#include "arch/x86_64/raw_syscall.h"
#include "core/ring_buffer.h"
#include "core/interpose_next.h"
#include "core/spawn_interpose.h"
#include "tools/trace_file.h"

#include <alloca.h>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <new>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <string>

extern char **environ;

namespace dprobe::agent
{

namespace
{

// This process image owns the session (a vfork child shares the parent's memory, and must
// leave it alone).
bool owns_session() noexcept
{
    return agent_active() && state().pid == getpid();
}

// The agent's last word, after the program's exit handlers and destructors: nothing it calls
// here (getpid, setitimer ...) is the program's, so none of it is recorded.
void on_process_exit(int status, void *)
{
    quiet_section q;
    if (!owns_session()) return;
    cpu_timers_paused cpu;
    write_session_hists(); // the histograms as the program leaves them
    ring_buffer_export_state(rb::ARENA_EXITED, status);
    if (state().attached) {
        std::string end;
        tracefile::append_kv(end, "reason", "exit");
        if (status >= 0) tracefile::append_kv(end, "status", std::to_string(status));
        stop_streamer(end);
    }
}

// The fork handlers' locks are the agent's, not calls of the program's fork: not recorded.
// They are held across the program's own prepare handlers (which run after this one) and
// the fork: meanwhile this thread never waits for the streamer, which may need them.
void atfork_prepare()
{
    quiet_section q;
    ring_buffer_thread_nowait(true);
    state().lock.lock();
    palloc_fork_prepare();
}
void atfork_parent()
{
    quiet_section q;
    palloc_fork_parent();
    state().lock.unlock();
    ring_buffer_thread_nowait(false);
}
// The child of a fork: a session of its own, in the same file, with its own ring buffers
// (the ring buffer made them before this runs), announced to the CLI at once so that
// whatever the child does next (exec, _exit, a crash) its events are kept.
void atfork_child()
{
    quiet_section q;
    agent_state &st = state();
    palloc_fork_child();
    st.lock.unlock();
    ring_buffer_thread_nowait(false);
    attach_fork_child();
    if (!st.active) return;
    fork_session();
    if (st.attached) start_streamer();
}

void before_exec()
{
    if (!owns_session()) return;
    quiet_section q;
    ring_buffer_export_state(rb::ARENA_EXEC, 0);
    if (state().attached) {
        std::string end;
        tracefile::append_kv(end, "reason", "exec");
        stop_streamer(end);
    }
    tracefs_down(); // the new image mounts its own at the same place
}

void after_failed_exec()
{
    if (!owns_session()) return;
    quiet_section q;
    ring_buffer_export_state(rb::ARENA_RUNNING, 0);
    if (state().attached) start_streamer();
    if (state().config.tracefs) tracefs_up();
}

// ---- dprobe attach: fatal signals ----

constexpr int k_fatal_signals[] = {SIGINT,  SIGTERM, SIGHUP, SIGQUIT, SIGPIPE,
                                   SIGSEGV, SIGBUS,  SIGILL, SIGFPE,  SIGABRT};

void fatal_handler(int sig, siginfo_t *, void *)
{
    static std::atomic<int> first{0};
    int expect = 0;
    if (first.compare_exchange_strong(expect, sig) && owns_session())
        ring_buffer_export_state(rb::ARENA_SIGNALED, sig);
    // The streamer copies what is there; this thread stops writing meanwhile.
    ring_buffer_set_tracing_on(false);
    struct timespec ts {
        0, 100 * 1000 * 1000
    };
    nanosleep(&ts, nullptr);
    signal(sig, SIG_DFL);
    raise(sig);
}

// posix_spawn: the spawned program's environment, built in one block of the agent's memory
// for the length of the call (the room exec_env_build needs, and the descriptors it opened).
// The spawning thread keeps only a pointer to it: a thread_local with a destructor would
// register that destructor with the C library (__cxa_thread_atexit_impl), which keeps the
// preload from being unloaded for as long as the thread lives. One spawn at a time per thread
// (posix_spawn is not async-signal-safe: no handler may call it in between).
struct spawn_room {
    exec_env_fds fds;
    char **env;
    char *text;
};
thread_local spawn_room *t_spawn = nullptr;

char *const *spawn_env_before(char *const envp[])
{
    const size_t n = env_count(envp) + k_exec_env_extra + 1;
    const size_t text = exec_env_text_room(envp);
    void *block = palloc(sizeof(spawn_room) + n * sizeof(char *) + text);
    if (!block) return envp; // no room: the program's environment as it is
    auto *r = new (block) spawn_room{exec_env_fds{}, nullptr, nullptr};
    r->env = reinterpret_cast<char **>(r + 1);
    r->text = reinterpret_cast<char *>(r->env + n);
    std::memset(r->env, 0, n * sizeof(char *) + text);
    t_spawn = r;
    return exec_env_build(envp, r->env, r->text, r->fds);
}

void spawn_env_after()
{
    spawn_room *r = t_spawn;
    if (!r) return;
    t_spawn = nullptr;
    exec_env_done(r->fds);
    pfree(r);
}

const spawn_env_hooks k_spawn_hooks = {spawn_env_before, spawn_env_after};

} // namespace

void install_lifecycle_hooks()
{
    static bool once = false; // none can be undone: they check owns_session()
    if (once) return;
    once = true;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    if (state().attached)
        // The agent may be unloaded before the process exits (dprobe detach): an exit
        // handler registered with atexit() belongs to this object and goes with it (glibc
        // runs it at the dlclose, when the session is over and it does nothing); one of
        // on_exit() would stay behind and be called into unmapped code at exit. The exit
        // status is then not known here; the session's END says "exit" without it.
        atexit([] { on_process_exit(-1, nullptr); });
    else
        on_exit(on_process_exit, nullptr);
    exec_env_init(state().status_fd, state().wake_fd);
    spawn_set_env_hooks(&k_spawn_hooks);
}

void install_signal_handlers()
{
    struct sigaction sa {
    };
    sa.sa_sigaction = fatal_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int sig : k_fatal_signals) {
        struct sigaction old {
        };
        if (sigaction(sig, nullptr, &old) != 0) continue;
        // Only where the program would die anyway: its own handlers stay in charge.
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) sigaction(sig, &sa, nullptr);
    }
}

void remove_signal_handlers()
{
    for (int sig : k_fatal_signals) {
        struct sigaction cur {
        };
        if (sigaction(sig, nullptr, &cur) != 0) continue;
        if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fatal_handler) {
            struct sigaction dfl {
            };
            dfl.sa_handler = SIG_DFL;
            sigemptyset(&dfl.sa_mask);
            sigaction(sig, &dfl, nullptr);
        }
    }
}

} // namespace dprobe::agent

// ---- interposers: exec (the session ends with the image), _exit (its status) ----
using namespace dprobe::agent;

// The environment is carried over on the stack (this may be a vfork child, which shares the
// parent's memory): room for the program's entries and dprobe's.
#define DPROBE_EXEC_ENV(envp, env, fds, timers)                                                    \
    char **env##_room =                                                                            \
        static_cast<char **>(alloca((env_count(envp) + k_exec_env_extra + 1) * sizeof(char *)));   \
    char *env##_text = static_cast<char *>(alloca(exec_env_text_room(envp)));                      \
    exec_env_fds fds;                                                                              \
    char *const *env = exec_env_build(envp, env##_room, env##_text, fds, timers)

// The C library's exec functions the interposers end in, looked up at load
// (core/interpose_next.h).
using exec_path_fn = int (*)(const char *, char *const[], char *const[]);
using exec_fd_fn = int (*)(int, char *const[], char *const[]);
static std::atomic<exec_path_fn> next_execve{nullptr};
static std::atomic<exec_path_fn> next_execvpe{nullptr};
static std::atomic<exec_fd_fn> next_fexecve{nullptr};

__attribute__((constructor)) static void find_next_exec_functions()
{
    dprobe::interpose_next(next_execve, "execve");
    dprobe::interpose_next(next_execvpe, "execvpe");
    dprobe::interpose_next(next_fexecve, "fexecve");
}

// FN(TARGET, ARGV, envp with dprobe's settings). What the agent does around the call (the
// environment, the session's end, the CPU-time timers) is its own work and not recorded: the
// program is seen calling the C library's exec function, as untraced. Recording is on again
// for the call itself (a vfork child shares this thread's state with its parent, which must
// find it as it was).
template <typename Target>
static int exec_with_env(int (*fn)(Target, char *const[], char *const[]), Target target,
                         char *const argv[], char *const envp[])
{
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    dprobe::ring_buffer_thread_mute(true);
    cpu_timers cpu; // the agent's work here is not the program's CPU time (cpu_timers.h)
    cpu.pause();
    DPROBE_EXEC_ENV(envp, env, fds, &cpu);
    before_exec();
    if (env == envp) cpu.resume(); // not carried in the environment: the kernel carries them
    dprobe::ring_buffer_thread_mute(false);
    int r = fn(target, argv, env);
    int e = errno;
    dprobe::ring_buffer_thread_mute(true);
    cpu.pause();
    exec_env_done(fds);
    after_failed_exec();
    cpu.resume();
    dprobe::ring_buffer_thread_mute(false);
    errno = e;
    return r;
}

// The argument list of execl and friends: how many entries (the terminating NULL included)
// ARG0 and AP make, then the vector in room for them on the caller's stack, as the C library
// builds it (no allocation: a vfork child may be the caller), and for execle the environment
// after the NULL.
static size_t count_args(const char *arg0, va_list ap)
{
    va_list c;
    va_copy(c, ap);
    size_t n = 2;
    if (arg0)
        while (va_arg(c, char *))
            n++;
    va_end(c);
    return n;
}
static char **fill_args(char **v, const char *arg0, va_list ap, char ***envp)
{
    size_t i = 0;
    v[i++] = const_cast<char *>(arg0);
    if (arg0)
        while (char *a = va_arg(ap, char *))
            v[i++] = a;
    v[i] = nullptr;
    if (envp) *envp = va_arg(ap, char **);
    return v;
}
#define DPROBE_EXEC_ARGS(arg0, ap)                                                                 \
    static_cast<char **>(alloca(count_args(arg0, ap) * sizeof(char *)))

extern "C" {

__attribute__((visibility("default"))) int execve(const char *path, char *const argv[],
                                                  char *const envp[])
{
    return exec_with_env(dprobe::interpose_next(next_execve, "execve"), path, argv, envp);
}

__attribute__((visibility("default"))) int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

__attribute__((visibility("default"))) int execvpe(const char *file, char *const argv[],
                                                   char *const envp[])
{
    return exec_with_env(dprobe::interpose_next(next_execvpe, "execvpe"), file, argv, envp);
}

__attribute__((visibility("default"))) int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

__attribute__((visibility("default"))) int fexecve(int fd, char *const argv[], char *const envp[])
{
    return exec_with_env(dprobe::interpose_next(next_fexecve, "fexecve"), fd, argv, envp);
}

__attribute__((visibility("default"))) int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    char **v = fill_args(DPROBE_EXEC_ARGS(arg, ap), arg, ap, nullptr);
    va_end(ap);
    return execve(path, v, environ);
}

__attribute__((visibility("default"))) int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    char **v = fill_args(DPROBE_EXEC_ARGS(arg, ap), arg, ap, nullptr);
    va_end(ap);
    return execvpe(file, v, environ);
}

__attribute__((visibility("default"))) int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    char **envp = nullptr;
    char **v = fill_args(DPROBE_EXEC_ARGS(arg, ap), arg, ap, &envp);
    va_end(ap);
    return execve(path, v, envp);
}

// _exit skips atexit and on_exit: note the status here (for a process `dprobe record` did
// not start itself, it learns it from nothing else), then leave as glibc's _exit does.
// Async-signal-safe, and harmless in a vfork child (which does not own the session).
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    if (owns_session()) dprobe::ring_buffer_export_state(dprobe::rb::ARENA_EXITED, status & 0xff);
    for (;;) {
        dprobe::arch::raw_syscall(SYS_exit_group, status);
        dprobe::arch::raw_syscall(SYS_exit, status);
    }
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status)
{
    _exit(status);
}

} // extern "C"
