// The direct dispatch (arch/x86_64/ftrace_direct.inc): a site whose one user is an fprobe with
// light handlers runs them without the compiled dispatch. Each case first makes the thread's
// first hit (which the light path leaves to the full one) and checks that the site is direct,
// then asserts what the compiled dispatch guarantees: entry data per activation, nested
// activations, an entry that declines its exit, a disabled fprobe, ip and return addresses.
#include "targets.h"

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/ftrace_frame.h"
#include "core/ftrace.h"
#include "core/task_ctx.h"

#include <dprobe/fprobe.h>
#include <gtest/gtest.h>

namespace
{

volatile auto nest = direct_nest_target;

// What the handlers saw; integer code only, so that the fprobe is light.
unsigned long site_ip;
unsigned long entries, exits, bad;
bool decline_odd; // entries with an odd argument decline their exit

struct activation {
    unsigned long depth;
    unsigned long parent_ip;
};

int nest_entry(struct fprobe *fp, unsigned long ip, unsigned long parent_ip,
               struct ftrace_regs *fregs, void *data)
{
    ++entries;
    const unsigned long depth = ftrace_regs_get_argument(fregs, 0) & 0xffffffff;
    if (ip != site_ip) ++bad;
    if (fp->entry_data_size) {
        if (!data) {
            ++bad;
        } else {
            auto *a = static_cast<activation *>(data);
            a->depth = depth;
            a->parent_ip = parent_ip;
        }
    } else if (data) {
        ++bad;
    }
    return decline_odd && (depth & 1) ? 1 : 0;
}

void nest_exit(struct fprobe *fp, unsigned long ip, unsigned long ret_ip, struct ftrace_regs *fregs,
               void *data)
{
    ++exits;
    const unsigned long ret = ftrace_regs_get_return_value(fregs) & 0xffffffff;
    if (ip != site_ip) ++bad;
    if (decline_odd && (ret & 1)) ++bad; // its entry declined it
    if (fp->entry_data_size) {
        const auto *a = static_cast<const activation *>(data);
        if (!a || a->depth != ret || a->parent_ip != ret_ip) ++bad;
    }
}

class fprobe_direct : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        entries = exits = bad = 0;
        decline_odd = false;
        fp_ = {};
    }
    // Registers fp_ on the nesting target, makes this thread's first hit, and checks that
    // the site now takes the direct dispatch.
    void arm()
    {
#if defined(__SANITIZE_ADDRESS__)
        GTEST_SKIP() << "sanitizer-instrumented dispatch is not clean: no light path to test";
#endif
        ASSERT_EQ(0, register_fprobe(&fp_, "direct_nest_target", nullptr));
        const dprobe::ftrace_site *s =
            dprobe::ftrace_location(reinterpret_cast<uintptr_t>(direct_nest_target));
        ASSERT_NE(nullptr, s);
        site_ip = s->ip;
        ASSERT_EQ(0u, nest(0));
        ASSERT_TRUE(s->light.load() & SITE_LIGHT_DIRECT) << "not direct: the case tests nothing";
        entries = exits = 0;
    }
    void TearDown() override
    {
        if (fp_.hlist_array) {
            EXPECT_EQ(0, unregister_fprobe(&fp_));
        }
        EXPECT_EQ(0UL, bad);
        if (const dprobe::task_ctx *t = dprobe::peek_task_ctx()) {
            EXPECT_EQ(0u, t->shadow_top) << "frames left on the shadow stack";
        }
    }
    struct fprobe fp_;
};

TEST_F(fprobe_direct, nested_activations_keep_their_own_data)
{
    fp_.entry_handler = nest_entry;
    fp_.exit_handler = nest_exit;
    fp_.entry_data_size = sizeof(activation);
    arm();
    if (IsSkipped()) return;
    EXPECT_EQ(20u, nest(20));
    EXPECT_EQ(21UL, entries);
    EXPECT_EQ(21UL, exits);
    EXPECT_EQ(0UL, fp_.nmissed);
    // The body was called from the direct call stub: its return goes to the direct exit.
    EXPECT_EQ(dprobe::arch::fgraph_return_direct_addr, direct_nest_return);
}

TEST_F(fprobe_direct, an_entry_that_returns_nonzero_gets_no_exit)
{
    fp_.entry_handler = nest_entry;
    fp_.exit_handler = nest_exit;
    fp_.entry_data_size = sizeof(activation);
    arm();
    if (IsSkipped()) return;
    decline_odd = true;
    EXPECT_EQ(9u, nest(9)); // depths 9..0: five odd ones decline
    EXPECT_EQ(10UL, entries);
    EXPECT_EQ(5UL, exits);
    EXPECT_EQ(0UL, fp_.nmissed) << "a declined exit is not a miss";
}

TEST_F(fprobe_direct, no_entry_data)
{
    fp_.entry_handler = nest_entry;
    fp_.exit_handler = nest_exit;
    arm();
    if (IsSkipped()) return;
    EXPECT_EQ(7u, nest(7));
    EXPECT_EQ(8UL, entries);
    EXPECT_EQ(8UL, exits);
}

TEST_F(fprobe_direct, entry_handler_only)
{
    fp_.entry_handler = nest_entry;
    arm();
    if (IsSkipped()) return;
    EXPECT_EQ(5u, nest(5));
    EXPECT_EQ(6UL, entries);
    EXPECT_EQ(0UL, exits);
}

TEST_F(fprobe_direct, exit_handler_only)
{
    fp_.exit_handler = nest_exit;
    arm();
    if (IsSkipped()) return;
    EXPECT_EQ(5u, nest(5));
    EXPECT_EQ(0UL, entries);
    EXPECT_EQ(6UL, exits);
}

TEST_F(fprobe_direct, disabled_fprobe_runs_nothing_until_enabled)
{
    fp_.entry_handler = nest_entry;
    fp_.exit_handler = nest_exit;
    fp_.entry_data_size = sizeof(activation);
    arm();
    if (IsSkipped()) return;
    disable_fprobe(&fp_);
    EXPECT_EQ(4u, nest(4));
    EXPECT_EQ(0UL, entries);
    EXPECT_EQ(0UL, exits);
    enable_fprobe(&fp_);
    EXPECT_EQ(4u, nest(4));
    EXPECT_EQ(5UL, entries);
    EXPECT_EQ(5UL, exits);
}

} // namespace
