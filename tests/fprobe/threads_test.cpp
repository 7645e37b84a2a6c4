// Registration and unregistration while other threads call the targets in a hot loop.
#include "targets.h"

#include <dprobe/fprobe.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace
{

using hot_fn = unsigned long (*)(unsigned long);
volatile hot_fn hot = hot_target;

// Tags: bit 0 = "the caller saw registration complete before calling".
std::atomic<bool> registered{false}, unregistered{false}, stop{false};
std::atomic<unsigned long> tagged_entries{0}, tagged_exits{0}, after_unregister{0};
std::atomic<unsigned long> wrong_return{0};

int hot_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *fregs, void *data)
{
    if (unregistered.load(std::memory_order_acquire)) after_unregister.fetch_add(1);
    unsigned long tag = ftrace_regs_get_argument(fregs, 0);
    *static_cast<unsigned long *>(data) = tag;
    if (tag & 1) tagged_entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

void hot_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *fregs, void *data)
{
    if (unregistered.load(std::memory_order_acquire)) after_unregister.fetch_add(1);
    unsigned long tag = *static_cast<unsigned long *>(data);
    if (ftrace_regs_get_return_value(fregs) != tag * 2 + 1) wrong_return.fetch_add(1);
    if (tag & 1) tagged_exits.fetch_add(1, std::memory_order_relaxed);
}

TEST(fprobe_threads, register_and_unregister_under_load)
{
    constexpr int rounds = 20;
    for (int round = 0; round < rounds; ++round) {
        registered = unregistered = stop = false;
        tagged_entries = tagged_exits = after_unregister = wrong_return = 0;
        std::atomic<unsigned long> tagged_calls{0}, bad_results{0};
        std::vector<std::thread> threads;
        for (int i = 0; i < 2; ++i) {
            threads.emplace_back([&, i] {
                unsigned long n = 0;
                while (!stop.load(std::memory_order_relaxed)) {
                    bool reg = registered.load(std::memory_order_acquire) &&
                               !unregistered.load(std::memory_order_acquire);
                    unsigned long tag = ((n++ * 2 + static_cast<unsigned long>(i)) << 1) | reg;
                    if (hot(tag) != tag * 2 + 1) bad_results.fetch_add(1);
                    // Count only calls that certainly started after registration returned
                    // and certainly ended before unregistration began.
                    if (reg && !unregistered.load(std::memory_order_acquire))
                        tagged_calls.fetch_add(1, std::memory_order_relaxed);
                }
            });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        struct fprobe fp = {};
        fp.entry_handler = hot_entry;
        fp.exit_handler = hot_exit;
        fp.entry_data_size = sizeof(unsigned long);
        ASSERT_EQ(0, register_fprobe(&fp, "hot_target", nullptr));
        registered.store(true, std::memory_order_release);
        // Let both threads make real progress under the probe (the machine may be busy).
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (tagged_calls.load() < 2000 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        // Stop counting tagged calls, let in-flight ones finish, then compare.
        unsigned long calls_before;
        {
            stop = true;
            for (auto &t : threads)
                t.join();
            calls_before = tagged_calls.load();
            threads.clear();
        }
        EXPECT_EQ(calls_before, tagged_entries.load()) << "round " << round;
        EXPECT_EQ(calls_before, tagged_exits.load()) << "round " << round;
        EXPECT_GT(calls_before, 0UL);

        // Now unregister while the threads run again: no handler may run afterwards.
        stop = false;
        for (int i = 0; i < 2; ++i)
            threads.emplace_back([&] {
                unsigned long n = 0;
                while (!stop.load(std::memory_order_relaxed))
                    if (hot(n * 2) != n * 4 + 1 || !++n) bad_results.fetch_add(1);
            });
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ASSERT_EQ(0, unregister_fprobe(&fp));
        unregistered.store(true, std::memory_order_release);
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        stop = true;
        for (auto &t : threads)
            t.join();
        EXPECT_EQ(0UL, after_unregister.load()) << "round " << round;
        EXPECT_EQ(0UL, wrong_return.load());
        EXPECT_EQ(0UL, bad_results.load());
    }
}

} // namespace
