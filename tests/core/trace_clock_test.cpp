#include "core/trace_clock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace dprobe;

namespace
{

uint64_t mono_ns(clockid_t c = CLOCK_MONOTONIC)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct restore_local {
    ~restore_local() { trace_clock_set("local"); }
};

bool has_invariant_tsc()
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "flags") == line && strstr(line, " nonstop_tsc")) found = true;
    fclose(f);
    return found;
}

} // namespace

TEST(trace_clock, list_text_default_local)
{
    restore_local r;
    ASSERT_EQ(trace_clock_set("local"), 0);
    EXPECT_EQ(trace_clock_list(), "[local] global counter perf mono mono_raw boot tai x86-tsc\n");
    EXPECT_EQ(trace_clock_current(), trace_clock_id::local);
}

TEST(trace_clock, set_selects_and_brackets)
{
    restore_local r;
    ASSERT_EQ(trace_clock_set("x86-tsc\n"), 0); // as `echo x86-tsc > trace_clock` writes it
    EXPECT_EQ(trace_clock_current(), trace_clock_id::x86_tsc);
    EXPECT_EQ(trace_clock_list(), "local global counter perf mono mono_raw boot tai [x86-tsc]\n");
    ASSERT_EQ(trace_clock_set("mono_raw"), 0);
    EXPECT_EQ(trace_clock_list(), "local global counter perf mono [mono_raw] boot tai x86-tsc\n");
    EXPECT_STREQ(trace_clock_name(trace_clock_current()), "mono_raw");
}

TEST(trace_clock, unknown_is_einval_and_keeps_current)
{
    restore_local r;
    ASSERT_EQ(trace_clock_set("boot"), 0);
    EXPECT_EQ(trace_clock_set("uptime"), -EINVAL);
    EXPECT_EQ(trace_clock_set(""), -EINVAL);
    EXPECT_EQ(trace_clock_set("locale"), -EINVAL);
    EXPECT_EQ(trace_clock_current(), trace_clock_id::boot);
}

TEST(trace_clock, units)
{
    EXPECT_TRUE(trace_clock_in_ns(trace_clock_id::local));
    EXPECT_TRUE(trace_clock_in_ns(trace_clock_id::mono));
    EXPECT_FALSE(trace_clock_in_ns(trace_clock_id::counter));
    EXPECT_FALSE(trace_clock_in_ns(trace_clock_id::x86_tsc));
}

TEST(trace_clock, calibrated_when_invariant_tsc)
{
    trace_clock_init();
    EXPECT_EQ(trace_clock_tsc_calibrated(), has_invariant_tsc());
    if (trace_clock_tsc_calibrated()) {
        // Sane frequency: 100 MHz .. 10 GHz.
        EXPECT_GT(trace_clock_tsc_khz(), 100000u);
        EXPECT_LT(trace_clock_tsc_khz(), 10000000u);
    }
}

TEST(trace_clock, local_monotonic_per_thread)
{
    restore_local r;
    trace_clock_init();
    ASSERT_EQ(trace_clock_set("local"), 0);
    auto run = [] {
        uint64_t prev = trace_clock_now();
        int backwards = 0;
        for (int i = 0; i < 200000; i++) {
            uint64_t t = trace_clock_now();
            backwards += t < prev;
            prev = t;
        }
        return backwards;
    };
    int b1 = 0, b2 = 0;
    std::thread t1([&] { b1 = run(); }), t2([&] { b2 = run(); });
    t1.join();
    t2.join();
    EXPECT_EQ(b1, 0);
    EXPECT_EQ(b2, 0);
}

TEST(trace_clock, every_clock_monotonic)
{
    restore_local r;
    trace_clock_init();
    for (const char *n :
         {"local", "global", "counter", "perf", "mono", "mono_raw", "boot", "tai", "x86-tsc"}) {
        ASSERT_EQ(trace_clock_set(n), 0);
        uint64_t prev = trace_clock_now();
        for (int i = 0; i < 10000; i++) {
            uint64_t t = trace_clock_now();
            ASSERT_GE(t, prev) << n;
            prev = t;
        }
    }
}

// The local clock runs at CLOCK_MONOTONIC's rate (within 2%, loose for a noisy VM) and
// shares its origin (within 5 ms).
TEST(trace_clock, local_tracks_clock_monotonic)
{
    restore_local r;
    trace_clock_init();
    ASSERT_EQ(trace_clock_set("local"), 0);
    uint64_t l0 = trace_clock_now(), m0 = mono_ns();
    struct timespec req = {0, 50 * 1000 * 1000};
    nanosleep(&req, nullptr);
    uint64_t l1 = trace_clock_now(), m1 = mono_ns();
    double rate = static_cast<double>(l1 - l0) / static_cast<double>(m1 - m0);
    EXPECT_NEAR(rate, 1.0, 0.02);
    EXPECT_LT(std::llabs(static_cast<long long>(l1 - m1)), 5000000LL);
}

TEST(trace_clock, counter_is_raw_tsc)
{
    restore_local r;
    ASSERT_EQ(trace_clock_set("counter"), 0);
    uint64_t a = trace_clock_rdtsc();
    uint64_t c = trace_clock_now();
    uint64_t b = trace_clock_rdtsc();
    EXPECT_LE(a, c);
    EXPECT_LE(c, b);
}

TEST(trace_clock, boot_and_mono_match_posix)
{
    restore_local r;
    ASSERT_EQ(trace_clock_set("boot"), 0);
    uint64_t a = mono_ns(CLOCK_BOOTTIME), c = trace_clock_now(), b = mono_ns(CLOCK_BOOTTIME);
    EXPECT_LE(a, c);
    EXPECT_LE(c, b);
    ASSERT_EQ(trace_clock_set("mono"), 0);
    a = mono_ns();
    c = trace_clock_now();
    b = mono_ns();
    EXPECT_LE(a, c);
    EXPECT_LE(c, b);
}

TEST(trace_clock, tsc_conversion_is_linear)
{
    trace_clock_init();
    if (!trace_clock_tsc_calibrated()) GTEST_SKIP() << "no invariant TSC";
    uint64_t khz = trace_clock_tsc_khz();
    uint64_t t = trace_clock_rdtsc();
    // One second worth of cycles converts to one second (to 1 ppm + rounding).
    uint64_t d = trace_clock_tsc_to_ns(t + khz * 1000) - trace_clock_tsc_to_ns(t);
    EXPECT_NEAR(static_cast<double>(d), 1e9, 2e3);
    // Slightly before the base (another CPU's TSC) still converts without wrapping.
    EXPECT_LT(trace_clock_tsc_to_ns(t - 1000), trace_clock_tsc_to_ns(t));
}
