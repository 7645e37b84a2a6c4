// ns per call of a tiny function: untraced, with an idle patch site, and with fprobe
// handlers attached; plus the time to register/unregister an fprobe on 1..10,000 functions.
// Every variant runs in the same process, so compare the rows with each other, not with
// another run.
#include "targets.h"

#include "arch/x86_64/insn.h"
#include "core/optprobe.h"

#include <dprobe/fprobe.h>

#include <benchmark/benchmark.h>
#include <chrono>
#include <cstdio>

namespace
{

using fn = unsigned long (*)(unsigned long);
fn volatile plain_fn = bench_plain;
fn volatile site_fn = bench_site;
fn volatile fentry_fn = bench_fentry;
fn volatile mid_fn = bench_mid;

int empty_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    return 0;
}
void empty_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *) {}
int data_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *fregs, void *data)
{
    *static_cast<unsigned long *>(data) = ftrace_regs_get_argument(fregs, 0);
    return 0;
}
void data_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *data)
{
    benchmark::DoNotOptimize(*static_cast<unsigned long *>(data));
}

// Handlers that touch a vector register (a double): not light, so their hits take the full
// path (the vector registers saved, the compiled dispatch).
volatile double full_sink;
int full_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    full_sink = full_sink + 1.0;
    return 0;
}
void full_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    full_sink = full_sink + 1.0;
}

void run_calls(benchmark::State &state, fn f)
{
    unsigned long x = 0;
    for (auto _ : state) {
        x = f(x);
        benchmark::DoNotOptimize(x);
    }
}

void BM_untraced(benchmark::State &state)
{
    run_calls(state, plain_fn);
}
void BM_idle_site_pfe(benchmark::State &state)
{
    run_calls(state, site_fn);
}
void BM_idle_site_fentry(benchmark::State &state)
{
    run_calls(state, fentry_fn);
}

template <bool exit, bool data, bool full = false>
void BM_fprobe(benchmark::State &state, const char *sym, fn f)
{
    struct fprobe fp = {};
    fp.entry_handler = full ? full_entry : data ? data_entry : empty_entry;
    if (exit) fp.exit_handler = full ? full_exit : data ? data_exit : empty_exit;
    if (data) fp.entry_data_size = sizeof(unsigned long);
    if (register_fprobe(&fp, sym, nullptr) != 0) {
        state.SkipWithError("register_fprobe failed");
        return;
    }
    run_calls(state, f);
    unregister_fprobe(&fp);
    if (fp.nmissed) state.SkipWithError("missed hits");
}

void BM_entry_only(benchmark::State &s)
{
    BM_fprobe<false, false>(s, "bench_site", site_fn);
}
void BM_entry_exit(benchmark::State &s)
{
    BM_fprobe<true, false>(s, "bench_site", site_fn);
}
void BM_entry_exit_data(benchmark::State &s)
{
    BM_fprobe<true, true>(s, "bench_site", site_fn);
}
void BM_entry_exit_fentry(benchmark::State &s)
{
    BM_fprobe<true, false>(s, "bench_fentry", fentry_fn);
}
void BM_entry_exit_full(benchmark::State &s)
{
    BM_fprobe<true, false, true>(s, "bench_site", site_fn);
}
void BM_entry_exit_full_jump(benchmark::State &s)
{
    BM_fprobe<true, false, true>(s, "bench_plain", plain_fn);
}
// No compiled-in site: the entry instructions jump to a detour (a jump site).
void BM_entry_only_jump(benchmark::State &s)
{
    BM_fprobe<false, false>(s, "bench_plain", plain_fn);
}
void BM_entry_exit_jump(benchmark::State &s)
{
    BM_fprobe<true, false>(s, "bench_plain", plain_fn);
}

// An optimized probe in the middle of a function (the kernel's optprobe): jmp to a detour
// that saves the complete register and vector state, calls the handler, restores, runs the
// relocated instructions and jumps back. Placed on the second instruction of bench_mid.
void empty_opt_handler(void *, struct pt_regs *) {}
void BM_optprobe_mid_function(benchmark::State &state)
{
    auto start = reinterpret_cast<uintptr_t>(bench_mid);
    auto i = dprobe::arch::insn_decode(reinterpret_cast<const void *>(start), 16, start);
    std::string why;
    auto op = dprobe::optprobe_prepare(start, 64, reinterpret_cast<const uint8_t *>(start),
                                       start + i->len, empty_opt_handler, nullptr, &why);
    if (!op || dprobe::optprobe_arm(*op) != 0) {
        state.SkipWithError(("optprobe: " + why).c_str());
        return;
    }
    run_calls(state, mid_fn);
    dprobe::optprobe_disarm(*op);
}
void BM_untraced_mid(benchmark::State &state)
{
    run_calls(state, mid_fn);
}

// Register + unregister an fprobe with entry and exit handlers on N functions.
void BM_register_unregister(benchmark::State &state)
{
    const char *glob = state.range(0) == 1     ? "gen_fn_00000"
                       : state.range(0) == 100 ? "gen_fn_000??"
                                               : "gen_fn_*";
    for (auto _ : state) {
        struct fprobe fp = {};
        fp.entry_handler = empty_entry;
        fp.exit_handler = empty_exit;
        auto t0 = std::chrono::steady_clock::now();
        int err = register_fprobe(&fp, glob, nullptr);
        auto t1 = std::chrono::steady_clock::now();
        if (err) {
            state.SkipWithError("register_fprobe failed");
            return;
        }
        // Make sure the probes really fire.
        unsigned long x = 0;
        for (unsigned i = 0; i < gen_fn_count; ++i)
            x += gen_fn_table[i](i);
        benchmark::DoNotOptimize(x);
        auto t2 = std::chrono::steady_clock::now();
        unregister_fprobe(&fp);
        auto t3 = std::chrono::steady_clock::now();
        state.SetIterationTime(std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count());
        state.counters["register_ms"] = std::chrono::duration<double, std::milli>(t1 - t0).count();
        state.counters["unregister_ms"] =
            std::chrono::duration<double, std::milli>(t3 - t2).count();
    }
}

} // namespace

BENCHMARK(BM_untraced);
BENCHMARK(BM_idle_site_pfe);
BENCHMARK(BM_idle_site_fentry);
BENCHMARK(BM_entry_only);
BENCHMARK(BM_entry_exit);
BENCHMARK(BM_entry_exit_data);
BENCHMARK(BM_entry_exit_fentry);
BENCHMARK(BM_entry_only_jump);
BENCHMARK(BM_entry_exit_jump);
BENCHMARK(BM_entry_exit_full);
BENCHMARK(BM_entry_exit_full_jump);
BENCHMARK(BM_untraced_mid);
BENCHMARK(BM_optprobe_mid_function);
BENCHMARK(BM_register_unregister)
    ->Arg(1)
    ->Arg(100)
    ->Arg(10000)
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
