// A kprobe on every instruction, one at a time, of functions covering each instruction class
// (insn_targets.S). Each probed run must return what the unprobed run returns, and the probe
// must fire exactly as often as the instruction runs, which a single-stepped reference run
// (TF set, counted by the program's own SIGTRAP handler) establishes. The program's own
// SIGSEGV handler recovers from the faulting load, probed or not.
#include "arch/x86_64/insn.h"
#include "core/symbols.h"

#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <map>
#include <set>
#include <cstdio>
#include <cstring>
#include <string>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

extern "C" {
long insn_riprel(long, long);
long insn_stack(long, long);
long insn_branches(long, long);
long insn_string(long, long);
long insn_sse(long, long);
long insn_avx(long, long);
long insn_fault(long, long);
long insn_misc(long, long);
long insn_badcall(long, long);
long insn_stack_helper(long, long);
long traced_call(long (*fn)(long, long), long a, long b);
extern char insn_fault_load[], insn_fault_resume[];
extern char insn_badcall_call[], insn_badcall_resume[];
}

namespace
{

// --- the program's own signal handlers ----------------------------------------------------

constexpr size_t max_fn = 4096;
std::atomic<bool> tracing;
uintptr_t trace_lo, trace_hi, last_rip;
unsigned trace_counts[max_fn];
std::atomic<unsigned long> unexpected_traps, segv_count;

void on_sigtrap(int, siginfo_t *si, void *ucv)
{
    auto *uc = static_cast<ucontext_t *>(ucv);
    const uintptr_t rip = uc->uc_mcontext.gregs[REG_RIP];
    if (si->si_code != TRAP_TRACE || !tracing) {
        ++unexpected_traps;
        return;
    }
    // A rep-prefixed string instruction traps once per iteration at its own address.
    if (rip != last_rip && rip >= trace_lo && rip < trace_hi) ++trace_counts[rip - trace_lo];
    last_rip = rip;
}

// Faulting instructions of the targets and where the handler resumes each.
bool is_fault_insn(uintptr_t rip)
{
    return rip == reinterpret_cast<uintptr_t>(insn_fault_load) ||
           rip == reinterpret_cast<uintptr_t>(insn_badcall_call);
}

std::atomic<uintptr_t> fault_sp; // the stack pointer the handler saw at the fault

void on_sigsegv(int, siginfo_t *, void *ucv)
{
    auto *uc = static_cast<ucontext_t *>(ucv);
    const uintptr_t rip = uc->uc_mcontext.gregs[REG_RIP];
    if (!is_fault_insn(rip)) {
        static const char msg[] = "insn_test: SIGSEGV at an unexpected address\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(3);
    }
    ++segv_count;
    fault_sp = uc->uc_mcontext.gregs[REG_RSP];
    const auto resume = reinterpret_cast<uintptr_t>(
        rip == reinterpret_cast<uintptr_t>(insn_fault_load) ? insn_fault_resume
                                                            : insn_badcall_resume);
    uc->uc_mcontext.gregs[REG_RIP] = resume;
    uc->uc_mcontext.gregs[REG_RAX] = 41;
    if (tracing) {
        // Resuming through sigreturn raises no trap for the first instruction.
        ++trace_counts[resume - trace_lo];
        last_rip = resume;
    }
}

void install_program_handlers()
{
    static bool done = [] {
        struct sigaction sa {
        };
        sa.sa_sigaction = on_sigtrap;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTRAP, &sa, nullptr);
        sa.sa_sigaction = on_sigsegv;
        sigaction(SIGSEGV, &sa, nullptr);
        return true;
    }();
    (void)done;
}

// --- probes ----------------------------------------------------------------------------------

std::atomic<unsigned long> pre_hits, post_hits;
std::atomic<bool> bad_pre_ip, handler_not_running;

int count_pre(struct kprobe *p, struct pt_regs *regs)
{
    ++pre_hits;
    if (regs->ip != reinterpret_cast<unsigned long>(p->addr) + 1) bad_pre_ip = true;
    if (kprobe_running() != p) handler_not_running = true;
    return 0;
}

void count_post(struct kprobe *p, struct pt_regs *, unsigned long)
{
    ++post_hits;
    if (kprobe_running() != p) handler_not_running = true;
}

struct target {
    const char *name;
    long (*fn)(long, long);
    long a, b;
};

long fault_cell = 1000;
long (*helper_ptr)(long, long) = insn_stack_helper;

std::vector<target> targets()
{
    std::vector<target> v = {
        {"insn_riprel", insn_riprel, 5, 9},
        {"insn_stack", insn_stack, 3, 4},
        {"insn_branches", insn_branches, 11, 1},
        {"insn_branches", insn_branches, 2, 0},
        {"insn_branches", insn_branches, 6, 7},
        {"insn_branches", insn_branches, 13, 1},
        {"insn_string", insn_string, 0x1122334455667788, 0x99},
        {"insn_sse", insn_sse, 3, 4},
        {"insn_fault", insn_fault, 0, 1},
        {"insn_fault", insn_fault, reinterpret_cast<long>(&fault_cell), 2},
        {"insn_misc", insn_misc, 1234567, 89},
        {"insn_badcall", insn_badcall, 0, 4},
        {"insn_badcall", insn_badcall, reinterpret_cast<long>(&helper_ptr), 4},
    };
    if (__builtin_cpu_supports("avx2")) v.push_back({"insn_avx", insn_avx, 5, 6});
    return v;
}

struct reference {
    long result;
    std::vector<unsigned> counts;
    uintptr_t lo, hi;
};

reference trace_reference(const target &t)
{
    auto hits = dprobe::kallsyms::instance().lookup_func(t.name);
    EXPECT_FALSE(hits.empty()) << t.name;
    reference ref{};
    ref.lo = hits.front().sym->addr;
    ref.hi = ref.lo + hits.front().sym->size;
    EXPECT_LE(ref.hi - ref.lo, max_fn);
    std::memset(trace_counts, 0, sizeof trace_counts);
    trace_lo = ref.lo;
    trace_hi = ref.hi;
    last_rip = 0;
    tracing = true;
    ref.result = traced_call(t.fn, t.a, t.b);
    tracing = false;
    ref.counts.assign(trace_counts, trace_counts + (ref.hi - ref.lo));
    // The step over `syscall` returns through sysret, which sets TF like popf does: the
    // trap comes one instruction late, so the arrival after the syscall is not reported.
    for (uintptr_t a = ref.lo; a < ref.hi;) {
        auto i = dprobe::arch::insn_decode(reinterpret_cast<const void *>(a), ref.hi - a, a);
        if (!i) break;
        if (i->k == dprobe::arch::insn::syscall && i->next() < ref.hi)
            ref.counts[i->next() - ref.lo] += ref.counts[a - ref.lo];
        a = i->next();
    }
    return ref;
}

std::vector<dprobe::arch::insn> decode_all(uintptr_t lo, uintptr_t hi)
{
    std::vector<dprobe::arch::insn> out;
    for (uintptr_t a = lo; a < hi;) {
        auto i = dprobe::arch::insn_decode(reinterpret_cast<const void *>(a), hi - a, a);
        if (!i) break;
        out.push_back(*i);
        a += i->len;
    }
    return out;
}

enum class mode { pre_only, pre_post, pre_only_optimized };

class insn_test : public ::testing::TestWithParam<mode>
{
  protected:
    void SetUp() override
    {
        install_program_handlers();
        ASSERT_EQ(0, kprobes_set_optimization(GetParam() == mode::pre_only_optimized));
    }
    void TearDown() override { kprobes_set_optimization(1); }
};

// The SIGSEGV handler of these resumes at a label right after the faulting instruction: in
// an optimized region that label is inside the jmp (the kernel refuses regions with
// exception-table fixups; user space has no such table: a documented limitation).
bool resumes_mid_region(const target &t)
{
    return t.fn == insn_fault || t.fn == insn_badcall;
}

TEST_P(insn_test, probe_every_instruction)
{
    const bool with_post = GetParam() == mode::pre_post;
    const bool optimizing = GetParam() == mode::pre_only_optimized;
    unsigned long probes = 0, classes_emulated = 0, classes_boosted = 0, optimized = 0;
    std::map<std::string, unsigned> refusals;
    std::set<std::string> seen;
    unsigned long points = 0, points_optimized = 0; // distinct probe points
    for (const target &t : targets()) {
        if (optimizing && resumes_mid_region(t)) continue;
        const bool first_of_function = seen.insert(t.name).second;
        SCOPED_TRACE(std::string(t.name) + "(" + std::to_string(t.a) + ", " + std::to_string(t.b) +
                     ")");
        const long plain = t.fn(t.a, t.b);
        reference ref = trace_reference(t);
        ASSERT_EQ(plain, ref.result) << "the traced run differs from the plain one";
        ASSERT_EQ(0u, unexpected_traps);
        auto insns = decode_all(ref.lo, ref.hi);
        ASSERT_FALSE(insns.empty());
        ASSERT_EQ(ref.hi, insns.back().next()) << "the function did not decode to its end";
        for (const auto &i : insns) {
            if (i.addr == ref.lo && i.k == dprobe::arch::insn::endbr)
                continue; // a probe at the entry lands after the endbr64
            struct kprobe p = {};
            p.addr = reinterpret_cast<kprobe_opcode_t *>(i.addr);
            p.pre_handler = count_pre;
            if (with_post) p.post_handler = count_post;
            const std::string what =
                dprobe::arch::insn_to_string(i) + " at +" + std::to_string(i.addr - ref.lo);
            ASSERT_EQ(0, register_kprobe(&p)) << what;
            ASSERT_EQ(reinterpret_cast<kprobe_opcode_t *>(i.addr), p.addr) << what;
            if (optimizing && first_of_function) {
                ++refusals[dprobe::kprobe_optimization_status(&p)];
                ++points;
                points_optimized += kprobe_optimized(&p) ? 1 : 0;
            }
            if (kprobe_optimized(&p)) {
                ++optimized;
                EXPECT_TRUE(optimizing) << what;
                EXPECT_EQ("optimized", dprobe::kprobe_optimization_status(&p)) << what;
            }
            pre_hits = 0;
            post_hits = 0;
            bad_pre_ip = false;
            handler_not_running = false;
            const unsigned long faults = segv_count;
            const long r = t.fn(t.a, t.b);
            const unsigned long faulted = segv_count - faults;
            const unsigned long nmissed = p.nmissed;
            unregister_kprobe(&p);
            ++probes;
            if (i.is_branch)
                ++classes_emulated;
            else
                ++classes_boosted;
            EXPECT_EQ(ref.result, r) << what;
            EXPECT_EQ(ref.counts[i.addr - ref.lo], pre_hits) << what;
            if (with_post) {
                // A faulting instruction never completes: no post handler for that hit.
                const bool at_fault = is_fault_insn(i.addr);
                EXPECT_EQ(pre_hits - (at_fault ? faulted : 0), post_hits) << what;
            }
            EXPECT_EQ(0u, nmissed) << what;
            EXPECT_FALSE(bad_pre_ip) << what;
            EXPECT_FALSE(handler_not_running) << what;
        }
        // Unprobed again: nothing left behind.
        pre_hits = 0;
        EXPECT_EQ(plain, t.fn(t.a, t.b));
        EXPECT_EQ(0u, pre_hits);
    }
    EXPECT_GT(probes, optimizing ? 140u : 150u);
    EXPECT_GT(classes_emulated, 20u);
    EXPECT_GT(classes_boosted, 90u);
    EXPECT_EQ(0u, unexpected_traps);
    if (optimizing) {
        std::printf("[ optimized ] %lu of %lu distinct probe points (%lu of %lu probe runs)\n",
                    points_optimized, points, optimized, probes);
        for (const auto &[why, n] : refusals)
            std::printf("[ optimized ]   %4u  %s\n", n, why.c_str());
        // insn_branches has an indirect jump: the kernel's rule refuses its whole function.
        EXPECT_GT(points_optimized * 10, points * 4); // > 40%
    } else {
        EXPECT_EQ(0u, optimized);
    }
}

INSTANTIATE_TEST_SUITE_P(kprobes, insn_test,
                         ::testing::Values(mode::pre_only, mode::pre_post,
                                           mode::pre_only_optimized),
                         [](const auto &info) {
                             switch (info.param) {
                             case mode::pre_only:
                                 return "pre_only";
                             case mode::pre_post:
                                 return "pre_post";
                             default:
                                 return "pre_only_optimized";
                             }
                         });

// A pre handler that returns non-zero changed regs->ip: the instruction is skipped.
int skip_fault(struct kprobe *, struct pt_regs *regs)
{
    regs->ip = reinterpret_cast<unsigned long>(insn_fault_resume);
    regs->ax = 100;
    return 1;
}

TEST(insn, pre_handler_redirects_execution)
{
    install_program_handlers();
    struct kprobe p = {};
    p.addr = reinterpret_cast<kprobe_opcode_t *>(insn_fault_load);
    p.pre_handler = skip_fault;
    p.post_handler = count_post;
    ASSERT_EQ(0, register_kprobe(&p));
    const unsigned long faults = segv_count;
    post_hits = 0;
    EXPECT_EQ(101 + 5, insn_fault(0, 5)); // the NULL load never runs
    EXPECT_EQ(faults, segv_count);
    EXPECT_EQ(0u, post_hits);
    unregister_kprobe(&p);
}

// A fault in the out-of-line copy reaches the program's handler at the original address.
TEST(insn, fault_in_copy_reported_at_the_original_address)
{
    install_program_handlers();
    // The handler resumes inside what would be an optimized region (see resumes_mid_region).
    ASSERT_EQ(0, kprobes_set_optimization(0));
    for (bool post : {false, true}) {
        struct kprobe p = {};
        p.addr = reinterpret_cast<kprobe_opcode_t *>(insn_fault_load);
        p.pre_handler = count_pre;
        p.post_handler = post ? count_post : nullptr;
        ASSERT_EQ(0, register_kprobe(&p));
        const unsigned long faults = segv_count;
        pre_hits = 0;
        post_hits = 0;
        EXPECT_EQ(41 + 1 + 3, insn_fault(0, 3));
        EXPECT_EQ(faults + 1, segv_count);
        EXPECT_EQ(1u, pre_hits);
        EXPECT_EQ(0u, post_hits); // the instruction did not complete
        // Again, with a valid pointer: the copy completes.
        EXPECT_EQ(fault_cell + 1 + 3, insn_fault(reinterpret_cast<long>(&fault_cell), 3));
        EXPECT_EQ(2u, pre_hits);
        EXPECT_EQ(post ? 1u : 0u, post_hits);
        unregister_kprobe(&p);
    }
    kprobes_set_optimization(1);
}

// The program's own traps still reach its own SIGTRAP handler.
TEST(insn, program_int3_reaches_program_handler)
{
    install_program_handlers();
    struct kprobe p = {};
    p.symbol_name = "insn_misc";
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    const unsigned long before = unexpected_traps;
    __asm__ volatile("int3");
    raise(SIGTRAP);
    EXPECT_EQ(before + 2, unexpected_traps);
    unregister_kprobe(&p);
    unexpected_traps = 0;
}

} // namespace
