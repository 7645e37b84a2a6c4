// ns per call of a function traced by the `function` tracer, against an fprobe whose entry
// handler writes the same 24-byte record (the cost the function tracer is held to), and the
// untraced call, in one run; the same for `function_graph` against an fprobe with entry and
// exit handlers writing the graph's two records. The buffers are in overwrite mode and
// nobody reads them. At the end the differences are printed (CPU time of the fastest
// repetition: use --benchmark_repetitions on a busy machine).
#include "core/ring_buffer.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/tracefs_tree.h"

#include <dprobe/fprobe.h>
#include <dprobe/ptrace.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

extern "C" {
unsigned long ftb_untraced(unsigned long, unsigned long);
unsigned long ftb_fprobe_entry(unsigned long, unsigned long);
unsigned long ftb_function(unsigned long, unsigned long);
unsigned long ftb_fprobe_graph(unsigned long, unsigned long);
unsigned long ftb_graph(unsigned long, unsigned long);
}

namespace
{

using namespace dprobe;
using fn = unsigned long (*)(unsigned long, unsigned long);

tracefs_tree &T = tracefs_tree::instance();

void run_calls(benchmark::State &state, fn f)
{
    fn volatile call = f;
    unsigned long x = 0;
    for (auto _ : state) {
        x = call(x, 1);
        benchmark::DoNotOptimize(x);
    }
    state.counters["written"] = double(ring_buffer_stats().written);
}

// The reference: what the function tracer's callback does, as an fprobe entry handler.
int record_entry(struct fprobe *, unsigned long ip, unsigned long parent_ip, struct ftrace_regs *,
                 void *)
{
    if (void *ev = ring_buffer_reserve(sizeof(ftrace_entry))) {
        auto *e = static_cast<ftrace_entry *>(ev);
        e->ent = trace_entry_header{TRACE_FN, 0, 0, trace_current_tid()};
        e->ip = ip;
        e->parent_ip = parent_ip;
        ring_buffer_commit(ev);
    }
    return 0;
}

struct graph_data {
    uint64_t calltime;
    int32_t depth;
};
thread_local int32_t t_depth;

int graph_entry(struct fprobe *, unsigned long ip, unsigned long, struct ftrace_regs *, void *data)
{
    auto *gd = static_cast<graph_data *>(data);
    gd->depth = t_depth++;
    rb_stamp stamp;
    if (void *ev = ring_buffer_reserve(sizeof(ftrace_graph_ent_entry), &stamp)) {
        gd->calltime = stamp.ts;
        auto *e = static_cast<ftrace_graph_ent_entry *>(ev);
        e->ent = trace_entry_header{TRACE_GRAPH_ENT, 0, 0, trace_current_tid()};
        e->func = ip;
        e->depth = gd->depth;
        e->pad = 0;
        ring_buffer_commit(ev);
    }
    return 0;
}

void graph_exit(struct fprobe *, unsigned long ip, unsigned long, struct ftrace_regs *regs,
                void *data)
{
    auto *gd = static_cast<graph_data *>(data);
    t_depth = gd->depth;
    rb_stamp stamp;
    if (void *ev = ring_buffer_reserve(sizeof(ftrace_graph_ret_entry), &stamp)) {
        auto *e = static_cast<ftrace_graph_ret_entry *>(ev);
        e->ent = trace_entry_header{TRACE_GRAPH_RET, 0, 0, trace_current_tid()};
        e->func = ip;
        e->retval = regs->regs.ax;
        e->depth = gd->depth;
        e->overrun = 0;
        e->calltime = gd->calltime;
        e->rettime = stamp.ts;
        ring_buffer_commit(ev);
    }
}

void BM_untraced(benchmark::State &state)
{
    run_calls(state, ftb_untraced);
}

void BM_fprobe_entry_record(benchmark::State &state)
{
    struct fprobe fp = {};
    fp.entry_handler = record_entry;
    if (register_fprobe(&fp, "ftb_fprobe_entry", nullptr)) {
        state.SkipWithError("register_fprobe failed");
        return;
    }
    ring_buffer_reset();
    run_calls(state, ftb_fprobe_entry);
    unregister_fprobe(&fp);
}

void run_tracer(benchmark::State &state, const char *tracer, const char *func, fn f)
{
    if (T.write_file("set_ftrace_filter", func, true) || T.write_file("current_tracer", tracer)) {
        state.SkipWithError("cannot start the tracer");
        return;
    }
    run_calls(state, f);
    T.write_file("current_tracer", "nop");
    T.write_file("set_ftrace_filter", "", true);
}

void BM_function_tracer(benchmark::State &state)
{
    run_tracer(state, "function", "ftb_function", ftb_function);
}

void BM_fprobe_graph_records(benchmark::State &state)
{
    struct fprobe fp = {};
    fp.entry_handler = graph_entry;
    fp.exit_handler = graph_exit;
    fp.entry_data_size = sizeof(graph_data);
    if (register_fprobe(&fp, "ftb_fprobe_graph", nullptr)) {
        state.SkipWithError("register_fprobe failed");
        return;
    }
    ring_buffer_reset();
    run_calls(state, ftb_fprobe_graph);
    unregister_fprobe(&fp);
}

void BM_function_graph_tracer(benchmark::State &state)
{
    run_tracer(state, "function_graph", "ftb_graph", ftb_graph);
}

BENCHMARK(BM_untraced);
BENCHMARK(BM_fprobe_entry_record);
BENCHMARK(BM_function_tracer);
BENCHMARK(BM_fprobe_graph_records);
BENCHMARK(BM_function_graph_tracer);

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
        auto get = [this](const char *n) {
            auto it = ns_.find(n);
            return it == ns_.end() ? -1.0 : it->second;
        };
        double base = get("BM_untraced");
        if (base < 0) return;
        std::printf("\nabove the untraced call (%.1f ns), fastest repetition:\n", base);
        for (const char *n : {"BM_fprobe_entry_record", "BM_function_tracer",
                              "BM_fprobe_graph_records", "BM_function_graph_tracer"})
            if (get(n) >= 0) std::printf("  %-28s %7.1f ns\n", n, get(n) - base);
        if (get("BM_function_tracer") >= 0 && get("BM_fprobe_entry_record") >= 0)
            std::printf("function tracer / fprobe entry handler writing one record: %.2f\n",
                        (get("BM_function_tracer") - base) /
                            (get("BM_fprobe_entry_record") - base));
        if (get("BM_function_graph_tracer") >= 0 && get("BM_fprobe_graph_records") >= 0)
            std::printf("function_graph tracer / fprobe entry+exit writing its records: %.2f\n",
                        (get("BM_function_graph_tracer") - base) /
                            (get("BM_fprobe_graph_records") - base));
    }

  private:
    std::map<std::string, double> ns_;
};

} // namespace

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv);
    T.write_file("trace", "", true); // the tree (and the clock) set up before timing
    diff_reporter rep;
    benchmark::RunSpecifiedBenchmarks(&rep);
    benchmark::Shutdown();
    return 0;
}
