// kthread: a helper thread on a stack dprobe maps and unmaps itself (core/kthread.h says why).
#include "core/kthread.h"

#include "core/ring_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <new>

namespace dprobe
{

namespace
{

// The program's default stack size for new threads (its RLIMIT_STACK at start, or what it
// set with pthread_setattr_default_np), rounded to pages; 8 MB when it cannot be read.
size_t default_stack_size() noexcept
{
    size_t size = 8u << 20;
    pthread_attr_t a;
    if (pthread_getattr_default_np(&a) == 0) {
        size_t s = 0;
        if (pthread_attr_getstacksize(&a, &s) == 0 && s >= size_t(PTHREAD_STACK_MIN)) size = s;
        pthread_attr_destroy(&a);
    }
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    return (size + page - 1) & ~(page - 1);
}

// What the new thread runs first: it records nothing from its first instruction on. (The
// ring buffer mutes threads named "dprobe-*" too, but only once named: the libc functions
// a thread calls before, pthread_setname_np's own strlen among them, were recorded as a
// thread of the program that came and went.)
struct start_args {
    void *(*fn)(void *);
    void *arg;
};

void *start_muted(void *p)
{
    ring_buffer_thread_mute(true);
    const start_args a = *static_cast<start_args *>(p);
    delete static_cast<start_args *>(p);
    return a.fn(a.arg);
}

} // namespace

bool kthread::is_current() const noexcept
{
    return joinable() && pthread_equal(thread_, pthread_self());
}

void kthread::unmap() noexcept
{
    if (stack_) munmap(stack_, len_);
    stack_ = nullptr;
    len_ = 0;
}

int kthread::join() noexcept
{
    if (!joinable()) return EINVAL;
    if (is_current()) return EDEADLK;
    int r = pthread_join(thread_, nullptr);
    if (r == 0) unmap();
    return r;
}

int kthread::timed_join(const timespec &abstime) noexcept
{
    if (!joinable()) return EINVAL;
    if (is_current()) return EDEADLK;
    int r = pthread_timedjoin_np(thread_, nullptr, &abstime);
    if (r == 0) unmap();
    return r;
}

void kthread::forget() noexcept
{
    if (!joinable()) return;
    if (owner_ != getpid()) {
        unmap();
    } else {
        pthread_detach(thread_);
        stack_ = nullptr; // the running thread's: left mapped
        len_ = 0;
    }
}

int kthread::start(void *(*fn)(void *), void *arg) noexcept
{
    if (joinable()) return EBUSY;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    const size_t size = default_stack_size();
    const size_t len = size + page;
    void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return errno == ENOMEM ? EAGAIN : errno;
    // The guard page: an overflow faults instead of running into the mapping below.
    if (mprotect(m, page, PROT_NONE) != 0) {
        int e = errno;
        munmap(m, len);
        return e;
    }
    auto *args = new (std::nothrow) start_args{fn, arg};
    if (!args) {
        munmap(m, len);
        return EAGAIN;
    }
    pthread_attr_t a;
    int r = pthread_attr_init(&a);
    if (r == 0) {
        r = pthread_attr_setstack(&a, static_cast<char *>(m) + page, size);
        if (r == 0) r = pthread_create(&thread_, &a, start_muted, args);
        pthread_attr_destroy(&a);
    }
    if (r != 0) {
        delete args;
        munmap(m, len);
        return r;
    }
    stack_ = m;
    len_ = len;
    owner_ = getpid();
    return 0;
}

} // namespace dprobe
