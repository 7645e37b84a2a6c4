// The agent in a process it was loaded into while running (`dprobe attach`), and its
// detach. The protocol is tools/attach_protocol.h.
//
// dprobe_agent_attach and dprobe_agent_detach run on a thread of the program that the
// command borrowed with ptrace: they only start an agent thread and return, so the thread
// goes back to what it was doing before any real work starts. That work (site setup with
// every thread stopped, events, streaming) waits for the command's settings message, which
// the command sends once it has given the borrowed thread back.
#include "tools/agent/agent.h"

#include "core/kthread.h"
#include "core/ring_buffer.h"
#include "tools/attach_protocol.h"

#include <cerrno>
#include <climits>
#include <ctime>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

namespace dprobe::agent
{

namespace
{

std::mutex g_attach_lock; // one attach or detach at a time
bool g_pending = false;   // an attach thread started, its session not up yet
int g_session_fd = -1;    // the attach command's connection, while it lasts
// Every thread start_thread made and nobody joined yet (g_attach_lock): the unload joins
// them, so that no thread of the agent is left when its code goes away. Never destroyed: a
// thread still running at the program's exit is no reason to terminate it.
std::vector<kthread> &g_threads = *new std::vector<kthread>;
constexpr int k_settings_wait_ms = 10000;

int connect_to(const std::string &name)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size()); // abstract: leading NUL
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    if (connect(fd, reinterpret_cast<sockaddr *>(&addr), len) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

void send_msg(int fd, const std::string &msg)
{
    (void)send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
}

// The settings and the trace file's descriptor. False on timeout, hang-up or a bad message.
bool recv_settings(int fd, std::string &text, int &out_fd)
{
    struct pollfd p {
        fd, POLLIN, 0
    };
    if (poll(&p, 1, k_settings_wait_ms) <= 0) return false;
    std::string buf(attach::max_message, '\0');
    iovec iov{buf.data(), buf.size()};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof cbuf;
    ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (n <= 0) return false;
    out_fd = -1;
    for (cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            std::memcpy(&out_fd, CMSG_DATA(c), sizeof out_fd);
    text.assign(buf.data(), static_cast<size_t>(n));
    return out_fd >= 0;
}

std::string counts()
{
    return std::to_string(state().pid) + " " + streamer_counts();
}

// Ends the attach session; g_attach_lock held. REPLY: the connection of a `dprobe detach`.
void detach_locked(int reply)
{
    agent_state &st = state();
    std::vector<std::string> failed = agent_stop("detach");
    for (const std::string &f : failed) {
        if (st.status_fd >= 0) send_msg(st.status_fd, "left " + f);
        if (reply >= 0 && reply != st.status_fd) send_msg(reply, "left " + f);
    }
    std::string done = "detached " + counts() + " " + st.output;
    if (st.status_fd >= 0) send_msg(st.status_fd, done);
    if (reply >= 0 && reply != st.status_fd) send_msg(reply, done);
    st.status_fd = -1;
    st.attached = false;
    // Wakes the attach thread of a foreground `dprobe attach`, which then closes it.
    if (g_session_fd >= 0) shutdown(g_session_fd, SHUT_RDWR);
}

void attach_main(std::string name)
{
    agent_state &st = state();
    ring_buffer_thread_mute(true); // the agent's own thread
    int fd = connect_to(name);
    std::string text;
    int out_fd = -1;
    if (fd >= 0) send_msg(fd, "hello " + std::to_string(getpid()) + " attach");
    if (fd < 0 || !recv_settings(fd, text, out_fd)) {
        // The command went away (or timed out): no session.
        std::lock_guard<std::mutex> g(g_attach_lock);
        g_pending = false;
        if (fd >= 0) ::close(fd);
        return;
    }
    attach::settings cfg = attach::decode(text);
    {
        std::lock_guard<std::mutex> g(g_attach_lock);
        g_pending = false;
        st.attached = true;
        char path[PATH_MAX];
        ssize_t n =
            readlink(("/proc/self/fd/" + std::to_string(out_fd)).c_str(), path, sizeof path - 1);
        st.output = n > 0 ? std::string(path, static_cast<size_t>(n)) : "";
        st.out_fd = out_fd;
        st.status_fd = fd;
        st.pid = getpid();
        std::string err = agent_start(cfg, "attach", true);
        if (!err.empty()) {
            send_msg(fd, "error " + err);
            ::close(out_fd);
            st.out_fd = -1;
            st.status_fd = -1;
            st.attached = false;
            ::close(fd);
            return;
        }
        g_session_fd = fd;
    }
    // The session runs on its own; this thread waits for the command's "detach" or its end.
    char buf[64];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        std::lock_guard<std::mutex> g(g_attach_lock);
        bool ours = g_session_fd == fd && st.active && st.attached;
        if (n > 0 && ours && std::string(buf, static_cast<size_t>(n)) == "detach") {
            detach_locked(-1);
        } else if (n > 0) {
            continue;
        } else if (ours && cfg.detach_on_hangup) {
            detach_locked(-1);
        } else if (ours) {
            st.status_fd = -1; // the command left the session running (--background)
        }
        if (g_session_fd == fd) g_session_fd = -1;
        ::close(fd);
        return;
    }
}

void detach_main(std::string name)
{
    ring_buffer_thread_mute(true);
    int fd = connect_to(name);
    if (fd < 0) return;
    send_msg(fd, "hello " + std::to_string(getpid()) + " detach");
    // The command says "detach" once it gave its borrowed thread back: until then that
    // thread could not be stopped, which removing jump sites may need.
    char buf[16];
    struct pollfd p {
        fd, POLLIN, 0
    };
    ssize_t n = poll(&p, 1, k_settings_wait_ms) == 1 ? recv(fd, buf, sizeof buf, 0) : -1;
    if (n != 6 || std::memcmp(buf, "detach", 6) != 0) {
        ::close(fd);
        return;
    }
    {
        std::lock_guard<std::mutex> g(g_attach_lock);
        agent_state &st = state();
        if (st.active && st.attached)
            detach_locked(fd);
        else
            send_msg(fd, "error no dprobe attach session in this process");
    }
    ::close(fd);
}

// Starts FN(NAME) on a thread named "dprobe-attach" (joined by join_agent_threads), with the
// asynchronous signals blocked (they are the program's) and the synchronous ones open (probe traps
// and faults must reach their handlers on any thread). Threads it creates inherit both.
int start_thread(void (*fn)(std::string), const char *name)
{
    size_t len = strnlen(name, 108);
    if (len == 0 || len > 100) return -ENAMETOOLONG;
    struct start {
        void (*fn)(std::string);
        std::string name;
    };
    auto *arg = new (std::nothrow) start{fn, std::string(name, len)};
    if (!arg) return -ENOMEM;
    sigset_t all, old;
    sigfillset(&all);
    for (int s : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS})
        sigdelset(&all, s);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    kthread t;
    int r = t.start(
        [](void *p) -> void * {
            auto *a = static_cast<start *>(p);
            pthread_setname_np(pthread_self(), "dprobe-attach");
            a->fn(std::move(a->name));
            delete a;
            return nullptr;
        },
        arg);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (r != 0) {
        delete arg;
        return -r;
    }
    g_threads.push_back(std::move(t));
    return 0;
}

} // namespace

void attach_fork_child() noexcept
{
    new (&g_attach_lock) std::mutex();
    for (kthread &t : g_threads)
        t.forget();
    g_threads.clear();
    g_pending = false;
}

int join_agent_threads(std::string *why)
{
    std::vector<kthread> threads;
    {
        std::lock_guard<std::mutex> g(g_attach_lock);
        if (state().active || g_pending) {
            *why = "a dprobe attach session is still running in the process";
            return -EBUSY;
        }
        threads.swap(g_threads);
    }
    std::vector<kthread> left;
    for (kthread &t : threads) {
        struct timespec until {
        };
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        if (t.timed_join(until) != 0) left.push_back(std::move(t));
    }
    if (left.empty()) return 0;
    std::lock_guard<std::mutex> g(g_attach_lock);
    for (kthread &t : left)
        g_threads.push_back(std::move(t));
    *why = std::to_string(left.size()) + " thread(s) of the dprobe agent did not end";
    return -EAGAIN;
}

} // namespace dprobe::agent

using namespace dprobe::agent;

extern "C" {

// Both run on a borrowed thread while the command holds it with ptrace: they must not wait
// for an agent thread (which may be stopping every thread, this one included, and would
// fail to): a session being set up or torn down answers -EBUSY at once.
__attribute__((visibility("default"))) int dprobe_agent_attach(const char *name)
{
    std::unique_lock<std::mutex> g(g_attach_lock, std::try_to_lock);
    if (!g.owns_lock()) return -EBUSY;
    agent_state &st = state();
    if (st.active && !st.attached) return -EEXIST;
    if (st.active || g_pending) return -EBUSY;
    if (unloading()) return -ESTALE; // its memory is gone: only dlclose may follow
    int r = start_thread(attach_main, name);
    g_pending = r == 0;
    return r;
}

__attribute__((visibility("default"))) int dprobe_agent_detach(const char *name)
{
    std::unique_lock<std::mutex> g(g_attach_lock, std::try_to_lock);
    if (!g.owns_lock()) return -EBUSY;
    agent_state &st = state();
    if (st.active && !st.attached) return -EEXIST;
    if (!st.active || unloading()) return -ENOENT;
    return start_thread(detach_main, name);
}

} // extern "C"
