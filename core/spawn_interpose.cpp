// posix_spawn()/posix_spawnp() interposers. glibc's posix_spawn runs the child with
// clone(CLONE_VM | CLONE_VFORK) on a stack it allocates: until it execs, the child runs in
// the parent's memory with the parent thread's thread pointer, hence on the parent thread's
// dprobe context, while the parent thread is suspended. A probe the child hits (on execve,
// on a signal function...) would push frames whose return-address slots lie on a stack
// that is unmapped once the child execs. So for the duration of the call the calling
// thread's context is marked as inside dispatch code: the child's probe hits count as missed
// and leave nothing behind. (vfork needs nothing: its child runs on the parent's own stack,
// below the parent's frames, where anything it leaves is dropped as gone.)
//
// An agent may also have its say in the spawned program's environment (spawn_set_env_hooks:
// `dprobe record` passes its settings on, also into an environment the program built).
//
// Not covered: system() and popen() spawn through glibc-internal calls.
#include "core/interpose_next.h"
#include "core/spawn_interpose.h"
#include "core/task_ctx.h"

#include <atomic>

#include <cerrno>
#include <dlfcn.h>
#include <spawn.h>

namespace
{

std::atomic<const dprobe::spawn_env_hooks *> g_env_hooks{nullptr};

using spawn_fn = int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                         const posix_spawnattr_t *, char *const[], char *const[]);

int spawn_marked(spawn_fn next, pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    if (!next) return ENOSYS;
    using namespace dprobe;
    const spawn_env_hooks *h = g_env_hooks.load(std::memory_order_acquire);
    char *const *env = envp;
    if (h) {
        interpose_mute quiet; // the agent's work (an environment built), not the program's
        env = h->before(envp);
    }
    task_ctx *t = current_task_ctx();
    const bool marked = t && dispatch_enter(t, current_stack_pointer());
    if (marked) t->spawning = 1;
    const int r = next(pid, path, fa, attr, argv, env);
    if (marked) {
        t->spawning = 0;
        dispatch_exit(t);
    }
    if (h) {
        interpose_mute quiet;
        h->after();
    }
    return r;
}

std::atomic<spawn_fn> next_spawn{nullptr};
std::atomic<spawn_fn> next_spawnp{nullptr};

// Looked up at load (core/interpose_next.h).
__attribute__((constructor)) void find_next_spawn_functions()
{
    dprobe::interpose_next(next_spawn, "posix_spawn");
    dprobe::interpose_next(next_spawnp, "posix_spawnp");
}

} // namespace

void dprobe::spawn_set_env_hooks(const spawn_env_hooks *hooks)
{
    g_env_hooks.store(hooks, std::memory_order_release);
}

extern "C" __attribute__((visibility("default"))) int
posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
            const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn_marked(dprobe::interpose_next(next_spawn, "posix_spawn"), pid, path, fa, attr,
                        argv, envp);
}

extern "C" __attribute__((visibility("default"))) int
posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
             const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    return spawn_marked(dprobe::interpose_next(next_spawnp, "posix_spawnp"), pid, file, fa, attr,
                        argv, envp);
}
