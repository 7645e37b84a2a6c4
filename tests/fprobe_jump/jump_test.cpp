// fprobe on functions without a compiled-in patch site: their first instructions are
// replaced by a jmp to a detour (a jump site), while other threads run them.
#include "core/ftrace.h"

#include <dprobe/fprobe.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
unsigned long plain_mix(unsigned long a, unsigned long b);
double plain_scale(double x, int n);
unsigned long plain_strsum(const char *s);
unsigned long plain_outer(unsigned long a);
}

namespace
{

using outer_fn = unsigned long (*)(unsigned long);
volatile outer_fn outer = plain_outer;

std::atomic<unsigned long> entries{0}, exits{0};
int count_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
void count_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    exits.fetch_add(1, std::memory_order_relaxed);
}

TEST(fprobe_jump, plain_functions_get_jump_sites)
{
    const unsigned long want = outer(12345);
    struct fprobe fp = {};
    fp.entry_handler = count_entry;
    fp.exit_handler = count_exit;
    ASSERT_EQ(0, register_fprobe(&fp, "plain_*", nullptr));
    dprobe::ftrace_update_objects();
    dprobe::ftrace_site *s = dprobe::ftrace_location(reinterpret_cast<uintptr_t>(plain_mix));
    ASSERT_NE(nullptr, s);
    EXPECT_EQ(dprobe::site_kind::jump, s->kind);
    entries = exits = 0;
    EXPECT_EQ(want, outer(12345));
    EXPECT_EQ(4UL, entries.load()); // outer, mix, strsum, scale
    EXPECT_EQ(4UL, exits.load());
    EXPECT_EQ(0, unregister_fprobe(&fp));
    EXPECT_EQ(want, outer(12345));
    EXPECT_EQ(4UL, entries.load());
}

TEST(fprobe_jump, libc_functions_by_glob)
{
    struct fprobe fp = {};
    fp.entry_handler = count_entry;
    fp.exit_handler = count_exit;
    ASSERT_EQ(0, register_fprobe(&fp, "libc.so.6:strto*", nullptr));
    EXPECT_GT(fprobe_count_ips_from_filter("libc.so.6:strto*", nullptr), 5);
    entries = exits = 0;
    char *end;
    EXPECT_EQ(12345L, strtol("12345xyz", &end, 10));
    EXPECT_STREQ("xyz", end);
    EXPECT_EQ(0x7fUL, strtoul("0x7f", nullptr, 16));
    EXPECT_DOUBLE_EQ(2.5, strtod("2.5", nullptr));
    EXPECT_GE(entries.load(), 3UL);
    EXPECT_EQ(entries.load(), exits.load());
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

TEST(fprobe_jump, enable_and_disable_while_threads_run_the_code)
{
    const unsigned long want = outer(99);
    std::atomic<bool> stop{false};
    std::atomic<unsigned long> wrong{0}, calls{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i)
        ts.emplace_back([&] {
            while (!stop.load(std::memory_order_relaxed)) {
                if (outer(99) != want) wrong.fetch_add(1);
                calls.fetch_add(1, std::memory_order_relaxed);
            }
        });
    for (int round = 0; round < 30; ++round) {
        struct fprobe fp = {};
        fp.entry_handler = count_entry;
        fp.exit_handler = count_exit;
        ASSERT_EQ(0, register_fprobe(&fp, "plain_*", nullptr));
        unsigned long c = calls.load();
        while (calls.load() < c + 100)
            std::this_thread::yield();
        ASSERT_EQ(0, unregister_fprobe(&fp));
    }
    stop = true;
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(0UL, wrong.load());
    EXPECT_GT(entries.load(), 0UL);
}

TEST(fprobe_jump, refusals_have_readable_reasons)
{
    // dprobe's own entry points are never hooked.
    const char *why = dprobe::ftrace_site_refusal(reinterpret_cast<uintptr_t>(&register_fprobe));
    ASSERT_NE(nullptr, why);
    EXPECT_GT(strlen(why), 5u);
}

} // namespace
