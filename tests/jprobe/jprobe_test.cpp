// jprobes: the kernel's kprobes self-test cases for jprobes (test_jprobe, test_jprobes of
// kernel/test_kprobes.c, Linux 4.14), and what user space adds: every way arguments are
// passed (integer and vector registers, the stack, structs by value, pointers), handlers that
// write their parameters, handlers that return without jprobe_return(), the vector state,
// threads, and unregistering while a handler runs. Built once per site flavour: the targets
// with patch sites (the jprobe rides on the site), and plain (a jump site while optimization
// is on, an int3 entry while it is off: both are run).
#include "jprobe_targets.h"

#include <dprobe/kprobes.h>

#include <gtest/gtest.h>

// The handlers of jprobe_vec_targets.c (their vector parameters need the ISA the file is built
// for; only their addresses are needed here).
extern "C" void jp_h_m256();
extern "C" void jp_h_m512();

#include <atomic>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <chrono>
#include <cpuid.h>
#include <cstring>
#include <thread>
#include <vector>

namespace
{

enum class mode { site, jump, int3 };

const char *mode_name(mode m)
{
    return m == mode::site ? "site" : m == mode::jump ? "jump" : "int3";
}

class jprobe_flavour : public ::testing::TestWithParam<mode>
{
  protected:
    void SetUp() override { ASSERT_EQ(kprobes_set_optimization(GetParam() != mode::int3), 0); }
    void TearDown() override { kprobes_set_optimization(1); }
    // The probe rides on a site (patch or jump) or traps, as this flavour says.
    void expect_mechanism(const struct jprobe &jp)
    {
        if (GetParam() == mode::int3)
            EXPECT_FALSE(jp.kp.flags & KPROBE_FLAG_FTRACE) << dprobe::kprobes_list_text();
        else
            EXPECT_TRUE(jp.kp.flags & KPROBE_FLAG_FTRACE) << dprobe::kprobes_list_text();
        EXPECT_FALSE(jp.kp.flags & KPROBE_FLAG_OPTIMIZED);
    }
};

// The kernel's test_jprobe: the handler sees the value, then jprobe_return().
uint32_t rand1;
std::atomic<int> jph_val;
uint32_t j_kprobe_handler(uint32_t value)
{
    if (value != rand1) ADD_FAILURE() << "incorrect value in jprobe handler";
    jph_val = rand1;
    jprobe_return();
    return 0;
}
uint32_t j_kprobe_handler2(uint32_t value)
{
    if (value != rand1 * 2) ADD_FAILURE() << "incorrect value in jprobe handler2";
    jph_val = jph_val + 1;
    jprobe_return();
    return 0;
}

TEST_P(jprobe_flavour, test_jprobe)
{
    rand1 = 0x1234567;
    struct jprobe jp = {};
    jp.kp.symbol_name = "jp_target";
    jp.entry = JPROBE_ENTRY(j_kprobe_handler);
    ASSERT_EQ(register_jprobe(&jp), 0);
    expect_mechanism(jp);
    jph_val = 0;
    EXPECT_EQ(jp_target(rand1), rand1 / 3 + 1);
    EXPECT_EQ(jph_val, static_cast<int>(rand1)) << "jprobe handler not called";
    EXPECT_NE(dprobe::kprobes_list_text().find("  j  jp_target+"), std::string::npos)
        << dprobe::kprobes_list_text();
    unregister_jprobe(&jp);
    jph_val = 0;
    jp_target(rand1);
    EXPECT_EQ(jph_val, 0) << "handler ran after unregister";
    EXPECT_EQ(jp.nreturned, 0u);
}

TEST_P(jprobe_flavour, test_jprobes_batch)
{
    rand1 = 0x7654321;
    struct jprobe jp = {}, jp2 = {};
    jp.kp.symbol_name = "jp_target";
    jp.entry = JPROBE_ENTRY(j_kprobe_handler);
    jp2.kp.symbol_name = "jp_target2";
    jp2.entry = JPROBE_ENTRY(j_kprobe_handler2);
    struct jprobe *jps[2] = {&jp, &jp2};
    ASSERT_EQ(register_jprobes(jps, 2), 0);
    jph_val = 0;
    EXPECT_EQ(jp_target(rand1), rand1 / 3 + 1);
    EXPECT_EQ(jph_val, static_cast<int>(rand1));
    EXPECT_EQ(jp_target2(rand1 * 2), rand1 * 2 * 7 + 2);
    EXPECT_EQ(jph_val, static_cast<int>(rand1) + 1);
    // Disabled: not called; enabled again: called.
    ASSERT_EQ(disable_jprobe(&jp2), 0);
    jph_val = 5;
    jp_target2(rand1 * 2);
    EXPECT_EQ(jph_val, 5);
    ASSERT_EQ(enable_jprobe(&jp2), 0);
    jp_target2(rand1 * 2);
    EXPECT_EQ(jph_val, 6);
    unregister_jprobes(jps, 2);
    // Registered again after unregistering (cleared as the kernel's test does).
    jp.kp.addr = nullptr;
    jp.kp.flags = 0;
    ASSERT_EQ(register_jprobe(&jp), 0);
    jph_val = 0;
    jp_target(rand1);
    EXPECT_EQ(jph_val, static_cast<int>(rand1));
    unregister_jprobe(&jp);
}

TEST_P(jprobe_flavour, batch_rolls_back_on_failure)
{
    struct jprobe jp = {}, bad = {};
    jp.kp.symbol_name = "jp_target";
    jp.entry = JPROBE_ENTRY(j_kprobe_handler);
    bad.kp.symbol_name = "jp_target2";
    bad.kp.offset = 1; // not an entry
    bad.entry = JPROBE_ENTRY(j_kprobe_handler2);
    struct jprobe *jps[2] = {&jp, &bad};
    EXPECT_EQ(register_jprobes(jps, 2), -EINVAL);
    jph_val = 0;
    jp_target(1);
    EXPECT_EQ(jph_val, 0);
    EXPECT_EQ(dprobe::kprobes_list_text(), "");
}

// Arguments as the function has them, every way they are passed.
std::atomic<bool> seen;
long seen_l[16];
double seen_d[16];
char seen_s[64];

long h_int6(long a, long b, long c, long d, long e, long f)
{
    long v[] = {a, b, c, d, e, f};
    std::memcpy(seen_l, v, sizeof v);
    seen = true;
    jprobe_return();
    return 0;
}

long h_int8(long a, long b, long c, long d, long e, long f, long g, long h)
{
    long v[] = {a, b, c, d, e, f, g, h};
    std::memcpy(seen_l, v, sizeof v);
    seen = true;
    jprobe_return();
    return 0;
}

double h_dbl10(double a, double b, double c, double d, double e, double f, double g, double h,
               double i, double j)
{
    double v[] = {a, b, c, d, e, f, g, h, i, j};
    std::memcpy(seen_d, v, sizeof v);
    seen = true;
    jprobe_return();
    return 0;
}

double h_mixed(int a, double b, long c, float d, const char *e, double f)
{
    seen_l[0] = a;
    seen_d[0] = b;
    seen_l[1] = c;
    seen_d[1] = d;
    std::snprintf(seen_s, sizeof seen_s, "%s", e);
    seen_d[2] = f;
    seen = true;
    jprobe_return();
    return 0;
}

long h_struct(struct jp_big big, struct jp_small small, const int *p)
{
    long v[] = {big.a, big.b, big.c, big.d, small.x, *p};
    std::memcpy(seen_l, v, sizeof v);
    seen_d[0] = small.y;
    seen = true;
    jprobe_return();
    return 0;
}

long h_thread_like(long x)
{
    seen_l[0] = x;
    jprobe_return();
    return 0;
}

long h_varargs(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    seen_l[0] = n;
    for (int i = 0; i < n && i < 8; ++i)
        seen_l[i + 1] = va_arg(ap, long);
    va_end(ap);
    seen = true;
    jprobe_return();
    return 0;
}

template <class H> struct probe_guard {
    struct jprobe jp = {};
    int err;
    probe_guard(const char *sym, H *h)
    {
        jp.kp.symbol_name = sym;
        jp.entry = JPROBE_ENTRY(h);
        seen = false;
        err = register_jprobe(&jp);
    }
    ~probe_guard()
    {
        if (!err) unregister_jprobe(&jp);
    }
};

TEST_P(jprobe_flavour, integer_arguments)
{
    probe_guard g("jp_int6", h_int6);
    ASSERT_EQ(g.err, 0);
    EXPECT_EQ(g.jp.kp.ainsn.stack_len, 0u) << "DWARF: all in registers, nothing to copy";
    expect_mechanism(g.jp);
    EXPECT_EQ(jp_int6(1, -2, 3, 1L << 40, 5, -6), 1 - 4 + 9 + 4 * (1L << 40) + 25 - 36);
    ASSERT_TRUE(seen);
    const long want[] = {1, -2, 3, 1L << 40, 5, -6};
    for (int i = 0; i < 6; ++i)
        EXPECT_EQ(seen_l[i], want[i]) << i;
}

TEST_P(jprobe_flavour, stack_passed_integers)
{
    probe_guard g("jp_int8", h_int8);
    ASSERT_EQ(g.err, 0);
    EXPECT_EQ(g.jp.kp.ainsn.stack_len, 16u) << "DWARF: g and h on the stack";
    EXPECT_EQ(jp_int8(1, 2, 3, 4, 5, 6, 70, 80), 1 + 4 + 9 + 16 + 25 + 36 + 490 + 640);
    ASSERT_TRUE(seen);
    const long want[] = {1, 2, 3, 4, 5, 6, 70, 80};
    for (int i = 0; i < 8; ++i)
        EXPECT_EQ(seen_l[i], want[i]) << i;
}

TEST_P(jprobe_flavour, floating_point_and_stack_passed_doubles)
{
    probe_guard g("jp_dbl10", h_dbl10);
    ASSERT_EQ(g.err, 0);
    EXPECT_EQ(g.jp.kp.ainsn.stack_len, 16u) << "DWARF: i and j on the stack";
    double want = 0;
    for (int i = 1; i <= 10; ++i)
        want += i * (i + 0.5);
    EXPECT_DOUBLE_EQ(jp_dbl10(1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5), want);
    ASSERT_TRUE(seen);
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(seen_d[i], i + 1.5) << i;
}

TEST_P(jprobe_flavour, mixed_arguments)
{
    probe_guard g("jp_mixed", h_mixed);
    ASSERT_EQ(g.err, 0);
    EXPECT_DOUBLE_EQ(jp_mixed(-7, 0.25, 1L << 33, 1.5f, "xyz", 1e10),
                     -7 + 0.5 + 3.0 * (1L << 33) + 6 + 5 * 'x' + 6e10);
    ASSERT_TRUE(seen);
    EXPECT_EQ(seen_l[0], -7);
    EXPECT_EQ(seen_d[0], 0.25);
    EXPECT_EQ(seen_l[1], 1L << 33);
    EXPECT_EQ(seen_d[1], 1.5);
    EXPECT_STREQ(seen_s, "xyz");
    EXPECT_EQ(seen_d[2], 1e10);
}

TEST_P(jprobe_flavour, struct_by_value_and_pointer)
{
    probe_guard g("jp_struct", h_struct);
    ASSERT_EQ(g.err, 0);
    EXPECT_EQ(g.jp.kp.ainsn.stack_len, 32u) << "DWARF: the 32-byte struct in memory";
    const int seven = 7;
    EXPECT_EQ(jp_struct({10, 20, 30, 40}, {50, 2.5}, &seven), 10 + 40 + 90 + 160 + 250 + 15 + 49);
    ASSERT_TRUE(seen);
    const long want[] = {10, 20, 30, 40, 50, 7};
    for (int i = 0; i < 6; ++i)
        EXPECT_EQ(seen_l[i], want[i]) << i;
    EXPECT_EQ(seen_d[0], 2.5);
}

TEST_P(jprobe_flavour, variadic_arguments)
{
    probe_guard g("jp_varargs", h_varargs);
    ASSERT_EQ(g.err, 0);
    EXPECT_EQ(g.jp.kp.ainsn.stack_len, unsigned{JPROBE_MAX_STACK_SIZE}) << "variadic";
    // Five in registers, two on the stack.
    EXPECT_EQ(jp_varargs(7, 1L, 2L, 3L, 4L, 5L, 6L, 7L), 1 + 4 + 9 + 16 + 25 + 36 + 49);
    ASSERT_TRUE(seen);
    for (int i = 0; i <= 7; ++i)
        EXPECT_EQ(seen_l[i], i ? i : 7) << i;
}

// A handler that writes every parameter, registers and stack copies alike, and one that
// returns instead of calling jprobe_return(): the function gets the originals either way.
long h_modify(long a, long b, long c, long d, long e, long f, long g, double x)
{
    a = b = c = d = e = f = g = 1000;
    x = -1;
    long *volatile keep[] = {&a, &b, &c, &d, &e, &f, &g};
    double *volatile keepx = &x;
    (void)keep;
    (void)keepx;
    seen = true;
    jprobe_return();
    return 0;
}
long h_modify_returns(long a, long b, long c, long d, long e, long f, long g, double x)
{
    a = b = c = d = e = f = g = 1000;
    x = -1;
    long *volatile keep[] = {&a, &b, &c, &d, &e, &f, &g};
    double *volatile keepx = &x;
    (void)keep;
    (void)keepx;
    seen = true;
    return -1; // no jprobe_return()
}

TEST_P(jprobe_flavour, handler_writing_its_parameters_changes_a_copy)
{
    const long want = 1 + 4 + 9 + 16 + 25 + 36 + 49 + 20;
    {
        probe_guard g("jp_modify", h_modify);
        ASSERT_EQ(g.err, 0);
        EXPECT_EQ(jp_modify(1, 2, 3, 4, 5, 6, 7, 2.5), want);
        EXPECT_TRUE(seen);
        EXPECT_EQ(g.jp.nreturned, 0u);
    }
    {
        probe_guard g("jp_modify", h_modify_returns);
        ASSERT_EQ(g.err, 0);
        for (int i = 0; i < 3; ++i)
            EXPECT_EQ(jp_modify(1, 2, 3, 4, 5, 6, 7, 2.5), want);
        EXPECT_TRUE(seen);
        EXPECT_EQ(g.jp.nreturned, 3u) << "returns without jprobe_return() are counted";
    }
}

// A kprobe and a jprobe at the same entry (one record, two users of the site when it has
// one): both handlers run on each call, each its own way, and either goes alone.
std::atomic<int> kp_hits;
int count_pre(struct kprobe *, struct pt_regs *regs)
{
    if (regs->di != 9) ADD_FAILURE() << "kprobe handler: rdi";
    ++kp_hits;
    return 0;
}

TEST_P(jprobe_flavour, beside_a_kprobe)
{
    struct kprobe kp = {};
    kp.symbol_name = "jp_recursive";
    kp.pre_handler = count_pre;
    probe_guard g("jp_recursive", h_thread_like);
    ASSERT_EQ(g.err, 0);
    ASSERT_EQ(register_kprobe(&kp), 0);
    kp_hits = 0;
    seen_l[0] = 0;
    EXPECT_EQ(jp_recursive(9), 10);
    EXPECT_EQ(jp_recursive(9), 10);
    EXPECT_EQ(kp_hits, 2);
    EXPECT_EQ(seen_l[0], 9);
    EXPECT_EQ(g.jp.kp.nmissed, 0u);
    EXPECT_EQ(kp.nmissed, 0u);
    const std::string list = dprobe::kprobes_list_text();
    EXPECT_NE(list.find("  j  jp_recursive+"), std::string::npos) << list;
    EXPECT_NE(list.find("  k  jp_recursive+"), std::string::npos) << list;
    unregister_kprobe(&kp);
    seen_l[0] = 0;
    EXPECT_EQ(jp_recursive(9), 10);
    EXPECT_EQ(kp_hits, 2);
    EXPECT_EQ(seen_l[0], 9) << "the jprobe alone";
}

// Refusals: not a function entry (-EINVAL), no handler (-EINVAL), arguments beyond what a
// jprobe copies (-E2BIG, from DWARF), unknown symbol (-ENOENT).
long h_any()
{
    jprobe_return();
    return 0;
}

TEST_P(jprobe_flavour, refusals)
{
    struct jprobe jp = {};
    jp.kp.symbol_name = "jp_int6";
    jp.kp.offset = 8;
    jp.entry = JPROBE_ENTRY(h_any);
    EXPECT_EQ(register_jprobe(&jp), -EINVAL);
    jp = {};
    jp.kp.symbol_name = "jp_int6";
    EXPECT_EQ(register_jprobe(&jp), -EINVAL);
    jp = {};
    jp.kp.symbol_name = "jp_too_many";
    jp.entry = JPROBE_ENTRY(h_any);
    EXPECT_EQ(register_jprobe(&jp), -E2BIG);
    jp = {};
    jp.kp.symbol_name = "jp_no_such_function";
    jp.entry = JPROBE_ENTRY(h_any);
    EXPECT_EQ(register_jprobe(&jp), -ENOENT);
    EXPECT_EQ(dprobe::kprobes_list_text(), "");
    // The function stays callable and correct.
    EXPECT_EQ(jp_too_many(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 16);
}

// A hit while a kprobe handler runs on the thread (here the jprobe's own, calling the
// function) is not handled and counts in nmissed, as test_kprobe_missed expects.
std::atomic<int> rec_calls;
long h_recursive(long x)
{
    ++rec_calls;
    if (jp_recursive(x) != x + 1) ADD_FAILURE() << "nested call";
    jprobe_return();
    return 0;
}

TEST_P(jprobe_flavour, nmissed_on_recursion)
{
    probe_guard g("jp_recursive", h_recursive);
    ASSERT_EQ(g.err, 0);
    rec_calls = 0;
    EXPECT_EQ(jp_recursive(41), 42);
    EXPECT_EQ(jp_recursive(1), 2);
    EXPECT_EQ(rec_calls, 2);
    EXPECT_EQ(g.jp.kp.nmissed, 2u);
}

// Unregistering while a handler runs returns only after it is done.
std::atomic<int> slow_state;
long h_slow(long x, long y)
{
    (void)x;
    (void)y;
    slow_state = 1;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (slow_state == 1 && std::chrono::steady_clock::now() < end)
        std::this_thread::yield();
    slow_state = 3;
    jprobe_return();
    return 0;
}

TEST_P(jprobe_flavour, unregister_while_hit)
{
    struct jprobe jp = {};
    jp.kp.symbol_name = "jp_thread_target";
    jp.entry = JPROBE_ENTRY(h_slow);
    ASSERT_EQ(register_jprobe(&jp), 0);
    slow_state = 0;
    long result = 0;
    std::thread caller([&] { result = jp_thread_target(5, 6); });
    while (slow_state == 0)
        std::this_thread::yield();
    std::atomic<bool> done{false};
    std::thread unreg([&] {
        unregister_jprobe(&jp);
        done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(done) << "unregister_jprobe returned while its handler ran";
    slow_state = 2;
    unreg.join();
    EXPECT_EQ(slow_state, 3);
    caller.join();
    EXPECT_EQ(result, 21);
}

// Threads call the function while the probe comes and goes: every hit sees consistent
// arguments and every call its result.
std::atomic<long> thread_hits, thread_bad;
long h_thread(long x, long y)
{
    if (y != ~x) ++thread_bad;
    ++thread_hits;
    x = y = 0; // the function still gets the originals
    jprobe_return();
    return 0;
}

TEST_P(jprobe_flavour, threads_hit_while_registering)
{
    thread_hits = thread_bad = 0;
    std::atomic<bool> stop{false};
    std::atomic<long> wrong{0}, calls{0};
    std::vector<std::thread> ts;
    for (int n = 0; n < 3; ++n)
        ts.emplace_back([&, n] {
            for (long i = n * 1000000L; !stop; ++i) {
                if (jp_thread_target(i, ~i) != i * 3 + ~i) ++wrong;
                ++calls;
            }
        });
    struct jprobe jp = {};
    for (int round = 0; round < 20; ++round) {
        jp = {};
        jp.kp.symbol_name = "jp_thread_target";
        jp.entry = JPROBE_ENTRY(h_thread);
        ASSERT_EQ(register_jprobe(&jp), 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(GetParam() == mode::int3 ? 20 : 5));
        unregister_jprobe(&jp);
    }
    stop = true;
    for (auto &t : ts)
        t.join();
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(thread_bad, 0);
    EXPECT_GT(thread_hits, 0);
    EXPECT_GT(calls, thread_hits);
}

// The upper halves of the vector registers: a handler that leaves them in use does not leave
// the program with them in use (XINUSE bit 2 read with XGETBV, ECX=1).
uint64_t xinuse()
{
    uint32_t lo, hi;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return (uint64_t{hi} << 32) | lo;
}

long h_dirty(long x, long y)
{
    (void)x;
    (void)y;
    asm volatile("vpcmpeqd %%ymm8, %%ymm8, %%ymm8" ::: "xmm8");
    seen = true;
    jprobe_return();
    return 0;
}

TEST_P(jprobe_flavour, vector_state_left_clean)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 4) || !__builtin_cpu_supports("avx"))
        GTEST_SKIP() << "no AVX or no XGETBV with ECX=1";
    probe_guard g("jp_thread_target", h_dirty);
    ASSERT_EQ(g.err, 0);
    asm volatile("vzeroupper" ::: "memory");
    const uint64_t before = xinuse();
    const long r = jp_thread_target(1, 2);
    const uint64_t after = xinuse();
    EXPECT_EQ(r, 5);
    EXPECT_TRUE(seen);
    EXPECT_EQ(before & 4, 0u);
    EXPECT_EQ(after & 4, 0u) << "the upper vector state was left in use";
}

// Vector arguments wider than xmm (__m256d in ymm, __m512d in zmm) reach the handler whole on
// every kind of entry (the int3 one reads their upper halves from the signal frame's XSAVE
// area), and the function still gets its own.
TEST_P(jprobe_flavour, m256_arguments_reach_the_handler_whole)
{
    if (!__builtin_cpu_supports("avx")) GTEST_SKIP() << "no AVX";
    struct jprobe jp = {};
    jp.kp.symbol_name = "jp_m256";
    jp.entry = JPROBE_ENTRY(jp_h_m256);
    ASSERT_EQ(register_jprobe(&jp), 0);
    expect_mechanism(jp);
    const double a[4] = {1.5, -2.25, 3.0, 1e300}, b[4] = {-0.5, 7.0, 1e-300, 42.0};
    for (int round = 0; round < 3; ++round) {
        jp_vec_seen_n = 0;
        std::memset(jp_vec_seen, 0, sizeof jp_vec_seen);
        const double want = (a[0] + 2 * a[1] + 3 * a[2] + 4 * a[3] - b[0] + b[1] - b[2] + b[3]) * 3;
        EXPECT_EQ(jp_call_m256(a, b, 3), want);
        EXPECT_EQ(jp_vec_seen_n, 3);
        for (int i = 0; i < 4; ++i) {
            EXPECT_EQ(jp_vec_seen[i], a[i]) << "a[" << i << "]";
            EXPECT_EQ(jp_vec_seen[4 + i], b[i]) << "b[" << i << "]";
        }
    }
    unregister_jprobe(&jp);
}

TEST_P(jprobe_flavour, m512_arguments_reach_the_handler_whole)
{
    if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512F";
    struct jprobe jp = {};
    jp.kp.symbol_name = "jp_m512";
    jp.entry = JPROBE_ENTRY(jp_h_m512);
    ASSERT_EQ(register_jprobe(&jp), 0);
    double a[8], b[8];
    double want = 0;
    for (int i = 0; i < 8; ++i) {
        a[i] = 1.25 * (i + 1) - 3;
        b[i] = -0.75 * i + 1e10;
        want += (i + 1) * a[i] - (i % 2 ? -1 : 1) * b[i];
    }
    for (int round = 0; round < 3; ++round) {
        jp_vec_seen_n = 0;
        EXPECT_EQ(jp_call_m512(a, b, 2), want * 2);
        EXPECT_EQ(jp_vec_seen_n, 2);
        for (int i = 0; i < 8; ++i) {
            EXPECT_EQ(jp_vec_seen[i], a[i]) << "a[" << i << "]";
            EXPECT_EQ(jp_vec_seen[8 + i], b[i]) << "b[" << i << "]";
        }
    }
    unregister_jprobe(&jp);
}

// A function without parameter DWARF entered at the very top of a stack (makecontext's):
// the 64 bytes the handler would see run into a guard page, which is read as zeros.
extern "C" long jp_asm_target(long);
std::atomic<long> asm_seen;
long h_asm(long x)
{
    asm_seen = x;
    jprobe_return();
    return 0;
}
ucontext_t main_uc, fn_uc;
void call_asm_target_on_stack_top()
{
    // Eight pages (a signal handler may run on it: under ASan its frames are large), the
    // guard page right above the top.
    const long page = sysconf(_SC_PAGESIZE), pages = 8;
    void *m = mmap(nullptr, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    ASSERT_EQ(mprotect(static_cast<char *>(m) + pages * page, page, PROT_NONE), 0);
    ASSERT_EQ(getcontext(&fn_uc), 0);
    fn_uc.uc_stack.ss_sp = m;
    fn_uc.uc_stack.ss_size = pages * page;
    fn_uc.uc_link = &main_uc;
    makecontext(&fn_uc, reinterpret_cast<void (*)()>(jp_asm_target), 1, 41L);
    ASSERT_EQ(swapcontext(&main_uc, &fn_uc), 0);
    munmap(m, (pages + 1) * page);
}

TEST_P(jprobe_flavour, unknown_arguments_at_the_top_of_a_stack)
{
    probe_guard g("jp_asm_target", h_asm);
    ASSERT_EQ(g.err, 0);
    EXPECT_EQ(g.jp.kp.ainsn.stack_len, unsigned{JPROBE_MAX_STACK_SIZE}) << "no DWARF: all of it";
    asm_seen = 0;
    call_asm_target_on_stack_top();
    EXPECT_EQ(asm_seen, 41);
    EXPECT_EQ(jp_asm_target(1), 2);
}

#ifdef JPROBE_TEST_SITES
INSTANTIATE_TEST_SUITE_P(sites, jprobe_flavour, ::testing::Values(mode::site),
                         [](const auto &i) { return std::string(mode_name(i.param)); });
#elif defined(JPROBE_TEST_INT3)
// A binary of its own: a jump site, once made, stays (and later probes ride on it).
INSTANTIATE_TEST_SUITE_P(plain, jprobe_flavour, ::testing::Values(mode::int3),
                         [](const auto &i) { return std::string(mode_name(i.param)); });
#else
INSTANTIATE_TEST_SUITE_P(plain, jprobe_flavour, ::testing::Values(mode::jump),
                         [](const auto &i) { return std::string(mode_name(i.param)); });
#endif

} // namespace
