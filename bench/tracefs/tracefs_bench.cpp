// ns per hit of an `f` dynamic event with two fetch args, against the bare probe (the same
// kind of fprobe with an empty handler) in the same run; plus the event with a filter that
// passes, one that rejects, and a string argument; and the event with a trigger (traceon,
// which tracing already on leaves at nothing; traceoff:0, whose count is used up, on the
// record; the same behind a filter that rejects; stacktrace, a stack record each hit). The ring
// buffer is in overwrite mode and nobody reads it, as with a tracer that has fallen behind. At the
// end the differences to the bare probe are printed (CPU time of the fastest repetition; use
// --benchmark_repetitions on a busy machine): that is the cost of building, filtering and
// committing a record.
#include "core/ring_buffer.h"
#include "tracefs/event_trigger.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"

#include <dprobe/fprobe.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

extern "C" {
unsigned long tfs_bench_bare(unsigned long, unsigned long);
unsigned long tfs_bench_event(unsigned long, unsigned long);
unsigned long tfs_bench_filtered(unsigned long, unsigned long);
unsigned long tfs_bench_rejected(unsigned long, unsigned long);
unsigned long tfs_bench_string(unsigned long, unsigned long);
unsigned long tfs_bench_trig_on(unsigned long, unsigned long);
unsigned long tfs_bench_trig_off(unsigned long, unsigned long);
unsigned long tfs_bench_trig_filter(unsigned long, unsigned long);
unsigned long tfs_bench_trig_stack(unsigned long, unsigned long);
struct tfs_bench_item {
    const char *name;
    unsigned long len;
};
unsigned long tfs_bench_named(const tfs_bench_item *, unsigned long);
}

namespace
{

using namespace dprobe;
using fn = unsigned long (*)(unsigned long, unsigned long);

int empty_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    return 0;
}

void run_calls(benchmark::State &state, fn f)
{
    fn volatile call = f;
    unsigned long x = 0;
    for (auto _ : state) {
        x = call(x, 1);
        benchmark::DoNotOptimize(x);
    }
}

void BM_untraced(benchmark::State &state)
{
    run_calls(state, tfs_bench_bare);
}

void BM_bare_fprobe(benchmark::State &state)
{
    struct fprobe fp = {};
    fp.entry_handler = empty_entry;
    if (register_fprobe(&fp, "tfs_bench_bare", nullptr)) {
        state.SkipWithError("register_fprobe failed");
        return;
    }
    run_calls(state, tfs_bench_bare);
    unregister_fprobe(&fp);
}

void run_event(benchmark::State &state, const char *func, const std::string &args,
               const char *filter, fn f, const char *trigger = nullptr)
{
    auto &ev = trace_events::instance();
    std::string name = std::string("ev_") + func;
    std::string line = "f:bench/" + name + " " + func + " " + args;
    if (ev.write_commands(line, ACCEPT_DYNAMIC)) {
        state.SkipWithError(("cannot create " + line + ": " + ev.errors().read()).c_str());
        return;
    }
    if (filter && ev.set_filter("bench", name, filter)) {
        state.SkipWithError("bad filter");
        return;
    }
    if (trigger && event_trigger_write(trace_array_top(), "bench", name, trigger)) {
        state.SkipWithError("bad trigger");
        return;
    }
    ring_buffer_set_overwrite(true);
    ring_buffer_set_tracing_on(true);
    ev.set_enabled("bench", name, true);
    run_calls(state, f);
    ev.set_enabled("bench", name, false);
    if (trigger) {
        std::lock_guard<std::mutex> g(trace_types_lock());
        clear_event_triggers(0);
    }
    rb_stats st = ring_buffer_stats();
    state.counters["written"] = double(st.written);
    ev.write_commands("-:bench/" + name, ACCEPT_DYNAMIC);
    ring_buffer_reset();
}

void BM_event_2args(benchmark::State &state)
{
    run_event(state, "tfs_bench_event", "x=$arg1:u64 y=$arg2:u32", nullptr, tfs_bench_event);
}

void BM_event_2args_filter_pass(benchmark::State &state)
{
    run_event(state, "tfs_bench_filtered", "x=$arg1:u64 y=$arg2:u32", "y == 1 && x != 7",
              tfs_bench_filtered);
}

void BM_event_2args_filter_reject(benchmark::State &state)
{
    run_event(state, "tfs_bench_rejected", "x=$arg1:u64 y=$arg2:u32", "y == 2", tfs_bench_rejected);
}

void BM_event_comm_string(benchmark::State &state)
{
    run_event(state, "tfs_bench_string", "x=$arg1:u64 c=$comm", nullptr, tfs_bench_string);
}

void BM_event_2args_trigger_traceon(benchmark::State &state)
{
    run_event(state, "tfs_bench_trig_on", "x=$arg1:u64 y=$arg2:u32", nullptr, tfs_bench_trig_on,
              "traceon");
}

void BM_event_2args_trigger_traceoff_0(benchmark::State &state)
{
    run_event(state, "tfs_bench_trig_off", "x=$arg1:u64 y=$arg2:u32", nullptr, tfs_bench_trig_off,
              "traceoff:0");
}

void BM_event_2args_trigger_filter_reject(benchmark::State &state)
{
    run_event(state, "tfs_bench_trig_filter", "x=$arg1:u64 y=$arg2:u32", nullptr,
              tfs_bench_trig_filter, "traceoff if y == 2");
}

void BM_event_2args_trigger_stacktrace(benchmark::State &state)
{
    run_event(state, "tfs_bench_trig_stack", "x=$arg1:u64 y=$arg2:u32", nullptr,
              tfs_bench_trig_stack, "stacktrace");
}

// Arguments named from the function's DWARF (`it->len n`, the kernel's BTF syntax) against
// the same fetches written out: resolved at parse time into the same program, they must
// cost the same per hit.
const tfs_bench_item bench_item = {"item", 42};

unsigned long call_named(unsigned long x, unsigned long y)
{
    return tfs_bench_named(&bench_item, x + y);
}

void BM_untraced_item(benchmark::State &state)
{
    run_calls(state, call_named);
}

void BM_event_dwarf_names(benchmark::State &state)
{
    run_event(state, "tfs_bench_named", "it->len n", nullptr, call_named);
}

// The same site as the named events (one after the other), so that code placement cannot
// tell them apart.
void BM_event_explicit_fetch(benchmark::State &state)
{
    run_event(state, "tfs_bench_named", "len=+8($arg1):u64 n=$arg2:u64", nullptr, call_named);
}

void BM_event_dwarf_string(benchmark::State &state)
{
    run_event(state, "tfs_bench_named", "it->name it->len", nullptr, call_named);
}

void BM_event_explicit_string(benchmark::State &state)
{
    run_event(state, "tfs_bench_named", "name=+0(+0($arg1)):string len=+8($arg1):u64", nullptr,
              call_named);
}

BENCHMARK(BM_untraced);
BENCHMARK(BM_bare_fprobe);
BENCHMARK(BM_event_2args);
BENCHMARK(BM_event_2args_filter_pass);
BENCHMARK(BM_event_2args_filter_reject);
BENCHMARK(BM_event_comm_string);
BENCHMARK(BM_event_2args_trigger_traceon);
BENCHMARK(BM_event_2args_trigger_traceoff_0);
BENCHMARK(BM_event_2args_trigger_filter_reject);
BENCHMARK(BM_event_2args_trigger_stacktrace);
BENCHMARK(BM_untraced_item);
BENCHMARK(BM_event_dwarf_names);
BENCHMARK(BM_event_explicit_fetch);
BENCHMARK(BM_event_dwarf_string);
BENCHMARK(BM_event_explicit_string);

// Prints the usual table, then each event's cost above the bare probe.
class diff_reporter : public benchmark::ConsoleReporter
{
  public:
    void ReportRuns(const std::vector<Run> &runs) override
    {
        ConsoleReporter::ReportRuns(runs);
        // The fastest repetition of each: the least disturbed by other load on the machine.
        // (With --benchmark_report_aggregates_only only the medians arrive: then those.)
        for (const auto &r : runs) {
            if (r.error_occurred || !r.iterations) continue;
            double ns = r.GetAdjustedCPUTime();
            if (r.run_type == Run::RT_Aggregate) {
                if (r.aggregate_name == "median") median_[r.run_name.function_name] = ns;
                continue;
            }
            auto [it, added] = ns_.emplace(r.run_name.function_name, ns);
            if (!added && ns < it->second) it->second = ns;
        }
    }
    void Finalize() override
    {
        ConsoleReporter::Finalize();
        if (ns_.empty()) ns_ = median_;
        auto bare = ns_.find("BM_bare_fprobe");
        auto base = ns_.find("BM_untraced");
        if (bare == ns_.end() || base == ns_.end()) return;
        std::printf("\nbare fprobe: %.1f ns above the untraced call\n",
                    bare->second - base->second);
        if (auto item = ns_.find("BM_untraced_item"); item != ns_.end())
            for (const char *n : {"BM_event_dwarf_names", "BM_event_explicit_fetch",
                                  "BM_event_dwarf_string", "BM_event_explicit_string"})
                if (auto it = ns_.find(n); it != ns_.end())
                    std::printf("%-32s %6.1f ns per hit above its untraced call (%.2fx)\n", n,
                                it->second - item->second, it->second / item->second);
        for (const auto &[name, ns] : ns_)
            if (name.rfind("BM_event", 0) == 0)
                std::printf("%-32s %6.1f ns per hit above the bare probe\n", name.c_str(),
                            ns - bare->second);
    }

  private:
    std::map<std::string, double> ns_, median_;
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
