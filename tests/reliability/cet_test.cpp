// Code built with -fcf-protection (endbr64 at every function entry, as Debian builds its
// libraries): the landing pad stays the first instruction of every probed function, armed
// or not, so an indirect call (which with IBT enforced must land on an endbr64) still does;
// the probe sits after it; exits are reported.
#include "cet_targets.h"
#include "probe_set.h"

#include <gtest/gtest.h>

#include <cstring>

namespace
{

using rel::probe_kind;
using rel::probe_set;

class cf_protection : public ::testing::TestWithParam<probe_kind>
{
};

const unsigned char endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};

bool starts_with_endbr64(const void *fn)
{
    return std::memcmp(fn, endbr64, 4) == 0;
}

long model_leaf(long x)
{
    return 7 * x + 3;
}
long model_outer(long x)
{
    return 7 * x + 2;
}

long (*volatile outer)(long) = cet_outer;
long (*volatile indirect)(long (*)(long), long) = cet_call_indirect;

unsigned long entry_ip;
int note_ip(struct fprobe *, unsigned long ip, unsigned long, struct ftrace_regs *, void *)
{
    entry_ip = ip;
    return 0;
}

TEST_P(cf_protection, landing_pads_stay_in_front_of_the_probes)
{
    const void *fns[] = {(void *)cet_leaf, (void *)cet_outer, (void *)cet_call_indirect};
    for (const void *f : fns)
        ASSERT_TRUE(starts_with_endbr64(f)) << "built without -fcf-protection?";
    probe_set ps(GetParam(), {{"cet_leaf", (void *)cet_leaf},
                              {"cet_outer", (void *)cet_outer},
                              {"cet_call_indirect", (void *)cet_call_indirect}});
    ps.expect_values("cet_leaf", model_leaf);
    ps.expect_values("cet_outer", model_outer);
    ASSERT_EQ(0, ps.attach());
    for (const void *f : fns)
        EXPECT_TRUE(starts_with_endbr64(f));
    for (long i = 0; i < 100; ++i) {
        EXPECT_EQ(7 * i + 2, outer(i));
        EXPECT_EQ(7 * i + 4, indirect(cet_leaf, i));
        EXPECT_EQ(7 * i + 3, indirect(cet_outer, i));
    }
    ps.detach();
    for (const void *f : fns)
        EXPECT_TRUE(starts_with_endbr64(f));
    EXPECT_EQ(200, ps.exits("cet_outer"));
    EXPECT_EQ(300, ps.exits("cet_leaf"));
    EXPECT_EQ(200, ps.exits("cet_call_indirect"));
    EXPECT_EQ(0, ps.bad_values());
    EXPECT_EQ(0UL, ps.missed());
}

// The address handlers get as the function's entry is the probe's, after the landing pad.
TEST(cf_protection_sites, the_probe_follows_endbr64)
{
    struct fprobe fp = {};
    fp.entry_handler = note_ip;
    const char *sym[] = {"cet_leaf"};
    ASSERT_EQ(0, register_fprobe_syms(&fp, sym, 1));
    entry_ip = 0;
    EXPECT_EQ(3, cet_leaf(0));
    EXPECT_EQ(reinterpret_cast<unsigned long>(cet_leaf) + 4, entry_ip);
    unregister_fprobe(&fp);
    struct kretprobe rp = {};
    rp.kp.symbol_name = "cet_leaf";
    rp.handler = [](struct kretprobe_instance *, struct pt_regs *) { return 0; };
    ASSERT_EQ(0, register_kretprobe(&rp));
    EXPECT_EQ(reinterpret_cast<kprobe_opcode_t *>(cet_leaf) + 4, rp.kp.addr);
    EXPECT_TRUE(rp.kp.flags & KPROBE_FLAG_ON_FUNC_ENTRY);
    unregister_kretprobe(&rp);
}

INSTANTIATE_TEST_SUITE_P(kinds, cf_protection,
                         ::testing::Values(probe_kind::fprobe, probe_kind::kretprobe),
                         [](const auto &info) { return std::string(rel::kind_name(info.param)); });

} // namespace
