// The recorder of `dprobe record` (see recorder.h).
#include "tools/dprobe/record/recorder.h"

#include "tools/dprobe/attach/session_watch.h"

#include "core/ring_buffer_layout.h"
#include "tools/trace_file.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dprobe::cli
{

namespace
{

int pidfd_open(pid_t pid)
{
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

uint64_t now_ms()
{
    struct timespec ts {
    };
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

// The wait status of a process that is not ours while it is a zombie (its parent has not
// reaped it yet): field 52 of /proc/PID/stat. -1 when it is already gone.
int zombie_status(pid_t pid)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    FILE *f = std::fopen(path, "re");
    if (!f) return -1;
    char buf[2048];
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char *p = std::strrchr(buf, ')');
    if (!p) return -1;
    // Fields from 3 (state) on are space-separated numbers; exit_code is field 52.
    int field = 2;
    long long v = -1;
    for (const char *q = p + 1; *q;) {
        while (*q == ' ')
            q++;
        if (!*q) break;
        field++;
        if (field == 3 && *q != 'Z') return -1; // not a zombie: no exit code yet
        if (field == 52) {
            v = std::strtoll(q, nullptr, 10);
            break;
        }
        while (*q && *q != ' ')
            q++;
    }
    return static_cast<int>(v);
}

std::string end_from_wait_status(int status)
{
    std::string kv;
    if (WIFSIGNALED(status)) {
        tracefile::append_kv(kv, "reason", "signal");
        tracefile::append_kv(kv, "signal", std::to_string(WTERMSIG(status)));
    } else {
        tracefile::append_kv(kv, "reason", "exit");
        tracefile::append_kv(kv, "status", std::to_string(WEXITSTATUS(status)));
    }
    return kv;
}

} // namespace

struct recorder::arena {
    pid_t pid = 0;
    uint64_t session = 0;
    int pidfd = -1;
    bool dead = false;
    std::unique_ptr<tracefile::arena_drain> drain;
    std::vector<std::pair<int32_t, std::string>> comms; // for the loss report
};

recorder::recorder(int out_fd, int status_fd, int wake_fd)
    : out_fd_(out_fd), status_fd_(status_fd), wake_fd_(wake_fd), start_ms_(now_ms())
{
}

recorder::~recorder()
{
    for (auto *v : {&arenas_, &done_})
        for (auto &a : *v)
            if (a->pidfd >= 0) ::close(a->pidfd);
    if (child_pidfd_ >= 0) ::close(child_pidfd_);
}

void recorder::set_child(pid_t pid)
{
    child_ = pid;
    child_pidfd_ = pidfd_open(pid);
}

void recorder::take_messages()
{
    for (;;) {
        char buf[8192];
        iovec iov{buf, sizeof buf - 1};
        alignas(cmsghdr) char cbuf[CMSG_SPACE(4 * sizeof(int))];
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        ssize_t n = recvmsg(status_fd_, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            status_eof_ = true; // every process that could write has closed it
        if (n <= 0) return;
        std::vector<int> fds;
        for (cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
                    int fd;
                    std::memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof fd);
                    fds.push_back(fd);
                }
        std::string msg(buf, static_cast<size_t>(n));
        if (msg.rfind("hello ", 0) == 0 && fds.size() == 1) {
            int pid = 0;
            unsigned long long session = 0;
            if (std::sscanf(msg.c_str() + 6, "%d %llu", &pid, &session) == 2) {
                on_hello(pid, session, fds[0]);
                continue;
            }
        }
        for (int fd : fds)
            ::close(fd);
        if (msg.rfind("error ", 0) == 0) {
            if (error.empty()) error = msg.substr(6);
        } else if (msg.rfind("mount ", 0) == 0) {
            mounts.push_back(msg.substr(6));
            tools::runtime_sweeper_note(sweeper_fd, 'm', mounts.back());
        } else if (msg.rfind("socket ", 0) == 0) {
            tools::runtime_sweeper_note(sweeper_fd, 's', msg.substr(7));
        } else if (msg.rfind("warn ", 0) == 0) {
            warnings.push_back(msg.substr(5));
        } else if (msg.rfind("int3 ", 0) == 0) {
            int3.push_back(msg.substr(5));
        } else if (msg.rfind("leftout ", 0) == 0) {
            left_out.push_back(msg.substr(8));
        } else if (msg.rfind("graph ", 0) == 0) {
            default_graphs.push_back(msg.substr(6));
        } else if (msg.rfind("ready ", 0) == 0) {
            int pid = 0;
            unsigned e = 0, f = 0;
            if (std::sscanf(msg.c_str() + 6, "%d %u %u", &pid, &e, &f) == 3 &&
                (pid == child_ || !ready)) {
                ready = true;
                events = e;
                functions = f;
            }
        }
    }
}

void recorder::on_hello(pid_t pid, uint64_t session, int fd)
{
    // A new image of a process already recorded: the old one exec'd (all its threads are
    // gone by now), its session ends.
    for (size_t i = 0; i < arenas_.size();) {
        arena &old = *arenas_[i];
        if (old.pid == pid && !old.dead) {
            std::string kv;
            tracefile::append_kv(kv, "reason", "exec");
            finish(old, kv);
            done_.push_back(std::move(arenas_[i]));
            arenas_.erase(arenas_.begin() + static_cast<long>(i));
            continue;
        }
        i++;
    }
    auto a = std::make_unique<arena>();
    a->pid = pid;
    a->session = session;
    a->drain = std::make_unique<tracefile::arena_drain>(out_fd_, session);
    std::string err = a->drain->open(fd);
    if (!err.empty()) {
        warnings.push_back("process " + std::to_string(pid) + ": " + err);
        return;
    }
    a->pidfd = pidfd_open(pid);
    if (a->pidfd < 0 && errno == ESRCH)
        a->dead = true; // gone already: what it wrote is all there is
    else if (blocking)
        a->drain->set_blocking(true); // a full buffer waits for this drain: nothing lost
    arenas_.push_back(std::move(a));
}

void recorder::drain_all(bool *busy)
{
    *busy = false;
    for (auto &a : arenas_) {
        bool failed = false;
        uint64_t moved = a->drain->drain(false, &failed);
        if (failed && error.empty())
            error = std::string("cannot write the trace file: ") + std::strerror(errno);
        if (moved >= 64 * 1024 || a->drain->backlog() >= 64 * 1024) *busy = true;
    }
}

std::string recorder::end_of(arena &a)
{
    const rb::arena_header &h = a.drain->header();
    std::string kv;
    switch (h.state.load(std::memory_order_acquire)) {
    case rb::ARENA_EXITED:
        tracefile::append_kv(kv, "reason", "exit");
        tracefile::append_kv(kv, "status", std::to_string(h.status.load()));
        return kv;
    case rb::ARENA_SIGNALED:
        tracefile::append_kv(kv, "reason", "signal");
        tracefile::append_kv(kv, "signal", std::to_string(h.status.load()));
        return kv;
    case rb::ARENA_EXEC:
        tracefile::append_kv(kv, "reason", "exec");
        return kv;
    default:
        break;
    }
    if (a.pid == child_ && child_reaped_) return end_from_wait_status(child_status_);
    int st = zombie_status(a.pid);
    if (st >= 0) return end_from_wait_status(st);
    tracefile::append_kv(kv, "reason", "gone"); // ended, how is not known
    return kv;
}

void recorder::finish(arena &a, const std::string &reason_kv)
{
    bool failed = false;
    a.drain->set_blocking(false);
    a.drain->drain(true, &failed);
    if (!a.drain->finish(reason_kv) || failed)
        if (error.empty())
            error = std::string("cannot write the trace file: ") + std::strerror(errno);
    a.dead = true;
}

void recorder::finish_dead()
{
    for (size_t i = 0; i < arenas_.size();) {
        arena &a = *arenas_[i];
        if (a.dead) {
            finish(a, end_of(a));
            done_.push_back(std::move(arenas_[i]));
            arenas_.erase(arenas_.begin() + static_cast<long>(i));
            continue;
        }
        i++;
    }
}

void recorder::run(const std::function<void()> &progress,
                   const std::function<bool()> &stop_requested)
{
    uint64_t last_progress = 0;
    bool busy = false;
    for (;;) {
        std::vector<pollfd> pfd;
        pfd.push_back({status_eof_ ? -1 : status_fd_, POLLIN, 0});
        pfd.push_back({wake_fd_, POLLIN, 0});
        pfd.push_back({child_reaped_ ? -1 : child_pidfd_, POLLIN, 0});
        std::vector<arena *> polled;
        for (auto &a : arenas_) {
            pfd.push_back({a->dead ? -1 : a->pidfd, POLLIN, 0});
            polled.push_back(a.get());
        }
        // Asleep until a buffer is half full, a process ends or a message comes; now and
        // then anyway, for the partial pages and the progress line.
        for (auto &a : arenas_)
            const_cast<rb::arena_header &>(a->drain->header())
                .consumer_waiting.store(busy ? 0 : 1, std::memory_order_relaxed);
        int r = poll(pfd.data(), pfd.size(), busy ? 1 : 100);
        for (auto &a : arenas_)
            const_cast<rb::arena_header &>(a->drain->header())
                .consumer_waiting.store(0, std::memory_order_relaxed);
        if (r < 0 && errno != EINTR) break;
        for (size_t i = 0; i < polled.size(); i++)
            if (pfd[3 + i].revents & (POLLIN | POLLHUP)) polled[i]->dead = true;
        if (pfd[1].revents & POLLIN) {
            uint64_t v;
            (void)!::read(wake_fd_, &v, sizeof v);
        }
        take_messages();
        // The child first: its wait status is its session's end.
        if (!child_reaped_ && child_ > 0 &&
            (child_pidfd_ < 0 || (pfd[2].revents & (POLLIN | POLLHUP)))) {
            int status = 0;
            pid_t w = waitpid(child_, &status, WNOHANG);
            if (w == child_ || (w < 0 && errno == ECHILD)) {
                child_status_ = status;
                child_reaped_ = true;
            }
        }
        // Without pidfd_open (before Linux 5.3): look.
        for (auto &a : arenas_)
            if (a->pidfd < 0 && !a->dead && kill(a->pid, 0) != 0 && errno == ESRCH) a->dead = true;
        drain_all(&busy);
        finish_dead();
        const uint64_t now = now_ms();
        if (now - last_progress >= 200) {
            last_progress = now;
            if (progress) progress();
        }
        take_messages();
        // Done when the program is, and every process that could still announce itself:
        // a child forked or spawned just before its parent left says hello a moment later.
        if (child_reaped_ && arenas_.empty() && status_eof_) break;
        if (stop_requested && stop_requested() && child_reaped_) {
            // Processes that outlive the program (daemons) when the user stops recording.
            for (auto &a : arenas_) {
                std::string kv;
                tracefile::append_kv(kv, "reason", "recording stopped");
                finish(*a, kv);
                done_.push_back(std::move(a));
            }
            arenas_.clear();
            break;
        }
    }
}

recorder::totals recorder::counts() const
{
    totals t;
    for (auto *v : {&arenas_, &done_})
        for (const auto &a : *v) {
            t.events += a->drain->events();
            t.lost += a->drain->lost();
            t.bytes += a->drain->bytes();
            size_t threads = 0;
            for (const auto &th : a->drain->threads())
                threads += th.written > 0;
            t.threads += threads;
            t.processes += threads > 0;
        }
    return t;
}

std::vector<std::string> recorder::loss_report() const
{
    std::vector<std::string> out;
    for (auto *v : {&done_, &arenas_})
        for (const auto &a : *v) {
            for (const auto &th : a->drain->threads()) {
                const uint64_t lost = th.dropped + th.lost;
                if (!lost) continue;
                char when[96] = "";
                if (th.first_loss_ms) {
                    const double f = (th.first_loss_ms - std::min(th.first_loss_ms, start_ms_)) /
                                     1e3,
                                 l = (th.last_loss_ms - std::min(th.last_loss_ms, start_ms_)) / 1e3;
                    if (l - f < 0.05)
                        std::snprintf(when, sizeof when, " %.2f s after the start", f);
                    else
                        std::snprintf(when, sizeof when,
                                      " between %.2f s and %.2f s after the start", f, l);
                }
                out.push_back(std::to_string(lost) + " event" + (lost == 1 ? "" : "s") +
                              " lost by thread " + std::to_string(th.tid) + " of process " +
                              std::to_string(a->pid) + when +
                              (th.dropped ? " (its buffer was full" : " (overwritten") +
                              "; `dprobe report` marks where)");
            }
            const uint64_t orphans =
                a->drain->header().orphan_dropped.load(std::memory_order_relaxed);
            if (orphans)
                out.push_back(std::to_string(orphans) + " event" + (orphans == 1 ? "" : "s") +
                              " of process " + std::to_string(a->pid) +
                              " lost with no buffer to hold them");
        }
    return out;
}

} // namespace dprobe::cli
