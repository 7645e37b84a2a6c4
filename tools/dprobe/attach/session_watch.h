// The watcher of a `dprobe attach` session (and of a `dprobe record` run): a small process of
// dprobe's own that outlives the command, so that a session leaves nothing behind when the
// traced process or the command is killed (the kernel has nothing to clean up in this way: its
// tracefs is not a mount a dead process leaves dangling).
//
// It is neither a child of the traced process (whose wait() must not see it) nor of the
// command (double fork, its own session), holds the session's connection to the agent and:
//   - when the traced process dies: takes its tracefs mount down and removes its socket;
//   - when the command dies before the session ended (a foreground attach killed): ends the
//     session as Ctrl-C would and runs ON_ORPHANED (the unload that `dprobe detach` does);
//   - when the session ends normally ("detached", from `dprobe detach` or the command):
//     exits.
#pragma once

#include <functional>
#include <string>
#include <sys/types.h>

namespace dprobe::tools
{

struct session_watch {
    pid_t pid = 0;
    int conn = -1;           // the session's connection to the agent (the watcher gets a copy)
    std::string mount;       // the process's tracefs mount point ("" when none)
    std::string socket;      // its tracefs socket file ("" when none)
    bool foreground = false; // the command stays: the watcher takes over if it dies
    std::function<void()> on_orphaned;
};

// Starts the watcher. For a foreground session returns the descriptor the command keeps
// until it is done (session_watch_done), else -1; -errno when no watcher could be started.
int start_session_watch(const session_watch &w);

// The command ended its session itself: the watcher of DONE_FD leaves.
void session_watch_done(int done_fd);

// For `dprobe record`: a watcher that does nothing while the command runs and, if the
// command is killed, takes down the tracefs mounts and sockets the recorded processes leave
// as they die (a FUSE mount whose server is gone answers ENOTCONN, a socket nobody serves
// ECONNREFUSED), until every one is gone: those the command told it of, and those the
// agents announce on STATUS_FD (the command's end of the status socket, which it reads
// only after the command died). Returns the descriptor the command tells it through
// (runtime_sweeper_note, then session_watch_done), or -errno.
int start_runtime_sweeper(int status_fd);
// A tracefs mount point ('m') or socket path ('s') of a recorded process.
void runtime_sweeper_note(int fd, char kind, const std::string &path);

} // namespace dprobe::tools
