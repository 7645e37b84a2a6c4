// ftrace's direct facility (core/ftrace.h, ftrace_direct) as any ops' owner uses it, with no
// fprobe: an ops that gives direct handlers has them called with its priv in place of its
// entry() and exit(), on the light sites' inline direct path (SITE_LIGHT_DIRECT) as on the
// full dispatch, and its gate word turns it off by the mask it gave. The fprobe that fills
// the facility in is tested in direct_test.cpp; here, that what core and arch do with it is
// generic.
#include "targets.h"

#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/ftrace_frame.h"
#include "core/ftrace.h"
#include "core/task_ctx.h"

#include <dprobe/ptrace.h>
#include <gtest/gtest.h>

namespace
{

volatile auto nest = direct_nest_target;

// The owner's record, handed to the handlers as their first argument.
struct owner {
    unsigned long entries, exits, bad;
    unsigned long site_ip;
};
owner the_owner;
unsigned long ops_entries, ops_exits; // entry() and exit(), which the direct handlers replace

int direct_entry(void *priv, unsigned long ip, unsigned long, struct ftrace_regs *fregs, void *)
{
    auto *o = static_cast<owner *>(priv);
    ++o->entries;
    if (ip != o->site_ip || !fregs) ++o->bad;
    return 0;
}

void direct_exit(void *priv, unsigned long ip, unsigned long, struct ftrace_regs *fregs, void *)
{
    auto *o = static_cast<owner *>(priv);
    ++o->exits;
    if (ip != o->site_ip || !fregs) ++o->bad;
}

int ops_entry(dprobe::ftrace_ops *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++ops_entries;
    return 0;
}

void ops_exit(dprobe::ftrace_ops *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++ops_exits;
}

class ftrace_direct_handlers : public ::testing::TestWithParam<bool>
{
  protected:
    void SetUp() override
    {
        the_owner = {};
        ops_entries = ops_exits = 0;
        gate_ = 0;
        dprobe::ftrace_update_objects();
        site_ = dprobe::ftrace_location(reinterpret_cast<uintptr_t>(direct_nest_target));
        ASSERT_NE(nullptr, site_);
        the_owner.site_ip = site_->ip;
        ops_.entry = ops_entry;
        ops_.exit = ops_exit;
        ops_.priv = &the_owner;
        ops_.direct.entry = direct_entry;
        ops_.direct.exit = direct_exit;
        ops_.direct.gate = &gate_;
        ops_.direct.gate_mask = 4;
        ops_.light = light();
        if (light()) {
#if defined(__SANITIZE_ADDRESS__)
            GTEST_SKIP() << "sanitizer-instrumented dispatch is not clean: no light path to test";
#endif
            ASSERT_TRUE(dprobe::arch::ext_state_clean(reinterpret_cast<uintptr_t>(direct_entry)));
            ASSERT_TRUE(dprobe::arch::ext_state_clean(reinterpret_cast<uintptr_t>(direct_exit)));
        }
        ASSERT_EQ(0, dprobe::ftrace_ops_attach(&ops_, {&site_, 1}));
        attached_ = true;
        ASSERT_EQ(0u, nest(0)); // the thread's first hit (the light path leaves it to the full)
        const uint8_t hint = site_->light.load();
        if (light()) {
            ASSERT_TRUE(hint & SITE_LIGHT_DIRECT) << "not direct: the case tests nothing";
        } else {
            ASSERT_EQ(0, hint) << "the full path: the dispatch calls the direct handlers";
        }
        the_owner.entries = the_owner.exits = 0;
    }
    void TearDown() override
    {
        if (attached_) {
            dprobe::ftrace_ops_detach(&ops_, {&site_, 1});
            dprobe::ftrace_ops_retire(&ops_);
        }
        EXPECT_EQ(0UL, the_owner.bad);
        EXPECT_EQ(0UL, ops_entries) << "entry() ran though the ops gave direct handlers";
        EXPECT_EQ(0UL, ops_exits) << "exit() ran though the ops gave direct handlers";
        if (const dprobe::task_ctx *t = dprobe::peek_task_ctx()) {
            EXPECT_EQ(0u, t->shadow_top) << "frames left on the shadow stack";
        }
    }
    bool light() const
    {
        return GetParam();
    }

    // Static: a shadow frame may name the ops after the test (it is retired, not freed).
    static inline dprobe::ftrace_ops ops_;
    static inline unsigned int gate_;
    dprobe::ftrace_site *site_ = nullptr;
    bool attached_ = false;
};

TEST_P(ftrace_direct_handlers, are_called_with_the_ops_priv)
{
    if (IsSkipped()) return;
    EXPECT_EQ(6u, nest(6));
    EXPECT_EQ(7UL, the_owner.entries);
    EXPECT_EQ(7UL, the_owner.exits);
    if (light()) {
        // The body was called from the direct call stub: its return went to the direct exit.
        EXPECT_EQ(dprobe::arch::fgraph_return_direct_addr, direct_nest_return);
    }
}

TEST_P(ftrace_direct_handlers, a_gate_bit_in_the_mask_turns_them_off)
{
    if (IsSkipped()) return;
    __atomic_store_n(&gate_, 4u, __ATOMIC_RELEASE);
    EXPECT_EQ(3u, nest(3));
    EXPECT_EQ(0UL, the_owner.entries);
    EXPECT_EQ(0UL, the_owner.exits);
    __atomic_store_n(&gate_, 0u, __ATOMIC_RELEASE);
    EXPECT_EQ(3u, nest(3));
    EXPECT_EQ(4UL, the_owner.entries);
    EXPECT_EQ(4UL, the_owner.exits);
}

TEST_P(ftrace_direct_handlers, gate_bits_outside_the_mask_change_nothing)
{
    if (IsSkipped()) return;
    __atomic_store_n(&gate_, ~4u, __ATOMIC_RELEASE);
    EXPECT_EQ(3u, nest(3));
    EXPECT_EQ(4UL, the_owner.entries);
    EXPECT_EQ(4UL, the_owner.exits);
}

INSTANTIATE_TEST_SUITE_P(paths, ftrace_direct_handlers, ::testing::Values(true, false),
                         [](const auto &info) { return info.param ? "light" : "full"; });

} // namespace
