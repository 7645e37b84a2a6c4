#include "tools/dprobe/attach/agent_link.h"

#include "tools/attach_protocol.h"
#include "tools/dprobe/attach/proc_target.h"
#include "tools/dprobe/attach/ptrace_call.h"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <random>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace dprobe::tools
{

namespace
{

const std::vector<std::string> k_libc = {"libc.so.6", "libc-2."};
const std::vector<std::string> k_agent = {"libdprobe-preload"};
constexpr uint64_t k_call_stack = 1 << 20; // the calls' own stack: dlopen runs constructors

std::string hex_name()
{
    std::random_device rd;
    char buf[64];
    std::snprintf(buf, sizeof buf, "dprobe-attach-%d-%08x%08x", getpid(), rd(), rd());
    return buf;
}

int64_t as_int(uint64_t rax)
{
    return static_cast<int32_t>(static_cast<uint32_t>(rax));
}

} // namespace

agent_link::~agent_link()
{
    if (conn_ >= 0) ::close(conn_);
    if (listen_ >= 0) ::close(listen_);
}

int agent_link::listen()
{
    listen_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (listen_ < 0) return -errno;
    name_ = hex_name();
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name_.data(), name_.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_.size());
    if (bind(listen_, reinterpret_cast<sockaddr *>(&addr), len) != 0 || ::listen(listen_, 4) != 0)
        return -errno;
    return 0;
}

int agent_link::accept_agent(pid_t pid, const char *kind, int timeout_ms, std::string *err)
{
    struct timespec start {
    }, now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (spent >= timeout_ms) {
            *err = "the dprobe agent in process " + std::to_string(pid) + " did not answer in " +
                   std::to_string(timeout_ms / 1000) + " s";
            return -ETIMEDOUT;
        }
        struct pollfd p {
            listen_, POLLIN, 0
        };
        int r = poll(&p, 1, 100);
        if (r <= 0) {
            if (!process_alive(pid)) {
                *err = "process " + std::to_string(pid) + " exited";
                return -ESRCH;
            }
            continue;
        }
        int c = accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        struct ucred cred {
        };
        socklen_t cl = sizeof cred;
        std::string hello;
        conn_ = c;
        // Only the process itself may answer: anyone can connect to an abstract socket.
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.pid != pid ||
            next(hello, 2000) != 1 || hello != "hello " + std::to_string(pid) + " " + kind) {
            ::close(c);
            conn_ = -1;
            continue;
        }
        return 0;
    }
}

bool agent_link::send(const std::string &text, int fd)
{
    iovec iov{const_cast<char *>(text.data()), text.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    return sendmsg(conn_, &mh, MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

int agent_link::next(std::string &msg, int timeout_ms)
{
    struct pollfd p {
        conn_, POLLIN, 0
    };
    int r = poll(&p, 1, timeout_ms);
    if (r < 0) return errno == EINTR ? 0 : -1;
    if (r == 0) return 0;
    std::string buf(attach::max_message, '\0');
    ssize_t n = recv(conn_, buf.data(), buf.size(), 0);
    if (n < 0) return errno == EINTR || errno == EAGAIN ? 0 : -1;
    if (n == 0) return -1;
    msg.assign(buf.data(), static_cast<size_t>(n));
    return 1;
}

std::string mapped_agent(pid_t pid)
{
    for (const proc_map &m : read_proc_maps(pid))
        if (m.path.rfind('/') != std::string::npos &&
            m.path.substr(m.path.rfind('/') + 1).rfind(k_agent[0], 0) == 0)
            return m.path;
    return "";
}

agent_call call_agent(pid_t pid, const std::string &agent, bool load, const char *entry,
                      const std::string &socket_name)
{
    agent_call out;
    auto fail = [&](int code, const std::string &msg) {
        out.error_code = code;
        out.error = msg;
        return out;
    };
    std::string id = std::to_string(pid);
    int merr = 0;
    auto maps = read_proc_maps(pid, &merr);
    if (maps.empty()) return fail(-ESRCH, "process " + id + " exited");
    std::string err;
    auto libc = find_remote_object(pid, maps, k_libc, 0, &err);
    if (!libc)
        return fail(-ENOENT, err.empty() ? "process " + id +
                                               " does not use glibc's libc.so.6 (statically "
                                               "linked, or another C library): dprobe cannot "
                                               "load its runtime into it"
                                         : err);
    uint64_t f_mmap = libc->func("mmap"), f_munmap = libc->func("munmap");
    uint64_t f_dlopen = libc->func("dlopen"), f_dlerror = libc->func("dlerror");
    if (!f_dlopen) {
        // glibc before 2.34 keeps them in libdl, if the program loaded it.
        if (auto dl = find_remote_object(pid, maps, {"libdl.so", "libdl-2."}, 0, &err)) {
            f_dlopen = dl->func("dlopen");
            f_dlerror = dl->func("dlerror");
        }
    }
    if (!f_mmap || !f_munmap || (load && (!f_dlopen || !f_dlerror)))
        return fail(-ENOENT, "process " + id +
                                 ": its C library has no dlopen (glibc older than "
                                 "2.34 without libdl loaded?): dprobe cannot load "
                                 "its runtime into it");

    // Hold the signals that would end this command: a thread left with its registers
    // pointing into a call would crash the program.
    sigset_t hold, old;
    sigemptyset(&hold);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGPIPE})
        sigaddset(&hold, s);
    sigprocmask(SIG_BLOCK, &hold, &old);
    struct unblock {
        sigset_t *old;
        ~unblock() { sigprocmask(SIG_SETMASK, old, nullptr); }
    } restore_mask{&old};

    thread_borrow t(pid);
    if (int e = t.borrow()) return fail(e, t.message());
    out.borrowed = "thread " + std::to_string(t.tid()) + " (" + t.parked() + ")";
    uint64_t ret = 0;
    int e = t.call(f_mmap,
                   {0, k_call_stack, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, ~0ull, 0},
                   0, &ret);
    if (e) return fail(e, t.message());
    if (ret >= ~4095ull)
        return fail(-ENOMEM, "process " + id + ": mmap of a stack for the call failed: " +
                                 std::strerror(static_cast<int>(-static_cast<int64_t>(ret))));
    const uint64_t mem = ret, top = mem + k_call_stack;
    auto unmap = [&] {
        uint64_t r2 = 0;
        t.call(f_munmap, {mem, k_call_stack}, 0, &r2);
    };
    // Strings at the bottom of the area, the stack grows down from its top.
    std::string path_arg = agent + '\0', name_arg = socket_name + '\0';
    if ((e = t.write_memory(mem, path_arg.data(), path_arg.size())) ||
        (e = t.write_memory(mem + 4096, name_arg.data(), name_arg.size()))) {
        unmap();
        return fail(e, "process " + id + ": cannot write its memory: " + std::strerror(-e));
    }
    if (load) {
        if ((e = t.call(f_dlopen, {mem, RTLD_NOW}, top, &ret))) return fail(e, t.message());
        if (ret == 0) {
            std::string why = "unknown error";
            uint64_t s = 0;
            if (t.call(f_dlerror, {}, top, &s) == 0 && s) {
                char buf[1024] = {};
                for (size_t i = 0; i + 1 < sizeof buf; i++)
                    if (t.read_memory(s + i, buf + i, 1) || !buf[i]) break;
                why = buf;
            }
            unmap();
            return fail(-ENOENT, "cannot load the dprobe runtime into process " + id + ": " + why);
        }
    }
    maps = read_proc_maps(pid);
    auto ag = find_remote_object(pid, maps, k_agent, 0, &err);
    uint64_t f_entry = ag ? ag->func(entry) : 0;
    if (!f_entry) {
        unmap();
        return fail(-ENOENT, ag ? "the dprobe agent in process " + id + " has no " + entry +
                                      " (another version?)"
                                : "process " + id + " has no dprobe runtime loaded");
    }
    if ((e = t.call(f_entry, {mem + 4096}, top, &ret))) return fail(e, t.message());
    out.result = static_cast<int>(as_int(ret));
    unmap();
    if ((e = t.give_back()))
        return fail(e, "process " + id + ": cannot restore thread " + std::to_string(t.tid()) +
                           ": " + std::strerror(-e));
    return out;
}

} // namespace dprobe::tools
