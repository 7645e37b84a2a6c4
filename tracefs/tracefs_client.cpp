#include "tracefs/tracefs_client.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace dprobe
{
namespace
{

bool all_digits(const std::string &s)
{
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

const char *op_word(tracefs_op op)
{
    switch (op) {
    case tracefs_op::read:
        return "READ";
    case tracefs_op::write:
        return "WRITE";
    case tracefs_op::write_trunc:
        return "TRUNCWRITE";
    case tracefs_op::trunc:
        return "TRUNC";
    case tracefs_op::list:
        return "LIST";
    case tracefs_op::poll:
        return "POLL";
    case tracefs_op::mkdir:
        return "MKDIR";
    case tracefs_op::rmdir:
        return "RMDIR";
    }
    return "READ";
}

} // namespace

std::string tracefs_runtime_dir()
{
    const char *x = std::getenv("XDG_RUNTIME_DIR");
    if (x && *x) return std::string(x) + "/dprobe";
    return "/tmp/dprobe-" + std::to_string(geteuid());
}

int tracefs_make_private_dir(const std::string &dir)
{
    if (dir.empty()) return -EINVAL;
    // Parents first (only the last component must be private).
    for (size_t i = 1; i < dir.size(); i++) {
        if (dir[i] != '/') continue;
        std::string parent = dir.substr(0, i);
        if (mkdir(parent.c_str(), 0700) && errno != EEXIST) return -errno;
    }
    if (mkdir(dir.c_str(), 0700) && errno != EEXIST) return -errno;
    struct stat st;
    if (lstat(dir.c_str(), &st)) return -errno;
    if (!S_ISDIR(st.st_mode)) return -ENOTDIR;
    if (st.st_uid != geteuid()) return -EPERM;
    if (st.st_mode & 077) return -EPERM;
    return 0;
}

std::string tracefs_default_mountpoint(pid_t pid)
{
    return tracefs_runtime_dir() + "/" + std::to_string(pid);
}

std::string tracefs_default_socket(pid_t pid)
{
    return tracefs_runtime_dir() + "/dprobe-" + std::to_string(pid) + ".sock";
}

tracefs_client::~tracefs_client()
{
    close();
}

void tracefs_client::close()
{
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    inbuf_.clear();
}

namespace
{

// Live sockets named dprobe-PID.sock, wherever they are bound: a process that `dprobe attach`
// loaded the runtime into serves its tracefs where its own environment says, which need not
// be where ours would put it.
std::vector<std::string> bound_sockets_of(pid_t pid)
{
    std::vector<std::string> out;
    std::ifstream in("/proc/net/unix");
    std::string line, name = "/dprobe-" + std::to_string(pid) + ".sock";
    while (std::getline(in, line)) {
        size_t slash = line.find('/');
        if (slash == std::string::npos) continue;
        std::string path = line.substr(slash);
        if (path.size() > name.size() &&
            path.compare(path.size() - name.size(), name.size(), name) == 0 &&
            std::find(out.begin(), out.end(), path) == out.end())
            out.push_back(path);
    }
    return out;
}

} // namespace

int tracefs_client::connect(const std::string &target)
{
    if (!all_digits(target)) return connect_path(target);
    pid_t pid = static_cast<pid_t>(std::atoi(target.c_str()));
    int r = connect_path(tracefs_default_socket(pid));
    if (r != -ENOENT && r != -ECONNREFUSED) return r;
    for (const std::string &p : bound_sockets_of(pid)) {
        if (connect_path(p) != 0) continue;
        struct ucred cred {
        };
        socklen_t cl = sizeof cred;
        if (getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid == pid)
            return 0; // served by that very process
        close();
    }
    return r;
}

int tracefs_client::connect_path(const std::string &path)
{
    close();
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (path.size() >= sizeof sa.sun_path) return -ENAMETOOLONG;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (::connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa)) {
        int e = errno;
        ::close(fd);
        return -e;
    }
    fd_ = fd;
    return 0;
}

bool tracefs_client::send_all(std::string_view s)
{
    while (!s.empty()) {
        ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        s.remove_prefix(size_t(n));
    }
    return true;
}

bool tracefs_client::read_line(std::string &line)
{
    for (;;) {
        size_t nl = inbuf_.find('\n');
        if (nl != std::string::npos) {
            line = inbuf_.substr(0, nl);
            inbuf_.erase(0, nl + 1);
            return true;
        }
        char buf[4096];
        ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        inbuf_.append(buf, size_t(n));
    }
}

bool tracefs_client::read_bytes(size_t n, std::string &out)
{
    out.clear();
    size_t take = std::min(n, inbuf_.size());
    out.append(inbuf_, 0, take);
    inbuf_.erase(0, take);
    while (out.size() < n) {
        char buf[65536];
        ssize_t k = ::recv(fd_, buf, std::min(sizeof buf, n - out.size()), 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        out.append(buf, size_t(k));
    }
    return true;
}

tracefs_reply tracefs_client::read_reply()
{
    tracefs_reply r;
    std::string line;
    if (!read_line(line)) {
        r.err = ECONNRESET;
        return r;
    }
    if (line.rfind("OK ", 0) == 0) {
        size_t n = std::strtoull(line.c_str() + 3, nullptr, 10);
        if (!read_bytes(n, r.data)) r.err = ECONNRESET;
        return r;
    }
    if (line.rfind("ERR ", 0) == 0) {
        r.err = std::atoi(line.c_str() + 4);
        if (r.err <= 0) r.err = EIO;
        return r;
    }
    r.err = EPROTO;
    return r;
}

tracefs_reply tracefs_client::request(tracefs_op op, std::string_view path, std::string_view data,
                                      int timeout_ms)
{
    tracefs_reply r;
    if (fd_ < 0) {
        r.err = ENOTCONN;
        return r;
    }
    std::string req = op_word(op);
    req += ' ';
    req += path.empty() ? std::string_view("/") : path;
    if (op == tracefs_op::write || op == tracefs_op::write_trunc)
        req += ' ' + std::to_string(data.size());
    if (op == tracefs_op::poll) req += ' ' + std::to_string(timeout_ms);
    req += '\n';
    if (op == tracefs_op::write || op == tracefs_op::write_trunc) req += data;
    if (!send_all(req)) {
        r.err = EPIPE;
        return r;
    }
    return read_reply();
}

int tracefs_client::pipe(std::string_view path, int timeout_ms,
                         const std::function<bool(std::string_view)> &on_data)
{
    if (fd_ < 0) return -ENOTCONN;
    std::string req = "PIPE " + std::string(path) + " " + std::to_string(timeout_ms) + "\n";
    if (!send_all(req)) return -EPIPE;
    for (;;) {
        std::string line;
        if (!read_line(line)) return -ECONNRESET;
        if (line == "END") return 0;
        if (line.rfind("ERR ", 0) == 0) {
            int e = std::atoi(line.c_str() + 4);
            return e > 0 ? -e : -EIO;
        }
        if (line.rfind("DATA ", 0) != 0) return -EPROTO;
        std::string chunk;
        if (!read_bytes(std::strtoull(line.c_str() + 5, nullptr, 10), chunk)) return -ECONNRESET;
        if (!on_data(chunk)) {
            close(); // the server notices the hang-up and stops streaming
            return 0;
        }
    }
}

tracefs_reply tracefs_socket_request(const std::string &target, tracefs_op op,
                                     std::string_view path, std::string_view data, int timeout_ms)
{
    tracefs_client c;
    if (int r = c.connect(target)) {
        tracefs_reply rep;
        rep.err = -r;
        return rep;
    }
    return c.request(op, path, data, timeout_ms);
}

tracefs_reply tracefs_socket_request(pid_t pid, tracefs_op op, std::string_view path,
                                     std::string_view data, int timeout_ms)
{
    return tracefs_socket_request(std::to_string(pid), op, path, data, timeout_ms);
}

int tracefs_socket_pipe(const std::string &target, std::string_view path, int timeout_ms,
                        const std::function<bool(std::string_view)> &on_data)
{
    tracefs_client c;
    if (int r = c.connect(target)) return r;
    return c.pipe(path, timeout_ms, on_data);
}

} // namespace dprobe
