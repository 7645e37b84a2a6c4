// Optimized kprobes whose regions overlap are optimized in turn: A (at overlap_a, its
// region reaching into overlap_b's) and B (at overlap_b). A thread can still be in A's
// detour after A's jmp was taken away (preempted there, or returning into it from a signal
// handler), and that detour ends with a jump back to overlap_c, in the middle of B's region:
// once B's jmp is written there, that jump lands in the middle of an instruction (SIGILL,
// found by tests/stress). The test runs A's detour copy the way such a thread would, with B
// optimized, then without. The same for a thread coming back from a single step of B's
// instruction after B was optimized.
#include "kprobe/kprobe_internal.h"

#include <dprobe/kprobes.h>

#include <gtest/gtest.h>

extern "C" {
unsigned long overlap_fn(unsigned long);
unsigned long overlap_run(uintptr_t copy, unsigned long x);
unsigned long overlap_resume(uintptr_t at, unsigned long v);
extern char overlap_a[], overlap_b[], overlap_c[];
}

namespace
{

int hits_a, hits_b, posts_b;
int pre_a(struct kprobe *, struct pt_regs *)
{
    ++hits_a;
    return 0;
}
int pre_b(struct kprobe *, struct pt_regs *)
{
    ++hits_b;
    return 0;
}

void post_b(struct kprobe *, struct pt_regs *, unsigned long)
{
    ++posts_b;
}

volatile auto fn = overlap_fn;

} // namespace

TEST(optprobe_overlap, a_detour_jumping_back_into_an_optimized_region_lands_on_its_copy)
{
    struct kprobe a = {}, b = {};
    a.addr = reinterpret_cast<kprobe_opcode_t *>(overlap_a);
    a.pre_handler = pre_a;
    ASSERT_EQ(0, register_kprobe(&a));
    ASSERT_TRUE(kprobe_optimized(&a)) << "A not optimized: the case tests nothing";
    EXPECT_EQ(8UL, fn(7));
    EXPECT_EQ(1, hits_a);
    uintptr_t a_copy = 0;
    {
        std::lock_guard<std::mutex> g(dprobe::kp::kprobe_mutex());
        const dprobe::kp::kp_record *ra =
            dprobe::kp::lookup_record(reinterpret_cast<uintptr_t>(overlap_a));
        ASSERT_NE(nullptr, ra);
        ASSERT_TRUE(ra->opt);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(overlap_c), ra->opt->addr + ra->opt->len)
            << "A's region must end inside B's";
        a_copy = ra->opt->d.copy();
    }
    // A goes; B, whose region covers overlap_c, is optimized.
    unregister_kprobe(&a);
    b.addr = reinterpret_cast<kprobe_opcode_t *>(overlap_b);
    b.pre_handler = pre_b;
    ASSERT_EQ(0, register_kprobe(&b));
    ASSERT_TRUE(kprobe_optimized(&b)) << "B not optimized: the case tests nothing";
    EXPECT_EQ(8UL, fn(7));
    EXPECT_EQ(1, hits_b);
    // A thread still in A's detour: it runs A's copies (add, mov), then jumps back.
    EXPECT_EQ(42UL, overlap_run(a_copy, 41));
    EXPECT_EQ(1, hits_b) << "it passed B's instruction in A's copy: no hit";
    // B goes: the jump back is aimed at the code again, and still right.
    unregister_kprobe(&b);
    EXPECT_EQ(42UL, overlap_run(a_copy, 41));
    EXPECT_EQ(8UL, fn(7));
}

TEST(optprobe_overlap, a_single_step_returning_late_lands_on_the_detour_copy)
{
    hits_b = posts_b = 0;
    // With a post handler B stays an int3 probe: its instruction runs from the ss copy, and
    // the thread goes on through the slot's ss return jump.
    struct kprobe post = {};
    post.addr = reinterpret_cast<kprobe_opcode_t *>(overlap_b);
    post.pre_handler = pre_b;
    post.post_handler = post_b;
    ASSERT_EQ(0, register_kprobe(&post));
    ASSERT_FALSE(kprobe_optimized(&post));
    EXPECT_EQ(8UL, fn(7));
    EXPECT_EQ(1, hits_b);
    EXPECT_EQ(1, posts_b);
    uintptr_t ss_ret = 0;
    {
        std::lock_guard<std::mutex> g(dprobe::kp::kprobe_mutex());
        const dprobe::kp::kp_record *r =
            dprobe::kp::lookup_record(reinterpret_cast<uintptr_t>(overlap_b));
        ASSERT_NE(nullptr, r);
        ss_ret = r->ss_ret;
    }
    ASSERT_NE(0u, ss_ret);
    EXPECT_EQ(42UL, overlap_resume(ss_ret, 42)) << "the ss return jump goes to overlap_c";
    // The post handler goes and B is optimized: a thread that single-stepped just before, and
    // comes back from its signal handler only now, takes the same jump.
    unregister_kprobe(&post);
    struct kprobe b = {};
    b.addr = reinterpret_cast<kprobe_opcode_t *>(overlap_b);
    b.pre_handler = pre_b;
    ASSERT_EQ(0, register_kprobe(&b));
    ASSERT_TRUE(kprobe_optimized(&b)) << "B not optimized: the case tests nothing";
    EXPECT_EQ(42UL, overlap_resume(ss_ret, 42));
    unregister_kprobe(&b);
    EXPECT_EQ(42UL, overlap_resume(ss_ret, 42));
    EXPECT_EQ(8UL, fn(7));
}
