// Threads in a hot loop through probed instructions, with exact counts while the probes stay
// armed, and no crash, no wrong result and consistent counts while other threads register,
// unregister, enable, disable and globally disarm them.
#include "targets.h"

#include "kprobe/kprobe_internal.h"

#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" long insn_hot(long, long);
extern "C" long insn_sse(long, long);

namespace
{

long (*volatile hot)(long, long) = insn_hot;

std::atomic<unsigned long> pre_hits, post_hits, ret_hits;
std::atomic<bool> bad_regs;

int hot_pre(struct kprobe *p, struct pt_regs *regs)
{
    pre_hits.fetch_add(1, std::memory_order_relaxed);
    if (regs->ip != reinterpret_cast<unsigned long>(p->addr) + 1) bad_regs = true;
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
                for (long i = 0;
                     !stop.load(std::memory_order_relaxed) && (per_thread == 0 || n < per_thread);
                     ++i, ++n)
                    if (hot(i, t) != i + 2 * t + 1) wrong.fetch_add(1);
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

// --- jump optimization ------------------------------------------------------------------------

bool listed_optimized(const struct kprobe &p)
{
    char addr[32];
    std::snprintf(addr, sizeof addr, "%016lx", reinterpret_cast<unsigned long>(p.addr));
    const std::string list = dprobe::kprobes_list_text();
    const size_t at = list.find(addr);
    if (at == std::string::npos) return false;
    const std::string line = list.substr(at, list.find('\n', at) - at);
    return line.find("[OPTIMIZED]") != std::string::npos;
}

// insn_hot+4 (lea ; add: 8 bytes) can take the jmp; it shows in the list until disabled.
TEST(kprobe_optimized, listed_until_disabled)
{
    ASSERT_EQ(1, kprobes_optimization());
    struct kprobe p = {};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    p.pre_handler = hot_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    reset();
    EXPECT_TRUE(kprobe_optimized(&p)) << dprobe::kprobe_optimization_status(&p);
    EXPECT_TRUE(listed_optimized(p)) << dprobe::kprobes_list_text();
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(1u, pre_hits.load());
    EXPECT_EQ(0, disable_kprobe(&p));
    EXPECT_FALSE(kprobe_optimized(&p));
    EXPECT_FALSE(listed_optimized(p));
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(1u, pre_hits.load());
    EXPECT_EQ(0, enable_kprobe(&p));
    EXPECT_TRUE(kprobe_optimized(&p));
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(2u, pre_hits.load());
    unregister_kprobe(&p);
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(2u, pre_hits.load());
    EXPECT_FALSE(bad_regs);
}

// A post handler cannot run after a jmp: a probe with one keeps the address an int3.
TEST(kprobe_optimized, post_handler_joining_unoptimizes)
{
    struct kprobe a = {}, b = {};
    a.addr = b.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    a.pre_handler = b.pre_handler = hot_pre;
    b.post_handler = hot_post;
    ASSERT_EQ(0, register_kprobe(&a));
    EXPECT_TRUE(kprobe_optimized(&a));
    ASSERT_EQ(0, register_kprobe(&b));
    EXPECT_FALSE(kprobe_optimized(&a));
    EXPECT_FALSE(kprobe_optimized(&b));
    reset();
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(2u, pre_hits.load());
    EXPECT_EQ(1u, post_hits.load());
    unregister_kprobe(&b);
    EXPECT_TRUE(kprobe_optimized(&a)); // the kernel re-optimizes too
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(3u, pre_hits.load());
    unregister_kprobe(&a);
}

// A second probe inside the region (not at its first byte) turns the first back into an
// int3 probe; both fire. When it goes, the first is optimized again.
TEST(kprobe_optimized, second_probe_inside_region)
{
    struct kprobe p1 = {}, p2 = {};
    p1.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    p2.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(1)); // +8: inside [+4, +12)
    p1.pre_handler = p2.pre_handler = hot_pre;
    ASSERT_EQ(0, register_kprobe(&p1));
    ASSERT_TRUE(kprobe_optimized(&p1));
    ASSERT_EQ(0, register_kprobe(&p2));
    EXPECT_FALSE(kprobe_optimized(&p1));
    EXPECT_FALSE(listed_optimized(p1)) << dprobe::kprobes_list_text();
    reset();
    for (long i = 0; i < 100; ++i)
        EXPECT_EQ(i + 1, hot(i, 0));
    EXPECT_EQ(200u, pre_hits.load());
    unregister_kprobe(&p2);
    EXPECT_TRUE(kprobe_optimized(&p1));
    reset();
    for (long i = 0; i < 100; ++i)
        EXPECT_EQ(i + 1, hot(i, 0));
    EXPECT_EQ(100u, pre_hits.load());
    unregister_kprobe(&p1);
    EXPECT_FALSE(bad_regs);
}

TEST(kprobe_optimized, knob_off_and_on)
{
    struct kprobe p = {};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    p.pre_handler = hot_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    ASSERT_TRUE(kprobe_optimized(&p));
    EXPECT_EQ(-EINVAL, kprobes_set_optimization(2));
    ASSERT_EQ(0, kprobes_set_optimization(0));
    EXPECT_EQ(0, kprobes_optimization());
    EXPECT_FALSE(kprobe_optimized(&p));
    EXPECT_EQ("optimization is off", dprobe::kprobe_optimization_status(&p));
    reset();
    const unsigned long traps = dprobe::kp::stats().int3_hits.load();
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(1u, pre_hits.load());
    EXPECT_EQ(traps + 1, dprobe::kp::stats().int3_hits.load());
    ASSERT_EQ(0, kprobes_set_optimization(1));
    EXPECT_TRUE(kprobe_optimized(&p));
    const unsigned long opt = dprobe::kp::opt_hits_total();
    EXPECT_EQ(5, hot(2, 1));
    EXPECT_EQ(2u, pre_hits.load());
    EXPECT_EQ(traps + 1, dprobe::kp::stats().int3_hits.load());
    EXPECT_EQ(opt + 1, dprobe::kp::opt_hits_total());
    // A new probe registered while the knob is off stays an int3 probe.
    unregister_kprobe(&p);
    ASSERT_EQ(0, kprobes_set_optimization(0));
    p = {};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    p.pre_handler = hot_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    EXPECT_FALSE(kprobe_optimized(&p));
    ASSERT_EQ(0, kprobes_set_optimization(1));
    EXPECT_TRUE(kprobe_optimized(&p));
    unregister_kprobe(&p);
}

std::atomic<unsigned long> p1_hits;
int p1_pre(struct kprobe *p, struct pt_regs *regs)
{
    p1_hits.fetch_add(1, std::memory_order_relaxed);
    return hot_pre(p, regs);
}

// Exact counts while hot-loop threads run through a probe that is optimized and
// unoptimized under them (the knob, a second probe coming and going inside the region):
// it stays armed throughout, so it sees every call exactly once.
TEST(kprobe_optimized, hot_loop_while_optimizing)
{
    struct kprobe p1 = {}, p2 = {};
    p1.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    p2.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(1));
    p1.pre_handler = p1_pre;
    p2.pre_handler = hot_pre;
    p1_hits = 0;
    ASSERT_EQ(0, register_kprobe(&p1));
    reset();
    workers w;
    w.start(0);
    unsigned long optimized_seen = 0;
    for (int round = 0; round < 40; ++round) {
        optimized_seen += kprobe_optimized(&p1) ? 1 : 0;
        EXPECT_EQ(0, kprobes_set_optimization(round & 1));
        if (round % 4 == 2) {
            ASSERT_EQ(0, register_kprobe(&p2));
            unregister_kprobe(&p2);
            p2.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(1));
            p2.flags = 0;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(0, kprobes_set_optimization(1));
    EXPECT_TRUE(kprobe_optimized(&p1));
    w.stop = true;
    w.join();
    unregister_kprobe(&p1);
    EXPECT_EQ(0u, w.wrong.load());
    EXPECT_EQ(w.calls.load(), p1_hits.load());
    EXPECT_GT(optimized_seen, 10u);
    EXPECT_FALSE(bad_regs);
    EXPECT_EQ(0u, p1.nmissed);
    // Exact counts with the probe optimized from start to end.
    p1 = {};
    p1.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(0));
    p1.pre_handler = hot_pre;
    ASSERT_EQ(0, register_kprobe(&p1));
    ASSERT_TRUE(kprobe_optimized(&p1));
    reset();
    workers w2;
    w2.start(50000);
    w2.join();
    unregister_kprobe(&p1);
    EXPECT_EQ(0u, w2.wrong.load());
    EXPECT_EQ(w2.calls.load(), pre_hits.load());
    EXPECT_EQ(0u, p1.nmissed);
}

// A kretprobe on a function without a compiled-in site rides on a jump site (no trap) while
// optimization is on; with it off it takes the int3 entry.
TEST(kprobe_optimized, kretprobe_on_a_jump_site)
{
    const long expect = insn_sse(3, 4);
    for (int on : {1, 0}) {
        SCOPED_TRACE(on ? "optimization on" : "optimization off");
        ASSERT_EQ(0, kprobes_set_optimization(on));
        struct kretprobe rp = {};
        rp.kp.symbol_name = on ? "insn_sse" : "insn_hot";
        rp.handler = hot_ret;
        rp.maxactive = 4;
        ASSERT_EQ(0, register_kretprobe(&rp));
        EXPECT_EQ(on != 0, kprobe_ftrace(&rp.kp) != 0);
        reset();
        const unsigned long traps = dprobe::kp::stats().int3_hits.load();
        for (long i = 0; i < 100; ++i) {
            if (on)
                EXPECT_EQ(expect, insn_sse(3, 4));
            else
                EXPECT_EQ(i + 1, hot(i, 0));
        }
        EXPECT_EQ(100u, ret_hits.load());
        EXPECT_EQ(traps + (on ? 0 : 100), dprobe::kp::stats().int3_hits.load());
        unregister_kretprobe(&rp);
    }
    kprobes_set_optimization(1);
}

// A thread caught in the int3 hook (its pre handler blocks) while another thread forks: in
// the child that thread is gone, and a new thread of the child that takes its context over
// must not inherit its place in the kprobe read side, or the child's unregister_kprobe
// waits for it for ever (a forked child's detach hung that way).
std::atomic<pid_t> caught_tid{0};
std::atomic<bool> caught_in_pre{false}, let_go{false};

int catching_pre(struct kprobe *, struct pt_regs *)
{
    if (static_cast<pid_t>(syscall(SYS_gettid)) == caught_tid.load()) {
        caught_in_pre = true;
        while (!let_go.load())
            sched_yield();
    }
    return 0;
}

TEST(kprobe_threads, forked_child_unregisters_with_a_parent_thread_caught_in_the_hook)
{
    kprobes_set_optimization(0); // the int3 hook, not an optimized probe's jump
    struct kprobe p = {};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(hot_insn(1));
    p.pre_handler = catching_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    std::thread caught([] {
        caught_tid = static_cast<pid_t>(syscall(SYS_gettid));
        EXPECT_EQ(hot(1, 2), 6);
    });
    while (!caught_in_pre.load())
        sched_yield();
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // A thread of the child hits the probe (taking the free context over), stays alive,
        // and the probe is unregistered meanwhile.
        std::atomic<bool> hit{false}, done{false};
        std::thread t([&] {
            if (hot(2, 3) != 9) _exit(2);
            hit = true;
            while (!done.load())
                sched_yield();
        });
        while (!hit.load())
            sched_yield();
        unregister_kprobe(&p);
        done = true;
        t.join();
        _exit(0);
    }
    int status = -1;
    bool ended = false;
    for (int i = 0; i < 1000 && !ended; i++) { // 10 s
        ended = waitpid(child, &status, WNOHANG) == child;
        if (!ended) usleep(10000);
    }
    if (!ended) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
    }
    let_go = true;
    caught.join();
    unregister_kprobe(&p);
    kprobes_set_optimization(1);
    ASSERT_TRUE(ended) << "the child's unregister_kprobe did not return within 10 s";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

} // namespace
