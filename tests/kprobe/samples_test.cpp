// The behaviour of the kernel's samples/kprobes/kprobe_example.c and kretprobe_example.c:
// one pre line then one post line per call, regs->ip == p->addr + 1, -ENOENT for a bad
// symbol; a kretprobe timing calls with per-instance data, an entry handler that discards
// some calls without counting them missed, and nmissed counting the activations beyond
// maxactive that were in flight at once.
#include "targets.h"

#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <ctime>
#include <thread>
#include <vector>

namespace
{

unsigned (*volatile target)(unsigned) = kprobe_target;
unsigned long (*volatile blocking)(unsigned long) = kprobe_blocking_target;

// kprobe_example: a log of what the handlers saw, written in signal context.
struct entry {
    char kind; // 'p' or 'q' (post)
    unsigned long addr, ip, flags;
};
entry log_buf[64];
std::atomic<int> log_n;

int handler_pre(struct kprobe *p, struct pt_regs *regs)
{
    int n = log_n++;
    if (n < 64) log_buf[n] = {'p', reinterpret_cast<unsigned long>(p->addr), regs->ip, regs->flags};
    return 0;
}

void handler_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
    int n = log_n++;
    if (n < 64) log_buf[n] = {'q', reinterpret_cast<unsigned long>(p->addr), regs->ip, flags};
}

TEST(kprobe_samples, kprobe_example)
{
    struct kprobe kp = {};
    kp.symbol_name = "kprobe_target";
    kp.pre_handler = handler_pre;
    kp.post_handler = handler_post;
    ASSERT_EQ(0, register_kprobe(&kp)); // "Planted kprobe at %p"
    log_n = 0;
    for (unsigned i = 0; i < 8; ++i)
        EXPECT_EQ(i * 10 / 3, target(i * 10));
    unregister_kprobe(&kp); // "kprobe at %p unregistered"
    ASSERT_EQ(16, log_n.load());
    for (int i = 0; i < 16; ++i) {
        const entry &e = log_buf[i];
        EXPECT_EQ(i % 2 ? 'q' : 'p', e.kind) << i;
        EXPECT_EQ(reinterpret_cast<unsigned long>(kp.addr), e.addr);
        if (e.kind == 'p') {
            EXPECT_EQ(e.addr + 1, e.ip); // x86: just past the int3
            EXPECT_TRUE(e.flags & 0x200) << "IF set in user mode";
        } else {
            EXPECT_EQ(0u, e.flags); // the post handler's flags argument
            EXPECT_GT(e.ip, e.addr);
        }
    }
    struct kprobe bad = {};
    bad.symbol_name = "no_such_symbol_kernel_clone";
    EXPECT_EQ(-ENOENT, register_kprobe(&bad)); // "register_kprobe failed, returned %d"
}

// kretprobe_example.
struct my_data {
    long long entry_stamp;
};

long long now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

std::atomic<int> returns, bad_ret, skipped;
std::atomic<long long> total_ns;

int entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    // The kernel sample skips kernel threads (no mm); skip odd arguments here.
    if (regs->di & 1) {
        ++skipped;
        return 1;
    }
    reinterpret_cast<my_data *>(ri->data)->entry_stamp = now_ns();
    return 0;
}

int ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    const unsigned long retval = regs_return_value(regs);
    const long long delta = now_ns() - reinterpret_cast<my_data *>(ri->data)->entry_stamp;
    if (delta < 0 || retval % 2 != 1) // even argument x returns x + 1
        ++bad_ret;
    total_ns += delta;
    ++returns;
    return 0;
}

TEST(kprobe_samples, kretprobe_example)
{
    struct kretprobe rp = {};
    rp.handler = ret_handler;
    rp.entry_handler = entry_handler;
    rp.data_size = sizeof(struct my_data);
    rp.maxactive = 20;
    rp.kp.symbol_name = "kprobe_blocking_target";
    ASSERT_EQ(0, register_kretprobe(&rp)); // "Planted return probe at %s: %p"
    returns = bad_ret = skipped = 0;
    total_ns = 0;
    for (unsigned long i = 0; i < 10; ++i)
        EXPECT_EQ(i + 1, blocking(i));
    EXPECT_EQ(5, returns.load());
    EXPECT_EQ(5, skipped.load());
    EXPECT_EQ(0, rp.nmissed) << "discarded entries are not misses";

    // 30 activations in flight at once (threads held inside the function): 10 missed.
    static std::atomic<int> inside;
    static std::atomic<bool> release;
    inside = 0;
    release = false;
    block_hook = [] {
        ++inside;
        while (!release.load())
            std::this_thread::yield();
    };
    returns = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 30; ++t)
        threads.emplace_back([t] { blocking(2 * static_cast<unsigned long>(t)); });
    while (inside.load() < 30)
        std::this_thread::yield();
    release = true;
    for (auto &th : threads)
        th.join();
    block_hook = nullptr;
    unregister_kretprobe(&rp); // "Missed probing %d instances of %s"
    EXPECT_EQ(10, rp.nmissed);
    EXPECT_EQ(20, returns.load());
    EXPECT_EQ(0, bad_ret.load());
}

} // namespace
