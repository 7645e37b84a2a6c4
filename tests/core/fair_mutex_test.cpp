// fair_mutex: the lock goes to waiters in arrival order, so that a thread that unlocks and
// locks again in a loop cannot keep a waiter out (a dlopen waits for these locks while it
// holds the loader's lock).
#include "core/fair_mutex.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <gtest/gtest.h>

using dprobe::fair_mutex;

namespace
{

// Waits (at most 10 s) until N threads wait for M.
bool wait_for_waiters(const fair_mutex &m, uint32_t n)
{
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (m.waiters() < n) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::yield();
    }
    return true;
}

TEST(fair_mutex, try_lock_takes_only_a_free_lock)
{
    fair_mutex m;
    ASSERT_TRUE(m.try_lock());
    EXPECT_FALSE(m.try_lock());
    EXPECT_EQ(0u, m.waiters());
    m.unlock();
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

// The holder unlocks and at once asks again: the thread already waiting gets it first.
// (std::mutex lets the unlocking thread take it back before the woken waiter runs.)
TEST(fair_mutex, unlock_hands_the_lock_to_the_waiter)
{
    for (int round = 0; round < 50; ++round) {
        fair_mutex m;
        std::string order;
        m.lock();
        std::thread waiter([&] {
            std::lock_guard<fair_mutex> g(m);
            order += 'W';
        });
        EXPECT_TRUE(wait_for_waiters(m, 1));
        m.unlock();
        m.lock();
        order += 'H';
        EXPECT_FALSE(m.try_lock()); // held, by this thread
        m.unlock();
        waiter.join();
        ASSERT_EQ("WH", order) << "round " << round;
    }
}

// Waiters are served in the order they came: each one queues behind the last, then the
// holder lets them all go.
TEST(fair_mutex, waiters_are_served_in_arrival_order)
{
    fair_mutex m;
    std::vector<int> order;
    std::vector<std::thread> threads;
    m.lock();
    for (int i = 0; i < 6; ++i) {
        threads.emplace_back([&, i] {
            std::lock_guard<fair_mutex> g(m);
            order.push_back(i);
        });
        // The next thread starts once this one holds its ticket.
        if (!wait_for_waiters(m, i + 1)) {
            ADD_FAILURE() << "thread " << i << " never waited";
            break;
        }
    }
    m.unlock();
    for (auto &t : threads)
        t.join();
    EXPECT_EQ((std::vector<int>{0, 1, 2, 3, 4, 5}), order);
}

} // namespace
