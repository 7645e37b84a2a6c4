// The C++ helpers of <dprobe/dprobe.hpp>.
#include "targets.h"

#include <dprobe/dprobe.hpp>
#include <gtest/gtest.h>

namespace
{

using target_fn = unsigned (*)(unsigned);
volatile target_fn target = fprobe_selftest_target;

TEST(fprobe_raii, function_probe_with_lambdas_unregisters_at_scope_end)
{
    int entries = 0, exits = 0;
    unsigned long seen_ret = 0;
    {
        dprobe::function_probe probe(
            "fprobe_selftest_target", nullptr,
            [&](unsigned long, unsigned long, ftrace_regs *regs) {
                ++entries;
                EXPECT_EQ(30UL, ftrace_regs_get_argument(regs, 0));
                return 0;
            },
            [&](unsigned long, unsigned long, ftrace_regs *regs) {
                ++exits;
                seen_ret = ftrace_regs_get_return_value(regs);
            });
        ASSERT_TRUE(probe) << probe.error();
        EXPECT_EQ(10u, target(30));
        probe.disable();
        target(30);
        probe.enable();
        EXPECT_EQ(1, entries);
        EXPECT_EQ(1, exits);
        EXPECT_EQ(10UL, seen_ret);
    }
    target(30);
    EXPECT_EQ(1, entries) << "still probed after the scope ended";
}

TEST(fprobe_raii, registration_guard_reports_errors)
{
    struct fprobe fp = {};
    fp.entry_handler = [](struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *,
                          void *) { return 0; };
    dprobe::fprobe_registration bad(fp, "no_function_has_this_name_*");
    EXPECT_FALSE(bad);
    EXPECT_EQ(-ENOENT, bad.error());
    {
        dprobe::fprobe_registration good(fp, "fprobe_selftest_target");
        EXPECT_TRUE(good);
        EXPECT_TRUE(fprobe_is_registered(&fp));
    }
    EXPECT_FALSE(fprobe_is_registered(&fp));
}

} // namespace
