// Threads in a hot loop through probed instructions, with exact counts while the probes stay
// armed, and no crash, no wrong result and consistent counts while other threads register,
// unregister, enable, disable and globally disarm them.
#include "targets.h"

#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

extern "C" long insn_hot(long, long);

namespace {

long (*volatile hot)(long, long) = insn_hot;

std::atomic<unsigned long> pre_hits, post_hits, ret_hits;
std::atomic<bool> bad_regs;

int hot_pre(struct kprobe *p, struct pt_regs *regs)
{
    pre_hits.fetch_add(1, std::memory_order_relaxed);
    if (regs->ip != reinterpret_cast<unsigned long>(p->addr) + 1)
        bad_regs = true;
    return 0;
}

void hot_post(struct kprobe *, struct pt_regs *, unsigned long)
{
    post_hits.fetch_add(1, std::memory_order_relaxed);
}

int hot_ret(struct kretprobe_instance *, struct pt_regs *)
{
    ret_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

constexpr int nthreads = 4;

// Each thread calls insn_hot(i, t) and checks the result: lea (%rdi,%rsi,2) + 1.
struct workers {
    std::atomic<bool> stop{false};
    std::atomic<unsigned long> calls{0}, wrong{0};
    std::vector<std::thread> threads;

    void start(unsigned long per_thread)
    {
        for (int t = 0; t < nthreads; ++t)
            threads.emplace_back([this, t, per_thread] {
                unsigned long n = 0;
                for (long i = 0; !stop.load(std::memory_order_relaxed) &&
                                 (per_thread == 0 || n < per_thread);
                     ++i, ++n)
                    if (hot(i, t) != i + 2 * t + 1)
                        wrong.fetch_add(1);
                calls.fetch_add(n);
            });
    }
    void join()
    {
        for (auto &th : threads)
            th.join();
        threads.clear();
    }
};

void reset()
{
    pre_hits = 0;
    post_hits = 0;
    ret_hits = 0;
    bad_regs = false;
}

uintptr_t hot_insn(int n)
{
    // insn_hot: endbr64 (4) ; lea (%rdi,%rsi,2),%rax (4) ; add $1,%rax (4) ; ret
    static const uintptr_t offs[] = {4, 8, 12};
    return reinterpret_cast<uintptr_t>(insn_hot) + offs[n];
}

TEST(kprobe_threads, exact_counts_while_armed)
{
    for (int which = 0; which < 3; ++which) {
        for (bool post : {false, true}) {
            SCOPED_TRACE("instruction " + std::to_string(which) + (post ? " pre+post" : " pre"));
            struct kprobe p = {};
            p.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(which));
            p.pre_handler = hot_pre;
            p.post_handler = post ? hot_post : nullptr;
            ASSERT_EQ(0, register_kprobe(&p));
            reset();
            workers w;
            w.start(20000);
            w.join();
            unregister_kprobe(&p);
            EXPECT_EQ(0u, w.wrong.load());
            EXPECT_EQ(w.calls.load(), pre_hits.load());
            EXPECT_EQ(post ? w.calls.load() : 0, post_hits.load());
            EXPECT_EQ(0u, p.nmissed);
            EXPECT_FALSE(bad_regs);
        }
    }
}

TEST(kprobe_threads, kretprobe_exact_counts)
{
    struct kretprobe rp = {};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(insn_hot);
    rp.handler = hot_ret;
    rp.maxactive = nthreads;
    ASSERT_EQ(0, register_kretprobe(&rp));
    reset();
    workers w;
    w.start(20000);
    w.join();
    unregister_kretprobe(&rp);
    EXPECT_EQ(0u, w.wrong.load());
    EXPECT_EQ(w.calls.load(), ret_hits.load());
    EXPECT_EQ(0, rp.nmissed);
}

TEST(kprobe_threads, arm_disarm_while_running)
{
    reset();
    workers w;
    w.start(0);
    struct kprobe p1 = {}, p2 = {};
    p1.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    p1.pre_handler = hot_pre;
    p1.post_handler = hot_post;
    p2.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(1));
    p2.pre_handler = hot_pre;
    struct kretprobe rp = {};
    rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(insn_hot);
    rp.handler = hot_ret;
    rp.maxactive = 64;
    for (int round = 0; round < 60; ++round) {
        ASSERT_EQ(0, register_kprobe(&p1));
        ASSERT_EQ(0, register_kprobe(&p2));
        ASSERT_EQ(0, register_kretprobe(&rp));
        for (int k = 0; k < 3; ++k) {
            EXPECT_EQ(0, disable_kprobe(&p1));
            EXPECT_EQ(0, disable_kretprobe(&rp));
            EXPECT_EQ(0, kprobes_set_enabled(0));
            EXPECT_EQ(0, kprobes_set_enabled(1));
            EXPECT_EQ(0, enable_kprobe(&p1));
            EXPECT_EQ(0, enable_kretprobe(&rp));
        }
        unregister_kprobe(&p2);
        unregister_kretprobe(&rp);
        unregister_kprobe(&p1);
        p1.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
        p1.flags = 0;
        p2.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(1));
        p2.flags = 0;
        rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(insn_hot);
        rp.kp.flags = 0;
    }
    // After the last unregister no handler runs any more.
    const unsigned long pre = pre_hits.load(), post = post_hits.load(), ret = ret_hits.load();
    for (int i = 0; i < 1000; ++i)
        hot(i, 0);
    w.stop = true;
    w.join();
    EXPECT_EQ(pre, pre_hits.load());
    EXPECT_EQ(post, post_hits.load());
    EXPECT_EQ(ret, ret_hits.load());
    EXPECT_EQ(0u, w.wrong.load());
    EXPECT_GT(w.calls.load(), 0u);
    EXPECT_GT(pre_hits.load(), 0u);
    EXPECT_LE(pre_hits.load(), 2 * w.calls.load() + 1000);
    EXPECT_LE(post_hits.load(), pre_hits.load());
    EXPECT_LE(ret_hits.load(), w.calls.load() + 1000);
    EXPECT_FALSE(bad_regs);
}

} // namespace
