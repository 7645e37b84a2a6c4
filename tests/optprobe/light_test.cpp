// The light detour of optimized kprobes: a handler that provably leaves the extended state
// alone gets a detour that saves only the general registers and the arithmetic flags. The
// probed code must still see every register as it left it: checked with every general
// register, the flags, the red zone, xmm/ymm/zmm registers, mask registers, the x87 stack
// and MXCSR live across the probe, for
//  - a clean handler (light detour), one that changes registers in pt_regs (honoured),
//  - a handler that wrecks the extended state (full detour, everything restored),
//  - a clean handler calling a function with an fprobe whose handler wrecks it (the ftrace
//    trampolines save the state themselves inside a light handler),
//  - a function that runs with DF set across the probe (never light).
#include "kprobe/kprobe_internal.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <tuple>

struct light_state {
    uint64_t gpr[16]; // rax rbx rcx rdx rsi rdi rbp r8..r15, [15] unused
    uint64_t flags;
    uint32_t mxcsr, pad;
    uint64_t k[8];
    uint8_t x87[3][16];
    uint64_t redzone[14];
    uint64_t pad2[2];
    alignas(64) uint8_t vec[32][64];
};
static_assert(offsetof(light_state, flags) == 128 && offsetof(light_state, mxcsr) == 136 &&
              offsetof(light_state, k) == 144 && offsetof(light_state, x87) == 208 &&
              offsetof(light_state, redzone) == 256 && offsetof(light_state, vec) == 384);

extern "C" {
void light_state_16(const light_state *, light_state *);
void light_state_32(const light_state *, light_state *);
void light_state_64(const light_state *, light_state *);
void light_state_df_16(const light_state *, light_state *);
extern char light_probe_light_state_16[], light_probe_light_state_32[],
    light_probe_light_state_64[], light_probe_light_state_df_16[];
void light_dirty_16();
void light_dirty_32();
void light_dirty_64();
void light_vec_dirty_16();
void light_vec_dirty_32();
void light_vec_dirty_64();
void light_nested();
}

namespace
{

// Under ASan and UBSan every function, the test's handlers and the light dispatch included,
// calls into the sanitizer runtime: none is provably clean, and the full detour serves all
// of them (the registers must survive all the same).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool light_possible = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
constexpr bool light_possible = false;
#else
constexpr bool light_possible = true;
#endif
#else
constexpr bool light_possible = true;
#endif

using state_fn = void (*)(const light_state *, light_state *);

struct width {
    int w;
    state_fn fn;
    char *probe;
    void (*dirty)();
    bool supported;
};

std::vector<width> widths()
{
    return {{16, light_state_16, light_probe_light_state_16, light_dirty_16, true},
            {32, light_state_32, light_probe_light_state_32, light_dirty_32,
             __builtin_cpu_supports("avx2") != 0},
            {64, light_state_64, light_probe_light_state_64, light_dirty_64,
             __builtin_cpu_supports("avx512f") != 0}};
}

unsigned long hits, nested_hits;
void (*volatile dirty_fn)() = light_dirty_16;

int clean_pre(struct kprobe *, struct pt_regs *)
{
    hits = hits + 1;
    return 0;
}
int clean_pre_changes_regs(struct kprobe *, struct pt_regs *regs)
{
    hits = hits + 1;
    regs->r12 = 0x1212121212121212ul;
    regs->cx = regs->cx ^ 0xff;
    regs->flags ^= 0x1; // CF
    return 0;
}
int dirty_pre(struct kprobe *, struct pt_regs *)
{
    hits = hits + 1;
    dirty_fn(); // an indirect call: not provably clean
    return 0;
}
// Touches the vector registers 0-15 and MXCSR only, through direct calls the scan follows:
// served by the vector caller.
int vector_width = 16;
int vec_pre(struct kprobe *, struct pt_regs *)
{
    hits = hits + 1;
    if (vector_width == 64)
        light_vec_dirty_64();
    else if (vector_width == 32)
        light_vec_dirty_32();
    else
        light_vec_dirty_16();
    return 0;
}
// Long double arithmetic: the x87 stack, which only the full caller keeps.
int x87_pre(struct kprobe *, struct pt_regs *)
{
    static volatile long double d;
    d = d * 3.0L + 1.0L;
    hits = hits + 1;
    return 0;
}
int clean_pre_calls_nested(struct kprobe *, struct pt_regs *)
{
    hits = hits + 1;
    light_nested();
    return 0;
}
int dirty_fprobe_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    nested_hits = nested_hits + 1;
    dirty_fn();
    return 0;
}

light_state random_state(std::mt19937_64 &rng, int w, uint64_t flags)
{
    light_state s;
    std::memset(static_cast<void *>(&s), 0, sizeof s);
    for (auto &g : s.gpr)
        g = rng();
    s.gpr[15] = 0;
    s.flags = flags;
    s.mxcsr = 0x7fbf; // round toward zero, all exceptions masked, every sticky flag set
    for (auto &k : s.k)
        k = w == 64 ? rng() : 0;
    const long double vals[3] = {1.25L + static_cast<long double>(rng() % 1000),
                                 -3.5L / static_cast<long double>(1 + rng() % 7),
                                 static_cast<long double>(rng())};
    for (int i = 0; i < 3; ++i)
        std::memcpy(s.x87[i], &vals[i], 10);
    for (auto &r : s.redzone)
        r = rng();
    const int nregs = w == 64 ? 32 : 16;
    for (int i = 0; i < nregs; ++i)
        for (int b = 0; b < w; ++b)
            s.vec[i][b] = static_cast<uint8_t>(rng());
    return s;
}

// Compares what the function stored with what it loaded (minus expected changes).
void expect_same(const light_state &in, const light_state &out, int w, bool df, const char *what)
{
    static const char *names[] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8",
                                  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
    for (int i = 0; i < 15; ++i)
        EXPECT_EQ(in.gpr[i], out.gpr[i]) << what << ": " << names[i];
    const uint64_t arith = 0x8d5; // OF SF ZF AF PF CF
    EXPECT_EQ(in.flags & arith, out.flags & arith) << what << ": flags";
    EXPECT_EQ(df, (out.flags & 0x400) != 0) << what << ": DF";
    EXPECT_EQ(in.mxcsr, out.mxcsr) << what << ": MXCSR";
    for (int i = 0; w == 64 && i < 8; ++i)
        EXPECT_EQ(in.k[i], out.k[i]) << what << ": k" << i;
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(0, std::memcmp(in.x87[i], out.x87[i], 10)) << what << ": st" << i;
    for (int i = 0; i < 14; ++i)
        EXPECT_EQ(in.redzone[i], out.redzone[i]) << what << ": red zone slot " << i;
    const int nregs = w == 64 ? 32 : 16;
    for (int i = 0; i < nregs; ++i)
        EXPECT_EQ(0, std::memcmp(in.vec[i], out.vec[i], static_cast<size_t>(w)))
            << what << ": vector register " << i << " (width " << w << ")";
}

struct probe_case {
    const char *what;
    kprobe_pre_handler_t pre;
    bool light; // the detour is expected to be the light one
};

void run_case(const width &wd, const probe_case &pc, bool with_nested_fprobe)
{
    dirty_fn = wd.dirty;
    struct kprobe kp = {};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(wd.probe);
    kp.pre_handler = pc.pre;
    ASSERT_EQ(0, register_kprobe(&kp)) << pc.what;
    ASSERT_TRUE(kprobe_optimized(&kp))
        << pc.what << ": " << dprobe::kprobe_optimization_status(&kp);
    EXPECT_EQ(pc.light && light_possible, dprobe::kp::kprobe_light_detour(&kp)) << pc.what;
    struct fprobe fp = {};
    fp.entry_handler = dirty_fprobe_entry;
    if (with_nested_fprobe) {
        ASSERT_EQ(0, register_fprobe(&fp, "light_nested", nullptr));
    }
    std::mt19937_64 rng(wd.w * 1000 + static_cast<int>(std::strlen(pc.what)));
    for (uint64_t flags : {0x8d5ul, 0x000ul, 0x801ul, 0x0c4ul}) {
        for (int rep = 0; rep < 3; ++rep) { // the first hit of a thread takes a detour too
            light_state in = random_state(rng, wd.w, flags), out = {};
            hits = nested_hits = 0;
            wd.fn(&in, &out);
            EXPECT_EQ(1u, hits) << pc.what;
            if (pc.pre == clean_pre_changes_regs) {
                in.gpr[11] = 0x1212121212121212ul;
                in.gpr[2] ^= 0xff;
                in.flags ^= 0x1;
            }
            expect_same(in, out, wd.w, false, pc.what);
            if (with_nested_fprobe) {
                EXPECT_EQ(1u, nested_hits);
            }
        }
    }
    if (with_nested_fprobe) unregister_fprobe(&fp);
    unregister_kprobe(&kp);
}

TEST(optprobe_light, registers_survive_every_handler_kind)
{
    const probe_case cases[] = {
        {"clean handler", clean_pre, true},
        {"clean handler changing registers", clean_pre_changes_regs, true},
        {"handler wrecking the extended state", dirty_pre, false},
    };
    for (const width &wd : widths()) {
        if (!wd.supported) continue;
        for (const probe_case &pc : cases)
            run_case(wd, pc, false);
    }
}

TEST(optprobe_light, fprobe_inside_a_light_handler_saves_the_state)
{
    for (const width &wd : widths()) {
        if (!wd.supported) continue;
        run_case(wd, {"clean handler calling an fprobed function", clean_pre_calls_nested, true},
                 true);
    }
}

TEST(optprobe_light, a_dirty_handler_joining_turns_the_detour_full)
{
    const width wd = widths()[0];
    struct kprobe a = {}, b = {};
    a.addr = b.addr = reinterpret_cast<kprobe_opcode_t *>(wd.probe);
    a.pre_handler = clean_pre;
    b.pre_handler = dirty_pre;
    dirty_fn = wd.dirty;
    ASSERT_EQ(0, register_kprobe(&a));
    EXPECT_EQ(light_possible, dprobe::kp::kprobe_light_detour(&a));
    ASSERT_EQ(0, register_kprobe(&b));
    EXPECT_TRUE(kprobe_optimized(&b));
    EXPECT_FALSE(dprobe::kp::kprobe_light_detour(&b));
    std::mt19937_64 rng(7);
    light_state in = random_state(rng, 16, 0x8d5), out = {};
    hits = 0;
    wd.fn(&in, &out);
    EXPECT_EQ(2u, hits);
    expect_same(in, out, 16, false, "clean + dirty handlers");
    unregister_kprobe(&b);
    EXPECT_EQ(light_possible, dprobe::kp::kprobe_light_detour(&a));
    unregister_kprobe(&a);
}

// Handlers that touch only the vector registers 0-15 and MXCSR get the vector caller (no
// xsave); one using the x87 stack gets the full caller; either way every register, flag,
// mask register, x87 register and the red zone come back as they were.
TEST(optprobe_vector, registers_survive_vector_and_x87_handlers)
{
    for (const width &wd : widths()) {
        if (!wd.supported) continue;
        vector_width = wd.w;
        const std::tuple<kprobe_pre_handler_t, bool, const char *> handlers[] = {
            {vec_pre, true, "vector handler"}, {x87_pre, false, "x87 handler"}};
        for (auto [pre, vec, what] : handlers) {
            struct kprobe kp = {};
            kp.addr = reinterpret_cast<kprobe_opcode_t *>(wd.probe);
            kp.pre_handler = pre;
            ASSERT_EQ(0, register_kprobe(&kp)) << what;
            ASSERT_TRUE(kprobe_optimized(&kp)) << what;
            EXPECT_FALSE(dprobe::kp::kprobe_light_detour(&kp)) << what;
            EXPECT_EQ(vec && light_possible, dprobe::kp::kprobe_vector_detour(&kp))
                << what << " (width " << wd.w << ")";
            std::mt19937_64 rng(wd.w * 31 + (vec ? 1 : 2));
            for (uint64_t flags : {0x8d5ul, 0x000ul}) {
                for (int rep = 0; rep < 3; ++rep) {
                    light_state in = random_state(rng, wd.w, flags), out = {};
                    hits = 0;
                    wd.fn(&in, &out);
                    EXPECT_EQ(1u, hits) << what;
                    expect_same(in, out, wd.w, false, what);
                }
            }
            unregister_kprobe(&kp);
        }
    }
}

// A thread's first hit (no context yet) goes through the vector caller's fallback, which
// saves the whole state after all and runs the full dispatch: registers intact there too.
TEST(optprobe_vector, a_threads_first_hit_takes_the_fallback)
{
    for (const width &wd : widths()) {
        if (!wd.supported) continue;
        vector_width = wd.w;
        struct kprobe kp = {};
        kp.addr = reinterpret_cast<kprobe_opcode_t *>(wd.probe);
        kp.pre_handler = vec_pre;
        ASSERT_EQ(0, register_kprobe(&kp));
        EXPECT_EQ(light_possible, dprobe::kp::kprobe_vector_detour(&kp));
        for (int t = 0; t < 3; ++t) {
            std::mt19937_64 rng(wd.w * 7 + t);
            light_state in = random_state(rng, wd.w, t ? 0x8d5ul : 0ul), out = {};
            hits = 0;
            std::thread th([&] { wd.fn(&in, &out); }); // a new thread: its first hit
            th.join();
            EXPECT_EQ(1u, hits);
            expect_same(in, out, wd.w, false, "first hit of a thread");
        }
        unregister_kprobe(&kp);
    }
}

// A handler the vector caller cannot serve joins a probe it serves: from the next hit on,
// the whole state is kept (by the full caller, or by the vector caller's fallback while the
// switch is under way), and the vector caller comes back when it leaves.
TEST(optprobe_vector, an_x87_handler_joining_turns_the_detour_full)
{
    const width wd = widths()[0];
    vector_width = wd.w;
    struct kprobe a = {}, b = {};
    a.addr = b.addr = reinterpret_cast<kprobe_opcode_t *>(wd.probe);
    a.pre_handler = vec_pre;
    b.pre_handler = x87_pre;
    ASSERT_EQ(0, register_kprobe(&a));
    EXPECT_EQ(light_possible, dprobe::kp::kprobe_vector_detour(&a));
    ASSERT_EQ(0, register_kprobe(&b));
    EXPECT_FALSE(dprobe::kp::kprobe_vector_detour(&b));
    std::mt19937_64 rng(11);
    light_state in = random_state(rng, 16, 0x8d5), out = {};
    hits = 0;
    wd.fn(&in, &out);
    EXPECT_EQ(2u, hits);
    expect_same(in, out, 16, false, "vector + x87 handlers");
    unregister_kprobe(&b);
    EXPECT_EQ(light_possible, dprobe::kp::kprobe_vector_detour(&a));
    unregister_kprobe(&a);
}

TEST(optprobe_light, never_light_where_df_may_be_set)
{
    struct kprobe kp = {};
    kp.addr = reinterpret_cast<kprobe_opcode_t *>(light_probe_light_state_df_16);
    kp.pre_handler = clean_pre;
    ASSERT_EQ(0, register_kprobe(&kp));
    ASSERT_TRUE(kprobe_optimized(&kp));
    EXPECT_FALSE(dprobe::kp::kprobe_light_detour(&kp));
    std::mt19937_64 rng(9);
    for (uint64_t flags : {0x8d5ul, 0x000ul}) {
        light_state in = random_state(rng, 16, flags), out = {};
        hits = 0;
        light_state_df_16(&in, &out);
        EXPECT_EQ(1u, hits);
        expect_same(in, out, 16, true, "DF set across the probe");
    }
    unregister_kprobe(&kp);
}

} // namespace
