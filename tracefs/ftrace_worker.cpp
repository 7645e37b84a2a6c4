// The ftrace worker thread (see ftrace_worker.h).
#include "tracefs/ftrace_worker.h"

#include "core/compiler.h"
#include "core/kthread.h"
#include "core/ring_buffer.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_iter.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <new>
#include <thread>

namespace dprobe
{
namespace
{

std::atomic<unsigned> pending_dumps[TRACE_ARRAY_MAX];
std::atomic<int> dump_cpu[TRACE_ARRAY_MAX];
std::atomic<int> wake_fd{-1};
std::mutex start_lock;
// Under start_lock. Never destroyed (a joinable kthread's destructor would end the
// process at exit, where the worker still runs).
kthread *worker_thread = nullptr;

void write_all(int fd, const std::string &s)
{
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::write(fd, s.data() + off, s.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        off += size_t(n);
    }
}

void dump(trace_array &tr, int cpu)
{
    // As the kernel's ftrace_dump(): the records are consumed as they are printed.
    std::string out = "Dumping ftrace buffer:\n---------------------------------\n";
    // One CPU's records cannot be consumed alone from per-thread buffers: they are printed
    // and left in place.
    trace_iter it(tr, tr.buffer, cpu < 0, cpu);
    while (it.read(out, 4096)) {
    }
    out += "---------------------------------\n";
    write_all(2, out);
}

void work_loop(int rfd)
{
    struct closer {
        int fd;
        ~closer() { ::close(fd); }
    } own{rfd};
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    char buf[64];
    for (;;) {
        ssize_t n = ::read(rfd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        for (unsigned id = 0; id < TRACE_ARRAY_MAX; id++) {
            unsigned w = pending_dumps[id].exchange(0, std::memory_order_acq_rel);
            if (!w) continue;
            std::lock_guard<std::mutex> g(trace_types_lock());
            trace_array *tr = trace_array_by_id(id);
            if (!tr) continue;
            // (Refused, and so dropped, while the buffer is exported to a consumer.)
            if ((w & FTRACE_WORK_SNAPSHOT) && tr->max_buffer)
                (void)ring_buffer_swap(tr->buffer, tr->max_buffer);
            if (w & (FTRACE_WORK_DUMP | FTRACE_WORK_CPUDUMP))
                dump(*tr, (w & FTRACE_WORK_DUMP) ? -1 : dump_cpu[id].load());
        }
    }
}

} // namespace

int ftrace_worker_start()
{
    std::lock_guard<std::mutex> g(start_lock);
    if (wake_fd.load() >= 0) return 0;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    auto *t = new (std::nothrow) kthread;
    const int rfd = fds[0];
    if (!t || !kthread_run(*t, [rfd] { work_loop(rfd); })) {
        delete t;
        close(fds[0]);
        close(fds[1]);
        return -EAGAIN;
    }
    worker_thread = t;
    wake_fd.store(fds[1]);
    return 0;
}

void ftrace_worker_stop()
{
    std::lock_guard<std::mutex> g(start_lock);
    const int fd = wake_fd.exchange(-1);
    if (fd < 0) return;
    ::close(fd); // the thread reads end-of-file and returns
    if (worker_thread && worker_thread->joinable()) worker_thread->join();
    delete worker_thread;
    worker_thread = nullptr;
}

DPROBE_NOPROBE void ftrace_worker_request(trace_array &tr, ftrace_work work) noexcept
{
    if (work == FTRACE_WORK_CPUDUMP)
        dump_cpu[tr.id].store(sched_getcpu(), std::memory_order_relaxed);
    pending_dumps[tr.id].fetch_or(work, std::memory_order_acq_rel);
    int fd = wake_fd.load(std::memory_order_acquire);
    if (fd >= 0) {
        char c = 1;
        ssize_t r = ::write(fd, &c, 1); // a full pipe already holds a wakeup
        (void)r;
    }
}

} // namespace dprobe
