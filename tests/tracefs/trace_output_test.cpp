#include "tracefs/trace_output.h"

#include "core/ring_buffer.h"
#include "core/trace_clock.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

using namespace dprobe;

namespace
{

int32_t gettid_()
{
    return static_cast<int32_t>(syscall(SYS_gettid));
}

struct ev {
    int32_t a;
    int32_t b;
};

// The event layer's role: "<event>: (<place>) args".
size_t format_ev(char *buf, size_t len, const void *payload, size_t payload_len, void *ctx)
{
    ev e;
    memcpy(&e, payload, sizeof e);
    ++*static_cast<int *>(ctx);
    int n = snprintf(buf, len, "myprobe: (do_work+0x4/0x20) a=%d b=0x%x", e.a, e.b);
    return static_cast<size_t>(n);
}

void write_ev(int32_t a, int32_t b)
{
    void *p = ring_buffer_reserve(sizeof(ev));
    ASSERT_NE(p, nullptr);
    ev e{a, b};
    memcpy(p, &e, sizeof e);
    ring_buffer_commit(p);
}

std::vector<std::string> lines_of(const std::string &s)
{
    std::vector<std::string> out;
    std::istringstream is(s);
    std::string l;
    while (std::getline(is, l))
        out.push_back(l);
    return out;
}

class trace_output_test : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        trace_clock_init();
        ring_buffer_set_clock("local");
        ring_buffer_set_tracing_on(true);
        ring_buffer_set_overwrite(true);
        ring_buffer_set_size_kb(k_rb_default_size_kb);
        ring_buffer_reset();
    }
    void TearDown() override
    {
        ring_buffer_set_clock("local");
        ring_buffer_set_size_kb(k_rb_default_size_kb);
        ring_buffer_reset();
    }
};

} // namespace

TEST(trace_output, header_is_the_kernels)
{
    EXPECT_EQ(trace_print_header(2721, 2721, 8),
              "# tracer: nop\n"
              "#\n"
              "# entries-in-buffer/entries-written: 2721/2721   #P:8\n"
              "#\n"
              "#                                _-----=> irqs-off/BH-disabled\n"
              "#                               / _----=> need-resched\n"
              "#                              | / _---=> hardirq/softirq\n"
              "#                              || / _--=> preempt-depth\n"
              "#                              ||| / _-=> migrate-disable\n"
              "#                              |||| /     delay\n"
              "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
              "#              | |         |   |||||     |         |\n");
    EXPECT_NE(
        trace_print_header(0, 17, 2).find("# entries-in-buffer/entries-written: 0/17   #P:2\n"),
        std::string::npos);
}

TEST(trace_output, context_columns)
{
    char buf[256];
    size_t n =
        trace_print_context(buf, sizeof buf, "sshd-session", 1082, 4, 5041239906000ull, true);
    // trace_print_context(): "%16s-%-7d [%03d] " (the sample line in dynevent-syntax.md
    // §12.1 has one more leading space than %16s gives for a 12-character comm).
    EXPECT_STREQ(buf, "    sshd-session-1082    [004] .....  5041.239906: ");
    EXPECT_EQ(n, strlen(buf));
    // Fifteen-character comm, seven-digit tid, three-digit cpu.
    trace_print_context(buf, sizeof buf, "abcdefghijklmno", 1234567, 123, 1000000, true);
    EXPECT_STREQ(buf, " abcdefghijklmno-1234567 [123] .....     0.001000: ");
    // Wider values push the columns, as printf does.
    trace_print_context(buf, sizeof buf, "x", 12345678, 1234, 123456789000000000ull, true);
    EXPECT_STREQ(buf, "               x-12345678 [1234] ..... 123456789.000000: ");
    trace_print_context(buf, sizeof buf, "<...>", 7, 0, 0, true);
    EXPECT_STREQ(buf, "           <...>-7       [000] .....     0.000000: ");
}

TEST(trace_output, timestamp_rounds_to_microseconds)
{
    char buf[256];
    trace_print_context(buf, sizeof buf, "t", 1, 0, 5041239906499ull, true);
    EXPECT_NE(strstr(buf, " 5041.239906: "), nullptr) << buf;
    trace_print_context(buf, sizeof buf, "t", 1, 0, 5041239906500ull, true);
    EXPECT_NE(strstr(buf, " 5041.239907: "), nullptr) << buf;
    trace_print_context(buf, sizeof buf, "t", 1, 0, 1999999999ull, true);
    EXPECT_NE(strstr(buf, "     2.000000: "), nullptr) << buf;
}

TEST(trace_output, raw_counter_timestamp)
{
    char buf[256];
    trace_print_context(buf, sizeof buf, "t", 1, 2, 123456789012ull, false);
    EXPECT_STREQ(buf, "               t-1       [002] ..... 123456789012: ");
}

TEST(trace_output, context_truncates_like_snprintf)
{
    char buf[10];
    size_t n = trace_print_context(buf, sizeof buf, "sshd-session", 1082, 4, 0, true);
    EXPECT_EQ(n, strlen("    sshd-session-1082    [004] .....     0.000000: "));
    EXPECT_EQ(strlen(buf), 9u);
}

TEST(trace_output, comm_cache_live_exited_unknown)
{
    comm_cache c;
    pthread_setname_np(pthread_self(), "comm-test");
    EXPECT_STREQ(c.lookup(gettid_(), "recorded"), "comm-test");

    // A thread seen alive keeps its last name after it exits.
    int32_t tid = 0;
    std::atomic<int> phase{0};
    std::thread t([&] {
        pthread_setname_np(pthread_self(), "short-lived");
        tid = gettid_();
        phase = 1;
        while (phase.load() != 2) {
        }
    });
    while (phase.load() != 1) {
    }
    EXPECT_STREQ(c.lookup(tid, "other"), "short-lived");
    phase = 2;
    t.join();
    EXPECT_STREQ(c.lookup(tid, "other"), "short-lived");

    // Never seen alive: the ring buffer's recorded name, else the kernel's "<...>".
    comm_cache fresh;
    EXPECT_STREQ(fresh.lookup(tid, "rec-name"), "rec-name");
    EXPECT_STREQ(fresh.lookup(0x3fffffff, ""), "<...>");
    EXPECT_STREQ(fresh.lookup(0x3ffffffe, nullptr), "<...>");
}

TEST(trace_output, record_with_lost_events_and_long_payload)
{
    comm_cache c;
    std::string big(1000, 'z');
    auto fmt_big = [](char *buf, size_t len, const void *, size_t, void *ctx) -> size_t {
        const std::string &s = *static_cast<std::string *>(ctx);
        return static_cast<size_t>(snprintf(buf, len, "big: %s\n", s.c_str()));
    };
    rb_record r{};
    r.ts = 1500000;
    r.tid = 0x3fffffff;
    r.cpu = 1;
    r.lost_before = 5;
    r.comm = "gone";
    std::string out;
    trace_print_record(out, r, c, fmt_big, &big, true);
    EXPECT_EQ(out, "TID:1073741823 [LOST 5 EVENTS]\n"
                   "            gone-1073741823 [001] .....     0.001500: big: " +
                       big + "\n");
}

TEST_F(trace_output_test, trace_file_end_to_end)
{
    int32_t tid = 0;
    std::thread t([&] {
        pthread_setname_np(pthread_self(), "worker-7");
        tid = gettid_();
        write_ev(1, 0x10);
        write_ev(2, 0x20);
        write_ev(3, 0x30);
    });
    t.join();
    int calls = 0;
    std::string text = trace_read(format_ev, &calls);
    EXPECT_EQ(calls, 3);
    auto lines = lines_of(text);
    ASSERT_EQ(lines.size(), 12u + 3u) << text;
    char p[64];
    snprintf(p, sizeof p, "# entries-in-buffer/entries-written: 3/3   #P:%ld",
             sysconf(_SC_NPROCESSORS_ONLN));
    EXPECT_EQ(lines[2], p);
    // The thread is gone: its name comes from what the ring buffer recorded.
    uint64_t prev = 0;
    for (int i = 0; i < 3; i++) {
        const std::string &l = lines[12 + i];
        // Fixed columns: comm right-aligned to 16, '-', tid left-aligned in 7, " [ccc] ".
        ASSERT_GE(l.size(), 52u) << l;
        EXPECT_EQ(l.substr(0, 17), "        worker-7-") << l;
        EXPECT_EQ(std::stoi(l.substr(17, 7)), tid) << l;
        EXPECT_EQ(l.substr(24, 2), " [") << l;
        EXPECT_EQ(l.substr(29, 8), "] ..... ") << l;
        EXPECT_LT(std::stol(l.substr(26, 3)), sysconf(_SC_NPROCESSORS_CONF));
        unsigned long long sec = 0, usec = 0;
        int a = 0, pos = 0;
        unsigned b = 0;
        ASSERT_EQ(sscanf(l.c_str() + 37, "%llu.%6llu: myprobe: (do_work+0x4/0x20) a=%d b=0x%x%n",
                         &sec, &usec, &a, &b, &pos),
                  4)
            << l;
        EXPECT_EQ(static_cast<size_t>(37 + pos), l.size()) << l;
        EXPECT_EQ(l[37 + 5 + 7], ':') << l; // "%5lu.%06lu" then ':'
        uint64_t us = sec * 1000000 + usec;
        EXPECT_GE(us, prev);
        prev = us;
        EXPECT_EQ(a, i + 1);
        EXPECT_EQ(b, static_cast<unsigned>((i + 1) * 0x10));
    }
    // Within a second of CLOCK_MONOTONIC now (the local clock's origin).
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t now_us = static_cast<uint64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
    EXPECT_LE(prev, now_us);
    EXPECT_GT(prev + 1000000, now_us);
    // `trace` does not consume.
    EXPECT_EQ(lines_of(trace_read(format_ev, &calls)).size(), 15u);
}

TEST_F(trace_output_test, trace_pipe_consumes)
{
    std::thread t([&] {
        for (int i = 0; i < 5; i++)
            write_ev(i, i);
    });
    t.join();
    comm_cache c;
    int calls = 0;
    std::string out;
    EXPECT_EQ(trace_pipe_read(out, 2, c, format_ev, &calls), 2u);
    EXPECT_EQ(lines_of(out).size(), 2u);
    EXPECT_NE(lines_of(out)[1].find("a=1 b=0x1"), std::string::npos);
    out.clear();
    EXPECT_EQ(trace_pipe_read(out, 100, c, format_ev, &calls), 3u);
    EXPECT_NE(lines_of(out)[2].find("a=4 b=0x4"), std::string::npos);
    EXPECT_EQ(trace_pipe_read(out, 100, c, format_ev, &calls), 0u);
    // The header now shows nothing left.
    EXPECT_NE(trace_print_header().find("entries-in-buffer/entries-written: 0/0 "),
              std::string::npos);
}

TEST_F(trace_output_test, overwritten_events_show_in_header_and_lost_line)
{
    ring_buffer_set_size_kb(16);
    int32_t tid = 0;
    std::atomic<int> phase{0};
    std::thread t([&] {
        tid = gettid_();
        for (int i = 0; i < 5000; i++)
            write_ev(i, 0);
        phase = 1;
        while (phase.load() != 2) {
        }
    });
    while (phase.load() != 1) {
    }
    rb_stats st = ring_buffer_stats();
    ASSERT_GT(st.overrun, 0u);
    int calls = 0;
    std::string text = trace_read(format_ev, &calls);
    auto lines = lines_of(text);
    char p[96];
    snprintf(p, sizeof p,
             "# entries-in-buffer/entries-written: %" PRIu64 "/5000   #P:", st.entries);
    EXPECT_EQ(lines[2].rfind(p, 0), 0u) << lines[2];
    snprintf(p, sizeof p, "TID:%d [LOST %" PRIu64 " EVENTS]", tid, st.overrun);
    EXPECT_EQ(lines[12], p);
    EXPECT_EQ(lines.size(), 13u + st.entries);
    phase = 2;
    t.join();
}

TEST_F(trace_output_test, counter_clock_prints_raw_cycles)
{
    ASSERT_EQ(ring_buffer_set_clock("counter"), 0);
    uint64_t a = trace_clock_rdtsc();
    std::thread t([] { write_ev(9, 9); });
    t.join();
    int calls = 0;
    auto lines = lines_of(trace_read(format_ev, &calls));
    ASSERT_EQ(lines.size(), 13u);
    const std::string &l = lines[12];
    ASSERT_GE(l.size(), 37u + 12u) << l;
    EXPECT_EQ(l.substr(29, 8), "] ..... ") << l;
    unsigned long long ts = 0;
    int pos = 0;
    ASSERT_EQ(sscanf(l.c_str() + 37, "%llu: myprobe: %n", &ts, &pos), 1) << l;
    EXPECT_GE(pos, 12 + 11) << l; // " %12llu": at least 12 columns
    EXPECT_GE(ts, a);
    EXPECT_LE(ts, trace_clock_rdtsc());
}
