// ns per hit of each kprobe kind, in one run, against an unprobed call of the same function
// and a raw int3 + SIGTRAP round trip (a handler that only returns, called by the kernel
// directly). Every probe is armed on its own copy of the target function at once, and the
// scenarios are measured in interleaved rounds (the minimum per scenario is kept), so that
// load on the machine affects them alike. Usage: bench_kprobe [--quick]
#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <string>
#include <vector>

extern "C" {
long kp_bench_plain0(long);
long kp_bench_plain1(long);
long kp_bench_plain2(long);
long kp_bench_plain3(long);
long kp_bench_site0(long);
long kp_bench_site1(long);
long kp_bench_site2(long);
long kp_bench_site3(long);
long kp_bench_site4(long);
long kp_bench_site5(long);
long kp_bench_ret_jump(long);
long kp_bench_raw_int3(long);
long kp_bench_mid_opt(long);
long kp_bench_mid_plain(long);
extern char kp_bench_mid_probe[];
}

namespace
{

using fn_t = long (*)(long);

std::atomic<unsigned long> hits;

// Handlers count with a plain load + store: one thread, no locked instruction.
void bump()
{
    hits.store(hits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
int on_pre(struct kprobe *, struct pt_regs *)
{
    bump();
    return 0;
}
void on_post(struct kprobe *, struct pt_regs *, unsigned long) {}
int on_ret(struct kretprobe_instance *, struct pt_regs *)
{
    bump();
    return 0;
}
int on_fentry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    bump();
    return 0;
}
void on_fexit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *) {}
void raw_trap(int) {}

double now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

double run(fn_t volatile *fn, long iters)
{
    long acc = 0;
    const double t0 = now_ns();
    for (long i = 0; i < iters; ++i)
        acc += (*fn)(i);
    const double t = (now_ns() - t0) / static_cast<double>(iters);
    if (acc == 42) std::puts("");
    return t;
}

using sigaction_fn = int (*)(int, const struct sigaction *, struct sigaction *);

struct scenario {
    std::string name;
    fn_t volatile fn;
    int base; // index of the unprobed scenario to subtract; -1: none
    bool slow;
    bool raw = false;
    double best = 1e18;
    unsigned long calls = 0, hits = 0;
    bool counts = true;
    int optimization = 0; // kprobes/optimization while this scenario runs
};

} // namespace

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    const long fast = quick ? 100'000 : 200'000;
    const long slow = quick ? 1'000 : 2'000;
    const int rounds = quick ? 5 : 60;

    std::vector<scenario> s;
    s.push_back({"unprobed call (plain function)", kp_bench_plain0, -1, false});
    s.push_back({"unprobed call (function with a patch site)", kp_bench_site0, -1, false});
    s.push_back({"raw int3 + SIGTRAP round trip", kp_bench_raw_int3, 0, true, true});
    s.push_back({"kprobe, boosted (int3, copy + jmp back)", kp_bench_plain1, 0, true});
    s.push_back({"kprobe, single-stepped (post_handler: 2 traps)", kp_bench_plain2, 0, true});
    s.push_back({"kretprobe, int3 entry", kp_bench_plain3, 0, true});
    s.push_back({"kprobe on a patch site [FTRACE]", kp_bench_site1, 1, false});
    s.push_back({"kprobe on a patch site [FTRACE] + post_handler", kp_bench_site2, 1, false});
    s.push_back({"kretprobe, patch-site entry [FTRACE]", kp_bench_site3, 1, false});
    s.push_back({"(reference) fprobe entry handler on a site", kp_bench_site4, 1, false});
    s.push_back({"(reference) fprobe entry + exit handlers", kp_bench_site5, 1, false});
    s.push_back({"unprobed call (plain function with a body)", kp_bench_mid_plain, -1, false});
    s.push_back({"kprobe mid-function, optimized [OPTIMIZED]", kp_bench_mid_opt, 11, false});
    s.push_back({"kprobe mid-function, int3 (optimization off)", kp_bench_mid_opt, 11, true});
    s.push_back(
        {"kretprobe, jump-site entry (function without a site)", kp_bench_ret_jump, 11, false});
    s[0].counts = s[1].counts = s[2].counts = s[11].counts = false;
    s[12].optimization = 1;

    struct kprobe kp1 = {}, kp2 = {}, kp_site1 = {}, kp_site2 = {};
    kp1.symbol_name = "kp_bench_plain1";
    kp1.pre_handler = on_pre;
    kp2.symbol_name = "kp_bench_plain2";
    kp2.pre_handler = on_pre;
    kp2.post_handler = on_post;
    kp_site1.symbol_name = "kp_bench_site1";
    kp_site1.pre_handler = on_pre;
    kp_site2.symbol_name = "kp_bench_site2";
    kp_site2.pre_handler = on_pre;
    kp_site2.post_handler = on_post;
    struct kretprobe rp1 = {}, rp2 = {};
    rp1.kp.symbol_name = "kp_bench_plain3";
    rp1.handler = on_ret;
    rp2.kp.symbol_name = "kp_bench_site3";
    rp2.handler = on_ret;
    struct fprobe fp = {};
    fp.entry_handler = on_fentry;
    struct fprobe fp2 = {};
    fp2.entry_handler = on_fentry;
    fp2.exit_handler = on_fexit;
    struct kprobe kp_mid = {};
    kp_mid.addr = reinterpret_cast<kprobe_opcode_t *>(kp_bench_mid_probe);
    kp_mid.pre_handler = on_pre;
    struct kretprobe rp_jump = {};
    rp_jump.kp.symbol_name = "kp_bench_ret_jump";
    rp_jump.handler = on_ret;
    struct kprobe *kps[] = {&kp1, &kp2, &kp_site1, &kp_site2, &kp_mid};
    struct kretprobe *rps[] = {&rp1, &rp2};
    // The baselines are int3 probes: registered with optimization off (a kretprobe keeps
    // the entry it got); the optimized rows turn it on while they run.
    kprobes_set_optimization(0);
    if (int err = register_kprobes(kps, 5)) {
        std::fprintf(stderr, "register_kprobes: %d\n", err);
        return 1;
    }
    if (int err = register_kretprobes(rps, 2)) {
        std::fprintf(stderr, "register_kretprobes: %d\n", err);
        return 1;
    }
    kprobes_set_optimization(1);
    if (int err = register_kretprobe(&rp_jump)) {
        std::fprintf(stderr, "register_kretprobe: %d\n", err);
        return 1;
    }
    kprobes_set_optimization(0);
    if (int err = register_fprobe(&fp, "kp_bench_site4", nullptr)) {
        std::fprintf(stderr, "register_fprobe: %d\n", err);
        return 1;
    }
    if (int err = register_fprobe(&fp2, "kp_bench_site5", nullptr)) {
        std::fprintf(stderr, "register_fprobe: %d\n", err);
        return 1;
    }
    if (!kp1.ainsn.boostable || kprobe_ftrace(&kp1) || !kprobe_ftrace(&kp_site1) ||
        !kprobe_ftrace(&rp2.kp) || kprobe_ftrace(&rp1.kp) || !kprobe_ftrace(&rp_jump.kp)) {
        std::fprintf(stderr, "unexpected probe mechanisms (%d %d %d %d %d %d)\n",
                     kp1.ainsn.boostable, kprobe_ftrace(&kp1), kprobe_ftrace(&kp_site1),
                     kprobe_ftrace(&rp2.kp), kprobe_ftrace(&rp1.kp), kprobe_ftrace(&rp_jump.kp));
        return 1;
    }

    // The raw round trip: the trivial handler owns SIGTRAP (through libc's own sigaction,
    // past dprobe's interposer) for the duration of its runs only.
    auto real_sigaction = reinterpret_cast<sigaction_fn>(dlsym(RTLD_NEXT, "sigaction"));
    if (!real_sigaction) real_sigaction = sigaction;
    struct sigaction raw_sa {
    }, dprobe_sa{};
    raw_sa.sa_handler = raw_trap;
    sigemptyset(&raw_sa.sa_mask);

    bool opt_ok = true;
    for (int r = 0; r < rounds; ++r) {
        for (scenario &sc : s) {
            const long iters = sc.slow ? slow : fast;
            if (kprobes_optimization() != sc.optimization) {
                kprobes_set_optimization(sc.optimization);
                opt_ok &= (kprobe_optimized(&kp_mid) != 0) == (sc.optimization != 0);
            }
            if (sc.raw) real_sigaction(SIGTRAP, &raw_sa, &dprobe_sa);
            hits = 0;
            const double t = run(&sc.fn, iters);
            if (sc.raw) real_sigaction(SIGTRAP, &dprobe_sa, nullptr);
            sc.best = std::min(sc.best, t);
            sc.calls += static_cast<unsigned long>(iters);
            sc.hits += hits.load();
        }
    }
    kprobes_set_optimization(1);
    unregister_fprobe(&fp);
    unregister_fprobe(&fp2);
    unregister_kretprobe(&rp_jump);
    unregister_kretprobes(rps, 2);
    unregister_kprobes(kps, 5);
    if (!opt_ok) {
        std::fprintf(stderr, "the mid-function kprobe was not optimized when it should be\n");
        return 1;
    }

    const double raw_ns = s[2].best;
    std::printf("%-50s %10s %10s %11s\n", "", "ns/call", "ns/hit", "x raw int3");
    for (const scenario &sc : s) {
        const double over = sc.base >= 0 ? sc.best - s[sc.base].best : 0.0;
        std::printf("%-50s %10.1f %10.1f %11.3f%s\n", sc.name.c_str(), sc.best, over,
                    sc.best / raw_ns,
                    sc.counts && sc.hits != sc.calls ? "  (hit count mismatch!)" : "");
    }
    std::printf("\nns/call: one call of the function, probe included (minimum over %d "
                "interleaved rounds);\nns/hit: ns/call minus the unprobed call of the same "
                "kind of function.\n",
                rounds);
    std::printf("targets: boosted <= 1.15x raw: %.2fx; single-stepped <= 2.3x raw: "
                "%.2fx; on a patch site <= 5 ns: %.1f ns\n",
                s[3].best / raw_ns, s[4].best / raw_ns, s[6].best - s[1].best);
    std::printf("optimized mid-function kprobe: %.1f ns/hit (%.0fx less than its int3 form); "
                "kretprobe jump-site entry: %.1f ns/hit (int3 entry: %.1f)\n",
                s[12].best - s[11].best, (s[13].best - s[11].best) / (s[12].best - s[11].best),
                s[14].best - s[11].best, s[5].best - s[0].best);
    return 0;
}
