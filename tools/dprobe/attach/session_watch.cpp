// The watcher of an attach session (see session_watch.h).
//
// Invariant: the watcher never touches the traced process but through what `dprobe detach`
// uses (the session's connection, and ON_ORPHANED), and its own process is invisible to the
// traced one: not its child, not in its process group or session.
#include "tools/dprobe/attach/session_watch.h"

#include "tools/dprobe/attach/proc_target.h"
#include "tools/dprobe/record/record_util.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <cstring>
#include <unistd.h>
#include <vector>

namespace dprobe::tools
{

namespace
{

constexpr int k_detach_ms = 30000;             // for the agent to end the session the command left
constexpr int k_exit_wait_ms = 5000;           // for a process whose session closed to be gone
constexpr long k_sweep_ns = 500 * 1000 * 1000; // between looks at a killed record's processes

int pidfd_of(pid_t pid)
{
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

// Everything but KEEP closed, the standard streams on /dev/null: the watcher must not hold
// the command's terminal, pipes or files open.
void detach_from_command(std::initializer_list<int> keep)
{
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++)
        if (null >= 0) dup2(null, fd);
    for (int fd = 3; fd < 1024; fd++) {
        bool kept = fd == null;
        for (int k : keep)
            kept |= fd == k;
        if (!kept) ::close(fd);
    }
    if (chdir("/") != 0) {
        // Harmless: only a busy mount point is at stake.
    }
    prctl(PR_SET_NAME, "dprobe-watch", 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGINT, SIG_IGN);
}

// The traced process is gone: its tracefs mount and socket go too.
void clean_after_death(const session_watch &w)
{
    if (!w.mount.empty()) {
        unmount_if_mounted(w.mount);
        remove_runtime_leftovers(w.mount);
        ::rmdir(w.mount.c_str());
    }
    if (!w.socket.empty()) ::unlink(w.socket.c_str());
}

// Reads one message of the session's connection: 1 "detached", 0 another, -1 end.
int read_message(int conn)
{
    char buf[4096];
    ssize_t n = recv(conn, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (n == 0) return -1;
    return std::string(buf, static_cast<size_t>(n)).rfind("detached ", 0) == 0 ? 1 : 0;
}

// The command died with the session running: end it as its Ctrl-C would, then unload.
void take_over(const session_watch &w, int pidfd)
{
    (void)send(w.conn, "detach", 6, MSG_NOSIGNAL);
    for (int waited = 0; waited < k_detach_ms; waited += 100) {
        struct pollfd p[2] = {{w.conn, POLLIN, 0}, {pidfd, POLLIN, 0}};
        if (poll(p, 2, 100) < 0 && errno != EINTR) break;
        if (p[1].revents) return clean_after_death(w);
        if (p[0].revents) {
            int r = read_message(w.conn);
            if (r == 1 || r < 0) break;
        }
    }
    if (w.on_orphaned && process_alive(w.pid)) w.on_orphaned();
}

[[noreturn]] void watch(const session_watch &w, int done_fd)
{
    const int pidfd = pidfd_of(w.pid);
    detach_from_command({w.conn, done_fd, pidfd});
    for (;;) {
        // In the foreground the command reads the connection; the watcher leaves it alone
        // until it takes over (a message it read would be lost to the command).
        struct pollfd p[3] = {
            {pidfd, POLLIN, 0}, {w.foreground ? -1 : w.conn, POLLIN, 0}, {done_fd, POLLIN, 0}};
        const int n = poll(p, 3, pidfd >= 0 ? -1 : 200);
        if (n < 0 && errno != EINTR) break;
        if ((pidfd >= 0 && p[0].revents) || !process_alive(w.pid)) {
            clean_after_death(w);
            break;
        }
        if (p[1].revents) {
            const int r = read_message(w.conn);
            if (r > 0) break; // detached
            if (r < 0) {
                // The agent closed the session, or its process is going away: a dying
                // process closes its descriptors before its pid says it is gone.
                struct pollfd d = {pidfd, POLLIN, 0};
                if ((pidfd >= 0 && poll(&d, 1, k_exit_wait_ms) == 1) || !process_alive(w.pid))
                    clean_after_death(w);
                break;
            }
        }
        if (done_fd >= 0 && p[2].revents) {
            char c = 0;
            if (::read(done_fd, &c, 1) == 1 && c == 'd') break; // the command finished it
            take_over(w, pidfd);
            break;
        }
    }
    _exit(0);
}

} // namespace

int start_session_watch(const session_watch &w)
{
    int pipefd[2] = {-1, -1};
    if (w.foreground && pipe2(pipefd, O_CLOEXEC) != 0) return -errno;
    const pid_t child = fork();
    if (child < 0) {
        const int e = -errno;
        if (pipefd[0] >= 0) {
            ::close(pipefd[0]);
            ::close(pipefd[1]);
        }
        return e;
    }
    if (child == 0) {
        // A session of its own, and reparented to init by the exit of this middle process.
        setsid();
        if (fork() == 0) watch(w, pipefd[0]);
        _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (pipefd[0] >= 0) ::close(pipefd[0]);
    return w.foreground ? pipefd[1] : -1;
}

namespace
{

// Whether PATH is a mount point now (/proc/self/mountinfo's fifth field).
bool is_mounted(const std::string &path)
{
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string field;
        for (int i = 0; i < 5 && f >> field; i++) {
        }
        if (field == path) return true;
    }
    return false;
}

// Whether the tracefs at PATH is gone for good: a mount point whose server died is taken
// down (and its directory removed), a socket file nobody serves removed; a live one stays.
bool swept(char kind, const std::string &path)
{
    if (kind == 'm') {
        struct stat st {
        };
        if (stat(path.c_str(), &st) == 0) return !is_mounted(path); // unmounted by its process
        if (errno == ENOENT) return true;
        if (errno != ENOTCONN) return false; // a request caught in its server's death: again

        unmount_if_mounted(path);
        ::rmdir(path.c_str());
        return true;
    }
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    const bool served = connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
    const int err = errno;
    ::close(fd);
    if (served) return false;
    if (err == ECONNREFUSED) ::unlink(path.c_str());
    return err == ECONNREFUSED || err == ENOENT;
}

// The agents' "mount PATH" and "socket PATH" messages still waiting in the status socket (the
// command read no further before it was killed), and those of processes that start later.
void take_status(int status, std::vector<std::pair<char, std::string>> &left)
{
    char buf[8192];
    for (;;) {
        const ssize_t n = recv(status, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) return;
        const std::string msg(buf, static_cast<size_t>(n));
        if (msg.rfind("mount ", 0) == 0) left.emplace_back('m', msg.substr(6));
        if (msg.rfind("socket ", 0) == 0) left.emplace_back('s', msg.substr(7));
    }
}

[[noreturn]] void sweep_after_kill(int done, int status)
{
    std::vector<std::pair<char, std::string>> left;
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(done, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t nl = text.find('\n', pos);
        const std::string line = text.substr(pos, nl == std::string::npos ? nl : nl - pos);
        pos = nl == std::string::npos ? text.size() : nl + 1;
        if (line == "d") _exit(0); // the command finished its run and cleaned up itself
        if (line.size() > 2 && (line[0] == 'm' || line[0] == 's') && line[1] == ' ')
            left.emplace_back(line[0], line.substr(2));
    }
    // The command was killed: each one as its process dies, for as long as a recorded
    // process may still say where it serves its tracefs.
    take_status(status, left);
    while (!left.empty()) {
        std::erase_if(left, [](const auto &l) { return swept(l.first, l.second); });
        take_status(status, left);
        struct timespec ts {
            0, k_sweep_ns
        };
        if (!left.empty()) nanosleep(&ts, nullptr);
    }
    _exit(0);
}

} // namespace

int start_runtime_sweeper(int status_fd)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return -errno;
    const pid_t child = fork();
    if (child < 0) {
        const int e = -errno;
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        return e;
    }
    if (child == 0) {
        setsid();
        if (fork() == 0) {
            detach_from_command({pipefd[0], status_fd});
            sweep_after_kill(pipefd[0], status_fd);
        }
        _exit(0);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    ::close(pipefd[0]);
    return pipefd[1];
}

void runtime_sweeper_note(int fd, char kind, const std::string &path)
{
    if (fd < 0) return;
    const std::string line = std::string(1, kind) + " " + path + "\n";
    (void)!::write(fd, line.data(), line.size());
}

void session_watch_done(int done_fd)
{
    if (done_fd < 0) return;
    // 'd' for the attach watcher (one byte), a line for the record sweeper.
    (void)!::write(done_fd, "d\n", 2);
    ::close(done_fd);
}

} // namespace dprobe::tools
