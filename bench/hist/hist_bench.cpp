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
// And the kernel's peer, where the host lets it be measured (root, tracefs, uprobe_events):
// a kernel uprobe (bench/peers' libtracefs helpers, in their private instance) on a 5-byte
// NOP at a function's start, recording; with `hist:keys=common_pid:vals=hitcount` where the
// kernel has hist triggers, else with the trigger nearest to it, a filtered one that never
// fires (`traceoff if y == 0`: the kernel builds the record for its filter, as for hist, and
// keeps none), both in soft mode; and a uprobe + uretprobe pair with that trigger on each,
// the floor of the kernel's latency recipe.
#include "bench/peers/uprobe_tracefs.h"
#include "core/ring_buffer.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include <benchmark/benchmark.h>

#include <link.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
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
unsigned long hist_bench_kup_event(unsigned long, unsigned long);
unsigned long hist_bench_kup_trigger(unsigned long, unsigned long);
unsigned long hist_bench_kup_entexit(unsigned long, unsigned long);
extern const char hist_bench_kup_event_nop[], hist_bench_kup_trigger_nop[],
    hist_bench_kup_entexit_nop[];
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

// ---- the kernel's peer ----

// File offset of ADDR in this executable (the first object dl_iterate_phdr reports).
int exe_offset_of(struct dl_phdr_info *info, size_t, void *arg)
{
    auto *q = static_cast<std::pair<uintptr_t, long long> *>(arg);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr) &ph = info->dlpi_phdr[i];
        const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
        if (ph.p_type == PT_LOAD && q->first >= start && q->first < start + ph.p_filesz)
            q->second = static_cast<long long>(q->first - start + ph.p_offset);
    }
    return 1;
}

long long exe_offset(const void *addr)
{
    std::pair<uintptr_t, long long> q{reinterpret_cast<uintptr_t>(addr), -1};
    dl_iterate_phdr(exe_offset_of, &q);
    return q.second;
}

const std::string &exe_path()
{
    static const std::string p = [] {
        char buf[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        return n > 0 ? std::string(buf, size_t(n)) : std::string();
    }();
    return p;
}

// Why the kernel's uprobes cannot be measured here, or "".
std::string kernel_unavailable()
{
    if (geteuid() != 0) return "needs root (uprobe_events is root-only)";
    const char *dir = peers_tracefs_dir(); // mounts tracefs when it is not
    if (!dir) return "no tracefs";
    if (access((std::string(dir) + "/uprobe_events").c_str(), W_OK) != 0)
        return "the kernel has no uprobe_events";
    if (exe_path().empty()) return "cannot read /proc/self/exe";
    return "";
}

// The trigger the kernel peers run: its hist where it has one, else the filtered trigger.
const char *const kernel_hist = "hist:keys=common_pid:vals=hitcount";
const char *const kernel_filtered = "traceoff if y == 0";     // y is 1 in every call
const char *const kernel_filtered_ret = "traceoff if r == 0"; // r is x + y + 1
std::string g_kernel_trigger;                                 // what was measured, for the summary

// The uprobe (RET: uretprobe) dprobe_peers/EVENT at ADDR with x and y (the uretprobe: r).
bool kernel_probe(benchmark::State &state, const char *event, const void *addr, bool ret)
{
    if (std::string why = kernel_unavailable(); !why.empty()) {
        state.SkipWithError(why.c_str());
        return false;
    }
    static std::set<std::string> made; // once per name: the repetitions reuse it
    if (made.count(event)) return true;
    long long off = exe_offset(addr);
    if (off < 0 ||
        peers_uprobe_create(event, exe_path().c_str(), static_cast<unsigned long long>(off), ret,
                            ret ? "r=$retval:u64" : "x=%di:u64 y=%si:u32") != 0) {
        state.SkipWithError(
            (std::string("cannot create the uprobe ") + event + ": " + std::strerror(errno))
                .c_str());
        return false;
    }
    made.insert(event);
    return true;
}

// The hist trigger on EVENT, or where the kernel has none the filtered one (FILTERED); false
// (and the benchmark skipped) when neither is taken.
bool kernel_trigger(benchmark::State &state, const char *event,
                    const char *filtered = kernel_filtered)
{
    if (peers_uprobe_trigger(event, kernel_hist) == 0) {
        g_kernel_trigger = kernel_hist;
        return true;
    }
    if (peers_uprobe_trigger(event, filtered) == 0) {
        g_kernel_trigger = "a filtered traceoff (the kernel has no hist trigger)";
        return true;
    }
    state.SkipWithError(
        (std::string("no trigger on ") + event + ": " + std::strerror(errno)).c_str());
    return false;
}

void kernel_untrigger(const char *event)
{
    peers_uprobe_trigger(event, g_kernel_trigger.starts_with("hist")
                                    ? "!hist:keys=common_pid:vals=hitcount"
                                    : "!traceoff");
}

void BM_kernel_uprobe_event(benchmark::State &state)
{
    if (!kernel_probe(state, "kh_event", hist_bench_kup_event_nop, false)) return;
    peers_uprobe_enable("kh_event", 1);
    run_calls(state, hist_bench_kup_event);
    peers_uprobe_enable("kh_event", 0);
    state.counters["kernel_hits"] = double(peers_uprobe_hits(exe_path().c_str(), "kh_event"));
}

void BM_kernel_uprobe_hist(benchmark::State &state)
{
    if (!kernel_probe(state, "kh_trigger", hist_bench_kup_trigger_nop, false) ||
        !kernel_trigger(state, "kh_trigger"))
        return;
    run_calls(state, hist_bench_kup_trigger);
    kernel_untrigger("kh_trigger");
    state.counters["kernel_hits"] = double(peers_uprobe_hits(exe_path().c_str(), "kh_trigger"));
}

void BM_kernel_entry_exit_hist(benchmark::State &state)
{
    if (!kernel_probe(state, "kh_in", hist_bench_kup_entexit_nop, false) ||
        !kernel_probe(state, "kh_out", reinterpret_cast<const void *>(hist_bench_kup_entexit),
                      true) ||
        !kernel_trigger(state, "kh_in"))
        return;
    if (!kernel_trigger(state, "kh_out", kernel_filtered_ret)) {
        kernel_untrigger("kh_in");
        return;
    }
    run_calls(state, hist_bench_kup_entexit);
    kernel_untrigger("kh_in");
    kernel_untrigger("kh_out");
    state.counters["kernel_hits"] = double(peers_uprobe_hits(exe_path().c_str(), "kh_out"));
}

BENCHMARK(BM_untraced);
BENCHMARK(BM_event);
BENCHMARK(BM_event_hist_pid);
BENCHMARK(BM_event_hist_log2);
BENCHMARK(BM_hist_only_pid);
BENCHMARK(BM_hist_only_log2);
BENCHMARK(BM_entry_exit);
BENCHMARK(BM_synth_latency_hist);
BENCHMARK(BM_kernel_uprobe_event);
BENCHMARK(BM_kernel_uprobe_hist);
BENCHMARK(BM_kernel_entry_exit_hist);

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
        auto kev = ns_.find("BM_kernel_uprobe_event"), kh = ns_.find("BM_kernel_uprobe_hist"),
             kee = ns_.find("BM_kernel_entry_exit_hist");
        if (kev != ns_.end())
            std::printf("\nkernel uprobe event (record): %.1f ns above the untraced call\n",
                        kev->second - base->second);
        if (kh != ns_.end()) {
            std::printf("kernel uprobe with %s: %.1f ns above the untraced call\n",
                        g_kernel_trigger.c_str(), kh->second - base->second);
            if (auto d = ns_.find("BM_hist_only_pid"); d != ns_.end())
                std::printf("  dprobe's hist trigger alone (BM_hist_only_pid): %.1fx cheaper\n",
                            (kh->second - base->second) / (d->second - base->second));
        }
        if (kee != ns_.end()) {
            std::printf("kernel uprobe + uretprobe, that trigger on each: %.1f ns above the "
                        "untraced call\n",
                        kee->second - base->second);
            if (sy != ns_.end())
                std::printf("  dprobe's synthetic latency hist: %.1fx cheaper\n",
                            (kee->second - base->second) / (sy->second - base->second));
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
    peers_uprobe_destroy_all();
    return 0;
}
