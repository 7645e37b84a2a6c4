// The environment of the programs a traced program runs (see exec_env.h).
#include "tools/agent/exec_env.h"

#include "tools/agent/agent.h"
#include "tools/agent/sigsafe_text.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

extern char **environ;

namespace dprobe::agent
{

namespace
{

// The settings a program started by the traced one gets (the descriptors' numbers are made
// at each exec; DPROBE_FIRST is only for the program `record` starts).
constexpr const char *k_vars[] = {
    "DPROBE_OUTPUT",     "DPROBE_EVENTS",       "DPROBE_GRAPH",       "DPROBE_GRAPH_NOTRACE",
    "DPROBE_GRAPH_MAIN", "DPROBE_FOLLOW_LOADS", "DPROBE_BUFFER_KB",   "DPROBE_CLOCK",
    "DPROBE_TRACEFS",    "DPROBE_NOWAIT",       "DPROBE_GRAPH_DEPTH", "DPROBE_TRACER",
    "DPROBE_TRIGGERS"};
constexpr size_t k_nvars = sizeof k_vars / sizeof k_vars[0];
static_assert(k_nvars + 4 <= k_exec_env_extra);

struct saved_env {
    bool ready = false;
    char *entries[k_nvars] = {}; // "NAME=value", kept for the process's life
    size_t n = 0;
    char agent[PATH_MAX] = {}; // this object's path, first in LD_PRELOAD
    size_t agent_len = 0;
    int status_fd = -1, wake_fd = -1;
};
saved_env g_env;

bool starts_with(const char *s, const char *prefix)
{
    return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// A descriptor the new program inherits: a copy of the agent's (close-on-exec) one.
int inheritable(int fd, int *opened)
{
    if (fd < 0) return -1;
    int c = fcntl(fd, F_DUPFD, 3);
    *opened = c;
    return c;
}

} // namespace

void exec_env_init(int status_fd, int wake_fd)
{
    for (const char *name : k_vars) {
        const size_t len = std::strlen(name);
        for (char **e = environ; e && *e; e++)
            if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=') {
                const size_t n = std::strlen(*e);
                char *copy = new char[n + 1];
                std::memcpy(copy, *e, n + 1);
                g_env.entries[g_env.n++] = copy;
                break;
            }
    }
    Dl_info info{};
    char rp[PATH_MAX];
    if (dladdr(reinterpret_cast<void *>(&exec_env_init), &info) && info.dli_fname &&
        realpath(info.dli_fname, rp)) {
        g_env.agent_len = std::strlen(rp);
        std::memcpy(g_env.agent, rp, g_env.agent_len + 1);
    }
    g_env.status_fd = status_fd;
    g_env.wake_fd = wake_fd;
    g_env.ready = g_env.agent_len > 0;
}

size_t env_count(char *const envp[])
{
    size_t n = 0;
    while (envp && envp[n])
        n++;
    return n;
}

size_t exec_env_text_room(char *const envp[])
{
    size_t preload = 0;
    for (size_t i = 0; envp && envp[i]; i++)
        if (starts_with(envp[i], "LD_PRELOAD=")) preload += std::strlen(envp[i]);
    return preload + g_env.agent_len + 128 + cpu_timers::k_env_room;
}

char *const *exec_env_build(char *const envp[], char **out, char *text, exec_env_fds &fds,
                            const cpu_timers *timers)
{
    if (!g_env.ready || !agent_active() || state().attached) return envp;
    size_t k = 0;
    const char *theirs = nullptr;
    for (size_t i = 0; envp && envp[i]; i++) {
        if (starts_with(envp[i], "DPROBE_")) continue;
        if (starts_with(envp[i], "LD_PRELOAD=")) {
            theirs = envp[i] + 11;
            continue;
        }
        out[k++] = envp[i];
    }
    for (size_t i = 0; i < g_env.n; i++)
        out[k++] = g_env.entries[i];
    char *p = text;
    fds.status = inheritable(g_env.status_fd, &fds.opened[0]);
    fds.wake = inheritable(g_env.wake_fd, &fds.opened[1]);
    if (fds.status >= 0) {
        out[k++] = p;
        p = put_str(p, "DPROBE_STATUS_FD=");
        p = put_ulong(p, static_cast<unsigned long>(fds.status));
        *p++ = '\0';
    }
    if (fds.wake >= 0) {
        out[k++] = p;
        p = put_str(p, "DPROBE_WAKE_FD=");
        p = put_ulong(p, static_cast<unsigned long>(fds.wake));
        *p++ = '\0';
    }
    if (timers && timers->carried()) {
        out[k++] = p;
        p = timers->encode(p);
    }
    // The agent first, then the program's own objects (the agent's path left out of them).
    out[k++] = p;
    p = put_str(p, "LD_PRELOAD=");
    p = put_str(p, g_env.agent);
    while (theirs && *theirs) {
        while (*theirs == ' ' || *theirs == ':')
            theirs++;
        const char *end = theirs;
        while (*end && *end != ' ' && *end != ':')
            end++;
        const size_t len = static_cast<size_t>(end - theirs);
        if (len && !(len == g_env.agent_len && std::memcmp(theirs, g_env.agent, len) == 0)) {
            *p++ = ' ';
            std::memcpy(p, theirs, len);
            p += len;
        }
        theirs = end;
    }
    *p++ = '\0';
    out[k] = nullptr;
    return out;
}

void exec_env_done(exec_env_fds &fds)
{
    for (int &fd : fds.opened)
        if (fd >= 0) {
            ::close(fd);
            fd = -1;
        }
}

} // namespace dprobe::agent
