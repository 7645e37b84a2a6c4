// dprobe's own helper threads inside a traced program (the kernel's kthread_run() and
// kthread_stop()): the tracefs servers, the trace streamer, the ftrace worker, attach's
// threads.
//
// A session leaves nothing behind in the program, and a thread's stack is the largest thing
// a thread leaves: the C library keeps the stacks of joined threads in a cache of its own
// (up to 40 MB of them, reused by the program's later threads), so a process attached to
// once kept four 8 MB stacks it never had. A kthread runs on a stack dprobe maps itself
// (pthread_attr_setstack: the C library neither caches nor frees it) and unmaps when the
// thread is joined. Its size is the program's default for new threads
// (pthread_getattr_default_np), with a guard page below it as the C library would add.
#ifndef DPROBE_CORE_KTHREAD_H
#define DPROBE_CORE_KTHREAD_H

#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <ctime>
#include <exception>
#include <memory>
#include <new>

namespace dprobe
{

class kthread
{
  public:
    kthread() noexcept = default;
    kthread(const kthread &) = delete;
    kthread &operator=(const kthread &) = delete;
    kthread(kthread &&o) noexcept { take(o); }
    // As std::thread: replacing or destroying a thread still to be joined is a bug.
    kthread &operator=(kthread &&o) noexcept
    {
        if (joinable()) std::terminate();
        take(o);
        return *this;
    }
    ~kthread()
    {
        if (joinable()) std::terminate();
    }

    bool joinable() const noexcept { return stack_ != nullptr; }
    // Whether the calling thread is this one.
    bool is_current() const noexcept;
    // Waits for the thread, then unmaps its stack. 0 or an errno.
    int join() noexcept;
    // join() that gives up at ABSTIME (CLOCK_REALTIME): ETIMEDOUT, the thread still joinable.
    int timed_join(const timespec &abstime) noexcept;
    // Gives the thread up without waiting for it: a thread that stops itself (it cannot
    // unmap the stack it runs on), one that does not end in time, or one a forked child only
    // has a copy of the handle of. In such a child the stack is unmapped (no thread runs on
    // it there); otherwise the thread is detached and its stack stays mapped, a reservation
    // the program is left with.
    void forget() noexcept;

    // Starts FN(ARG) on a new thread, on a fresh stack. 0 or an errno (EAGAIN when the
    // kernel has no thread or no memory for now).
    int start(void *(*fn)(void *), void *arg) noexcept;

  private:
    void take(kthread &o) noexcept
    {
        thread_ = o.thread_;
        stack_ = o.stack_;
        len_ = o.len_;
        owner_ = o.owner_;
        o.stack_ = nullptr;
        o.len_ = 0;
    }
    void unmap() noexcept;

    pthread_t thread_{};
    void *stack_ = nullptr; // the mapping: guard page, then the stack
    size_t len_ = 0;
    int owner_ = 0; // the process that started the thread (a forked child is another)
};

// Starts FN on a new kthread into OUT. Thread creation fails with EAGAIN now and then on a
// loaded machine (clone, or the mmap of the stack), so that failure is retried with a
// growing pause, about two seconds in all. Answers false, with OUT untouched, when the
// thread still cannot be made: the caller carries on without it. Never throws, so a traced
// program is never terminated because dprobe could not get a thread.
template <class F> bool kthread_run(kthread &out, F fn) noexcept
{
    auto *box = new (std::nothrow) F(std::move(fn));
    if (!box) return false;
    auto entry = [](void *p) -> void * {
        std::unique_ptr<F> f(static_cast<F *>(p));
        (*f)();
        return nullptr;
    };
    for (int attempt = 0;; ++attempt) {
        kthread t;
        int r = t.start(entry, box);
        if (r == 0) {
            out = std::move(t);
            return true;
        }
        if (r != EAGAIN || attempt == 16) {
            delete box;
            return false;
        }
        struct timespec ts {
            0, (1L << std::min(attempt, 7)) * 1000 * 1000
        }; // 1 .. 128 ms
        nanosleep(&ts, nullptr);
    }
}

} // namespace dprobe

#endif
