// Optimized probes at every instruction boundary of a function that keeps live state in
// the red zone, vector registers and flags: same results as unprobed, every hit seen, and
// arming/disarming while threads run through the function.
#include "arch/x86_64/insn.h"
#include "core/optprobe.h"
#include "core/task_ctx.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <immintrin.h>
#include <memory>
#include <thread>
#include <vector>

extern "C" unsigned long opt_leaf(unsigned long a, unsigned long b);
extern "C" char opt_leaf_end[];

namespace
{

using leaf_fn = unsigned long (*)(unsigned long, unsigned long);
volatile leaf_fn leaf = opt_leaf;

std::atomic<unsigned long> hits{0};
unsigned long seen_di;

void clobbering_handler(void *, struct pt_regs *regs)
{
    hits.fetch_add(1, std::memory_order_relaxed);
    seen_di = regs->di;
    // Wreck every register a careless handler could: vector state, flags, DF.
    __asm__ volatile("vpcmpeqd %%ymm3, %%ymm3, %%ymm3\n\t"
                     "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"
                     "vzeroupper\n\t"
                     "xor %%eax, %%eax\n\t"
                     "cmp $1, %%eax\n\t"
                     "std\n\t"
                     "cld" ::
                         : "xmm0", "xmm3", "eax", "cc");
}

std::vector<uintptr_t> boundaries()
{
    std::vector<uintptr_t> out;
    auto start = reinterpret_cast<uintptr_t>(opt_leaf);
    auto end = reinterpret_cast<uintptr_t>(opt_leaf_end);
    for (uintptr_t at = start; at < end;) {
        auto i = dprobe::arch::insn_decode(reinterpret_cast<const void *>(at), end - at, at);
        if (!i) break;
        out.push_back(at);
        at += i->len;
    }
    return out;
}

TEST(optprobe, every_boundary_same_results)
{
    auto start = reinterpret_cast<uintptr_t>(opt_leaf);
    size_t size = reinterpret_cast<uintptr_t>(opt_leaf_end) - start;
    std::vector<uint8_t> code(reinterpret_cast<const uint8_t *>(start),
                              reinterpret_cast<const uint8_t *>(start) + size);
    const unsigned long want1 = leaf(100, 200), want2 = leaf(900, 3);
    int optimized = 0;
    for (uintptr_t at : boundaries()) {
        std::string why;
        auto op = dprobe::optprobe_prepare(start, size, code.data(), at, clobbering_handler,
                                           nullptr, &why);
        if (!op) continue; // e.g. a region crossing the end
        ASSERT_EQ(0, dprobe::optprobe_arm(*op)) << std::hex << at;
        ++optimized;
        hits = 0;
        EXPECT_EQ(want1, leaf(100, 200)) << "probe at +" << at - start;
        EXPECT_EQ(want2, leaf(900, 3)) << "probe at +" << at - start;
        EXPECT_EQ(2UL, hits.load());
        ASSERT_EQ(0, dprobe::optprobe_disarm(*op));
        EXPECT_EQ(0, std::memcmp(reinterpret_cast<void *>(start), code.data(), size));
        dprobe::synchronize_dispatch();
        dprobe::optprobe_free(std::move(op));
    }
    EXPECT_GE(optimized, 10);
}

TEST(optprobe, handler_sees_registers_and_ip)
{
    auto start = reinterpret_cast<uintptr_t>(opt_leaf);
    size_t size = reinterpret_cast<uintptr_t>(opt_leaf_end) - start;
    auto b = boundaries();
    std::string why;
    auto op = dprobe::optprobe_prepare(start, size, reinterpret_cast<const uint8_t *>(start), b[4],
                                       clobbering_handler, nullptr, &why);
    ASSERT_NE(nullptr, op) << why;
    ASSERT_EQ(0, dprobe::optprobe_arm(*op));
    seen_di = 0;
    leaf(4242, 1);
    EXPECT_EQ(4242UL, seen_di);
    ASSERT_EQ(0, dprobe::optprobe_disarm(*op));
}

TEST(optprobe, arm_and_disarm_while_threads_run)
{
    auto start = reinterpret_cast<uintptr_t>(opt_leaf);
    size_t size = reinterpret_cast<uintptr_t>(opt_leaf_end) - start;
    std::vector<uint8_t> code(reinterpret_cast<const uint8_t *>(start),
                              reinterpret_cast<const uint8_t *>(start) + size);
    const unsigned long want = leaf(7, 8);
    std::atomic<bool> stop{false};
    std::atomic<unsigned long> wrong{0}, calls{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i)
        ts.emplace_back([&] {
            while (!stop.load(std::memory_order_relaxed)) {
                if (leaf(7, 8) != want) wrong.fetch_add(1);
                calls.fetch_add(1, std::memory_order_relaxed);
            }
        });
    auto b = boundaries();
    // A thread may still be inside a disarmed detour, which points at its optprobe: keep
    // them all until the threads are gone.
    std::vector<std::unique_ptr<dprobe::optprobe>> retired;
    for (int round = 0; round < 40; ++round) {
        std::string why;
        auto op = dprobe::optprobe_prepare(start, size, code.data(), b[1 + round % 8],
                                           clobbering_handler, nullptr, &why);
        ASSERT_NE(nullptr, op) << why;
        ASSERT_EQ(0, dprobe::optprobe_arm(*op));
        unsigned long c = calls.load();
        while (calls.load() < c + 200)
            std::this_thread::yield();
        ASSERT_EQ(0, dprobe::optprobe_disarm(*op));
        retired.push_back(std::move(op));
    }
    stop = true;
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(0UL, wrong.load());
}

} // namespace
