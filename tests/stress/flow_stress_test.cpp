// Flow stress: probe churn while the probed code leaves its functions every way it can.
//
// In one process, for each site flavour (fentry, pfe, plain: see flow_targets.h), worker
// threads run C++ exceptions thrown through 12 probed frames, longjmp out of 12 frames,
// stack walks (backtrace, dladdr, _Unwind_Backtrace) from three probed frames and a recursion
// that signal handlers interrupt. A sender thread signals the workers all the time; the
// signal handler calls a probed function (on the sigaltstack for one worker) and, when it
// interrupted the recursion's body or the handler of a churned probe, leaves with siglongjmp.
// A spawner makes threads that end inside probed frames (pthread_exit) or are cancelled
// there; a loader thread dlopens, calls and dlcloses libraries with patch sites. Meanwhile
// control threads register, unregister, enable and disable overlapping fprobes, kretprobes
// and kprobes, and a knob thread flips kprobes/enabled and kprobes/optimization.
//
// Exact accounting, for the fprobe of each flavour that stays registered all along (its
// handlers are never left by a jump): every entry its handler saw ends in exactly one exit or
// one miss, and the only other misses are the hits of signal handlers that interrupted
// dprobe itself: nmissed == (entries - exits) + (signal-handler calls - their entries), give
// or take one per jump out of dprobe's own code (which may land between a handler's return
// and dprobe's note that it returned). The
// follower of the loaded libraries sees every call exactly once, entry and exit. Every exit
// of every probe finds the entry data its entry wrote and the real return address; every
// workload returns what it returns untraced. A crash fails the test (the process dies).
//
// DPROBE_STRESS_SECONDS (default 4) sets the duration. The figures are one "flow-stress:" line.
#include "tests/stress/flow_targets.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <mutex>
#include <pthread.h>
#include <random>
#include <string>
#include <thread>
#include <ucontext.h>
#include <unistd.h>
#include <vector>

std::atomic<unsigned long> flow_calls[flow_nflavours][flow_nfns];

extern "C" {
extern char __start_flow_jumpable[], __stop_flow_jumpable[];
extern char __start_flow_jump_handlers[], __stop_flow_jump_handlers[];
}

namespace
{

#define JUMP_HANDLER __attribute__((section("flow_jump_handlers"), noinline))

const char *const flavour_names[flow_nflavours] = {"fentry", "pfe", "plain"};

struct flavour_fns {
    long (*catcher)(int);
    long (*setjmper)(int);
    long (*outer)(int);
    long (*leaf)(long);
    long (*deep)(int);
    long (*exiter)(int);
    long (*canceller)(int);
};
const flavour_fns fns[flow_nflavours] = {
    {flow_fentry_catcher, flow_fentry_setjmper, flow_fentry_outer, flow_fentry_leaf,
     flow_fentry_deep, flow_fentry_exiter, flow_fentry_canceller},
    {flow_pfe_catcher, flow_pfe_setjmper, flow_pfe_outer, flow_pfe_leaf, flow_pfe_deep,
     flow_pfe_exiter, flow_pfe_canceller},
    {flow_plain_catcher, flow_plain_setjmper, flow_plain_outer, flow_plain_leaf, flow_plain_deep,
     flow_plain_exiter, flow_plain_canceller},
};

constexpr unsigned long data_magic = 0x5eed5eed00000000UL;

// --- What the run found ----------------------------------------------------------------------

struct figures {
    std::atomic<unsigned long> entries[flow_nflavours]{}, exits[flow_nflavours]{};
    std::atomic<unsigned long> sig_calls[flow_nflavours]{}, sig_entries[flow_nflavours]{};
    std::atomic<unsigned long> bad_data{0}, bad_ret_ip{0}, wrong_results{0};
    std::atomic<unsigned long> workloads{0}, signals{0}, jumps{0}, dprobe_jumps{0}, thread_exits{0},
        cancels{0}, loads{0};
    std::atomic<unsigned long> dl_calls{0}, dl_entries{0}, dl_exits{0};
    std::atomic<unsigned long> churn_hits{0}, churn_ops{0}, failed_ops{0}, knob_flips{0};
    std::mutex log_lock;
    std::vector<std::string> log;
    void note(const std::string &s)
    {
        std::lock_guard<std::mutex> g(log_lock);
        if (log.size() < 20) log.push_back(s);
    }
};
figures fig;

// Per thread: inside the signal handler (its probed calls are counted apart), and where a
// jump out of the signal handler lands.
thread_local volatile sig_atomic_t in_signal;
thread_local volatile sig_atomic_t jump_armed;
thread_local sigjmp_buf jump_back;

// The data an exit finds: what its entry wrote.
struct entry_data {
    unsigned long magic; // data_magic | flavour or probe number
    unsigned long parent_ip;
};

int flavour_of(struct fprobe *fp);

// --- The fprobes that stay registered: exact counts ------------------------------------------

struct fprobe exact[flow_nflavours];

int flavour_of(struct fprobe *fp)
{
    return static_cast<int>(fp - exact);
}

int exact_entry(struct fprobe *fp, unsigned long, unsigned long parent_ip, struct ftrace_regs *,
                void *data)
{
    const int fl = flavour_of(fp);
    fig.entries[fl].fetch_add(1, std::memory_order_relaxed);
    if (in_signal) fig.sig_entries[fl].fetch_add(1, std::memory_order_relaxed);
    auto *d = static_cast<entry_data *>(data);
    d->magic = data_magic | static_cast<unsigned long>(fl);
    d->parent_ip = parent_ip;
    return 0;
}

void exact_exit(struct fprobe *fp, unsigned long, unsigned long ret_ip, struct ftrace_regs *,
                void *data)
{
    const int fl = flavour_of(fp);
    auto *d = static_cast<entry_data *>(data);
    if (d->magic != (data_magic | static_cast<unsigned long>(fl)))
        fig.bad_data.fetch_add(1, std::memory_order_relaxed);
    else if (d->parent_ip != ret_ip)
        fig.bad_ret_ip.fetch_add(1, std::memory_order_relaxed);
    fig.exits[fl].fetch_add(1, std::memory_order_relaxed);
}

// --- The follower of dlopen'd libraries: exact too ------------------------------------------

struct fprobe follower;

int follower_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    fig.dl_entries.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
void follower_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    fig.dl_exits.fetch_add(1, std::memory_order_relaxed);
}

// --- Churned probes: their handlers may be left by a jump ------------------------------------

enum class ckind { fprobe, kretprobe, kprobe };
struct churned {
    ckind kind;
    std::string what; // glob or symbol
    struct fprobe fp;
    struct kretprobe rp;
    struct kprobe kp;
    enum { off, on, disabled } state = off;
};
std::vector<churned> churn; // fixed after set-up: handlers find their entry by address

JUMP_HANDLER int churn_fp_entry(struct fprobe *, unsigned long, unsigned long parent_ip,
                                struct ftrace_regs *, void *data)
{
    fig.churn_hits.fetch_add(1, std::memory_order_relaxed);
    auto *d = static_cast<entry_data *>(data);
    d->magic = data_magic | 0xff;
    d->parent_ip = parent_ip;
    return 0;
}

JUMP_HANDLER void churn_fp_exit(struct fprobe *, unsigned long, unsigned long ret_ip,
                                struct ftrace_regs *, void *data)
{
    auto *d = static_cast<entry_data *>(data);
    if (d->magic != (data_magic | 0xff))
        fig.bad_data.fetch_add(1, std::memory_order_relaxed);
    else if (d->parent_ip != ret_ip)
        fig.bad_ret_ip.fetch_add(1, std::memory_order_relaxed);
}

JUMP_HANDLER int churn_rp_entry(struct kretprobe_instance *ri, struct pt_regs *)
{
    fig.churn_hits.fetch_add(1, std::memory_order_relaxed);
    *reinterpret_cast<unsigned long *>(ri->data) = data_magic | 0xfe;
    return 0;
}

JUMP_HANDLER int churn_rp_exit(struct kretprobe_instance *ri, struct pt_regs *)
{
    if (*reinterpret_cast<unsigned long *>(ri->data) != (data_magic | 0xfe))
        fig.bad_data.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

JUMP_HANDLER int churn_kp_pre(struct kprobe *, struct pt_regs *)
{
    fig.churn_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

// --- Signals ---------------------------------------------------------------------------------

bool in_range(uintptr_t ip, const char *lo, const char *hi)
{
    return ip >= reinterpret_cast<uintptr_t>(lo) && ip < reinterpret_cast<uintptr_t>(hi);
}

// Executable ranges of the objects loaded at the start, and which of them is libdprobe.so:
// code in none of them is dprobe's too (its stubs, detours and instruction slots).
struct code_range {
    uintptr_t lo, hi;
    bool dprobe;
};
code_range ranges[256];
int nranges;

void note_code_ranges()
{
    Dl_info self;
    dladdr(reinterpret_cast<void *>(&register_fprobe), &self);
    nranges = 0;
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *p) {
            const auto base = static_cast<uintptr_t>(info->dlpi_addr);
            const bool dprobe =
                reinterpret_cast<uintptr_t>(static_cast<Dl_info *>(p)->dli_fbase) == base;
            for (int i = 0; i < info->dlpi_phnum && nranges < 256; ++i) {
                const ElfW(Phdr) &ph = info->dlpi_phdr[i];
                if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
                    ranges[nranges++] = {base + ph.p_vaddr, base + ph.p_vaddr + ph.p_memsz, dprobe};
            }
            return 0;
        },
        &self);
}

bool in_dprobe(uintptr_t ip)
{
    for (int i = 0; i < nranges; ++i)
        if (ip >= ranges[i].lo && ip < ranges[i].hi) return ranges[i].dprobe;
    return true;
}

std::atomic<unsigned> sig_seed{1};

void on_signal(int, siginfo_t *, void *uc)
{
    const int saved_errno = errno;
    in_signal = 1;
    fig.signals.fetch_add(1, std::memory_order_relaxed);
    const unsigned r = sig_seed.fetch_add(0x9e3779b9, std::memory_order_relaxed);
    const int fl = static_cast<int>((r >> 8) % flow_nflavours);
    fig.sig_calls[fl].fetch_add(1, std::memory_order_relaxed);
    if (fns[fl].leaf(5) != 16) fig.wrong_results.fetch_add(1, std::memory_order_relaxed);
    in_signal = 0;
    const auto ip =
        static_cast<uintptr_t>(static_cast<ucontext_t *>(uc)->uc_mcontext.gregs[REG_RIP]);
    // Leave the body of the recursion, a churned probe's handler, or dprobe's own code for
    // good (half the time).
    if (jump_armed && (r & 0x10000)) {
        const bool ours = in_range(ip, __start_flow_jumpable, __stop_flow_jumpable) ||
                          in_range(ip, __start_flow_jump_handlers, __stop_flow_jump_handlers);
        const bool dprobe = !ours && in_dprobe(ip);
        if (ours || dprobe) {
            jump_armed = 0;
            fig.jumps.fetch_add(1, std::memory_order_relaxed);
            if (dprobe) fig.dprobe_jumps.fetch_add(1, std::memory_order_relaxed);
            siglongjmp(jump_back, 1);
        }
    }
    errno = saved_errno;
}

// --- Threads ---------------------------------------------------------------------------------

std::atomic<bool> stop{false};

void check(long got, long want, const char *what, int fl)
{
    if (got == want) return;
    if (fig.wrong_results.fetch_add(1) < 5)
        fig.note(std::string(what) + " (" + flavour_names[fl] + ") returned " +
                 std::to_string(got) + ", not " + std::to_string(want));
}

// The recursion, which a signal handler may leave with siglongjmp back to here.
__attribute__((noinline)) void run_deep(int fl, int d)
{
    if (sigsetjmp(jump_back, 1) == 0) {
        jump_armed = 1;
        const long r = fns[fl].deep(d);
        jump_armed = 0;
        check(r, 22 + d, "deep", fl);
    }
    jump_armed = 0;
    in_signal = 0;
}

void worker(int w)
{
    stack_t ss = {};
    std::vector<char> alt;
    if (w == 0) { // this worker's signal handler runs on the sigaltstack
        alt.resize(1 << 16);
        ss.ss_sp = alt.data();
        ss.ss_size = alt.size();
        sigaltstack(&ss, nullptr);
    }
    unsigned long n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
        const int fl = static_cast<int>(n++ % flow_nflavours);
        const flavour_fns &f = fns[fl];
        const int d = static_cast<int>(n % 12);
        check(f.catcher(d), -1, "catcher", fl);
        check(f.setjmper(d), -2, "setjmper", fl);
        check(f.outer(d), 1, "outer", fl);
        for (int i = 0; i < 16; ++i)
            run_deep(fl, (d + i) % 12);
        fig.workloads.fetch_add(1, std::memory_order_relaxed);
    }
    if (w == 0) {
        ss.ss_flags = SS_DISABLE;
        sigaltstack(&ss, nullptr);
    }
}

void sender(std::vector<pthread_t> targets)
{
    std::mt19937 rng(7);
    while (!stop.load(std::memory_order_relaxed)) {
        pthread_kill(targets[rng() % targets.size()], SIGUSR1);
        std::this_thread::sleep_for(std::chrono::microseconds(20 + rng() % 200));
    }
}

void *exit_thread(void *arg)
{
    const auto fl = reinterpret_cast<uintptr_t>(arg);
    fns[fl].exiter(static_cast<int>(fl * 3 + 2));
    return nullptr; // not reached: exiter ends the thread
}

void *cancel_thread(void *arg)
{
    const auto fl = reinterpret_cast<uintptr_t>(arg);
    fns[fl].canceller(static_cast<int>(fl * 3 + 2));
    return nullptr; // not reached: cancelled
}

void spawner()
{
    for (uintptr_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const uintptr_t fl = i % flow_nflavours;
        pthread_t t;
        if (pthread_create(&t, nullptr, exit_thread, reinterpret_cast<void *>(fl)) == 0) {
            pthread_join(t, nullptr);
            fig.thread_exits.fetch_add(1);
        }
        if (pthread_create(&t, nullptr, cancel_thread, reinterpret_cast<void *>(fl)) == 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            pthread_cancel(t);
            pthread_join(t, nullptr);
            fig.cancels.fetch_add(1);
        }
    }
}

const char *const dl_libs[] = {DLSITES_FENTRY, DLSITES_PFE, DLSITES_PLAIN};

void loader()
{
    for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        void *h = dlopen(dl_libs[i % 3], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fig.note(std::string("dlopen: ") + dlerror());
            fig.failed_ops.fetch_add(1);
            return;
        }
        auto cube = reinterpret_cast<unsigned long (*)(unsigned long)>(dlsym(h, "dl_cube"));
        for (unsigned long x = 1; x <= 3; ++x) {
            fig.dl_calls.fetch_add(1);
            if (cube(x) != x * x * x) fig.wrong_results.fetch_add(1);
        }
        dlclose(h);
        fig.loads.fetch_add(1);
    }
}

void op_failed(const churned &c, const char *op, int err)
{
    fig.failed_ops.fetch_add(1);
    fig.note(c.what + ": " + op + " returned " + std::to_string(err));
}

// One random change to probe C.
void change(churned &c, std::mt19937 &rng)
{
    int err = 0;
    const unsigned pick = rng() % 4;
    if (c.state == churned::off) {
        switch (c.kind) {
        case ckind::fprobe:
            c.fp = {};
            c.fp.entry_handler = churn_fp_entry;
            c.fp.exit_handler = churn_fp_exit;
            c.fp.entry_data_size = sizeof(entry_data);
            err = register_fprobe(&c.fp, c.what.c_str(), nullptr);
            break;
        case ckind::kretprobe:
            c.rp = {};
            c.rp.kp.symbol_name = c.what.c_str();
            c.rp.entry_handler = churn_rp_entry;
            c.rp.handler = churn_rp_exit;
            c.rp.data_size = sizeof(unsigned long);
            c.rp.maxactive = 32;
            err = register_kretprobe(&c.rp);
            break;
        case ckind::kprobe:
            c.kp = {};
            c.kp.symbol_name = c.what.c_str();
            c.kp.pre_handler = churn_kp_pre;
            err = register_kprobe(&c.kp);
            break;
        }
        if (err) return op_failed(c, "register", err);
        c.state = churned::on;
    } else if (pick == 0) {
        switch (c.kind) {
        case ckind::fprobe:
            err = unregister_fprobe(&c.fp);
            break;
        case ckind::kretprobe:
            unregister_kretprobe(&c.rp);
            break;
        case ckind::kprobe:
            unregister_kprobe(&c.kp);
            break;
        }
        if (err) return op_failed(c, "unregister", err);
        c.state = churned::off;
    } else {
        const bool on = c.state == churned::disabled;
        switch (c.kind) {
        case ckind::fprobe:
            on ? enable_fprobe(&c.fp) : disable_fprobe(&c.fp);
            break;
        case ckind::kretprobe:
            err = on ? enable_kretprobe(&c.rp) : disable_kretprobe(&c.rp);
            break;
        case ckind::kprobe:
            err = on ? enable_kprobe(&c.kp) : disable_kprobe(&c.kp);
            break;
        }
        if (err) return op_failed(c, on ? "enable" : "disable", err);
        c.state = on ? churned::on : churned::disabled;
    }
    fig.churn_ops.fetch_add(1);
}

// Control thread K of NK owns every NK-th churned probe.
void control(size_t k, size_t nk)
{
    std::mt19937 rng(static_cast<unsigned>(k + 11));
    while (!stop.load(std::memory_order_relaxed)) {
        const size_t i = k + nk * (rng() % ((churn.size() - k + nk - 1) / nk));
        change(churn[i], rng);
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    }
}

void knobs()
{
    std::mt19937 rng(5);
    while (!stop.load(std::memory_order_relaxed)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2 + rng() % 8));
        const int on = static_cast<int>((rng() >> 4) & 1);
        const int r = (rng() & 1) ? kprobes_set_optimization(on) : kprobes_set_enabled(on);
        if (r) {
            fig.failed_ops.fetch_add(1);
            fig.note("knob returned " + std::to_string(r));
        }
        fig.knob_flips.fetch_add(1);
    }
    kprobes_set_optimization(1);
    kprobes_set_enabled(1);
}

unsigned long unregister_all()
{
    for (churned &c : churn) {
        if (c.state == churned::off) continue;
        switch (c.kind) {
        case ckind::fprobe:
            unregister_fprobe(&c.fp);
            break;
        case ckind::kretprobe:
            unregister_kretprobe(&c.rp);
            break;
        case ckind::kprobe:
            unregister_kprobe(&c.kp);
            break;
        }
        c.state = churned::off;
    }
    unsigned long missed = 0;
    for (struct fprobe &fp : exact)
        missed += fp.nmissed;
    return missed;
}

double seconds_to_run()
{
    const char *s = std::getenv("DPROBE_STRESS_SECONDS");
    return s ? std::atof(s) : 4.0;
}

TEST(flow_stress, churn_with_exceptions_jumps_signals_exits_and_loads)
{
    // Set-up: the exact probes, the follower, and the churned probes (not yet registered).
    char globs[flow_nflavours][32];
    for (int fl = 0; fl < flow_nflavours; ++fl) {
        exact[fl] = {};
        exact[fl].entry_handler = exact_entry;
        exact[fl].exit_handler = exact_exit;
        exact[fl].entry_data_size = sizeof(entry_data);
        std::snprintf(globs[fl], sizeof globs[fl], "flow_%s_*", flavour_names[fl]);
        ASSERT_EQ(register_fprobe(&exact[fl], globs[fl], nullptr), 0) << globs[fl];
    }
    follower = {};
    follower.entry_handler = follower_entry;
    follower.exit_handler = follower_exit;
    follower.flags = FPROBE_FL_FOLLOW_LOADS;
    ASSERT_EQ(register_fprobe(&follower,
                              "libdlsites_fentry.so:dl_cube libdlsites_pfe.so:dl_cube "
                              "libdlsites_plain.so:dl_cube",
                              nullptr),
              0);
    churn.clear();
    churn.reserve(64);
    churn.push_back({ckind::fprobe, "flow_*er", {}, {}, {}});
    churn.push_back({ckind::fprobe, "flow_*_leaf flow_*_deep flow_*_middle", {}, {}, {}});
    churn.push_back({ckind::fprobe, "flow_*_thrower flow_*_jumper", {}, {}, {}});
    for (const char *fl : flavour_names) {
        for (const char *fn : {"middle", "thrower", "leaf", "deep", "jumper"})
            churn.push_back({ckind::kretprobe, std::string("flow_") + fl + "_" + fn, {}, {}, {}});
        for (const char *fn : {"deep", "leaf", "catcher"})
            churn.push_back({ckind::kprobe, std::string("flow_") + fl + "_" + fn, {}, {}, {}});
    }

    note_code_ranges();
    struct sigaction sa = {};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    struct sigaction old_sa;
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_sa), 0);

    // Threads that must not get the signal start with it blocked.
    sigset_t usr1, old_mask;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
    std::vector<std::thread> others;
    others.emplace_back(spawner);
    others.emplace_back(loader);
    others.emplace_back(control, 0, 2);
    others.emplace_back(control, 1, 2);
    others.emplace_back(knobs);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    std::vector<std::thread> workers;
    for (int w = 0; w < 3; ++w)
        workers.emplace_back(worker, w);
    std::vector<pthread_t> ids;
    for (auto &t : workers)
        ids.push_back(t.native_handle());
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    std::thread send(sender, ids);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_to_run()));
    stop = true;
    send.join();
    for (auto &t : workers)
        t.join();
    for (auto &t : others)
        t.join();
    sigaction(SIGUSR1, &old_sa, nullptr);

    const unsigned long churn_missed = unregister_all();
    (void)churn_missed;
    unsigned long calls = 0;
    for (auto &per_flavour : flow_calls)
        for (auto &c : per_flavour)
            calls += c.load();
    std::printf("flow-stress: %.0f s, %lu probed calls, %lu workloads, %lu signals (%lu left "
                "with siglongjmp, %lu of them from dprobe's code), %lu thread exits, %lu "
                "cancellations, %lu loads, %lu churn "
                "operations, %lu knob flips, %lu churned-probe hits\n",
                seconds_to_run(), calls, fig.workloads.load(), fig.signals.load(), fig.jumps.load(),
                fig.dprobe_jumps.load(), fig.thread_exits.load(), fig.cancels.load(),
                fig.loads.load(), fig.churn_ops.load(), fig.knob_flips.load(),
                fig.churn_hits.load());
    for (int fl = 0; fl < flow_nflavours; ++fl) {
        const unsigned long e = fig.entries[fl], x = fig.exits[fl], sc = fig.sig_calls[fl],
                            se = fig.sig_entries[fl], missed = exact[fl].nmissed;
        std::printf("flow-stress: %s: %lu entries, %lu exits, %lu missed (%lu signal-handler "
                    "calls, %lu of them seen)\n",
                    flavour_names[fl], e, x, missed, sc, se);
        EXPECT_GT(x, 0UL) << flavour_names[fl];
        EXPECT_LE(x, e) << flavour_names[fl];
        EXPECT_LE(se, sc) << flavour_names[fl];
        // A jump out of dprobe's own code between a handler's return and dprobe's note that it
        // ran may count that activation twice or not at all; nothing else may.
        const long off = static_cast<long>(missed) - static_cast<long>((e - x) + (sc - se));
        EXPECT_LE(std::labs(off), static_cast<long>(fig.dprobe_jumps.load()))
            << flavour_names[fl] << ": every entry ends in one exit or one miss (" << off
            << " off)";
    }
    EXPECT_EQ(unregister_fprobe(&follower), 0);
    for (struct fprobe &fp : exact)
        EXPECT_EQ(unregister_fprobe(&fp), 0);
    for (const std::string &s : fig.log)
        ADD_FAILURE() << s;
    EXPECT_EQ(fig.wrong_results.load(), 0UL);
    EXPECT_EQ(fig.bad_data.load(), 0UL);
    EXPECT_EQ(fig.bad_ret_ip.load(), 0UL);
    EXPECT_EQ(fig.failed_ops.load(), 0UL);
    EXPECT_EQ(fig.dl_entries.load(), fig.dl_calls.load());
    EXPECT_EQ(fig.dl_exits.load(), fig.dl_calls.load());
    EXPECT_GT(fig.jumps.load(), 0UL);
    EXPECT_GT(fig.churn_ops.load(), 0UL);
    EXPECT_GT(fig.thread_exits.load(), 0UL);
    EXPECT_GT(fig.loads.load(), 0UL);
}

} // namespace
