// Every register across a jprobe hit, on every way in (a patchable-entry site, an -mfentry
// site, a jump site, an int3 entry) and every way a handler comes back (a tail call of
// jprobe_return(), a call of it followed by an epilogue, a call after which the handler would
// go on, no call at all), also after touching vector registers (which a jprobe on a site then
// saves around it: the direct call's vector variant, or the full path elsewhere): the
// probed function finds every general register, the flags, its stack arguments and the vector
// registers (their upper halves too, when the caller had them in use) as its caller set them;
// the handler gets the arguments, and whatever it clobbers (caller-saved registers, flags, its
// copy of the stack arguments, callee-saved registers before a jprobe_return() that must jump)
// is not seen by the function or its caller; the upper vector state is not left in use. The
// functions and handlers are assembly (jprobe_regs_targets.S): what they record is exact.
#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/jprobes_arch.h"
#include "core/ftrace.h"

#include <dprobe/kprobes.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cpuid.h>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>

extern "C" {
struct jpd_regs {
    uint64_t rax, rbx, rcx, rdx, rsi, rdi, rbp, r8, r9, r10, r11, r12, r13, r14, r15;
    uint64_t flags;
    uint64_t stack[2];
    uint8_t xmm[16][16];
    uint8_t ymmh[16][16];
    uint64_t ret;    // the return address a handler found
    uint64_t xinuse; // XINUSE at the function's entry (after its record)
};
static_assert(offsetof(jpd_regs, flags) == 120 && offsetof(jpd_regs, xmm) == 144 &&
              offsetof(jpd_regs, ymmh) == 400 && offsetof(jpd_regs, ret) == 656 &&
              offsetof(jpd_regs, xinuse) == 664);
extern jpd_regs jpd_in, jpd_seen, jpd_hseen, jpd_after;
extern void *jpd_fn;
extern uint64_t jpd_avx, jpd_have_vzeroupper, jpd_have_xinuse;
long jpd_call();
uint64_t jpd_xinuse();
long jpd_pfe(long, long, long, long, long, long, long, long);
long jpd_fentry(long, long, long, long, long, long, long, long);
long jpd_plain(long, long, long, long, long, long, long, long);
long jpd_plain_int3(long, long, long, long, long, long, long, long);
void jpd_h_tail();
void jpd_h_site();
void jpd_h_jump();
void jpd_h_returns();
void jpd_h_vector();
void jpd_h_vector_jump();
extern char dprobe_jprobe_direct_landing[];
extern char dprobe_jprobe_direct_vlanding[];
long jp_int8(long a, long b, long c, long d, long e, long f, long g, long h);
long jp_recursive(long x);
long jp_thread_target(long x, long y);
}

namespace
{

enum class mode { pfe, fentry, jump, int3 };
enum class how { tail, site, jump, returns, vector, vector_jump };

const char *name(mode m)
{
    const char *n[] = {"pfe", "fentry", "jump", "int3"};
    return n[static_cast<int>(m)];
}
const char *name(how h)
{
    const char *n[] = {"tail", "site", "jump", "returns", "vector", "vector_jump"};
    return n[static_cast<int>(h)];
}

bool have_avx()
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}

bool have_xinuse()
{
    unsigned a, b, c, d;
    return have_avx() && __get_cpuid_count(0xd, 1, &a, &b, &c, &d) && (a & 4);
}

using params = std::tuple<mode, how, bool>;

class jprobe_regs : public ::testing::TestWithParam<params>
{
  protected:
    void SetUp() override
    {
        if (std::get<2>(GetParam()) && !have_avx()) GTEST_SKIP() << "no AVX";
        ASSERT_EQ(kprobes_set_optimization(std::get<0>(GetParam()) != mode::int3), 0);
    }
    void TearDown() override
    {
        jpd_avx = 0;
        kprobes_set_optimization(1);
    }
};

void *function_of(mode m)
{
    switch (m) {
    case mode::pfe:
        return reinterpret_cast<void *>(&jpd_pfe);
    case mode::fentry:
        return reinterpret_cast<void *>(&jpd_fentry);
    case mode::jump:
        return reinterpret_cast<void *>(&jpd_plain);
    default:
        return reinterpret_cast<void *>(&jpd_plain_int3);
    }
}

void *handler_of(how h)
{
    switch (h) {
    case how::tail:
        return reinterpret_cast<void *>(&jpd_h_tail);
    case how::site:
        return reinterpret_cast<void *>(&jpd_h_site);
    case how::jump:
        return reinterpret_cast<void *>(&jpd_h_jump);
    case how::returns:
        return reinterpret_cast<void *>(&jpd_h_returns);
    case how::vector:
        return reinterpret_cast<void *>(&jpd_h_vector);
    default:
        return reinterpret_cast<void *>(&jpd_h_vector_jump);
    }
}

void randomize(std::mt19937_64 &rng)
{
    std::memset(&jpd_in, 0, sizeof jpd_in);
    uint64_t *gpr = &jpd_in.rax;
    for (int i = 0; i < 15; ++i)
        gpr[i] = rng();
    // CF PF AF ZF SF OF at random; DF clear, as the ABI wants at a call; IF and bit 1 set.
    jpd_in.flags = 0x202 | (rng() & 0x8d5);
    jpd_in.stack[0] = rng();
    jpd_in.stack[1] = rng();
    for (auto &x : jpd_in.xmm)
        for (auto &b : x)
            b = static_cast<uint8_t>(rng());
    for (auto &y : jpd_in.ymmh)
        for (auto &b : y)
            b = static_cast<uint8_t>(rng());
}

std::string hex(const uint8_t *p, size_t n)
{
    std::string s;
    char b[4];
    for (size_t i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%02x", p[n - 1 - i]);
        s += b;
    }
    return s;
}

TEST_P(jprobe_regs, every_register_as_the_caller_set_it)
{
    const auto [m, h, avx] = GetParam();
    const bool site = m != mode::int3;
    const bool direct = site; // on a site: the direct call
    // The direct call's vector variant saves the registers a handler may change.
    const bool vector = h == how::vector || h == how::vector_jump;
    struct jprobe jp = {};
    jp.kp.addr = static_cast<kprobe_opcode_t *>(function_of(m));
    jp.entry = handler_of(h);
    ASSERT_EQ(register_jprobe(&jp), 0);
    EXPECT_EQ(!!(jp.kp.flags & KPROBE_FLAG_FTRACE), site) << dprobe::kprobes_list_text();
    const auto *d = static_cast<const dprobe::arch::jprobe_desc *>(jp.jh);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->direct != 0, direct) << "the direct call takes the handlers on sites";
    EXPECT_EQ((d->direct & dprobe::arch::JPROBE_DIRECT_VECTOR) != 0, direct && vector)
        << "the vector registers saved around a handler that is not light";
    if (h == how::tail || h == how::site || h == how::returns) {
        EXPECT_EQ(d->may_jump, 0u) << "jprobe_return() never has to jump out of it";
    }
    if (h == how::jump || h == how::vector_jump) {
        EXPECT_NE(d->may_jump, 0u);
    }
    EXPECT_EQ(d->nsites, h == how::site || h == how::vector ? 1u : 0u);
    if (site) {
        dprobe::ftrace_site *s = dprobe::ftrace_location(reinterpret_cast<uintptr_t>(jp.kp.addr));
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(s->light.load(), SITE_LIGHT_CALL) << "the one user has an entry of its own";
    }
    jpd_fn = jp.kp.addr;
    jpd_avx = avx;
    jpd_have_vzeroupper = have_avx();
    jpd_have_xinuse = have_xinuse();
    std::mt19937_64 rng(0x6a70 + static_cast<int>(m) * 16 + static_cast<int>(h) * 2 + avx);
    // The first hit of a thread (its context allocated) takes the full path: several rounds.
    for (int round = 0; round < 4; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        randomize(rng);
        std::memset(&jpd_seen, 0, sizeof jpd_seen);
        std::memset(&jpd_hseen, 0, sizeof jpd_hseen);
        const long r = jpd_call();
        EXPECT_EQ(r, static_cast<long>(jpd_in.rdi + 1));
        // The function: every general register, the flags, its stack arguments.
        const uint64_t *in = &jpd_in.rax, *seen = &jpd_seen.rax;
        const char *names[] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8",
                               "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
        for (int i = 0; i < 15; ++i)
            EXPECT_EQ(seen[i], in[i]) << names[i];
        EXPECT_EQ(jpd_seen.flags & 0xcd5, jpd_in.flags & 0xcd5) << "flags";
        EXPECT_EQ(jpd_seen.stack[0], jpd_in.stack[0]);
        EXPECT_EQ(jpd_seen.stack[1], jpd_in.stack[1]);
        // Vector registers: the argument registers always; all sixteen where dprobe saves
        // nothing (the direct call of a light handler, from the thread's second hit on) or
        // keeps them all (a jump site, whose callers may keep values anywhere; an int3).
        const int nvec =
            (direct && !vector && round > 0) || m == mode::jump || m == mode::int3 ? 16 : 8;
        for (int i = 0; i < nvec; ++i) {
            EXPECT_EQ(hex(jpd_seen.xmm[i], 16), hex(jpd_in.xmm[i], 16)) << "xmm" << i;
            if (avx) {
                EXPECT_EQ(hex(jpd_seen.ymmh[i], 16), hex(jpd_in.ymmh[i], 16))
                    << "the upper half of ymm" << i;
            }
        }
        if (!avx && have_xinuse()) {
            EXPECT_EQ(jpd_seen.xinuse & 4, 0u) << "the upper vector state was left in use";
        }
        // The caller: its callee-saved registers and its stack.
        EXPECT_EQ(jpd_after.rbx, jpd_in.rbx);
        EXPECT_EQ(jpd_after.rbp, jpd_in.rbp);
        EXPECT_EQ(jpd_after.r12, jpd_in.r12);
        EXPECT_EQ(jpd_after.r13, jpd_in.r13);
        EXPECT_EQ(jpd_after.r14, jpd_in.r14);
        EXPECT_EQ(jpd_after.r15, jpd_in.r15);
        EXPECT_EQ(jpd_after.stack[0], jpd_in.stack[0]);
        EXPECT_EQ(jpd_after.stack[1], jpd_in.stack[1]);
        // The handler: the arguments.
        EXPECT_EQ(jpd_hseen.rdi, jpd_in.rdi);
        EXPECT_EQ(jpd_hseen.rsi, jpd_in.rsi);
        EXPECT_EQ(jpd_hseen.rdx, jpd_in.rdx);
        EXPECT_EQ(jpd_hseen.rcx, jpd_in.rcx);
        EXPECT_EQ(jpd_hseen.r8, jpd_in.r8);
        EXPECT_EQ(jpd_hseen.r9, jpd_in.r9);
        EXPECT_EQ(jpd_hseen.rax, jpd_in.rax) << "al: the vector registers of a variadic call";
        EXPECT_EQ(jpd_hseen.r10, jpd_in.r10) << "the static chain";
        EXPECT_EQ(jpd_hseen.stack[0], jpd_in.stack[0]);
        EXPECT_EQ(jpd_hseen.stack[1], jpd_in.stack[1]);
        for (int i = 0; vector && i < 8; ++i) {
            EXPECT_EQ(hex(jpd_hseen.xmm[i], 16), hex(jpd_in.xmm[i], 16)) << "xmm" << i;
            if (avx) {
                EXPECT_EQ(hex(jpd_hseen.ymmh[i], 16), hex(jpd_in.ymmh[i], 16))
                    << "an __m256 argument reaches the handler whole: ymm" << i;
            }
        }
        if (round > 0 && direct) {
            EXPECT_EQ(jpd_hseen.ret,
                      reinterpret_cast<uint64_t>(vector ? dprobe_jprobe_direct_vlanding
                                                        : dprobe_jprobe_direct_landing))
                << "not the direct call";
        }
    }
    unregister_jprobe(&jp);
    EXPECT_EQ(jp.kp.nmissed, 0u);
    EXPECT_EQ(jp.nreturned, h == how::returns ? 4u : 0u);
    // Unregistered: the function runs alone.
    jpd_hseen.rdi = 0;
    randomize(rng);
    EXPECT_EQ(jpd_call(), static_cast<long>(jpd_in.rdi + 1));
    EXPECT_EQ(jpd_hseen.rdi, 0u);
}

// C handlers built with ASan call its runtime (through the PLT): they are not light, and take
// the direct call's vector variant; the assembly ones above stay light.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool c_handlers_light = false;
#else
constexpr bool c_handlers_light = true;
#endif
constexpr unsigned long c_handlers_direct =
    c_handlers_light ? dprobe::arch::JPROBE_DIRECT
                     : dprobe::arch::JPROBE_DIRECT | dprobe::arch::JPROBE_DIRECT_VECTOR;
char *const c_handlers_landing =
    c_handlers_light ? dprobe_jprobe_direct_landing : dprobe_jprobe_direct_vlanding;

// A C function with parameter DWARF on a patch site (jprobe_targets.c, -pg -mfentry), a C
// handler that is integer code only: the direct call copies exactly the stack arguments
// DWARF tells (16 bytes), the handler gets them and writes its copy, the function gets its
// own.
volatile long int8_seen[8];
volatile uintptr_t int8_ret;
long h_int8_clean(long a, long b, long c, long d, long e, long f, long g, long h)
{
    int8_seen[0] = a;
    int8_seen[1] = b;
    int8_seen[2] = c;
    int8_seen[3] = d;
    int8_seen[4] = e;
    int8_seen[5] = f;
    int8_seen[6] = g;
    int8_seen[7] = h;
    int8_ret = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
    g = h = -1; // its copy
    asm volatile("" : : "r"(&g), "r"(&h) : "memory");
    jprobe_return();
    return 0;
}

TEST(jprobe_direct, stack_arguments_known_from_dwarf)
{
    ASSERT_EQ(kprobes_set_optimization(1), 0);
    struct jprobe jp = {};
    jp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&jp_int8);
    jp.entry = JPROBE_ENTRY(h_int8_clean);
    ASSERT_EQ(register_jprobe(&jp), 0);
    EXPECT_TRUE(jp.kp.flags & KPROBE_FLAG_FTRACE);
    const auto *d = static_cast<const dprobe::arch::jprobe_desc *>(jp.jh);
    EXPECT_EQ(d->direct, c_handlers_direct) << "a known length";
    EXPECT_EQ(d->stack_len, 16u);
    for (long round = 0; round < 4; ++round) {
        int8_ret = 0;
        EXPECT_EQ(jp_int8(1, 2, 3, 4, 5, 6, 70 + round, 80),
                  1 + 4 + 9 + 16 + 25 + 36 + 7 * (70 + round) + 640);
        const long want[] = {1, 2, 3, 4, 5, 6, 70 + round, 80};
        for (int i = 0; i < 8; ++i)
            EXPECT_EQ(int8_seen[i], want[i]) << i;
        if (round > 0) {
            EXPECT_EQ(int8_ret, reinterpret_cast<uintptr_t>(c_handlers_landing))
                << "not the direct call";
        }
    }
    unregister_jprobe(&jp);
    EXPECT_EQ(jp.nreturned, 0u);
    EXPECT_EQ(jp.kp.nmissed, 0u);
}

// The direct call keeps the kprobes' guarantees: a hit while its handler runs on the thread
// (the handler calling the function) is not handled and counts in nmissed; unregister waits
// for a handler still running.
std::atomic<long> rec_calls, rec_bad;
long h_recursive_clean(long x)
{
    rec_calls.fetch_add(1);
    if (jp_recursive(x) != x + 1) rec_bad.fetch_add(1);
    jprobe_return();
    return 0;
}

std::atomic<int> spin_state; // 0: armed; the handler makes it 1 and spins until it is 2
long h_spin_clean(long, long)
{
    if (spin_state.load() == 0) {
        spin_state.store(1);
        while (spin_state.load() == 1)
            __builtin_ia32_pause();
        spin_state.store(3);
    }
    jprobe_return();
    return 0;
}

TEST(jprobe_direct, recursion_is_missed)
{
    ASSERT_EQ(kprobes_set_optimization(1), 0);
    struct jprobe jp = {};
    jp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&jp_recursive);
    jp.entry = JPROBE_ENTRY(h_recursive_clean);
    ASSERT_EQ(register_jprobe(&jp), 0);
    EXPECT_EQ(static_cast<const dprobe::arch::jprobe_desc *>(jp.jh)->direct, c_handlers_direct);
    rec_calls = rec_bad = 0;
    for (long i = 0; i < 5; ++i)
        EXPECT_EQ(jp_recursive(i), i + 1);
    EXPECT_EQ(rec_calls, 5);
    EXPECT_EQ(rec_bad, 0);
    EXPECT_EQ(jp.kp.nmissed, 5u);
    unregister_jprobe(&jp);
}

TEST(jprobe_direct, unregister_waits_for_a_running_handler)
{
    ASSERT_EQ(kprobes_set_optimization(1), 0);
    struct jprobe jp = {};
    jp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(&jp_thread_target);
    jp.entry = JPROBE_ENTRY(h_spin_clean);
    ASSERT_EQ(register_jprobe(&jp), 0);
    EXPECT_EQ(static_cast<const dprobe::arch::jprobe_desc *>(jp.jh)->direct, c_handlers_direct);
    // A thread's first hit takes the full path: one before the one that spins.
    spin_state = 2;
    long result = 0;
    std::thread caller([&] {
        jp_thread_target(0, 0);
        spin_state = 0;
        result = jp_thread_target(5, 6);
    });
    while (spin_state.load() != 1)
        std::this_thread::yield();
    std::atomic<bool> done{false};
    std::thread unreg([&] {
        unregister_jprobe(&jp);
        done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(done) << "unregister_jprobe returned while its handler ran";
    spin_state = 2;
    unreg.join();
    caller.join();
    EXPECT_EQ(spin_state, 3);
    EXPECT_EQ(result, 21);
}

INSTANTIATE_TEST_SUITE_P(
    all, jprobe_regs,
    ::testing::Combine(::testing::Values(mode::pfe, mode::fentry, mode::jump, mode::int3),
                       ::testing::Values(how::tail, how::site, how::jump, how::returns, how::vector,
                                         how::vector_jump),
                       ::testing::Bool()),
    [](const auto &i) {
        return std::string(name(std::get<0>(i.param))) + "_" + name(std::get<1>(i.param)) +
               (std::get<2>(i.param) ? "_ymm" : "");
    });

} // namespace
