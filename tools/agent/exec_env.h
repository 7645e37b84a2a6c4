// The environment of the programs a traced program runs: what they need to be traced the
// same way (LD_PRELOAD with the agent, the DPROBE_* settings, descriptors of the CLI's
// socket and eventfd that are open in the new program), carried into the environment the
// program hands to execve, execle, execvpe, fexecve and posix_spawn even when it built that
// environment itself (PATH and HOME only, say), as uftrace does.
//
// exec_env_build() runs in an exec interposer, possibly in a vfork child: it allocates
// nothing and takes no lock; the caller gives it the room (on its stack).
#pragma once

#include <cstddef>

#include "tools/agent/cpu_timers.h"

namespace dprobe::agent
{

// Takes note of the settings in this process's environment (at the agent's start, before
// the program can change it) and of the descriptors to pass on (the agent's own copies).
void exec_env_init(int status_fd, int wake_fd);

// Entries exec_env_build may add to an environment, and bytes of text it may need beyond
// the length of the environment's LD_PRELOAD.
inline constexpr size_t k_exec_env_extra = 18;
size_t exec_env_text_room(char *const envp[]);

struct exec_env_fds {
    int status = -1, wake = -1; // descriptors the new program inherits (-1: none)
    int opened[2] = {-1, -1};   // made for this exec: closed again if it fails
};

// ENVP with dprobe's variables put back: every DPROBE_* and LD_PRELOAD entry of ENVP is
// replaced by the agent's (LD_PRELOAD keeps the program's other objects, after the agent).
// OUT has room for count(ENVP) + k_exec_env_extra + 1 pointers, TEXT for
// exec_env_text_room(ENVP) bytes. Returns OUT, or ENVP when the agent is not recording.
// TIMERS, when given and paused with a timer armed, go along (DPROBE_CPU_TIMERS) for the new
// image's agent to re-arm (cpu_timers.h); the caller re-arms them itself when ENVP comes back.
char *const *exec_env_build(char *const envp[], char **out, char *text, exec_env_fds &fds,
                            const cpu_timers *timers = nullptr);
// After an exec that failed (or a spawn that returned): the descriptors it opened, closed.
void exec_env_done(exec_env_fds &fds);
size_t env_count(char *const envp[]);

} // namespace dprobe::agent
