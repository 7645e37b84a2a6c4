// Trace buffers (core/ring_buffer.h): several independent sets of per-thread buffers, as the
// kernel's instances have, and the snapshot swap.
#include "core/ring_buffer.h"
#include "core/trace_clock.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

using namespace dprobe;

namespace
{

int32_t gettid_()
{
    return static_cast<int32_t>(syscall(SYS_gettid));
}

bool put(trace_buffer *tb, uint64_t v)
{
    void *p = ring_buffer_reserve(tb, sizeof v);
    if (!p) return false;
    std::memcpy(p, &v, sizeof v);
    ring_buffer_commit(tb, p);
    return true;
}

std::vector<uint64_t> values(trace_buffer *tb, ring_buffer_reader::mode m)
{
    std::vector<uint64_t> out;
    ring_buffer_reader rd(m, tb);
    rb_record r;
    while (rd.next(r)) {
        uint64_t v;
        std::memcpy(&v, r.payload, sizeof v);
        out.push_back(v);
    }
    return out;
}

class trace_buffer_test : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        trace_clock_init();
        ring_buffer_reset();
    }
    void TearDown() override
    {
        for (trace_buffer *tb : allocated)
            ring_buffer_free(tb);
        ring_buffer_reset();
    }
    trace_buffer *alloc()
    {
        trace_buffer *tb = ring_buffer_alloc();
        if (tb) allocated.push_back(tb);
        return tb;
    }
    std::vector<trace_buffer *> allocated;
};

} // namespace

TEST_F(trace_buffer_test, buffers_are_independent)
{
    trace_buffer *a = alloc();
    ASSERT_NE(a, nullptr);
    EXPECT_NE(a, ring_buffer_global());
    EXPECT_NE(ring_buffer_id(a), 0u);
    for (uint64_t i = 0; i < 10; i++) {
        ASSERT_TRUE(put(a, 100 + i));
        if (i % 2) {
            ASSERT_TRUE(put(ring_buffer_global(), i));
        }
    }
    EXPECT_EQ(values(a, ring_buffer_reader::PEEK).size(), 10u);
    EXPECT_EQ(values(ring_buffer_global(), ring_buffer_reader::PEEK),
              (std::vector<uint64_t>{1, 3, 5, 7, 9}));
    EXPECT_EQ(ring_buffer_stats(a).written, 10u);
    EXPECT_EQ(ring_buffer_stats(ring_buffer_global()).written, 5u);

    // tracing_on, reset and the size are each buffer's own.
    ring_buffer_set_tracing_on(a, false);
    EXPECT_FALSE(put(a, 1));
    EXPECT_TRUE(put(ring_buffer_global(), 11));
    ring_buffer_set_tracing_on(a, true);
    ring_buffer_reset(ring_buffer_global());
    EXPECT_TRUE(values(ring_buffer_global(), ring_buffer_reader::PEEK).empty());
    EXPECT_EQ(values(a, ring_buffer_reader::CONSUME).size(), 10u);
    EXPECT_EQ(ring_buffer_set_size_kb(a, 64), 0);
    EXPECT_EQ(ring_buffer_size_kb(a), 64u);
    EXPECT_EQ(ring_buffer_size_kb(), k_rb_default_size_kb);
}

TEST_F(trace_buffer_test, per_thread_buffers_in_each)
{
    trace_buffer *a = alloc();
    ASSERT_NE(a, nullptr);
    std::vector<int32_t> tids(3);
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++)
        ts.emplace_back([&, t] {
            tids[t] = gettid_();
            for (uint64_t i = 0; i < 1000; i++) {
                put(a, i);
                put(ring_buffer_global(), i);
            }
        });
    for (auto &t : ts)
        t.join();
    auto st = ring_buffer_thread_stats(a);
    ASSERT_EQ(st.size(), 3u);
    for (const rb_stats &s : st) {
        EXPECT_EQ(s.written, 1000u);
        EXPECT_TRUE(s.exited);
    }
    EXPECT_EQ(ring_buffer_stats(ring_buffer_global()).written, 3000u);
    EXPECT_EQ(values(a, ring_buffer_reader::CONSUME).size(), 3000u);
    // Drained exited buffers are recycled, for any trace buffer.
    size_t before = ring_buffer_nr_buffers();
    std::thread([&] { put(a, 7); }).join();
    EXPECT_EQ(ring_buffer_nr_buffers(), before);
}

TEST_F(trace_buffer_test, swap_exchanges_contents_and_writers_follow)
{
    trace_buffer *main = alloc(), *snap = alloc();
    ASSERT_TRUE(main && snap);
    for (uint64_t i = 0; i < 5; i++)
        ASSERT_TRUE(put(main, i));
    ring_buffer_swap(main, snap);
    EXPECT_TRUE(values(main, ring_buffer_reader::PEEK).empty());
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK), (std::vector<uint64_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(ring_buffer_stats(snap).written, 5u);
    EXPECT_EQ(ring_buffer_stats(main).written, 0u);
    // The same thread keeps writing to MAIN: its records land there, not in the snapshot.
    ASSERT_TRUE(put(main, 50));
    ASSERT_TRUE(put(main, 51));
    EXPECT_EQ(values(main, ring_buffer_reader::PEEK), (std::vector<uint64_t>{50, 51}));
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK).size(), 5u);
    // Swapping back finds the thread's first buffer again.
    ring_buffer_swap(main, snap);
    ASSERT_TRUE(put(main, 6));
    EXPECT_EQ(values(main, ring_buffer_reader::PEEK), (std::vector<uint64_t>{0, 1, 2, 3, 4, 6}));
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK), (std::vector<uint64_t>{50, 51}));
}

TEST_F(trace_buffer_test, swap_while_threads_write_loses_and_doubles_nothing)
{
    trace_buffer *main = alloc(), *snap = alloc();
    ASSERT_TRUE(main && snap);
    ring_buffer_set_size_kb(main, 4096);
    ring_buffer_set_size_kb(snap, 4096);
    std::atomic<bool> stop{false};
    std::atomic<int> started{0};
    std::atomic<uint64_t> written{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 2; t++)
        ts.emplace_back([&, t] {
            started.fetch_add(1);
            // Until the swaps are done, and at most 40000 records a thread: no buffer can
            // overflow. (Counted in swaps, not in time: a loaded machine may run the writers
            // and the swapper one after the other for a while.)
            for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); i++) {
                if (i >= 40000) {
                    std::this_thread::yield();
                    continue;
                }
                if (put(main, (uint64_t(t) << 48) | i))
                    written.fetch_add(1, std::memory_order_relaxed);
            }
        });
    while (started.load() < 2)
        std::this_thread::yield();
    // Swaps while the writers write: a record must land in exactly one of the two buffers.
    for (int swaps = 0; swaps < 200; swaps++) {
        ring_buffer_swap(main, snap);
        std::this_thread::yield();
    }
    stop.store(true);
    for (auto &t : ts)
        t.join();
    EXPECT_GT(written.load(), 0u);
    auto a = values(main, ring_buffer_reader::CONSUME);
    auto b = values(snap, ring_buffer_reader::CONSUME);
    std::vector<uint64_t> all(a);
    all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()); // nothing twice
    EXPECT_EQ(all.size(), written.load());                            // nothing lost
    rb_stats sa = ring_buffer_stats(main), sb = ring_buffer_stats(snap);
    EXPECT_EQ(sa.written + sb.written, written.load());
    EXPECT_EQ(sa.overrun + sb.overrun, 0u);
    EXPECT_EQ(sa.dropped + sb.dropped, 0u);
}

TEST_F(trace_buffer_test, free_and_realloc_start_empty)
{
    trace_buffer *a = ring_buffer_alloc();
    ASSERT_NE(a, nullptr);
    unsigned id = ring_buffer_id(a);
    ASSERT_TRUE(put(a, 1));
    ring_buffer_free(a);
    trace_buffer *b = alloc();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(ring_buffer_id(b), id);                         // the id is reused...
    EXPECT_TRUE(values(b, ring_buffer_reader::PEEK).empty()); // ...but nothing of A shows
    EXPECT_EQ(ring_buffer_stats(b).written, 0u);
    // This thread's slot of the old buffer is stale: it gets a buffer of B.
    ASSERT_TRUE(put(b, 2));
    EXPECT_EQ(values(b, ring_buffer_reader::PEEK), (std::vector<uint64_t>{2}));
}

TEST_F(trace_buffer_test, all_ids_can_be_used)
{
    std::vector<trace_buffer *> got;
    while (trace_buffer *tb = ring_buffer_alloc())
        got.push_back(tb);
    EXPECT_EQ(got.size(), size_t{k_rb_max_trace_buffers - 1});
    for (trace_buffer *tb : got)
        ring_buffer_free(tb);
    trace_buffer *again = alloc();
    EXPECT_NE(again, nullptr);
}

TEST_F(trace_buffer_test, forked_child_starts_empty_in_every_buffer)
{
    trace_buffer *a = alloc();
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(put(a, 1));
    ASSERT_TRUE(put(ring_buffer_global(), 2));
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        bool ok = values(a, ring_buffer_reader::PEEK).empty() &&
                  values(ring_buffer_global(), ring_buffer_reader::PEEK).empty() && put(a, 3) &&
                  values(a, ring_buffer_reader::PEEK) == std::vector<uint64_t>{3};
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_EQ(values(a, ring_buffer_reader::PEEK), (std::vector<uint64_t>{1}));
}

// The global trace buffer (the top level's, the one probes write through the direct
// ring_buffer_reserve) swapped with a snapshot buffer: its writers follow, on the direct path
// too, and a swap back gives each thread its first buffer again.
TEST_F(trace_buffer_test, global_swap_moves_the_direct_writers)
{
    trace_buffer *global = ring_buffer_global(), *snap = alloc();
    ASSERT_NE(snap, nullptr);
    ASSERT_TRUE(put(global, 1));
    ASSERT_TRUE(put(global, 2));
    ASSERT_EQ(ring_buffer_swap(global, snap), 0);
    EXPECT_TRUE(values(global, ring_buffer_reader::PEEK).empty());
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK), (std::vector<uint64_t>{1, 2}));
    EXPECT_EQ(ring_buffer_stats(snap).written, 2u);
    EXPECT_EQ(ring_buffer_stats().written, 0u);
    uint64_t v = 3;
    void *p = ring_buffer_reserve(sizeof v);
    ASSERT_NE(p, nullptr);
    std::memcpy(p, &v, sizeof v);
    ring_buffer_commit(p);
    EXPECT_EQ(values(global, ring_buffer_reader::PEEK), (std::vector<uint64_t>{3}));
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK), (std::vector<uint64_t>{1, 2}));
    ASSERT_EQ(ring_buffer_swap(global, snap), 0);
    ASSERT_TRUE(put(global, 4));
    EXPECT_EQ(values(global, ring_buffer_reader::PEEK), (std::vector<uint64_t>{1, 2, 4}));
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK), (std::vector<uint64_t>{3}));
    // Another thread that wrote before the swap writes to the global buffer after it.
    std::atomic<int> step{0};
    std::thread t([&] {
        put(global, 10);
        step.store(1);
        while (step.load() != 2)
            std::this_thread::yield();
        put(global, 11);
    });
    while (step.load() != 1)
        std::this_thread::yield();
    ASSERT_EQ(ring_buffer_swap(global, snap), 0);
    step.store(2);
    t.join();
    EXPECT_EQ(values(global, ring_buffer_reader::PEEK), (std::vector<uint64_t>{3, 11}));
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK), (std::vector<uint64_t>{1, 2, 4, 10}));
}

TEST_F(trace_buffer_test, global_swap_while_threads_write_loses_and_doubles_nothing)
{
    trace_buffer *global = ring_buffer_global(), *snap = alloc();
    ASSERT_NE(snap, nullptr);
    ring_buffer_set_size_kb(global, 4096);
    ring_buffer_set_size_kb(snap, 4096);
    std::atomic<int> running{2}, swaps_seen{0};
    std::atomic<uint64_t> written{0};
    std::vector<std::thread> ts;
    // 40000 writes each, and on (up to 120000) until a dozen swaps have happened: on a loaded
    // machine the swapping thread may not run before the writers are done.
    for (int t = 0; t < 2; t++)
        ts.emplace_back([&, t] {
            for (uint64_t i = 0; i < 40000 || (swaps_seen.load() < 12 && i < 120000); i++) {
                const uint64_t v = (uint64_t(t) << 48) | i;
                void *p = ring_buffer_reserve(sizeof v); // the direct path
                if (!p) continue;
                std::memcpy(p, &v, sizeof v);
                ring_buffer_commit(p);
                written.fetch_add(1, std::memory_order_relaxed);
            }
            running.fetch_sub(1);
        });
    int swaps = 0;
    for (; running.load() > 0; swaps++) {
        ASSERT_EQ(ring_buffer_swap(global, snap), 0);
        swaps_seen.store(swaps + 1);
    }
    for (auto &t : ts)
        t.join();
    ring_buffer_set_size_kb(global, k_rb_default_size_kb);
    EXPECT_GT(swaps, 10);
    auto a = values(global, ring_buffer_reader::CONSUME);
    auto b = values(snap, ring_buffer_reader::CONSUME);
    std::vector<uint64_t> all(a);
    all.insert(all.end(), b.begin(), b.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()); // nothing twice
    EXPECT_EQ(all.size(), written.load());                            // nothing lost
    rb_stats sa = ring_buffer_stats(global), sb = ring_buffer_stats(snap);
    EXPECT_EQ(sa.written + sb.written, written.load());
    EXPECT_EQ(sa.dropped + sb.dropped, 0u);
}

namespace
{
trace_buffer *g_nested_tb;
void nested_writer(int)
{
    put(g_nested_tb, 2);
}
} // namespace

// A signal handler writing while the outer write, reserved before a swap, is not committed
// yet: its event goes after the outer one in the same buffer, and both are published.
TEST_F(trace_buffer_test, write_nested_across_a_swap_stays_with_the_outer_one)
{
    trace_buffer *global = ring_buffer_global(), *snap = alloc();
    ASSERT_NE(snap, nullptr);
    ASSERT_TRUE(put(global, 0)); // this thread has its buffer
    ring_buffer_reset();
    g_nested_tb = global;
    struct sigaction sa = {}, old = {};
    sa.sa_handler = nested_writer;
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    uint64_t v = 1;
    void *p = ring_buffer_reserve(sizeof v);
    ASSERT_NE(p, nullptr);
    std::memcpy(p, &v, sizeof v);
    ASSERT_EQ(ring_buffer_swap(global, snap), 0);
    raise(SIGUSR1);
    ring_buffer_commit(p);
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_EQ(values(snap, ring_buffer_reader::PEEK), (std::vector<uint64_t>{1, 2}));
    EXPECT_TRUE(values(global, ring_buffer_reader::PEEK).empty());
    ASSERT_TRUE(put(global, 3));
    EXPECT_EQ(values(global, ring_buffer_reader::PEEK), (std::vector<uint64_t>{3}));
}

// While a consumer drains the global buffer (dprobe record), it cannot be swapped: its
// buffers are the consumer's.
TEST_F(trace_buffer_test, global_swap_is_refused_while_exported)
{
    trace_buffer *snap = alloc();
    ASSERT_NE(snap, nullptr);
    ASSERT_GE(ring_buffer_export(-1), 0);
    EXPECT_EQ(ring_buffer_swap(ring_buffer_global(), snap), -EBUSY);
    EXPECT_FALSE(ring_buffer_try_swap(ring_buffer_global(), snap));
    trace_buffer *other = alloc();
    ASSERT_NE(other, nullptr);
    EXPECT_EQ(ring_buffer_swap(other, snap), 0); // others can
    ring_buffer_unexport();
    EXPECT_EQ(ring_buffer_swap(ring_buffer_global(), snap), 0);
}

TEST_F(trace_buffer_test, muted_thread_writes_nothing_anywhere)
{
    trace_buffer *a = alloc();
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(put(a, 1));
    ring_buffer_thread_mute(true);
    EXPECT_FALSE(put(a, 2));
    EXPECT_FALSE(put(ring_buffer_global(), 2));
    ring_buffer_thread_mute(false);
    ASSERT_TRUE(put(a, 3));
    EXPECT_EQ(values(a, ring_buffer_reader::PEEK), (std::vector<uint64_t>{1, 3}));
}
