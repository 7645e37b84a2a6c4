// The vector state a probe hit leaves behind, for every kind of probe.
//
// On Intel parts, once the upper halves of the vector registers are in use (XINUSE bit 2,
// AVX; bit 6, ZMM_Hi256), every legacy-SSE instruction costs a state transition of about
// 200 ns, in dprobe, in handlers and in the traced program until its next vzeroupper. So:
//  - a call from code with clean upper state returns with the state components in use
//    (XINUSE bits 2 and 5-7) exactly as before, whatever the handlers left behind;
//  - handlers start with clean upper state even when the probed code had live upper
//    state;
//  - live upper state of the probed code comes back bit for bit: the argument registers at
//    a patch site's entry, the result registers at a return, all sixteen where the code
//    around may keep values in any of them (a jump site, an instruction, a patch site that
//    the patchable_function_entry attribute made in a unit built with -fipa-ra).
// XINUSE is read with XGETBV (ECX=1): deterministic, no timing. Skipped where the CPU has
// no AVX (there is no upper state) or no XGETBV with ECX=1.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/ftrace_frame.h"
#include "core/ftrace.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <cpuid.h>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>

extern "C" {
long vs_pfe(long);
long vs_attr_pfe(long); // vs_attr_target.c
long vs_fentry(long);
long vs_plain(long);
extern char vs_mid_probe[];
uint64_t vs_xinuse();
void vs_dirty_ymm();
long vs_call_clean(long (*fn)(long), long arg, uint64_t xinuse[2]);
long vs_call_live_32(long (*fn)(long), long arg, const void *in, void *out);
long vs_call_live_64(long (*fn)(long), long arg, const void *in, void *out);
long vs_call_callee_saved(long (*fn)(long), long arg);
}

namespace
{

constexpr uint64_t upper_bits = 0x44;   // AVX (2), ZMM_Hi256 (6)
constexpr uint64_t checked_bits = 0xe4; // and opmask (5), Hi16_ZMM (7)

const char *skip_reason()
{
    unsigned a, b, c, d;
    if (dprobe::arch::vector_size() < 32) return "no AVX: the CPU has no upper vector state";
    if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 4))
        return "the CPU has no XGETBV with ECX=1 (XINUSE)";
    return nullptr;
}

// The light path does not exist in a sanitizer build: its instrumented dispatch is not clean.
#if defined(__SANITIZE_ADDRESS__)
#define SKIP_WITHOUT_LIGHT_PATH()                                                                  \
    GTEST_SKIP() << "sanitizer-instrumented dispatch is not clean: no light path to test"
#else
#define SKIP_WITHOUT_LIGHT_PATH() (void)0
#endif

// The light byte of FN's site (SITE_LIGHT_ON, SITE_LIGHT_PT_REGS), -1 when FN has no site.
int site_light(long (*fn)(long))
{
    const dprobe::ftrace_site *site = dprobe::ftrace_location(reinterpret_cast<uintptr_t>(fn));
    return site ? site->light.load() : -1;
}

// What the handlers saw and did.
int hits;
uint64_t handler_dirty; // XINUSE upper bits found at a handler's start (ORed)
bool dirty_handlers;    // handlers leave ymm8's upper half in use

void in_handler()
{
    ++hits;
    handler_dirty |= vs_xinuse() & upper_bits;
    if (dirty_handlers) vs_dirty_ymm();
}

int fp_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    in_handler();
    return 0;
}
void fp_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    in_handler();
}
int rp_entry(struct kretprobe_instance *, struct pt_regs *)
{
    in_handler();
    return 0;
}
int rp_exit(struct kretprobe_instance *, struct pt_regs *)
{
    in_handler();
    return 0;
}
int kp_pre(struct kprobe *, struct pt_regs *)
{
    in_handler();
    return 0;
}
// A handler that provably leaves the extended state alone (an optimized kprobe gets the
// light detour for it): counts only.
int kp_pre_clean(struct kprobe *, struct pt_regs *)
{
    __atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
    return 0;
}

// fprobe handlers that provably leave the extended state alone (the light path: no vector
// register saved at all): count only.
int fp_entry_clean(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    __atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
    return 0;
}
void fp_exit_clean(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    __atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

int rp_entry_clean(struct kretprobe_instance *, struct pt_regs *)
{
    __atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
    return 0;
}
int rp_exit_clean(struct kretprobe_instance *, struct pt_regs *)
{
    __atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
    return 0;
}

enum class kind {
    fprobe_entry, // entry handler only
    fprobe_exit,  // entry and exit handlers
    fprobe_light, // entry and exit handlers leaving the extended state alone (light path)
    kretprobe,
    kretprobe_light, // handlers leaving the extended state alone (light path on a site)
    kprobe_int3,     // kprobe on an instruction, optimization off
    kprobe_opt,      // optimized, handler touching vector registers (full detour)
    kprobe_light,    // optimized, handler leaving them alone (light detour)
};

struct probe_case {
    const char *name;
    kind k;
    long (*fn)(long);
    const char *sym;
    // Vector registers whose full width must survive a call (bit n: register n).
    unsigned kept;
    int hits_per_call;
};

// gtest prints a case by its name.
void PrintTo(const probe_case &c, std::ostream *os)
{
    *os << c.name;
}

constexpr unsigned args = 0xff, results = 0x3, all16 = 0xffff;

const probe_case cases[] = {
    {"fprobe_entry_pfe", kind::fprobe_entry, vs_pfe, "vs_pfe", args, 1},
    {"fprobe_entry_fentry", kind::fprobe_entry, vs_fentry, "vs_fentry", args, 1},
    {"fprobe_entry_jump", kind::fprobe_entry, vs_plain, "vs_plain", all16, 1},
    {"fprobe_exit_pfe", kind::fprobe_exit, vs_pfe, "vs_pfe", results, 2},
    {"fprobe_exit_fentry", kind::fprobe_exit, vs_fentry, "vs_fentry", results, 2},
    {"fprobe_exit_jump", kind::fprobe_exit, vs_plain, "vs_plain", all16, 2},
    // A patch site by attribute, in a unit whose callers may rely on it leaving registers
    // alone (-fipa-ra): all sixteen, as for a jump site.
    {"fprobe_entry_attr_pfe", kind::fprobe_entry, vs_attr_pfe, "vs_attr_pfe", all16, 1},
    {"fprobe_exit_attr_pfe", kind::fprobe_exit, vs_attr_pfe, "vs_attr_pfe", all16, 2},
    // The light path saves nothing, so nothing may change: all sixteen registers.
    {"fprobe_light_pfe", kind::fprobe_light, vs_pfe, "vs_pfe", all16, 2},
    {"fprobe_light_fentry", kind::fprobe_light, vs_fentry, "vs_fentry", all16, 2},
    {"fprobe_light_jump", kind::fprobe_light, vs_plain, "vs_plain", all16, 2},
    {"kretprobe_pfe", kind::kretprobe, vs_pfe, "vs_pfe", results, 2},
    {"kretprobe_plain", kind::kretprobe, vs_plain, "vs_plain", all16, 2},
    {"kretprobe_light_pfe", kind::kretprobe_light, vs_pfe, "vs_pfe", all16, 2},
    {"kretprobe_light_plain", kind::kretprobe_light, vs_plain, "vs_plain", all16, 2},
    {"kprobe_int3", kind::kprobe_int3, vs_plain, nullptr, all16, 1},
    {"kprobe_optimized_full", kind::kprobe_opt, vs_plain, nullptr, all16, 1},
    {"kprobe_optimized_light", kind::kprobe_light, vs_plain, nullptr, all16, 1},
};

class vector_state : public ::testing::TestWithParam<probe_case>
{
  protected:
    void SetUp() override
    {
        if (const char *why = skip_reason()) GTEST_SKIP() << why;
        const probe_case &c = GetParam();
        if (c.k == kind::kprobe_int3) {
            ASSERT_EQ(0, kprobes_set_optimization(0));
        }
        switch (c.k) {
        case kind::fprobe_entry:
        case kind::fprobe_exit:
            fp = {};
            fp.entry_handler = fp_entry;
            if (c.k == kind::fprobe_exit) fp.exit_handler = fp_exit;
            ASSERT_EQ(0, register_fprobe(&fp, c.sym, nullptr));
            break;
        case kind::fprobe_light: {
            fp = {};
            fp.entry_handler = fp_entry_clean;
            fp.exit_handler = fp_exit_clean;
            ASSERT_EQ(0, register_fprobe(&fp, c.sym, nullptr));
            registered = true;
            SKIP_WITHOUT_LIGHT_PATH();
            ASSERT_GT(site_light(c.fn), 0) << "not light: the case tests nothing";
            // A thread's first hit allocates its context, which the light path leaves to
            // the full one (which keeps fewer registers): have it done.
            EXPECT_EQ(1, c.fn(0));
            break;
        }
        case kind::kretprobe:
        case kind::kretprobe_light: {
            rp = {};
            rp.kp.symbol_name = c.sym;
            const bool light = c.k == kind::kretprobe_light;
            rp.entry_handler = light ? rp_entry_clean : rp_entry;
            rp.handler = light ? rp_exit_clean : rp_exit;
            rp.maxactive = 4;
            ASSERT_EQ(0, register_kretprobe(&rp));
            registered = true;
            if (!light) break;
            SKIP_WITHOUT_LIGHT_PATH();
            ASSERT_GT(site_light(c.fn), 0) << "not light: the case tests nothing";
            EXPECT_EQ(1, c.fn(0)); // the thread's first hit goes the full way
            break;
        }
        default:
            kp = {};
            kp.addr = reinterpret_cast<kprobe_opcode_t *>(vs_mid_probe);
            kp.pre_handler = c.k == kind::kprobe_light ? kp_pre_clean : kp_pre;
            ASSERT_EQ(0, register_kprobe(&kp));
            if (c.k != kind::kprobe_int3) {
                ASSERT_TRUE(kprobe_optimized(&kp)) << "not optimized: the case tests nothing";
            }
            break;
        }
        registered = true;
    }

    void TearDown() override
    {
        if (!registered) return;
        switch (GetParam().k) {
        case kind::fprobe_entry:
        case kind::fprobe_exit:
        case kind::fprobe_light:
            unregister_fprobe(&fp);
            break;
        case kind::kretprobe:
        case kind::kretprobe_light:
            unregister_kretprobe(&rp);
            break;
        default:
            unregister_kprobe(&kp);
            break;
        }
        kprobes_set_optimization(1);
    }

    struct fprobe fp = {};
    struct kretprobe rp = {};
    struct kprobe kp = {};
    bool registered = false;
};

TEST_P(vector_state, clean_state_stays_clean)
{
    const probe_case &c = GetParam();
    for (bool dirty : {false, true}) {
        if (dirty && (c.k == kind::kprobe_light || c.k == kind::fprobe_light ||
                      c.k == kind::kretprobe_light))
            continue; // its handler must not touch the vector registers
        dirty_handlers = dirty;
        hits = 0;
        handler_dirty = 0;
        uint64_t x[2];
        EXPECT_EQ(42, vs_call_clean(c.fn, 41, x));
        dirty_handlers = false;
        EXPECT_EQ(c.hits_per_call, hits);
        EXPECT_EQ(0u, x[0] & upper_bits)
            << "vzeroupper did not clean the state: " << std::hex << x[0];
        EXPECT_EQ(x[0] & checked_bits, x[1] & checked_bits)
            << "XINUSE before the call " << std::hex << x[0] << ", after " << x[1]
            << (dirty ? " (handlers left ymm8 dirty)" : "");
    }
}

TEST_P(vector_state, live_upper_state_comes_back_and_handlers_run_clean)
{
    const probe_case &c = GetParam();
    const unsigned width = dprobe::arch::vector_size();
    alignas(64) uint8_t in[16 * 64], out[16 * 64];
    for (unsigned i = 0; i < sizeof in; ++i)
        in[i] = static_cast<uint8_t>(i * 13 + 5);
    for (bool dirty : {false, true}) {
        if (dirty && (c.k == kind::kprobe_light || c.k == kind::fprobe_light ||
                      c.k == kind::kretprobe_light))
            continue;
        dirty_handlers = dirty;
        hits = 0;
        handler_dirty = 0;
        std::memset(out, 0, sizeof out);
        const long r =
            width == 64 ? vs_call_live_64(c.fn, 41, in, out) : vs_call_live_32(c.fn, 41, in, out);
        dirty_handlers = false;
        EXPECT_EQ(42, r);
        EXPECT_EQ(c.hits_per_call, hits);
        if (c.k != kind::kprobe_light && c.k != kind::fprobe_light &&
            c.k != kind::kretprobe_light) {
            // (no handler code touches vector registers there)
            EXPECT_EQ(0u, handler_dirty) << "a handler started with the upper state in use";
        }
        std::string lost;
        for (unsigned n = 0; n < 16; ++n)
            if ((c.kept >> n & 1) && std::memcmp(in + n * width, out + n * width, width) != 0)
                lost += " " + std::to_string(n);
        EXPECT_EQ("", lost) << "vector registers that lost their value"
                            << (dirty ? " (handlers left ymm8 dirty)" : "");
    }
}

// A light handler calling a function whose site got a probe of the full kind after the
// handler was scanned clean (it then called an idle site): that probe's trampoline must save
// the whole state, since the light hit around it saved nothing.
int nested_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    __atomic_add_fetch(&hits, vs_fentry(1), __ATOMIC_RELAXED); // 2
    return 0;
}

TEST(vector_state_light, full_probe_hit_inside_a_light_handler_keeps_everything)
{
    if (const char *why = skip_reason()) GTEST_SKIP() << why;
    SKIP_WITHOUT_LIGHT_PATH();
    struct fprobe outer = {}, inner = {};
    outer.entry_handler = nested_entry;
    outer.exit_handler = fp_exit_clean;
    ASSERT_EQ(0, register_fprobe(&outer, "vs_plain", nullptr));
    EXPECT_GT(site_light(vs_plain), 0) << "not light: the test tests nothing";
    inner.entry_handler = fp_entry;
    inner.exit_handler = fp_exit;
    ASSERT_EQ(0, register_fprobe(&inner, "vs_fentry", nullptr));
    EXPECT_EQ(1, vs_plain(0)); // the thread's first hit (its context) goes the full way

    const unsigned width = dprobe::arch::vector_size();
    alignas(64) uint8_t in[16 * 64], out[16 * 64];
    for (unsigned i = 0; i < sizeof in; ++i)
        in[i] = static_cast<uint8_t>(i * 7 + 3);
    dirty_handlers = true;
    hits = 0;
    handler_dirty = 0;
    const long r = width == 64 ? vs_call_live_64(vs_plain, 41, in, out)
                               : vs_call_live_32(vs_plain, 41, in, out);
    uint64_t x[2];
    EXPECT_EQ(42, vs_call_clean(vs_plain, 41, x));
    dirty_handlers = false;
    EXPECT_EQ(42, r);
    // Outer entry (+2 from vs_fentry) and exit; the inner probe's hits are recursion (a
    // handler calling a probed function), missed: the warm-up call's and these two.
    EXPECT_EQ(2 * 3, hits);
    EXPECT_EQ(3u, inner.nmissed);
    EXPECT_EQ(0u, handler_dirty) << "a handler started with the upper state in use";
    std::string lost;
    for (unsigned n = 0; n < 16; ++n)
        if (std::memcmp(in + n * width, out + n * width, width) != 0)
            lost += " " + std::to_string(n);
    EXPECT_EQ("", lost) << "vector registers that lost their value";
    EXPECT_EQ(x[0] & checked_bits, x[1] & checked_bits)
        << "XINUSE before the call " << std::hex << x[0] << ", after " << x[1];
    EXPECT_EQ(0, unregister_fprobe(&inner));
    EXPECT_EQ(0, unregister_fprobe(&outer));
}

// A light handler cut short by a signal handler's siglongjmp leaves the thread's count of
// running light handlers raised; the next section, which finds the old one abandoned, sets it
// back (else every later hit of the thread would save the whole extended state).
sigjmp_buf light_jmp;
volatile int jump_now;
void light_sig(int)
{
    siglongjmp(light_jmp, 1);
}
int jumping_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    __atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
    if (jump_now) {
        // tgkill(getpid(), gettid(), SIGUSR1), with the syscall instruction: a call of the C
        // library would keep the handler from being scanned clean.
        long pid, tid, r;
        __asm__ volatile("syscall" : "=a"(pid) : "0"(39L) : "rcx", "r11", "memory");
        __asm__ volatile("syscall" : "=a"(tid) : "0"(186L) : "rcx", "r11", "memory");
        register long sig __asm__("rdx") = SIGUSR1;
        __asm__ volatile("syscall"
                         : "=a"(r)
                         : "0"(234L), "D"(pid), "S"(tid), "r"(sig)
                         : "rcx", "r11", "memory");
    }
    return 0;
}

TEST(vector_state_light, a_light_handler_left_by_a_jump_is_forgotten)
{
    SKIP_WITHOUT_LIGHT_PATH();
    struct fprobe fp = {};
    fp.entry_handler = jumping_entry;
    fp.exit_handler = fp_exit_clean;
    ASSERT_EQ(0, register_fprobe(&fp, "vs_pfe", nullptr));
    EXPECT_GT(site_light(vs_pfe), 0) << "not light: the test tests nothing";
    EXPECT_EQ(1, vs_pfe(0)); // the thread's first hit goes the full way
    struct sigaction sa = {}, old = {};
    sa.sa_handler = light_sig;
    ASSERT_EQ(0, sigaction(SIGUSR1, &sa, &old));
    hits = 0;
    jump_now = 1;
    if (sigsetjmp(light_jmp, 1) == 0) {
        vs_pfe(1);
        ADD_FAILURE() << "the handler did not jump";
    }
    jump_now = 0;
    EXPECT_EQ(1, hits);
    EXPECT_EQ(1u, dprobe_ext_unsaved) << "the light handler was not running when it was left";
    EXPECT_EQ(2, vs_pfe(1));
    EXPECT_EQ(0u, dprobe_ext_unsaved);
    EXPECT_EQ(3, hits); // this call's entry and exit
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// A kretprobe's handlers get a full pt_regs, on the light path too (the callee-saved
// registers are stored for them, not for fprobes).
// (Volatile stores, one by one: a copy the compiler vectorizes would not be light.)
volatile unsigned long seen_regs[2][6];
void note_regs(int at, const struct pt_regs *regs)
{
    seen_regs[at][0] = regs->bx;
    seen_regs[at][1] = regs->bp;
    seen_regs[at][2] = regs->r12;
    seen_regs[at][3] = regs->r13;
    seen_regs[at][4] = regs->r14;
    seen_regs[at][5] = regs->r15;
}
int rp_entry_regs(struct kretprobe_instance *, struct pt_regs *regs)
{
    note_regs(0, regs);
    return 0;
}
int rp_exit_regs(struct kretprobe_instance *, struct pt_regs *regs)
{
    note_regs(1, regs);
    return 0;
}

TEST(vector_state_light, kretprobe_handlers_get_a_full_pt_regs)
{
    SKIP_WITHOUT_LIGHT_PATH();
    struct kretprobe rp = {};
    rp.kp.symbol_name = "vs_pfe";
    rp.entry_handler = rp_entry_regs;
    rp.handler = rp_exit_regs;
    rp.maxactive = 4;
    ASSERT_EQ(0, register_kretprobe(&rp));
    EXPECT_EQ(SITE_LIGHT_ON | SITE_LIGHT_PT_REGS, site_light(vs_pfe))
        << "not light: the test tests nothing";
    EXPECT_EQ(1, vs_pfe(0)); // the thread's first hit goes the full way
    for (auto &at : seen_regs)
        for (auto &r : at)
            r = 0;
    EXPECT_EQ(42, vs_call_callee_saved(vs_pfe, 41));
    const unsigned long want[6] = {0x1b1b1b1b1b1b1b1b, 0x1d1d1d1d1d1d1d1d, 0x1c1c1c1c1c1c1c1c,
                                   0x1e1e1e1e1e1e1e1e, 0x1f1f1f1f1f1f1f1f, 0x1a1a1a1a1a1a1a1a};
    const char *names[6] = {"rbx", "rbp", "r12", "r13", "r14", "r15"};
    for (int at = 0; at < 2; ++at)
        for (int i = 0; i < 6; ++i)
            EXPECT_EQ(want[i], seen_regs[at][i])
                << names[i] << (at ? " at the return" : " at the entry");
    unregister_kretprobe(&rp);
}

INSTANTIATE_TEST_SUITE_P(kinds, vector_state, ::testing::ValuesIn(cases),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
