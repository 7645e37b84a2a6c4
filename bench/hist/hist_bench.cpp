// ns per hit of hist triggers (trace_events_hist.h) against the same fprobe event without
// a trigger, in the same run: the event recording (two fetch args, ring buffer in overwrite
// mode, nobody reading), the event recording with a hist:keys=common_pid:vals=hitcount
// trigger, and with a two-key log2 histogram (keys=common_pid,x.log2:vals=hitcount,y); and
// the triggers alone (the event only held by the trigger, in soft mode: no record is kept,
// as the kernel's hist users usually run it). At the end the differences are printed (CPU
// time of the fastest repetition; use --benchmark_repetitions on a busy machine).
// Last, the kernel's "latency histogram from two events" recipe: an fprobe entry and exit
// event of one function, ts0=common_timestamp.usecs at entry keyed by common_pid, an onmatch()
// at exit writing a synthetic event lat=common_timestamp.usecs-$ts0 and a hist keyed by lat
// on the synthetic event (nothing recorded: the triggers alone, as the recipe runs), beside
// the same function's fprobe entry and exit events recording (two records a call).
#include "core/ring_buffer.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

extern "C" {
unsigned long hist_bench_bare(unsigned long, unsigned long);
unsigned long hist_bench_event(unsigned long, unsigned long);
unsigned long hist_bench_event_pid(unsigned long, unsigned long);
unsigned long hist_bench_event_log2(unsigned long, unsigned long);
unsigned long hist_bench_pid(unsigned long, unsigned long);
unsigned long hist_bench_log2(unsigned long, unsigned long);
unsigned long hist_bench_entexit(unsigned long, unsigned long);
unsigned long hist_bench_synth(unsigned long, unsigned long);
}

namespace
{

using namespace dprobe;
using fn = unsigned long (*)(unsigned long, unsigned long);

const char *const pid_hist = "hist:keys=common_pid:vals=hitcount";
const char *const log2_hist = "hist:keys=common_pid,x.log2:vals=hitcount,y";

void run_calls(benchmark::State &state, fn f)
{
    fn volatile call = f;
    unsigned long x = 0;
    for (auto _ : state) {
        x = call(x, 1);
        benchmark::DoNotOptimize(x);
    }
}

// The event f:bench/ev_FUNC FUNC x=$arg1:u64 y=$arg2:u32, enabled when RECORD, with TRIGGER
// (may be nullptr) in its trigger file.
void run_event(benchmark::State &state, const char *func, bool record, const char *trigger, fn f)
{
    auto &ev = trace_events::instance();
    auto &tree = tracefs_tree::instance();
    std::string name = std::string("ev_") + func;
    std::string line = "f:bench/" + name + " " + func + " x=$arg1:u64 y=$arg2:u32";
    if (ev.write_commands(line, ACCEPT_DYNAMIC)) {
        state.SkipWithError(("cannot create " + line + ": " + ev.errors().read()).c_str());
        return;
    }
    const std::string trig = "events/bench/" + name + "/trigger";
    if (trigger && tree.write_file(trig, trigger, false)) {
        state.SkipWithError(("cannot write trigger: " + ev.errors().read()).c_str());
        return;
    }
    ring_buffer_set_overwrite(true);
    ring_buffer_set_tracing_on(true);
    if (record) ev.set_enabled("bench", name, true);
    run_calls(state, f);
    if (record) ev.set_enabled("bench", name, false);
    if (trigger) {
        std::string h;
        tree.read_file("events/bench/" + name + "/hist", h);
        size_t at = h.find("    Hits: ");
        if (at != std::string::npos) state.counters["hist_hits"] = std::stod(h.substr(at + 10));
        tree.write_file(trig, "", true);
    }
    state.counters["written"] = double(ring_buffer_stats().written);
    ev.write_commands("-:bench/" + name, ACCEPT_DYNAMIC);
    ring_buffer_reset();
}

void BM_untraced(benchmark::State &state)
{
    run_calls(state, hist_bench_bare);
}
void BM_event(benchmark::State &state)
{
    run_event(state, "hist_bench_event", true, nullptr, hist_bench_event);
}
void BM_event_hist_pid(benchmark::State &state)
{
    run_event(state, "hist_bench_event_pid", true, pid_hist, hist_bench_event_pid);
}
void BM_event_hist_log2(benchmark::State &state)
{
    run_event(state, "hist_bench_event_log2", true, log2_hist, hist_bench_event_log2);
}
void BM_hist_only_pid(benchmark::State &state)
{
    run_event(state, "hist_bench_pid", false, pid_hist, hist_bench_pid);
}
void BM_hist_only_log2(benchmark::State &state)
{
    run_event(state, "hist_bench_log2", false, log2_hist, hist_bench_log2);
}

// Entry and exit fprobe events of FUNC, recording (RECORD) or running the latency recipe.
void run_entry_exit(benchmark::State &state, const char *func, bool synth, fn f)
{
    auto &ev = trace_events::instance();
    auto &tree = tracefs_tree::instance();
    const std::string in = std::string("in_") + func, out = std::string("out_") + func;
    if (ev.write_commands("f:bench/" + in + " " + func + " x=$arg1:u64", ACCEPT_DYNAMIC) ||
        ev.write_commands("f:bench/" + out + " " + func + "%return r=$retval:u64",
                          ACCEPT_DYNAMIC)) {
        state.SkipWithError(("cannot create events: " + ev.errors().read()).c_str());
        return;
    }
    const std::string tin = "events/bench/" + in + "/trigger";
    const std::string tout = "events/bench/" + out + "/trigger";
    const std::string lat = "hist:keys=common_pid:lat=common_timestamp.usecs-$ts0:onmatch(bench." +
                            in + ").bench_lat($lat)";
    if (synth) {
        int r = ev.run_synth_command("bench_lat u64 lat", false);
        r = r ? r : tree.write_file(tin, "hist:keys=common_pid:ts0=common_timestamp.usecs", false);
        r = r ? r : tree.write_file(tout, lat, false);
        r = r ? r : tree.write_file("events/synthetic/bench_lat/trigger", "hist:keys=lat", false);
        if (r) {
            state.SkipWithError(("cannot set the recipe up: " + ev.errors().read()).c_str());
            return;
        }
    }
    ring_buffer_set_overwrite(true);
    ring_buffer_set_tracing_on(true);
    if (!synth) {
        ev.set_enabled("bench", in, true);
        ev.set_enabled("bench", out, true);
    }
    run_calls(state, f);
    if (synth) {
        std::string h;
        tree.read_file("events/synthetic/bench_lat/hist", h);
        size_t at = h.find("    Hits: ");
        if (at != std::string::npos) state.counters["synth_hits"] = std::stod(h.substr(at + 10));
        tree.write_file("events/synthetic/bench_lat/trigger", "", true);
        tree.write_file(tout, "", true);
        tree.write_file(tin, "", true);
        ev.run_synth_command("!bench_lat", false);
    } else {
        ev.set_enabled("bench", in, false);
        ev.set_enabled("bench", out, false);
    }
    state.counters["written"] = double(ring_buffer_stats().written);
    ev.write_commands("-:bench/" + in, ACCEPT_DYNAMIC);
    ev.write_commands("-:bench/" + out, ACCEPT_DYNAMIC);
    ring_buffer_reset();
}

void BM_entry_exit(benchmark::State &state)
{
    run_entry_exit(state, "hist_bench_entexit", false, hist_bench_entexit);
}
void BM_synth_latency_hist(benchmark::State &state)
{
    run_entry_exit(state, "hist_bench_synth", true, hist_bench_synth);
}

BENCHMARK(BM_untraced);
BENCHMARK(BM_event);
BENCHMARK(BM_event_hist_pid);
BENCHMARK(BM_event_hist_log2);
BENCHMARK(BM_hist_only_pid);
BENCHMARK(BM_hist_only_log2);
BENCHMARK(BM_entry_exit);
BENCHMARK(BM_synth_latency_hist);

class diff_reporter : public benchmark::ConsoleReporter
{
  public:
    void ReportRuns(const std::vector<Run> &runs) override
    {
        ConsoleReporter::ReportRuns(runs);
        for (const auto &r : runs) {
            if (r.error_occurred || !r.iterations || r.run_type == Run::RT_Aggregate) continue;
            double ns = r.GetAdjustedCPUTime();
            auto [it, added] = ns_.emplace(r.run_name.function_name, ns);
            if (!added && ns < it->second) it->second = ns;
        }
    }
    void Finalize() override
    {
        ConsoleReporter::Finalize();
        auto base = ns_.find("BM_untraced");
        auto event = ns_.find("BM_event");
        if (base == ns_.end()) return;
        auto ee = ns_.find("BM_entry_exit"), sy = ns_.find("BM_synth_latency_hist");
        if (ee != ns_.end() && sy != ns_.end()) {
            const double e = ee->second - base->second, y = sy->second - base->second;
            std::printf("\nfprobe entry+exit events: %.1f ns above the untraced call\n"
                        "synthetic latency hist:   %.1f ns above the untraced call (%.2fx the "
                        "entry+exit events; target <= 3x)\n",
                        e, y, y / e);
        }
        if (event == ns_.end()) return;
        std::printf("\nevent (record, no trigger): %.1f ns above the untraced call\n",
                    event->second - base->second);
        for (const char *n : {"BM_event_hist_pid", "BM_event_hist_log2"})
            if (auto it = ns_.find(n); it != ns_.end())
                std::printf("%-22s %6.1f ns above the event without trigger\n", n,
                            it->second - event->second);
        for (const char *n : {"BM_hist_only_pid", "BM_hist_only_log2"})
            if (auto it = ns_.find(n); it != ns_.end())
                std::printf("%-22s %6.1f ns above the untraced call, %+.1f ns against the event "
                            "without trigger\n",
                            n, it->second - base->second, it->second - event->second);
    }

  private:
    std::map<std::string, double> ns_;
};

} // namespace

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv);
    trace_events::instance(); // clock calibration before timing
    diff_reporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    benchmark::Shutdown();
    return 0;
}
