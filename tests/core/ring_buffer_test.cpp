#include "core/ring_buffer.h"
#include "core/trace_clock.h"

#include "arch/x86_64/ext_state.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

using namespace dprobe;

namespace
{

// A 32-byte test payload: who wrote it, its sequence number, and a checksum.
struct payload {
    uint32_t magic;
    int32_t tid;
    uint64_t seq;
    uint64_t check;
    uint64_t marker;
};
static_assert(sizeof(payload) == 32);
constexpr uint32_t k_magic = 0xd0be5eedu;

int32_t gettid_()
{
    return static_cast<int32_t>(syscall(SYS_gettid));
}

bool write_one(uint64_t seq, uint64_t marker = 0)
{
    void *p = ring_buffer_reserve(sizeof(payload));
    if (!p) return false;
    payload pl{k_magic, gettid_(), seq, seq * 0x9e3779b97f4a7c15ull ^ marker, marker};
    memcpy(p, &pl, sizeof pl);
    ring_buffer_commit(p);
    return true;
}

payload as_payload(const rb_record &r)
{
    payload pl{};
    EXPECT_GE(r.len, sizeof(payload));
    memcpy(&pl, r.payload, sizeof pl);
    EXPECT_EQ(pl.magic, k_magic);
    EXPECT_EQ(pl.check, pl.seq * 0x9e3779b97f4a7c15ull ^ pl.marker);
    return pl;
}

std::vector<rb_record> drain(ring_buffer_reader::mode m, std::vector<payload> *pls = nullptr)
{
    std::vector<rb_record> out;
    ring_buffer_reader rd(m);
    rb_record r;
    while (rd.next(r)) {
        if (pls) pls->push_back(as_payload(r));
        r.payload = nullptr; // not valid past the next call
        out.push_back(r);
    }
    return out;
}

rb_stats stats_of(int32_t tid)
{
    for (const rb_stats &s : ring_buffer_thread_stats())
        if (s.tid == tid) return s;
    ADD_FAILURE() << "no buffer for tid " << tid;
    return {};
}

// Every test starts from empty buffers with the default settings.
class ring_buffer_test : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        trace_clock_init();
        ring_buffer_set_tracing_on(true);
        ring_buffer_set_overwrite(true);
        ring_buffer_set_size_kb(k_rb_default_size_kb);
        ring_buffer_reset();
    }
    void TearDown() override
    {
        ring_buffer_set_cpumask(ring_buffer_global(),
                                std::vector<uint64_t>(k_rb_max_cpus / 64, ~uint64_t{0}));
        ring_buffer_set_tracing_on(true);
        ring_buffer_set_overwrite(true);
        ring_buffer_set_size_kb(k_rb_default_size_kb);
        ring_buffer_reset();
    }
};

// Runs FN on a new thread (a new buffer of the current size) and returns that thread's tid.
template <class F> int32_t on_thread(F fn)
{
    int32_t tid = 0;
    std::thread t([&] {
        tid = gettid_();
        fn();
    });
    t.join();
    return tid;
}

} // namespace

TEST_F(ring_buffer_test, round_trip_in_order)
{
    const int n = 5000;
    uint64_t t0 = trace_clock_now();
    int32_t tid = on_thread([&] {
        for (int i = 0; i < n; i++)
            ASSERT_TRUE(write_one(i));
    });
    uint64_t t1 = trace_clock_now();
    rb_stats before = stats_of(tid);
    EXPECT_EQ(before.written, static_cast<uint64_t>(n));
    EXPECT_EQ(before.entries, static_cast<uint64_t>(n));
    EXPECT_TRUE(before.exited);
    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(recs.size(), static_cast<size_t>(n));
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(pls[i].seq, static_cast<uint64_t>(i));
        EXPECT_EQ(pls[i].tid, tid);
        EXPECT_EQ(recs[i].tid, tid);
        EXPECT_EQ(recs[i].len, sizeof(payload));
        EXPECT_LT(recs[i].cpu, ncpu);
        EXPECT_EQ(recs[i].lost_before, 0u);
        EXPECT_GE(recs[i].ts, t0);
        EXPECT_LE(recs[i].ts, t1);
        if (i) {
            EXPECT_GE(recs[i].ts, recs[i - 1].ts);
        }
    }
    // Drained and exited: the buffer was recycled; the totals keep its counts.
    rb_stats st = ring_buffer_stats();
    EXPECT_EQ(st.written, static_cast<uint64_t>(n));
    EXPECT_EQ(st.read, static_cast<uint64_t>(n));
    EXPECT_EQ(st.entries, 0u);
    EXPECT_EQ(st.overrun, 0u);
    EXPECT_EQ(st.dropped, 0u);
}

TEST_F(ring_buffer_test, payload_sizes_and_alignment)
{
    on_thread([] {
        for (size_t len :
             {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{100}, k_rb_max_payload}) {
            auto *p = static_cast<unsigned char *>(ring_buffer_reserve(len));
            ASSERT_NE(p, nullptr) << len;
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u);
            for (size_t i = 0; i < len; i++)
                p[i] = static_cast<unsigned char>(len + i);
            ring_buffer_commit(p);
        }
        EXPECT_EQ(ring_buffer_reserve(k_rb_max_payload + 1), nullptr);
    });
    ring_buffer_reader rd(ring_buffer_reader::CONSUME);
    rb_record r;
    for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{100}, k_rb_max_payload}) {
        ASSERT_TRUE(rd.next(r));
        ASSERT_EQ(r.len, len);
        auto *p = static_cast<const unsigned char *>(r.payload);
        for (size_t i = 0; i < len; i++)
            ASSERT_EQ(p[i], static_cast<unsigned char>(len + i));
    }
    EXPECT_FALSE(rd.next(r));
}

TEST_F(ring_buffer_test, oversized_is_dropped_and_counted)
{
    int32_t tid = on_thread([] { EXPECT_EQ(ring_buffer_reserve(k_rb_max_payload + 1), nullptr); });
    EXPECT_EQ(stats_of(tid).dropped, 1u);
    EXPECT_EQ(stats_of(tid).written, 0u);
}

TEST_F(ring_buffer_test, peek_does_not_consume)
{
    on_thread([] {
        for (int i = 0; i < 10; i++)
            write_one(i);
    });
    EXPECT_EQ(drain(ring_buffer_reader::PEEK).size(), 10u);
    EXPECT_EQ(drain(ring_buffer_reader::PEEK).size(), 10u);
    EXPECT_EQ(ring_buffer_stats().entries, 10u);
    EXPECT_TRUE(ring_buffer_has_data());
    EXPECT_EQ(drain(ring_buffer_reader::CONSUME).size(), 10u);
    EXPECT_EQ(drain(ring_buffer_reader::PEEK).size(), 0u);
    EXPECT_FALSE(ring_buffer_has_data());
}

TEST_F(ring_buffer_test, merge_orders_threads_by_timestamp)
{
    // Two threads alternate strictly, so the merged order is known.
    std::atomic<int> turn{0};
    const int n = 200;
    auto writer = [&](int me) {
        for (int i = 0; i < n; i++) {
            while (turn.load() % 2 != me) {
            }
            write_one(static_cast<uint64_t>(turn.load()));
            turn.fetch_add(1);
        }
    };
    std::thread a(writer, 0), b(writer, 1);
    a.join();
    b.join();
    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::PEEK, &pls);
    ASSERT_EQ(recs.size(), 2u * n);
    for (size_t i = 0; i < recs.size(); i++) {
        EXPECT_EQ(pls[i].seq, i);
        if (i) {
            EXPECT_GE(recs[i].ts, recs[i - 1].ts);
        }
    }
}

TEST_F(ring_buffer_test, overwrite_mode_drops_oldest_and_counts_overrun)
{
    ASSERT_EQ(ring_buffer_set_size_kb(16), 0); // 4 pages
    EXPECT_EQ(ring_buffer_size_kb(), 16u);
    const uint64_t n = 10000;
    int32_t tid = on_thread([&] {
        for (uint64_t i = 0; i < n; i++)
            ASSERT_TRUE(write_one(i));
    });
    rb_stats st = stats_of(tid);
    EXPECT_EQ(st.written, n);
    EXPECT_EQ(st.dropped, 0u);
    EXPECT_GT(st.overrun, 0u);
    EXPECT_GT(st.entries, 0u);
    EXPECT_LE(st.entries, 4 * k_rb_page_size / 40);
    EXPECT_EQ(st.entries + st.overrun, n);

    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(recs.size(), st.entries);
    EXPECT_EQ(recs[0].lost_before, st.overrun);
    // What is left is the newest events, consecutive up to the last one.
    for (size_t i = 0; i < pls.size(); i++)
        EXPECT_EQ(pls[i].seq, st.overrun + i);
    EXPECT_EQ(pls.back().seq, n - 1);
    rb_stats after = ring_buffer_stats();
    EXPECT_EQ(after.written, n);
    EXPECT_EQ(after.written, after.read + after.overrun);
    EXPECT_EQ(after.entries, 0u);
}

TEST_F(ring_buffer_test, discard_mode_drops_newest_and_counts_them)
{
    ASSERT_EQ(ring_buffer_set_size_kb(16), 0);
    ring_buffer_set_overwrite(false);
    const uint64_t n = 10000;
    uint64_t accepted = 0;
    std::atomic<int> phase{0};
    int32_t tid = 0;
    std::thread t([&] {
        tid = gettid_();
        for (uint64_t i = 0; i < n; i++)
            accepted += write_one(i);
        phase = 1;
        while (phase.load() != 2) {
        }
        // After the consumer emptied the buffer, writes succeed again.
        EXPECT_TRUE(write_one(n));
    });
    while (phase.load() != 1) {
    }
    rb_stats st = stats_of(tid);
    EXPECT_EQ(st.written, accepted);
    EXPECT_EQ(st.dropped, n - accepted);
    EXPECT_EQ(st.overrun, 0u);
    EXPECT_LT(accepted, n);
    std::vector<payload> pls;
    drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(pls.size(), accepted);
    for (size_t i = 0; i < pls.size(); i++)
        EXPECT_EQ(pls[i].seq, i); // the oldest were kept
    phase = 2;
    t.join();
    pls.clear();
    auto after = drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(pls.size(), 1u);
    EXPECT_EQ(pls[0].seq, n);
    // The drop left a mark where it happened: right before the first event written after it.
    EXPECT_EQ(after[0].lost_before, n - accepted);
}

TEST_F(ring_buffer_test, reset_empties_and_zeroes_counts)
{
    std::atomic<int> phase{0};
    int32_t tid = 0;
    std::thread t([&] {
        tid = gettid_();
        for (int i = 0; i < 100; i++)
            write_one(i);
        phase = 1;
        while (phase.load() != 2) {
        }
        for (int i = 100; i < 105; i++)
            write_one(i);
        phase = 3;
    });
    while (phase.load() != 1) {
    }
    EXPECT_EQ(stats_of(tid).entries, 100u);
    ring_buffer_reset();
    rb_stats st = stats_of(tid);
    EXPECT_EQ(st.entries, 0u);
    EXPECT_EQ(st.written, 0u);
    EXPECT_EQ(st.overrun, 0u);
    EXPECT_EQ(drain(ring_buffer_reader::PEEK).size(), 0u);
    phase = 2;
    while (phase.load() != 3) {
    }
    std::vector<payload> pls;
    drain(ring_buffer_reader::PEEK, &pls);
    ASSERT_EQ(pls.size(), 5u);
    EXPECT_EQ(pls[0].seq, 100u);
    EXPECT_EQ(stats_of(tid).written, 5u);
    t.join();
}

TEST_F(ring_buffer_test, tracing_off_reserves_nothing)
{
    ring_buffer_set_tracing_on(false);
    EXPECT_FALSE(ring_buffer_tracing_on());
    on_thread([] {
        for (int i = 0; i < 10; i++)
            EXPECT_EQ(ring_buffer_reserve(32), nullptr);
    });
    ring_buffer_set_tracing_on(true);
    EXPECT_EQ(drain(ring_buffer_reader::PEEK).size(), 0u);
    rb_stats st = ring_buffer_stats();
    EXPECT_EQ(st.written, 0u);
    EXPECT_EQ(st.dropped, 0u); // off is not "dropped"
}

TEST_F(ring_buffer_test, discard_gives_space_back)
{
    on_thread([] {
        void *a = ring_buffer_reserve(32);
        ASSERT_NE(a, nullptr);
        ring_buffer_discard(a);
        void *b = ring_buffer_reserve(32);
        EXPECT_EQ(b, a); // the space was taken back
        memset(b, 0, 32);
        ring_buffer_discard(b);
        write_one(7);
    });
    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(pls.size(), 1u);
    EXPECT_EQ(pls[0].seq, 7u);
    EXPECT_EQ(recs[0].lost_before, 0u);
}

TEST_F(ring_buffer_test, nested_reserve_commits_in_order)
{
    int32_t tid = on_thread([] {
        void *outer = ring_buffer_reserve(sizeof(payload));
        ASSERT_NE(outer, nullptr);
        // What a signal handler would do mid-write: a complete nested write.
        ASSERT_TRUE(write_one(2, 1));
        // Nested writes only appear once the outermost write commits.
        EXPECT_FALSE(ring_buffer_has_data());
        // Deeper nesting than k_rb_max_nesting is refused.
        void *lv[k_rb_max_nesting];
        for (unsigned i = 1; i < k_rb_max_nesting; i++)
            ASSERT_NE(lv[i] = ring_buffer_reserve(8), nullptr);
        EXPECT_EQ(ring_buffer_reserve(8), nullptr);
        for (unsigned i = k_rb_max_nesting - 1; i >= 1; i--)
            ring_buffer_discard(lv[i]);
        payload pl{k_magic, gettid_(), 1, 1 * 0x9e3779b97f4a7c15ull, 0};
        memcpy(outer, &pl, sizeof pl);
        ring_buffer_commit(outer);
    });
    rb_stats st = stats_of(tid);
    EXPECT_EQ(st.written, 2u);
    EXPECT_EQ(st.dropped, 1u);
    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(pls.size(), 2u);
    EXPECT_EQ(pls[0].seq, 1u);
    EXPECT_EQ(pls[1].seq, 2u);
    EXPECT_LE(recs[0].ts, recs[1].ts);
}

TEST_F(ring_buffer_test, discard_of_outer_after_nested_becomes_padding)
{
    on_thread([] {
        void *outer = ring_buffer_reserve(sizeof(payload));
        ASSERT_NE(outer, nullptr);
        ASSERT_TRUE(write_one(5, 1));
        ring_buffer_discard(outer); // cannot be given back: a nested record follows
    });
    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(pls.size(), 1u);
    EXPECT_EQ(pls[0].seq, 5u);
}

namespace
{
std::atomic<uint64_t> g_sig_attempts{0}, g_sig_ok{0};
void sig_writer(int)
{
    uint64_t n = g_sig_attempts.fetch_add(1);
    if (write_one(n, 0x5167)) g_sig_ok.fetch_add(1);
}
} // namespace

TEST_F(ring_buffer_test, nested_write_from_signal_handler)
{
    // Deterministic: a signal delivered between reserve and commit writes a nested record.
    struct sigaction sa = {}, old = {};
    sa.sa_handler = sig_writer;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    g_sig_attempts = 0;
    g_sig_ok = 0;
    on_thread([] {
        void *outer = ring_buffer_reserve(sizeof(payload));
        ASSERT_NE(outer, nullptr);
        raise(SIGUSR1);
        payload pl{k_magic, gettid_(), 100, 100 * 0x9e3779b97f4a7c15ull, 0};
        memcpy(outer, &pl, sizeof pl);
        ring_buffer_commit(outer);
    });
    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(g_sig_ok.load(), 1u);
    ASSERT_EQ(pls.size(), 2u);
    EXPECT_EQ(pls[0].seq, 100u);
    EXPECT_EQ(pls[1].marker, 0x5167u);
    EXPECT_LE(recs[0].ts, recs[1].ts);
    sigaction(SIGUSR1, &old, nullptr);
}

TEST_F(ring_buffer_test, signal_storm_keeps_records_intact_and_counts_exact)
{
    // Room for every event, no overrun: at most 4 N writes of the thread and about as many
    // of its signal handler (a run under ASan wrote 835,000 events in all when the thread
    // could make up to 10 N, more than 32 MB held).
    ASSERT_EQ(ring_buffer_set_size_kb(65536), 0);
    struct sigaction sa = {}, old = {};
    sa.sa_handler = sig_writer;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    g_sig_attempts = 0;
    g_sig_ok = 0;
    std::atomic<bool> done{false};
    std::atomic<pthread_t> target{};
    std::atomic<bool> ready{false};
    // At least N writes, and more until signals have written some too (on a loaded machine
    // the signalling thread may not run before N are done), up to 4 N.
    const uint64_t n = 50000;
    uint64_t main_ok = 0, main_writes = 0;
    int32_t tid = 0;
    std::thread w([&] {
        tid = gettid_();
        target = pthread_self();
        ready = true;
        for (uint64_t i = 0; i < n || (g_sig_ok.load() < 100 && i < 4 * n); i++) {
            main_ok += write_one(i);
            main_writes++;
        }
        done = true;
    });
    while (!ready.load()) {
    }
    while (!done.load()) {
        pthread_kill(target.load(), SIGUSR1);
        std::this_thread::yield();
    }
    w.join();
    sigaction(SIGUSR1, &old, nullptr);
    rb_stats st = stats_of(tid);
    EXPECT_EQ(st.written, main_ok + g_sig_ok.load());
    // Totals also count signals that hit while the thread mapped its buffer or was exiting.
    const uint64_t attempts = main_writes + g_sig_attempts.load();
    rb_stats all = ring_buffer_stats();
    EXPECT_EQ(all.written + all.dropped, attempts);
    EXPECT_EQ(st.overrun, 0u);
    std::vector<payload> pls;
    auto recs = drain(ring_buffer_reader::CONSUME, &pls); // checks every checksum
    EXPECT_EQ(recs.size(), st.written);
    uint64_t next_main = 0, seen_sig = 0;
    for (const payload &p : pls) {
        if (p.marker == 0x5167) {
            seen_sig++;
        } else {
            EXPECT_GE(p.seq, next_main); // main records keep their order
            next_main = p.seq + 1;
        }
    }
    EXPECT_EQ(seen_sig, g_sig_ok.load());
    EXPECT_GT(g_sig_ok.load(), 0u);
}

TEST_F(ring_buffer_test, two_writers_and_a_consumer_account_exactly)
{
    ASSERT_EQ(ring_buffer_set_size_kb(64), 0);
    for (bool overwrite : {true, false}) {
        SCOPED_TRACE(overwrite ? "overwrite" : "discard");
        ring_buffer_set_overwrite(overwrite);
        ring_buffer_reset();
        const uint64_t n = 300000;
        std::atomic<int> writers_done{0};
        std::atomic<bool> release{false};
        int32_t tids[2] = {};
        uint64_t ok[2] = {};
        std::map<int32_t, uint64_t> got, lost, next_seq;
        std::map<int32_t, bool> order_ok;
        std::thread consumer([&] {
            for (;;) {
                bool finished = writers_done.load() == 2;
                {
                    ring_buffer_reader rd(ring_buffer_reader::CONSUME);
                    rb_record r;
                    while (rd.next(r)) {
                        payload p = as_payload(r);
                        got[r.tid]++;
                        lost[r.tid] += r.lost_before;
                        if (!order_ok.count(r.tid)) order_ok[r.tid] = true;
                        if (p.seq < next_seq[r.tid]) order_ok[r.tid] = false;
                        next_seq[r.tid] = p.seq + 1;
                    }
                }
                if (finished) break;
                ring_buffer_wait(10);
            }
        });
        auto writer = [&](int k) {
            tids[k] = gettid_();
            for (uint64_t i = 0; i < n; i++)
                ok[k] += write_one(i);
            writers_done.fetch_add(1);
            while (!release.load()) // stay alive: per-thread counts are checked below
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        };
        std::thread a(writer, 0), b(writer, 1);
        consumer.join();
        for (int k = 0; k < 2; k++) {
            rb_stats st = stats_of(tids[k]);
            EXPECT_EQ(st.written, ok[k]);
            EXPECT_EQ(st.written + st.dropped, n);
            EXPECT_EQ(st.read, got[tids[k]]);
            EXPECT_EQ(st.written, st.read + st.overrun); // all consumed: written == read + lost
            EXPECT_EQ(st.entries, 0u);
            EXPECT_TRUE(order_ok[tids[k]]);
            if (!overwrite) {
                EXPECT_EQ(st.overrun, 0u);
                // Drops are marked where they happened, but for those after the last write.
                EXPECT_LE(lost[tids[k]], st.dropped);
            } else {
                EXPECT_EQ(st.overrun, lost[tids[k]]);
                EXPECT_EQ(st.dropped, 0u);
            }
        }
        release = true;
        a.join();
        b.join();
    }
}

TEST_F(ring_buffer_test, consumer_blocks_until_data_arrives)
{
    // Nothing there: the wait times out.
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(ring_buffer_wait(100));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));

    std::atomic<bool> woke{false};
    std::chrono::steady_clock::time_point woke_at;
    std::thread reader([&] {
        bool r = ring_buffer_wait(10000);
        woke_at = std::chrono::steady_clock::now();
        woke = r;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_FALSE(woke.load()); // still blocked
    auto wrote_at = std::chrono::steady_clock::now();
    on_thread([] { write_one(1); });
    reader.join();
    EXPECT_TRUE(woke.load());
    EXPECT_GE(woke_at, wrote_at);
    // Woken by the commit, not by the 10 s timeout or a 1 s poll slice.
    EXPECT_LT(woke_at - wrote_at, std::chrono::milliseconds(900));
    EXPECT_TRUE(ring_buffer_wait(0)); // data already there: no wait
}

TEST_F(ring_buffer_test, exited_thread_buffer_stays_readable_then_is_recycled)
{
    int32_t tid = on_thread([] {
        pthread_setname_np(pthread_self(), "rb-exiter");
        write_one(42);
    });
    {
        ring_buffer_reader rd(ring_buffer_reader::PEEK);
        rb_record r;
        ASSERT_TRUE(rd.next(r));
        EXPECT_EQ(r.tid, tid);
        EXPECT_STREQ(r.comm, "rb-exiter");
        EXPECT_EQ(as_payload(r).seq, 42u);
    }
    EXPECT_TRUE(stats_of(tid).exited);
    drain(ring_buffer_reader::CONSUME);
    // Consumed: recycled, so churning threads reuse it instead of mapping new buffers.
    size_t before = ring_buffer_nr_buffers();
    for (int i = 0; i < 50; i++) {
        on_thread([&] {
            for (int k = 0; k < 10; k++)
                write_one(k);
        });
        EXPECT_EQ(drain(ring_buffer_reader::CONSUME).size(), 10u);
    }
    EXPECT_LE(ring_buffer_nr_buffers(), before + 1);
    // Reset also recycles exited threads' buffers with unread data.
    on_thread([] { write_one(1); });
    ring_buffer_reset();
    size_t mid = ring_buffer_nr_buffers();
    for (int i = 0; i < 20; i++) {
        on_thread([] { write_one(1); });
        ring_buffer_reset();
    }
    EXPECT_EQ(ring_buffer_nr_buffers(), mid);
}

TEST_F(ring_buffer_test, size_setting)
{
    EXPECT_EQ(ring_buffer_set_size_kb(0), -EINVAL);
    ASSERT_EQ(ring_buffer_set_size_kb(1), 0);
    EXPECT_EQ(ring_buffer_size_kb(), k_rb_min_pages * k_rb_page_size / 1024);
    ASSERT_EQ(ring_buffer_set_size_kb(100), 0);
    EXPECT_EQ(ring_buffer_size_kb(), 100u);
    ASSERT_EQ(ring_buffer_set_size_kb(101), 0);
    EXPECT_EQ(ring_buffer_size_kb(), 104u); // whole pages
    // A new thread's buffer has the new size: 26 pages hold 26*102 32-byte events (40 bytes
    // with their header).
    ASSERT_EQ(ring_buffer_set_size_kb(104), 0);
    int32_t tid = on_thread([] {
        for (int i = 0; i < 10000; i++)
            write_one(i);
    });
    rb_stats st = stats_of(tid);
    EXPECT_LE(st.entries, 26u * (k_rb_page_size / 40));
    EXPECT_GE(st.entries, 24u * (k_rb_page_size / 40)); // the oldest page may be going
}

TEST_F(ring_buffer_test, set_clock_resets_and_switches_units)
{
    on_thread([] { write_one(1); });
    ASSERT_EQ(ring_buffer_set_clock("x86-tsc"), 0);
    EXPECT_EQ(drain(ring_buffer_reader::PEEK).size(), 0u);
    uint64_t a = trace_clock_rdtsc();
    on_thread([] { write_one(2); });
    uint64_t b = trace_clock_rdtsc();
    auto recs = drain(ring_buffer_reader::PEEK);
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_GE(recs[0].ts, a);
    EXPECT_LE(recs[0].ts, b);
    EXPECT_EQ(ring_buffer_set_clock("bogus"), -EINVAL);
    ASSERT_EQ(ring_buffer_set_clock("local"), 0);
}

TEST_F(ring_buffer_test, forked_child_starts_empty)
{
    // A parent thread's buffer, and the forking thread's own.
    on_thread([] { write_one(1); });
    std::atomic<int> phase{0};
    std::thread t([&] {
        write_one(2);
        phase = 1;
        while (phase.load() != 2) {
        }
        pid_t pid = fork();
        if (pid == 0) {
            // Child: nothing of the parent's; its own writes work and carry its tid.
            int bad = 0;
            bad |= ring_buffer_has_data() ? 1 : 0;
            bad |= write_one(3) ? 0 : 2;
            std::vector<payload> pls;
            auto recs = drain(ring_buffer_reader::CONSUME, &pls);
            bad |= (pls.size() == 1 && pls[0].seq == 3 && recs[0].tid == gettid_()) ? 0 : 4;
            bad |= ring_buffer_stats().written == 1 ? 0 : 8;
            _exit(bad);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        EXPECT_TRUE(WIFEXITED(status));
        EXPECT_EQ(WEXITSTATUS(status), 0);
    });
    while (phase.load() != 1) {
    }
    {
        // Hold the reader lock across the fork: the child must not inherit it locked.
        ring_buffer_reader rd(ring_buffer_reader::PEEK);
        phase = 2;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    t.join();
    // The parent still has both records.
    std::vector<payload> pls;
    drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(pls.size(), 2u);
}

// ---- compact events ------------------------------------------------------------------------

namespace
{
// A 12-byte small event, as the function graph writes them.
struct __attribute__((packed, aligned(4))) small_rec {
    uint16_t type;
    uint16_t depth;
    uint64_t func;
};
static_assert(sizeof(small_rec) == 12);

bool write_small(uint64_t func)
{
    rb_stamp st{};
    void *p = ring_buffer_reserve_small(sizeof(small_rec), &st);
    if (!p) return false;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 4u); // its u64 is 8-aligned
    small_rec r{7, 3, func};
    memcpy(p, &r, sizeof r);
    ring_buffer_commit(p);
    return true;
}
} // namespace

TEST_F(ring_buffer_test, small_events_take_16_bytes)
{
    ASSERT_EQ(ring_buffer_set_size_kb(16), 0); // 4 pages
    const uint64_t n = 5000;
    int32_t tid = on_thread([&] {
        for (uint64_t i = 0; i < n; i++)
            ASSERT_TRUE(write_small(i));
    });
    // 256 events a page (a CPU mark now and then takes 8 bytes of one).
    rb_stats st = stats_of(tid);
    EXPECT_LE(st.entries, 4u * 256);
    EXPECT_GE(st.entries, 3u * 250);
    ring_buffer_reader rd(ring_buffer_reader::CONSUME);
    rb_record r;
    uint64_t next = n - st.entries, count = 0, last_ts = 0;
    while (rd.next(r)) {
        ASSERT_EQ(r.len, sizeof(small_rec));
        small_rec s;
        memcpy(&s, r.payload, sizeof s);
        EXPECT_EQ(s.type, 7);
        EXPECT_EQ(s.func, next);
        EXPECT_GE(r.ts, last_ts);
        last_ts = r.ts;
        next++;
        count++;
    }
    EXPECT_EQ(count, st.entries);
    EXPECT_EQ(next, n);
}

TEST_F(ring_buffer_test, a_long_pause_keeps_exact_time_stamps)
{
    // 27 bits of nanoseconds are 134 ms: a longer pause needs a TIME_EXTEND.
    uint64_t t[3] = {};
    on_thread([&] {
        rb_stamp st{};
        for (int i = 0; i < 3; i++) {
            void *p = ring_buffer_reserve(8, &st);
            ASSERT_NE(p, nullptr);
            memset(p, i, 8);
            ring_buffer_commit(p);
            t[i] = st.ts;
            if (i < 2) std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 200 : 1));
        }
    });
    auto recs = drain(ring_buffer_reader::CONSUME);
    ASSERT_EQ(recs.size(), 3u);
    for (int i = 0; i < 3; i++)
        EXPECT_EQ(recs[i].ts, t[i]) << i;
    EXPECT_GT(t[1] - t[0], (1ull << 27) / 2); // in every clock unit, well past one delta
}

TEST_F(ring_buffer_test, each_event_carries_the_cpu_it_was_written_on)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 2) GTEST_SKIP() << "one CPU";
    std::vector<unsigned> want;
    on_thread([&] {
        for (int i = 0; i < 6; i++) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(i % 2, &set);
            ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0);
            rb_stamp st{};
            void *p = ring_buffer_reserve(8, &st);
            ASSERT_NE(p, nullptr);
            memset(p, 0, 8);
            ring_buffer_commit(p);
            want.push_back(st.cpu);
            EXPECT_EQ(st.cpu, static_cast<unsigned>(i % 2));
        }
    });
    auto recs = drain(ring_buffer_reader::CONSUME);
    ASSERT_EQ(recs.size(), want.size());
    for (size_t i = 0; i < recs.size(); i++)
        EXPECT_EQ(recs[i].cpu, want[i]) << i;
}

// tracing_cpumask: a writer on a CPU left out of the mask records nothing and is not counted
// as dropped; the CPUs in the mask record as before; a full mask is the default.
TEST_F(ring_buffer_test, cpumask_leaves_out_the_writers_on_other_cpus)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one CPU";
    const std::vector<uint64_t> all(k_rb_max_cpus / 64, ~uint64_t{0});
    EXPECT_EQ(ring_buffer_cpumask(ring_buffer_global()), all);
    trace_buffer *inst = ring_buffer_alloc();
    ASSERT_NE(inst, nullptr);
    EXPECT_EQ(ring_buffer_cpumask(inst), all);
    ring_buffer_set_cpumask(ring_buffer_global(), {2}); // CPU 1 only
    ring_buffer_set_cpumask(inst, {1});                 // CPU 0 only
    EXPECT_EQ(ring_buffer_cpumask(ring_buffer_global())[0], 2u);
    EXPECT_EQ(ring_buffer_cpumask(ring_buffer_global())[1], 0u);
    int global_made = 0, inst_made = 0;
    on_thread([&] {
        for (int i = 0; i < 6; i++) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(i % 2, &set);
            ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0);
            void *p = ring_buffer_reserve(8);
            EXPECT_EQ(p != nullptr, i % 2 == 1) << i;
            if (p) {
                memset(p, 0, 8);
                ring_buffer_commit(p);
                global_made++;
            }
            void *q = ring_buffer_reserve(inst, 8, nullptr);
            EXPECT_EQ(q != nullptr, i % 2 == 0) << i;
            if (q) {
                memset(q, 0, 8);
                ring_buffer_commit(inst, q);
                inst_made++;
            }
        }
    });
    EXPECT_EQ(global_made, 3);
    EXPECT_EQ(inst_made, 3);
    auto recs = drain(ring_buffer_reader::PEEK);
    ASSERT_EQ(recs.size(), 3u);
    for (const auto &r : recs)
        EXPECT_EQ(r.cpu, 1u);
    EXPECT_EQ(ring_buffer_stats().dropped, 0u);
    // Back to every CPU: both record again.
    ring_buffer_set_cpumask(ring_buffer_global(), all);
    on_thread([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0);
        void *p = ring_buffer_reserve(8);
        EXPECT_NE(p, nullptr);
        if (p) ring_buffer_commit(p);
    });
    ring_buffer_free(inst);
}

TEST_F(ring_buffer_test, muted_thread_writes_nothing)
{
    int32_t tid = on_thread([] {
        ring_buffer_thread_mute(true);
        EXPECT_TRUE(ring_buffer_thread_muted());
        EXPECT_FALSE(write_one(1));
        ring_buffer_thread_mute(false);
        EXPECT_TRUE(write_one(2));
    });
    std::vector<payload> pls;
    drain(ring_buffer_reader::CONSUME, &pls);
    ASSERT_EQ(pls.size(), 1u);
    EXPECT_EQ(pls[0].seq, 2u);
    EXPECT_EQ(ring_buffer_stats().dropped, 0u); // muted is not dropped
    (void)tid;
}

// A handler that records an event must be able to run on the light path (no vector register
// saved): the writer's code scans clean, its rare paths (a thread's first event, a clock read
// through the C library) behind dprobe_ext_guarded. The file is built with
// -mgeneral-regs-only by GCC; a sanitizer's instrumentation is not clean.
extern "C" __attribute__((noinline)) void rb_light_writer(uint64_t v)
{
    void *p = ring_buffer_reserve_small(sizeof v);
    if (!p) return;
    std::memcpy(p, &v, sizeof v);
    ring_buffer_commit(p);
}

TEST_F(ring_buffer_test, writer_scans_clean_for_light_handlers)
{
#if defined(__SANITIZE_ADDRESS__) || !defined(__GNUC__) || defined(__clang__)
    GTEST_SKIP() << "only GCC builds the writer without vector code (-mgeneral-regs-only), "
                    "and sanitizer instrumentation is not clean";
#endif
    const auto r = dprobe::arch::ext_state_scan_code(reinterpret_cast<uintptr_t>(&rb_light_writer));
    EXPECT_TRUE(r.clean) << r.why;
    // And it still writes: from a new thread (its first event goes through the guard), with
    // the state-unsaved counter raised as in a light handler.
    const int32_t tid = on_thread([] {
        dprobe_ext_unsaved = 1;
        rb_light_writer(42);
        rb_light_writer(43);
        dprobe_ext_unsaved = 0;
    });
    EXPECT_EQ(2u, stats_of(tid).entries);
}
