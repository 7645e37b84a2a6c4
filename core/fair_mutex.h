// A mutex that serves its waiters in arrival order, for the locks a dlopen takes inside the
// loader's own lock (the site table, the notifiers' registration locks).
//
// std::mutex lets the thread that just unlocked take the lock again before a woken waiter
// runs. A thread that registers and unregisters probes in a loop then holds such a lock
// almost all the time, and a dlopen on another thread - which waits for it while holding
// the loader's lock, and so blocks every other dlopen, dlsym and dlclose of the process -
// was measured waiting 51 to 116 seconds (fprobe_follow_stress, AMD EPYC, 2 vCPUs). The
// kernel's mutex avoids the same starvation by handing the lock to a waiter that has
// waited too long (MUTEX_FLAG_HANDOFF); here every unlock hands it to the oldest waiter.
// A ticket lock, waiting on the futex behind std::atomic::wait. Never taken on the hot path.
#ifndef DPROBE_CORE_FAIR_MUTEX_H
#define DPROBE_CORE_FAIR_MUTEX_H

#include <atomic>
#include <cstdint>

namespace dprobe
{

class fair_mutex
{
  public:
    fair_mutex() = default;
    fair_mutex(const fair_mutex &) = delete;
    fair_mutex &operator=(const fair_mutex &) = delete;

    void lock() noexcept
    {
        const uint32_t mine = next_.fetch_add(1, std::memory_order_relaxed);
        for (uint32_t now; (now = serving_.load(std::memory_order_acquire)) != mine;)
            serving_.wait(now, std::memory_order_relaxed);
    }

    // Takes the lock only when nobody holds it or waits for it.
    bool try_lock() noexcept
    {
        uint32_t now = serving_.load(std::memory_order_acquire);
        return next_.compare_exchange_strong(now, now + 1, std::memory_order_acquire,
                                             std::memory_order_relaxed);
    }

    // How many threads wait for the lock (while it is held; the kernel's mutex_is_locked()
    // is its cousin). A snapshot, for tests and diagnostics.
    uint32_t waiters() const noexcept
    {
        const uint32_t queued =
            next_.load(std::memory_order_relaxed) - serving_.load(std::memory_order_relaxed);
        return queued > 1 ? queued - 1 : 0;
    }

    void unlock() noexcept
    {
        serving_.fetch_add(1, std::memory_order_release);
        // Every waiter wakes and compares its ticket (libstdc++ skips the system call when
        // nobody waits).
        serving_.notify_all();
    }

  private:
    std::atomic<uint32_t> next_{0};    // the next ticket given
    std::atomic<uint32_t> serving_{0}; // the ticket that holds the lock
};

} // namespace dprobe

#endif
