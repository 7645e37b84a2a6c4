// A kprobe and a jump site in the same entry bytes. A jump site (an fprobe on a function
// without a compiled-in site) replaces the entry's first instructions with a jmp to a detour
// that runs a copy of them: made over a kprobe's int3 or optimized jmp, it copies the probe's
// bytes as if they were the function's, and its jmp buries the probe (the traced program
// crashed: `dprobe record -e 'p:e1 libc.so.6:open' -e 'f:e3 libc.so.6:open'`). So a jump site
// is neither made nor enabled while a kprobe holds bytes of its entry, and a kprobe is not
// placed inside the entry of a jump site that is enabled or about to be: the second one is
// refused, the first keeps working, and the function computes what it computes.
#include "targets.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>

namespace
{

// kprobe_target (-O2, no site): mov %edi,%eax (2 bytes); mov $imm,%edx (5); imul; shr; ret.
// A jump site's jmp covers its first two instructions: offset 2 is inside.
unsigned (*volatile target)(unsigned) = kprobe_target;
std::atomic<int> kp_hits, fp_hits;

int count_pre(struct kprobe *, struct pt_regs *)
{
    kp_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
int count_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    fp_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

struct kprobe make_kprobe(unsigned offset)
{
    struct kprobe kp = {};
    kp.symbol_name = "kprobe_target";
    kp.offset = offset;
    kp.pre_handler = count_pre;
    return kp;
}

struct fprobe make_fprobe()
{
    struct fprobe fp = {};
    fp.entry_handler = count_entry;
    return fp;
}

void reset()
{
    kp_hits = 0;
    fp_hits = 0;
}

// An fprobe on kprobe_target is refused while a kprobe holds its entry.
void expect_fprobe_refused()
{
    struct fprobe fp = make_fprobe();
    const int err = register_fprobe(&fp, "kprobe_target", nullptr);
    EXPECT_NE(0, err);
    if (err == 0) unregister_fprobe(&fp);
}

// Once nothing holds the entry, an fprobe on kprobe_target goes in and fires on a call of X.
void expect_fprobe_fires(unsigned x)
{
    struct fprobe fp = make_fprobe();
    ASSERT_EQ(0, register_fprobe(&fp, "kprobe_target", nullptr));
    reset();
    target(x);
    EXPECT_EQ(1, fp_hits.load());
    unregister_fprobe(&fp);
}

TEST(jump_overlap, kprobe_at_the_entry_then_an_fprobe_is_refused)
{
    for (int opt : {1, 0}) { // optimized (a jmp) and int3
        SCOPED_TRACE(opt ? "optimized kprobe" : "int3 kprobe");
        ASSERT_EQ(0, kprobes_set_optimization(opt));
        struct kprobe kp = make_kprobe(0);
        ASSERT_EQ(0, register_kprobe(&kp));
        expect_fprobe_refused();
        reset();
        EXPECT_EQ(9u / DIV_FACTOR, target(9));
        EXPECT_EQ(1, kp_hits.load());
        unregister_kprobe(&kp);
        ASSERT_NO_FATAL_FAILURE(expect_fprobe_fires(9));
    }
    kprobes_set_optimization(1);
}

TEST(jump_overlap, kprobe_inside_an_unused_jump_site_keeps_it_from_being_enabled)
{
    // The jump site is made and then left unused: an int3 may go inside it.
    struct fprobe fp = make_fprobe();
    ASSERT_EQ(0, register_fprobe(&fp, "kprobe_target", nullptr));
    unregister_fprobe(&fp);
    struct kprobe kp = make_kprobe(2);
    ASSERT_EQ(0, register_kprobe(&kp));
    expect_fprobe_refused();
    reset();
    EXPECT_EQ(11u / DIV_FACTOR, target(11));
    EXPECT_EQ(1, kp_hits.load());
    EXPECT_EQ(0, fp_hits.load());
    unregister_kprobe(&kp);
    ASSERT_NO_FATAL_FAILURE(expect_fprobe_fires(11));
}

TEST(jump_overlap, kprobe_inside_an_enabled_jump_site_is_refused_or_runs)
{
    for (bool earlier : {false, true}) {
        // EARLIER: a kprobe went there before (while the jump site was unused) and left its
        // record, which the new one reuses.
        SCOPED_TRACE(earlier ? "a record made earlier" : "a new record");
        struct fprobe fp = make_fprobe();
        if (earlier) {
            ASSERT_EQ(0, register_fprobe(&fp, "kprobe_target", nullptr));
            unregister_fprobe(&fp);
            struct kprobe before = make_kprobe(2);
            ASSERT_EQ(0, register_kprobe(&before));
            unregister_kprobe(&before);
        }
        fp = make_fprobe();
        ASSERT_EQ(0, register_fprobe(&fp, "kprobe_target", nullptr));
        struct kprobe kp = make_kprobe(2);
        const int err = register_kprobe(&kp);
        reset();
        EXPECT_EQ(13u / DIV_FACTOR, target(13));
        EXPECT_EQ(1, fp_hits.load());
        // Refused, or placed where it runs (on the detour's copy of the instruction): never
        // lost, never over the jmp.
        EXPECT_EQ(err == 0 ? 1 : 0, kp_hits.load()) << "register_kprobe: " << err;
        if (err == 0) unregister_kprobe(&kp);
        unregister_fprobe(&fp);
        reset();
        EXPECT_EQ(13u / DIV_FACTOR, target(13));
        EXPECT_EQ(0, fp_hits.load() + kp_hits.load());
    }
}

} // namespace
