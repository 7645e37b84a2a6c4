// Stress: worker threads call probed functions in a loop while control threads register,
// unregister, enable and disable fprobes, kprobes and kretprobes on them, and a knob thread
// flips kprobes/enabled and kprobes/optimization. Every function is probed by several kinds
// at once: fprobes on compiled-in sites (-pg -mfentry, -fpatchable-function-entry) and on
// jump sites, kprobes riding on those sites ([FTRACE]), int3 kprobes with post handlers,
// jump-optimized kprobes, and kretprobes.
//
// Exact counts. Each probe has a state word, a seqcount: odd while its (single) control
// thread changes the probe, otherwise the change count and whether the probe is armed
// (registered and enabled; for the kprobe family also kprobes/enabled, which has its own
// word). A worker reads the words of the probes on the function it calls before and after
// each call; the handlers count into the worker's thread-local record of that call. For a
// call during which no word moved (a "stable" call) every armed probe must have fired
// exactly once (and its exit or post handler once), every disarmed one not at all. A call
// that raced a change may be seen or not, but never twice, and never with an exit or post
// handler without its entry. Handlers also check the argument, the entry data and the
// return value they see; the worker checks the result. nmissed must stay 0.
//
// DPROBE_STRESS_SECONDS (default 3) sets the duration, DPROBE_STRESS_THREADS (default 4) the
// number of worker threads. The figures are printed as one "stress:" line.
#include "arch/x86_64/insn.h"
#include "arch/x86_64/insn_bytes.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" {
unsigned long stress_fentry(unsigned long);
unsigned long stress_pfe(unsigned long);
unsigned long stress_plain(unsigned long);
unsigned long stress_asm(unsigned long);
extern char stress_asm_int3[], stress_asm_opt[];
}

namespace
{

using target_fn = unsigned long (*)(unsigned long);

enum target : int { T_FENTRY, T_PFE, T_PLAIN, T_ASM, NTARGETS };

struct target_def {
    const char *name;
    target_fn fn;
};
const target_def targets[NTARGETS] = {
    {"stress_fentry", stress_fentry},
    {"stress_pfe", stress_pfe},
    {"stress_plain", stress_plain},
    {"stress_asm", stress_asm},
};
target_fn volatile calls[NTARGETS] = {stress_fentry, stress_pfe, stress_plain, stress_asm};

unsigned long expected(unsigned long tag)
{
    unsigned long x = tag * 0x9e3779b97f4a7c15UL;
    x ^= x >> 29;
    return x + tag;
}

enum class pkind : uint8_t {
    fprobe_exit,  // fprobe with entry and exit handlers (and entry data)
    fprobe_entry, // fprobe with an entry handler only
    kprobe,       // pre handler only: rides on a site, or int3, or optimized
    kprobe_post,  // pre and post handlers: int3 (single-step or boost)
    kretprobe,    // entry_handler and handler (and instance data)
};

struct probe_def {
    const char *what;
    pkind kind;
    target t;
    char *at; // kprobe address inside the function; nullptr: the function entry
};

const probe_def defs[] = {
    {"fprobe fentry site", pkind::fprobe_exit, T_FENTRY, nullptr},
    {"fprobe fentry site (entry only)", pkind::fprobe_entry, T_FENTRY, nullptr},
    {"kprobe on fentry site", pkind::kprobe, T_FENTRY, nullptr},
    {"kretprobe on fentry site", pkind::kretprobe, T_FENTRY, nullptr},
    {"fprobe pfe site", pkind::fprobe_exit, T_PFE, nullptr},
    {"fprobe pfe site (entry only)", pkind::fprobe_entry, T_PFE, nullptr},
    {"kprobe on pfe site", pkind::kprobe, T_PFE, nullptr},
    {"kretprobe on pfe site", pkind::kretprobe, T_PFE, nullptr},
    {"fprobe jump site", pkind::fprobe_exit, T_PLAIN, nullptr},
    {"fprobe jump site (2nd)", pkind::fprobe_exit, T_PLAIN, nullptr},
    {"kprobe on jump site", pkind::kprobe, T_PLAIN, nullptr},
    {"kretprobe on jump site", pkind::kretprobe, T_PLAIN, nullptr},
    {"fprobe jump site (asm)", pkind::fprobe_exit, T_ASM, nullptr},
    {"kretprobe on jump site (asm)", pkind::kretprobe, T_ASM, nullptr},
    {"kprobe int3 pre+post", pkind::kprobe_post, T_ASM, stress_asm_int3},
    {"kprobe int3/optimized (aggregate)", pkind::kprobe, T_ASM, stress_asm_int3},
    {"kprobe optimized", pkind::kprobe, T_ASM, stress_asm_opt},
    {"kprobe pre+post (unoptimizes)", pkind::kprobe_post, T_ASM, stress_asm_opt},
};
constexpr int NP = sizeof defs / sizeof defs[0];
constexpr int NCONTROL = 3;

bool is_fprobe(pkind k)
{
    return k == pkind::fprobe_exit || k == pkind::fprobe_entry;
}
bool has_exit(pkind k)
{
    return k == pkind::fprobe_exit || k == pkind::kprobe_post || k == pkind::kretprobe;
}

// The probes themselves: arrays, so a handler finds its probe's index from the pointer.
struct fprobe fps[NP];
struct kprobe kps[NP];
struct kretprobe rps[NP];

// State words: bit 0 = changing, bit 1 = armed, the rest counts changes.
std::atomic<uint64_t> state[NP];
std::atomic<uint64_t> kprobes_on_state{2}; // kprobes/enabled

// The worker's call in progress, filled by the handlers (which run on the worker's thread).
struct current_call {
    unsigned long tag;
    int t; // -1 when not inside a call
    uint8_t entry[NP], exit[NP];
};
thread_local current_call cur = {0, -1, {}, {}};

// Found by handlers (which may run in a signal handler: counters only).
std::atomic<unsigned long> stray_hits, bad_args, bad_retvals, bad_data;

void hit_entry(int i, unsigned long arg)
{
    if (cur.t != defs[i].t) {
        stray_hits.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (arg != cur.tag) bad_args.fetch_add(1, std::memory_order_relaxed);
    ++cur.entry[i];
}

void hit_exit(int i, unsigned long retval, bool check_ret)
{
    if (cur.t != defs[i].t) {
        stray_hits.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (check_ret && retval != expected(cur.tag))
        bad_retvals.fetch_add(1, std::memory_order_relaxed);
    ++cur.exit[i];
}

int fp_entry(struct fprobe *fp, unsigned long, unsigned long, struct ftrace_regs *fregs, void *data)
{
    const int i = static_cast<int>(fp - fps);
    hit_entry(i, ftrace_regs_get_argument(fregs, 0));
    if (data) *static_cast<unsigned long *>(data) = ftrace_regs_get_argument(fregs, 0);
    return 0;
}

void fp_exit(struct fprobe *fp, unsigned long, unsigned long, struct ftrace_regs *fregs, void *data)
{
    const int i = static_cast<int>(fp - fps);
    if (*static_cast<unsigned long *>(data) != cur.tag)
        bad_data.fetch_add(1, std::memory_order_relaxed);
    hit_exit(i, ftrace_regs_get_return_value(fregs), true);
}

int kp_pre(struct kprobe *p, struct pt_regs *regs)
{
    hit_entry(static_cast<int>(p - kps), regs->di);
    return 0;
}

void kp_post(struct kprobe *p, struct pt_regs *, unsigned long)
{
    hit_exit(static_cast<int>(p - kps), 0, false);
}

int rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    hit_entry(static_cast<int>(get_kretprobe(ri) - rps), regs->di);
    *reinterpret_cast<unsigned long *>(ri->data) = regs->di;
    return 0;
}

int rp_exit(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    if (*reinterpret_cast<unsigned long *>(ri->data) != cur.tag)
        bad_data.fetch_add(1, std::memory_order_relaxed);
    hit_exit(static_cast<int>(get_kretprobe(ri) - rps), regs_return_value(regs), true);
    return 0;
}

// Everything the run found, for the report and the assertions.
struct figures {
    std::atomic<unsigned long> calls{0}, wrong_results{0};
    std::atomic<unsigned long> stable_armed[NP]{}, stable_disarmed[NP]{}, racing[NP]{},
        racing_seen[NP]{};
    std::atomic<unsigned long> lost[NP]{}, extra[NP]{};
    std::atomic<unsigned long> registers{0}, unregisters{0}, enables{0}, disables{0}, knob_flips{0},
        failed_ops{0}, nmissed{0}, optimized_seen{0}, ftrace_regs{0};
    std::atomic<unsigned long> op_ns{0}; // time spent in the control operations
    std::atomic<unsigned long> probe_ops[NP]{}, probe_op_ns[NP]{};
    std::mutex log_lock;
    std::vector<std::string> log; // the first violations, in words
    void note(const std::string &s)
    {
        std::lock_guard<std::mutex> g(log_lock);
        if (log.size() < 20) log.push_back(s);
    }
};
figures fig;

std::atomic<bool> stop_workers{false}, stop_controls{false};

void worker(int w)
{
    std::vector<int> on[NTARGETS];
    for (int i = 0; i < NP; ++i)
        on[defs[i].t].push_back(i);
    unsigned long n = 0;
    unsigned long sa[NP] = {}, sd[NP] = {}, rc[NP] = {}, rs[NP] = {};
    uint64_t w1[NP], w2[NP];
    const auto publish = [&] {
        for (int i = 0; i < NP; ++i) {
            fig.stable_armed[i].fetch_add(sa[i]);
            fig.stable_disarmed[i].fetch_add(sd[i]);
            fig.racing[i].fetch_add(rc[i]);
            fig.racing_seen[i].fetch_add(rs[i]);
            sa[i] = sd[i] = rc[i] = rs[i] = 0;
        }
    };
    while (!stop_workers.load(std::memory_order_relaxed)) {
        if (n % 65536 == 0) publish();
        const int t = static_cast<int>(n % NTARGETS);
        const unsigned long tag = (static_cast<unsigned long>(w) << 40) | n;
        ++n;
        std::memset(cur.entry, 0, sizeof cur.entry);
        std::memset(cur.exit, 0, sizeof cur.exit);
        cur.tag = tag;
        const uint64_t g1 = kprobes_on_state.load(std::memory_order_acquire);
        for (int i : on[t])
            w1[i] = state[i].load(std::memory_order_acquire);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        cur.t = t;
        const unsigned long r = calls[t](tag);
        cur.t = -1;
        std::atomic_thread_fence(std::memory_order_seq_cst);
        const uint64_t g2 = kprobes_on_state.load(std::memory_order_relaxed);
        for (int i : on[t])
            w2[i] = state[i].load(std::memory_order_relaxed);

        if (r != expected(tag) && fig.wrong_results.fetch_add(1) < 5)
            fig.note(std::string("wrong result from ") + targets[t].name);
        for (int i : on[t]) {
            const bool fam = !is_fprobe(defs[i].kind);
            const bool stable = w1[i] == w2[i] && !(w1[i] & 1) && (!fam || (g1 == g2 && !(g1 & 1)));
            const bool armed = (w1[i] & 2) && (!fam || (g1 & 2));
            const unsigned e = cur.entry[i], x = cur.exit[i];
            const unsigned want_x = has_exit(defs[i].kind) ? e : 0;
            if (e > 1 || x > want_x) {
                fig.extra[i].fetch_add(1);
                fig.note(std::string(defs[i].what) + ": " + std::to_string(e) + " entries, " +
                         std::to_string(x) + " exits in one call");
            } else if (!stable) {
                ++rc[i];
                rs[i] += e;
            } else if (armed) {
                ++sa[i];
                if (e != 1 || x != (has_exit(defs[i].kind) ? 1u : 0u)) {
                    fig.lost[i].fetch_add(1);
                    fig.note(std::string(defs[i].what) + ": armed, but " + std::to_string(e) +
                             " entries, " + std::to_string(x) + " exits");
                }
            } else {
                ++sd[i];
                if (e || x) {
                    fig.extra[i].fetch_add(1);
                    fig.note(std::string(defs[i].what) + ": disarmed, but fired");
                }
            }
        }
    }
    fig.calls.fetch_add(n);
    publish();
}

// --- control -------------------------------------------------------------------------------

enum class reg_state : uint8_t { unregistered, enabled, disabled };
reg_state rstate[NP];
std::atomic<int> kretprobe_maxactive{64};

void begin_change(std::atomic<uint64_t> &s)
{
    s.store(s.load() | 1, std::memory_order_seq_cst);
}
void end_change(std::atomic<uint64_t> &s, bool armed)
{
    const uint64_t v = ((s.load() >> 2) + 1) << 2;
    s.store(v | (armed ? 2 : 0), std::memory_order_seq_cst);
}

void failed(int i, const char *op, int err)
{
    fig.failed_ops.fetch_add(1);
    fig.note(std::string(defs[i].what) + ": " + op + " returned " + std::to_string(err));
}

void do_register(int i, bool disabled)
{
    const probe_def &d = defs[i];
    int err = 0;
    if (is_fprobe(d.kind)) {
        struct fprobe &fp = fps[i];
        fp = {};
        fp.entry_handler = fp_entry;
        if (d.kind == pkind::fprobe_exit) {
            fp.exit_handler = fp_exit;
            fp.entry_data_size = sizeof(unsigned long);
        }
        fp.flags = disabled ? FPROBE_FL_DISABLED : 0;
        err = register_fprobe(&fp, targets[d.t].name, nullptr);
    } else if (d.kind == pkind::kretprobe) {
        struct kretprobe &rp = rps[i];
        rp = {};
        rp.kp.symbol_name = targets[d.t].name;
        rp.kp.flags = disabled ? KPROBE_FLAG_DISABLED : 0;
        rp.entry_handler = rp_entry;
        rp.handler = rp_exit;
        rp.data_size = sizeof(unsigned long);
        rp.maxactive = kretprobe_maxactive.load();
        err = register_kretprobe(&rp);
        if (!err && kprobe_ftrace(&rp.kp)) fig.ftrace_regs.fetch_add(1);
    } else {
        struct kprobe &kp = kps[i];
        kp = {};
        if (d.at)
            kp.addr = reinterpret_cast<kprobe_opcode_t *>(d.at);
        else
            kp.symbol_name = targets[d.t].name;
        kp.pre_handler = kp_pre;
        if (d.kind == pkind::kprobe_post) kp.post_handler = kp_post;
        kp.flags = disabled ? KPROBE_FLAG_DISABLED : 0;
        err = register_kprobe(&kp);
        if (!err && kprobe_ftrace(&kp)) fig.ftrace_regs.fetch_add(1);
    }
    if (err)
        failed(i, "register", err);
    else
        rstate[i] = disabled ? reg_state::disabled : reg_state::enabled;
    fig.registers.fetch_add(1);
}

void do_unregister(int i)
{
    const pkind k = defs[i].kind;
    if (is_fprobe(k)) {
        fig.nmissed.fetch_add(__atomic_load_n(&fps[i].nmissed, __ATOMIC_RELAXED));
        if (int err = unregister_fprobe(&fps[i])) failed(i, "unregister", err);
    } else if (k == pkind::kretprobe) {
        unregister_kretprobe(&rps[i]);
        fig.nmissed.fetch_add(static_cast<unsigned long>(rps[i].nmissed) + rps[i].kp.nmissed);
    } else {
        unregister_kprobe(&kps[i]);
        fig.nmissed.fetch_add(kps[i].nmissed);
    }
    rstate[i] = reg_state::unregistered;
    fig.unregisters.fetch_add(1);
}

void do_enable(int i, bool on)
{
    const pkind k = defs[i].kind;
    int err = 0;
    if (is_fprobe(k)) {
        if (on)
            enable_fprobe(&fps[i]);
        else
            disable_fprobe(&fps[i]);
    } else {
        struct kprobe *kp = k == pkind::kretprobe ? &rps[i].kp : &kps[i];
        err = on ? enable_kprobe(kp) : disable_kprobe(kp);
    }
    if (err)
        failed(i, on ? "enable" : "disable", err);
    else
        rstate[i] = on ? reg_state::enabled : reg_state::disabled;
    (on ? fig.enables : fig.disables).fetch_add(1);
}

void nap(std::mt19937 &rng)
{
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
}

void control(int c)
{
    std::mt19937 rng(1234 + c);
    std::vector<int> mine;
    for (int i = c; i < NP; i += NCONTROL)
        mine.push_back(i);
    while (!stop_controls.load(std::memory_order_relaxed)) {
        const int i = mine[rng() % mine.size()];
        const bool coin = rng() & 1;
        const auto t0 = std::chrono::steady_clock::now();
        begin_change(state[i]);
        switch (rstate[i]) {
        case reg_state::unregistered:
            do_register(i, coin);
            break;
        case reg_state::enabled:
            coin ? do_enable(i, false) : do_unregister(i);
            break;
        case reg_state::disabled:
            coin ? do_enable(i, true) : do_unregister(i);
            break;
        }
        end_change(state[i], rstate[i] == reg_state::enabled);
        const unsigned long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - t0)
                                     .count();
        fig.op_ns.fetch_add(ns);
        fig.probe_op_ns[i].fetch_add(ns);
        fig.probe_ops[i].fetch_add(1);
        // Optimization follows the other probes at the address and around it: note how
        // often a kprobe of this thread is found optimized.
        for (int k : mine)
            if (rstate[k] != reg_state::unregistered && !is_fprobe(defs[k].kind) &&
                defs[k].kind != pkind::kretprobe &&
                (__atomic_load_n(&kps[k].flags, __ATOMIC_RELAXED) & KPROBE_FLAG_OPTIMIZED))
                fig.optimized_seen.fetch_add(1);
        nap(rng);
    }
}

// Flips kprobes/optimization (armed states unchanged) and kprobes/enabled (every kprobe
// and kretprobe disarmed while 0).
void knobs()
{
    std::mt19937 rng(99);
    bool opt = true, on = true;
    while (!stop_controls.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(std::chrono::microseconds(500 + rng() % 3000));
        if (rng() % 3) {
            opt = !opt;
            if (int err = kprobes_set_optimization(opt)) {
                fig.failed_ops.fetch_add(1);
                fig.note("kprobes_set_optimization returned " + std::to_string(err));
            }
        } else {
            on = !on;
            begin_change(kprobes_on_state);
            if (int err = kprobes_set_enabled(on)) {
                fig.failed_ops.fetch_add(1);
                fig.note("kprobes_set_enabled returned " + std::to_string(err));
            }
            end_change(kprobes_on_state, on);
        }
        fig.knob_flips.fetch_add(1);
    }
    kprobes_set_optimization(1);
    begin_change(kprobes_on_state);
    kprobes_set_enabled(1);
    end_change(kprobes_on_state, true);
}

double env_number(const char *name, double dflt)
{
    const char *s = std::getenv(name);
    return s && *s ? std::atof(s) : dflt;
}

bool covered()
{
    if (!fig.optimized_seen.load() || !fig.ftrace_regs.load()) return false;
    for (int i = 0; i < NP; ++i)
        if (!fig.stable_armed[i].load() || !fig.stable_disarmed[i].load() || !fig.racing[i].load())
            return false;
    return true;
}

TEST(stress, probes_come_and_go_while_threads_call)
{
    const double seconds = env_number("DPROBE_STRESS_SECONDS", 3);
    const int nworkers = static_cast<int>(env_number("DPROBE_STRESS_THREADS", 4));
    ASSERT_GT(seconds, 0);
    ASSERT_GT(nworkers, 0);
    kretprobe_maxactive = std::max(64, 2 * nworkers);

    // The kprobe addresses are instruction boundaries of stress_asm.
    for (char *at : {stress_asm_int3, stress_asm_opt})
        ASSERT_TRUE(dprobe::arch::insn_decode(at, 16, reinterpret_cast<uintptr_t>(at)));
    // Jump sites are made once per function, by the first fprobe or kretprobe that needs one
    // (a kretprobe made while kprobes/optimization is 0 would take an int3 entry instead,
    // and no jump site may then be made over it): make them now.
    for (target t : {T_PLAIN, T_ASM}) {
        struct fprobe fp = {};
        fp.entry_handler = fp_entry;
        ASSERT_EQ(0, register_fprobe(&fp, targets[t].name, nullptr)) << targets[t].name;
        ASSERT_EQ(0, unregister_fprobe(&fp));
    }

    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> ws, cs;
    for (int w = 0; w < nworkers; ++w)
        ws.emplace_back(worker, w);
    for (int c = 0; c < NCONTROL; ++c)
        cs.emplace_back(control, c);
    cs.emplace_back(knobs);
    // Run the time asked for, then on until every probe was seen armed, disarmed and
    // changing under a call (a slow or busy machine may need longer), at most 10x longer.
    const auto deadline = start + std::chrono::duration<double>(seconds);
    const auto limit = start + std::chrono::duration<double>(seconds * 10);
    while (std::chrono::steady_clock::now() < deadline ||
           (!covered() && std::chrono::steady_clock::now() < limit))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop_controls = true;
    for (auto &t : cs)
        t.join();
    // The workers go on for a moment with the probes as the controls left them.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop_workers = true;
    for (auto &t : ws)
        t.join();
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int i = 0; i < NP; ++i)
        if (rstate[i] != reg_state::unregistered) do_unregister(i);
    // Nothing fires any more.
    cur.t = -2;
    for (int t = 0; t < NTARGETS; ++t)
        EXPECT_EQ(expected(77), calls[t](77));

    unsigned long armed = 0, disarmed = 0, racing = 0, racing_seen = 0, lost = 0, extra = 0;
    for (int i = 0; i < NP; ++i) {
        armed += fig.stable_armed[i];
        disarmed += fig.stable_disarmed[i];
        racing += fig.racing[i];
        racing_seen += fig.racing_seen[i];
        lost += fig.lost[i];
        extra += fig.extra[i];
        std::printf("  %-34s armed %10lu  disarmed %10lu  racing %9lu (seen %8lu)  %5lu ops "
                    "(%.0f us)\n",
                    defs[i].what, fig.stable_armed[i].load(), fig.stable_disarmed[i].load(),
                    fig.racing[i].load(), fig.racing_seen[i].load(), fig.probe_ops[i].load(),
                    fig.probe_op_ns[i].load() / 1e3 / std::max(1UL, fig.probe_ops[i].load()));
    }
    std::printf("stress: %d worker + %d control threads, %.1f s, %lu calls, %lu probe checks "
                "(%lu armed exact, %lu disarmed exact, %lu racing, %lu of those seen), "
                "%lu registrations (%lu on a site), %lu unregistrations, %lu enables, "
                "%lu disables (%.0f us each on average), %lu knob flips, %lu times a kprobe "
                "was found optimized; lost %lu, extra %lu, nmissed %lu, "
                "failed ops %lu, wrong results %lu, bad args %lu, bad retvals %lu, bad data "
                "%lu, stray hits %lu\n",
                nworkers, NCONTROL + 1, took, fig.calls.load(), armed + disarmed + racing, armed,
                disarmed, racing, racing_seen, fig.registers.load(), fig.ftrace_regs.load(),
                fig.unregisters.load(), fig.enables.load(), fig.disables.load(),
                fig.op_ns.load() / 1e3 /
                    std::max(1UL, fig.registers + fig.unregisters + fig.enables + fig.disables),
                fig.knob_flips.load(), fig.optimized_seen.load(), lost, extra, fig.nmissed.load(),
                fig.failed_ops.load(), fig.wrong_results.load(), bad_args.load(),
                bad_retvals.load(), bad_data.load(), stray_hits.load());
    for (const auto &s : fig.log)
        ADD_FAILURE() << s;
    EXPECT_EQ(0UL, lost);
    EXPECT_EQ(0UL, extra);
    EXPECT_EQ(0UL, fig.nmissed.load());
    EXPECT_EQ(0UL, fig.failed_ops.load());
    EXPECT_EQ(0UL, fig.wrong_results.load());
    EXPECT_EQ(0UL, bad_args.load());
    EXPECT_EQ(0UL, bad_retvals.load());
    EXPECT_EQ(0UL, bad_data.load());
    EXPECT_EQ(0UL, stray_hits.load());
    // Every probe was exercised in every state.
    for (int i = 0; i < NP; ++i) {
        EXPECT_GT(fig.stable_armed[i].load(), 0UL) << defs[i].what;
        EXPECT_GT(fig.stable_disarmed[i].load(), 0UL) << defs[i].what;
        EXPECT_GT(fig.racing[i].load(), 0UL) << defs[i].what;
    }
    EXPECT_GT(fig.optimized_seen.load(), 0UL);
    EXPECT_GT(fig.ftrace_regs.load(), 0UL);
}

} // namespace
