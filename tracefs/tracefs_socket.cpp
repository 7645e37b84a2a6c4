// Unix socket binding of the tracefs tree (protocol in tracefs_socket.h).
#include "tracefs/tracefs_socket.h"

#include "core/kthread.h"
#include "core/ring_buffer.h"
#include "tracefs/tracefs_tree.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <list>
#include <mutex>
#include <new>
#include <thread>

namespace dprobe
{
namespace
{

constexpr size_t max_line = 8192;
constexpr size_t max_write = 64u << 20;

struct server_state {
    std::mutex m;
    std::condition_variable cv;
    int listen_fd = -1;
    std::string path;
    kthread acceptor;
    std::atomic<bool> stop{false};
    unsigned active = 0; // connection threads running
    // Every connection's thread, joined (its stack unmapped) once it has ended: by the
    // acceptor as it goes, and by tracefs_socket_stop.
    struct connection {
        kthread thread;
        bool done = false;
    };
    std::list<connection> connections;
    pid_t pid = 0; // the process serving (a forked child has no server threads)
};

server_state &srv()
{
    static server_state *s = new server_state; // never destroyed (threads may outlive statics)
    return *s;
}

// Server threads take no asynchronous signals: those belong to the traced program.
void block_async_signals(sigset_t &old)
{
    sigset_t all;
    sigfillset(&all);
    for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP})
        sigdelset(&all, s);
    pthread_sigmask(SIG_BLOCK, &all, &old);
}

const char *errno_name(int e)
{
    const char *n = strerrorname_np(e);
    return n ? n : "EIO";
}

class conn
{
  public:
    explicit conn(int fd) : fd_(fd)
    {
        // The peer's pid: what a trace_marker write records as its writer.
        ucred cred{};
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) peer_pid_ = cred.pid;
    }
    ~conn() { ::close(fd_); }

    void serve()
    {
        std::string line;
        while (read_line(line)) {
            if (!handle(line)) return;
        }
    }

  private:
    int fd_;
    int32_t peer_pid_ = 0;
    std::string in_;

    bool stopping() const { return srv().stop.load(std::memory_order_acquire); }

    bool hung_up() const
    {
        pollfd p{fd_, POLLRDHUP, 0};
        return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    }

    // Waits for input, checking for a server stop every 100 ms.
    bool fill()
    {
        for (;;) {
            if (stopping()) return false;
            pollfd p{fd_, POLLIN, 0};
            int r = ::poll(&p, 1, 100);
            if (r < 0 && errno != EINTR) return false;
            if (r <= 0) continue;
            char buf[65536];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) return false;
            in_.append(buf, size_t(n));
            return true;
        }
    }

    bool read_line(std::string &line)
    {
        for (;;) {
            size_t nl = in_.find('\n');
            if (nl != std::string::npos) {
                line = in_.substr(0, nl);
                in_.erase(0, nl + 1);
                return true;
            }
            if (in_.size() > max_line || !fill()) return false;
        }
    }

    bool read_bytes(size_t n, std::string &out)
    {
        while (in_.size() < n)
            if (!fill()) return false;
        out = in_.substr(0, n);
        in_.erase(0, n);
        return true;
    }

    bool send_all(std::string_view s)
    {
        while (!s.empty()) {
            ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                pollfd p{fd_, POLLOUT, 0};
                ::poll(&p, 1, 100);
                if (stopping()) return false;
                continue;
            }
            if (n <= 0) return false;
            s.remove_prefix(size_t(n));
        }
        return true;
    }

    bool ok(std::string_view data = {})
    {
        return send_all("OK " + std::to_string(data.size()) + "\n") && send_all(data);
    }

    bool err(int e)
    {
        if (e < 0) e = -e;
        return send_all("ERR " + std::to_string(e) + " " + errno_name(e) + "\n");
    }

    bool reply(int r, std::string_view data = {}) { return r < 0 ? err(r) : ok(data); }

    static std::vector<std::string> words(const std::string &line)
    {
        std::vector<std::string> w;
        size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && line[i] == ' ')
                i++;
            size_t s = i;
            while (i < line.size() && line[i] != ' ')
                i++;
            if (i > s) w.push_back(line.substr(s, i - s));
        }
        return w;
    }

    bool handle(const std::string &line)
    {
        tracefs_tree &t = tracefs_tree::instance();
        tracefs_caller_pid = peer_pid_;
        auto w = words(line);
        if (w.empty()) return err(EINVAL);
        const std::string &cmd = w[0];
        if (w.size() < 2) return err(EINVAL);
        const std::string &path = w[1];

        if (cmd == "READ" && w.size() == 2) {
            tracefs_stat st;
            if (int r = t.stat(path, st)) return err(r);
            if (st.is_dir) return err(EISDIR);
            std::string out;
            int r = t.read_file(path, out);
            return reply(r, out);
        }
        if ((cmd == "WRITE" || cmd == "TRUNCWRITE") && w.size() == 3) {
            char *end = nullptr;
            unsigned long long n = std::strtoull(w[2].c_str(), &end, 10);
            if (!end || *end || n > max_write) return err(EINVAL) && false;
            std::string data;
            if (!read_bytes(size_t(n), data)) return false;
            return reply(t.write_file(path, data, cmd == "TRUNCWRITE"));
        }
        if (cmd == "TRUNC" && w.size() == 2) return reply(t.write_file(path, {}, true));
        if (cmd == "MKDIR" && w.size() == 2) return reply(t.mkdir(path));
        if (cmd == "RMDIR" && w.size() == 2) return reply(t.rmdir(path));
        if (cmd == "LIST" && w.size() == 2) {
            std::vector<std::string> names;
            if (int r = t.list(path, names)) return err(r);
            std::string out;
            std::string base = tracefs_normalize_path(path);
            for (const auto &n : names) {
                tracefs_stat st;
                out += n;
                if (t.stat(base.empty() ? n : base + "/" + n, st) == 0 && st.is_dir) out += '/';
                out += '\n';
            }
            return ok(out);
        }
        if (cmd == "POLL" && w.size() == 3) return poll_file(path, std::atoi(w[2].c_str()));
        if (cmd == "PIPE" && (w.size() == 2 || w.size() == 3))
            return pipe_file(path, w.size() == 3 ? std::atoi(w[2].c_str()) : -1);
        return err(EINVAL);
    }

    bool poll_file(const std::string &path, int timeout_ms)
    {
        std::unique_ptr<tracefs_file> f;
        if (int r = tracefs_tree::instance().open(path, O_RDONLY | O_NONBLOCK, f)) return err(r);
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        for (;;) {
            if (f->poll() & POLLIN) return ok("1");
            if (stopping() || hung_up()) return false;
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
            if (timeout_ms >= 0 && left <= 0) return ok("0");
            int step = timeout_ms < 0 ? 100 : int(std::min<long long>(left, 100));
            ring_buffer_wait(step);
        }
    }

    bool pipe_file(const std::string &path, int timeout_ms)
    {
        std::unique_ptr<tracefs_file> f;
        if (int r = tracefs_tree::instance().open(path, O_RDONLY, f)) return err(r);
        if (!f->is_stream()) return err(EINVAL); // PIPE is for trace_pipe; READ the other files
        auto last = std::chrono::steady_clock::now();
        bool timed_out = false, gone = false;
        tracefs_read_opts opts;
        opts.interrupted = [&] {
            if (stopping() || hung_up()) {
                gone = true;
                return true;
            }
            if (timeout_ms >= 0 &&
                std::chrono::steady_clock::now() - last > std::chrono::milliseconds(timeout_ms)) {
                timed_out = true;
                return true;
            }
            return false;
        };
        std::string buf(65536, '\0');
        for (;;) {
            ssize_t n = f->read(buf.data(), buf.size(), 0, opts);
            if (n > 0) {
                if (!send_all("DATA " + std::to_string(n) + "\n") ||
                    !send_all(std::string_view(buf.data(), size_t(n))))
                    return false;
                last = std::chrono::steady_clock::now();
                continue;
            }
            if (gone) return false;
            if (timed_out || n == 0) return send_all("END\n");
            return err(int(n));
        }
    }
};

void serve_connection(int fd, server_state::connection *self)
{
    {
        conn c(fd);
        c.serve();
    }
    server_state &s = srv();
    std::lock_guard<std::mutex> g(s.m);
    s.active--;
    self->done = true;
    s.cv.notify_all();
}

// Joins the threads of the connections that have ended. At stop (ALL), a thread still
// serving after the stop's wait is given up (its stack left mapped); its node stays in the
// list, for the thread marks it done when it ends.
void reap_connections(bool all)
{
    server_state &s = srv();
    std::list<server_state::connection> ended;
    {
        std::lock_guard<std::mutex> g(s.m);
        for (auto it = s.connections.begin(); it != s.connections.end();) {
            auto next = std::next(it);
            if (it->done)
                ended.splice(ended.end(), s.connections, it);
            else if (all)
                it->thread.forget();
            it = next;
        }
    }
    for (auto &c : ended)
        if (c.thread.joinable()) c.thread.join();
}

bool peer_allowed(int fd)
{
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) return false;
    return cred.uid == geteuid() || cred.uid == 0;
}

void accept_loop(int lfd)
{
    server_state &s = srv();
    while (!s.stop.load(std::memory_order_acquire)) {
        pollfd p{lfd, POLLIN, 0};
        int r = ::poll(&p, 1, 100);
        reap_connections(false);
        if (r <= 0) continue;
        int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        if (!peer_allowed(fd)) {
            ::close(fd);
            continue;
        }
        // The connection's node exists before its thread: the thread marks it done. Only this
        // thread adds nodes or removes ones not done, so the node stays put meanwhile.
        server_state::connection *c;
        {
            std::lock_guard<std::mutex> g(s.m);
            s.active++;
            c = &s.connections.emplace_back();
        }
        kthread t;
        const bool started = kthread_run(t, [fd, c] { serve_connection(fd, c); });
        std::lock_guard<std::mutex> g(s.m);
        if (started) {
            c->thread = std::move(t);
        } else {
            ::close(fd);
            s.active--;
            s.connections.pop_back();
        }
    }
}

} // namespace

int tracefs_socket_start(const std::string &path)
{
    server_state &s = srv();
    std::lock_guard<std::mutex> g(s.m);
    if (s.listen_fd >= 0) return -EBUSY;
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) return -ENAMETOOLONG;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    // A socket file left by a process that died: nobody listens on it any more.
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path.c_str());
    mode_t old = umask(077);
    int r = bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa);
    umask(old);
    if (r || listen(fd, 16)) {
        int e = errno;
        ::close(fd);
        return -e;
    }
    chmod(path.c_str(), 0600);
    s.listen_fd = fd;
    s.path = path;
    s.pid = getpid();
    s.active = 0;
    s.stop.store(false, std::memory_order_release);
    sigset_t saved;
    block_async_signals(saved);
    if (!kthread_run(s.acceptor, [fd] { accept_loop(fd); })) {
        pthread_sigmask(SIG_SETMASK, &saved, nullptr);
        ::close(fd);
        s.listen_fd = -1;
        unlink(path.c_str());
        return -EAGAIN;
    }
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    return 0;
}

void tracefs_socket_stop()
{
    server_state &s = srv();
    kthread acceptor;
    std::string path;
    int fd;
    {
        std::lock_guard<std::mutex> g(s.m);
        if (s.listen_fd < 0) return;
        if (s.pid != getpid()) {
            // A forked child: the threads and the socket file are the parent's. Forget the
            // handle without pthread_detach: the thread does not exist here, and detaching
            // the parent's copied descriptor failed with EINVAL in shell children (detach()
            // threw, std::terminate) when bash ran under a libc-wide trace.
            s.acceptor.forget();
            for (auto &c : s.connections)
                c.thread.forget();
            s.connections.clear();
            ::close(s.listen_fd);
            s.listen_fd = -1;
            s.path.clear();
            return;
        }
        s.stop.store(true, std::memory_order_release);
        acceptor = std::move(s.acceptor);
        fd = s.listen_fd;
        path = s.path;
        // Wakes the acceptor's poll now (POLLHUP) rather than at its next 100 ms timeout:
        // the program's exit waits for it.
        ::shutdown(fd, SHUT_RDWR);
    }
    if (acceptor.joinable()) acceptor.join();
    std::unique_lock<std::mutex> g(s.m);
    // Connection threads notice the stop within 100 ms.
    s.cv.wait_for(g, std::chrono::seconds(5), [&] { return s.active == 0; });
    g.unlock();
    reap_connections(true);
    g.lock();
    ::close(fd);
    unlink(path.c_str());
    s.listen_fd = -1;
    s.path.clear();
}

std::string tracefs_socket_path()
{
    server_state &s = srv();
    std::lock_guard<std::mutex> g(s.m);
    return s.path;
}

} // namespace dprobe
