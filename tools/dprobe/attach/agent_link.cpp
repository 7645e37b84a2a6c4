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
    close();
}

void agent_link::close()
{
    if (conn_ >= 0) ::close(conn_);
    if (listen_ >= 0) ::close(listen_);
    conn_ = listen_ = -1;
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

namespace
{

// The C library functions a call into the process needs, at their addresses there.
struct remote_libc {
    uint64_t mmap = 0, munmap = 0, dlopen = 0, dlerror = 0, dlclose = 0;
};

// Finds them in PID's libc (or libdl, before glibc 2.34). "" or what is missing.
std::string find_remote_libc(pid_t pid, const std::vector<proc_map> &maps, bool load,
                             remote_libc &f, int *code)
{
    const std::string id = std::to_string(pid);
    *code = -ENOENT;
    std::string err;
    auto libc = find_remote_object(pid, maps, k_libc, 0, &err);
    if (!libc)
        return err.empty() ? "process " + id +
                                 " does not use glibc's libc.so.6 (statically linked, or "
                                 "another C library): dprobe cannot load its runtime into it"
                           : err;
    f.mmap = libc->func("mmap");
    f.munmap = libc->func("munmap");
    f.dlopen = libc->func("dlopen");
    f.dlerror = libc->func("dlerror");
    f.dlclose = libc->func("dlclose");
    if (!f.dlopen) {
        if (auto dl = find_remote_object(pid, maps, {"libdl.so", "libdl-2."}, 0, &err)) {
            f.dlopen = dl->func("dlopen");
            f.dlerror = dl->func("dlerror");
            f.dlclose = dl->func("dlclose");
        }
    }
    if (!f.mmap || !f.munmap || (load && (!f.dlopen || !f.dlerror || !f.dlclose)))
        return "process " + id +
               ": its C library has no dlopen (glibc older than 2.34 without libdl loaded?): "
               "dprobe cannot load its runtime into it";
    return "";
}

// Holds the signals that would end this command while it holds a thread of the process: a
// thread left with its registers pointing into a call would crash the program.
class hold_signals
{
  public:
    hold_signals()
    {
        sigset_t hold;
        sigemptyset(&hold);
        for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGPIPE})
            sigaddset(&hold, s);
        sigprocmask(SIG_BLOCK, &hold, &old_);
    }
    ~hold_signals() { sigprocmask(SIG_SETMASK, &old_, nullptr); }
    hold_signals(const hold_signals &) = delete;
    hold_signals &operator=(const hold_signals &) = delete;

  private:
    sigset_t old_;
};

// Memory in the process for the calls: strings at its bottom, their stack growing down from
// its top. Unmapped again by the destructor, while the thread is still held.
class call_area
{
  public:
    call_area(thread_borrow &t, const remote_libc &f) : t_(t), f_(f) {}
    ~call_area()
    {
        uint64_t r = 0;
        if (mem_) t_.call(f_.munmap, {mem_, k_call_stack}, 0, &r);
    }
    call_area(const call_area &) = delete;
    call_area &operator=(const call_area &) = delete;
    // 0, or -errno with *ERR.
    int map(pid_t pid, std::string *err)
    {
        uint64_t ret = 0;
        if (int e = t_.call(f_.mmap,
                            {0, k_call_stack, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, ~0ull, 0},
                            0, &ret)) {
            *err = t_.message();
            return e;
        }
        if (ret >= ~4095ull) {
            *err = "process " + std::to_string(pid) + ": mmap of a stack for the call failed: " +
                   std::strerror(static_cast<int>(-static_cast<int64_t>(ret)));
            return -ENOMEM;
        }
        mem_ = ret;
        return 0;
    }
    uint64_t at(uint64_t off) const { return mem_ + off; }
    uint64_t top() const { return mem_ + k_call_stack; }
    // A C string of the process at AT (at most 1023 bytes).
    std::string read_string(uint64_t at)
    {
        char buf[1024] = {};
        for (size_t i = 0; i + 1 < sizeof buf; i++)
            if (t_.read_memory(at + i, buf + i, 1) || !buf[i]) break;
        return buf;
    }

  private:
    thread_borrow &t_;
    const remote_libc &f_;
    uint64_t mem_ = 0;
};

// A reference to AGENT as the loader of the process gives it: dlopen(RTLD_NOLOAD) on the
// borrowed thread, its path at PATH_AT. The loader answers only once no other thread is in
// the middle of loading or unloading it (its lock is held across the constructors), so the
// entry point called next never runs in an object whose constructors have not all run: a
// killed attach leaves its thread finishing the dlopen on its own, which the next command
// finds mapped. *H: 0 when the object is not loaded (any more). 0, or -errno with *ERR.
int loader_reference(thread_borrow &t, const remote_libc &f, const call_area &area,
                     uint64_t path_at, uint64_t *h, std::string *err)
{
    if (int e = t.call(f.dlopen, {path_at, RTLD_NOW | RTLD_NOLOAD}, area.top(), h)) {
        *err = t.message();
        return e;
    }
    return 0;
}

} // namespace

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
    auto maps = read_proc_maps(pid);
    if (maps.empty()) return fail(-ESRCH, "process " + id + " exited");
    remote_libc f;
    int code = 0;
    // dlopen and dlclose even when not loading: the call goes through the loader's reference.
    if (std::string why = find_remote_libc(pid, maps, true, f, &code); !why.empty())
        return fail(code, why);

    hold_signals held;
    thread_borrow t(pid);
    if (int e = t.borrow()) return fail(e, t.message());
    out.borrowed = "thread " + std::to_string(t.tid()) + " (" + t.parked() + ")";
    uint64_t ret = 0;
    int e = 0;
    {
        call_area area(t, f);
        std::string err;
        if ((e = area.map(pid, &err))) return fail(e, err);
        std::string path_arg = agent + '\0', name_arg = socket_name + '\0';
        if ((e = t.write_memory(area.at(0), path_arg.data(), path_arg.size())) ||
            (e = t.write_memory(area.at(4096), name_arg.data(), name_arg.size())))
            return fail(e, "process " + id + ": cannot write its memory: " + std::strerror(-e));
        uint64_t loaded = 0, ref = 0;
        if (!load) {
            if ((e = loader_reference(t, f, area, area.at(0), &ref, &err))) return fail(e, err);
            if (!ref) return fail(-ENOENT, "process " + id + " has no dprobe runtime loaded");
        }
        if (load) {
            if ((e = t.call(f.dlopen, {area.at(0), RTLD_NOW}, area.top(), &ret)))
                return fail(e, t.message());
            loaded = ret;
            if (ret == 0) {
                std::string why = "unknown error";
                uint64_t s = 0;
                if (t.call(f.dlerror, {}, area.top(), &s) == 0 && s) why = area.read_string(s);
                return fail(-ENOENT,
                            "cannot load the dprobe runtime into process " + id + ": " + why);
            }
        }
        maps = read_proc_maps(pid);
        std::string aerr;
        auto ag = find_remote_object(pid, maps, k_agent, 0, &aerr);
        uint64_t f_entry = ag ? ag->func(entry) : 0;
        if (!f_entry)
            return fail(-ENOENT, ag ? "the dprobe agent in process " + id + " has no " + entry +
                                          " (another version?)"
                                    : "process " + id + " has no dprobe runtime loaded");
        if ((e = t.call(f_entry, {area.at(4096)}, area.top(), &ret))) return fail(e, t.message());
        out.result = static_cast<int>(as_int(ret));
        uint64_t r = 0;
        if (ref && (e = t.call(f.dlclose, {ref}, area.top(), &r))) return fail(e, t.message());
        if (load && out.result < 0 && loaded) {
            // Refused (a session already runs, say): the reference this dlopen took is given
            // back, so that the detach's dlclose unloads the object.
            uint64_t r = 0;
            t.call(f.dlclose, {loaded}, area.top(), &r);
        }
    }
    if ((e = t.give_back()))
        return fail(e, "process " + id + ": cannot restore thread " + std::to_string(t.tid()) +
                           ": " + std::strerror(-e));
    return out;
}

namespace
{

// One try of unload_agent. RESULT -EAGAIN: a thread of the process is in dprobe's code now.
agent_call unload_once(pid_t pid, const std::string &agent)
{
    agent_call out;
    auto fail = [&](int code, const std::string &msg) {
        out.error_code = code;
        out.error = msg;
        return out;
    };
    const std::string id = std::to_string(pid);
    auto maps = read_proc_maps(pid);
    if (maps.empty()) return fail(-ESRCH, "process " + id + " exited");
    remote_libc f;
    int code = 0;
    if (std::string why = find_remote_libc(pid, maps, true, f, &code); !why.empty())
        return fail(code, why);
    std::string err;
    hold_signals held;
    thread_borrow t(pid);
    if (int e = t.borrow()) return fail(e, t.message());
    out.borrowed = "thread " + std::to_string(t.tid()) + " (" + t.parked() + ")";
    int e = 0;
    {
        call_area area(t, f);
        if ((e = area.map(pid, &err))) return fail(e, err);
        const std::string path_arg = agent + '\0';
        if ((e = t.write_memory(area.at(0), path_arg.data(), path_arg.size())))
            return fail(e, "process " + id + ": cannot write its memory: " + std::strerror(-e));
        uint64_t ref = 0;
        if ((e = loader_reference(t, f, area, area.at(0), &ref, &err))) return fail(e, err);
        // !REF: unloaded meanwhile (by a command killed in its dlclose, which its thread
        // finished); what is left is for agent_leftovers to say.
        if (ref) {
            // Where the object is now that the loader is done with it.
            auto ag = find_remote_object(pid, read_proc_maps(pid), k_agent, 0, &err);
            const uint64_t f_unload = ag ? ag->func(attach::unload_symbol) : 0;
            const uint64_t why_at = area.at(4096), why_len = 4096;
            uint64_t ret = 0, r = 0;
            if (!f_unload) {
                t.call(f.dlclose, {ref}, area.top(), &r);
                return fail(-ENOENT, "the dprobe agent in process " + id + " has no " +
                                         attach::unload_symbol + " (another version?)");
            }
            if ((e = t.call(f_unload, {t.saved_ip(), t.saved_sp(), why_at, why_len}, area.top(),
                            &ret)))
                return fail(e, t.message());
            out.result = static_cast<int>(as_int(ret));
            // The reference taken above goes back first; those of the attach commands below.
            if ((e = t.call(f.dlclose, {ref}, area.top(), &r))) return fail(e, t.message());
            if (out.result != 0) out.error = area.read_string(why_at);
        }
        // -EIO: released, but something could not be given back: still unloaded.
        if (ref && (out.result == 0 || out.result == -EIO)) {
            // Every reference the attach commands took (one dlopen each): closed until the
            // loader no longer knows the object. Each round takes one more reference
            // (RTLD_NOLOAD) and gives back two.
            for (int round = 0; round < 64; round++) {
                uint64_t h = 0, r = 0;
                if ((e = t.call(f.dlopen, {area.at(0), RTLD_NOW | RTLD_NOLOAD}, area.top(), &h)))
                    return fail(e, t.message());
                if (!h) break;
                for (int i = 0; i < 2 && r == 0; i++)
                    if ((e = t.call(f.dlclose, {h}, area.top(), &r))) return fail(e, t.message());
                if (r) break;
            }
        }
    }
    if ((e = t.give_back()))
        return fail(e, "process " + id + ": cannot restore thread " + std::to_string(t.tid()) +
                           ": " + std::strerror(-e));
    return out;
}

} // namespace

agent_call unload_agent(pid_t pid, const std::string &agent, int timeout_ms)
{
    struct timespec start {
    }, now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        agent_call c = unload_once(pid, agent);
        clock_gettime(CLOCK_MONOTONIC, &now);
        const long spent =
            (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (c.error_code || c.result != -EAGAIN || spent >= timeout_ms) return c;
        struct timespec ts {
            0, 20 * 1000 * 1000
        };
        nanosleep(&ts, nullptr);
    }
}

std::vector<std::string> agent_leftovers(pid_t pid, const std::string &agent)
{
    std::vector<std::string> left;
    // The allocator of the agent's namespace, beside it (arch/x86_64/private_ns_alloc.S).
    const std::string nsalloc =
        agent.empty() ? "" : agent.substr(0, agent.rfind('/') + 1) + "libdprobe-nsalloc.so";
    for (const proc_map &m : read_proc_maps(pid))
        if ((!agent.empty() && (m.path == agent || m.path == nsalloc)) ||
            m.path.rfind("/memfd:dprobe", 0) == 0) {
            char range[64];
            std::snprintf(range, sizeof range, "%#llx-%#llx ",
                          static_cast<unsigned long long>(m.start),
                          static_cast<unsigned long long>(m.end));
            left.push_back(range + m.path);
        }
    return left;
}

} // namespace dprobe::tools
