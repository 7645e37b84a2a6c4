// Starting dprobe's own helper threads inside a traced program (the kernel's kthread_run()).
#ifndef DPROBE_CORE_KTHREAD_H
#define DPROBE_CORE_KTHREAD_H

#include <algorithm>
#include <system_error>
#include <thread>
#include <time.h>

namespace dprobe
{

// Starts FN on a new thread into OUT. pthread_create fails with EAGAIN now and then on a
// loaded machine (clone, or the mmap of the stack), so that failure is retried with a
// growing pause, about two seconds in all. Answers false, with OUT untouched, when the
// thread still cannot be made: the caller carries on without it. Never throws, so a traced
// program is never terminated because dprobe could not get a thread.
template <class F> bool kthread_run(std::thread &out, F fn) noexcept
{
    for (int attempt = 0;; ++attempt) {
        try {
            out = std::thread(fn);
            return true;
        } catch (const std::system_error &e) {
            if (e.code() != std::errc::resource_unavailable_try_again || attempt == 16)
                return false;
        } catch (...) {
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
