// dprobe report: a recorded trace as the kernel's `trace` file (text), as ftrace's
// function_graph output (graph), as the kernel's `hist` files (hist), as Chrome
// trace-event JSON (chrome), as a flame graph (flamegraph, an SVG) or folded stacks (folded).
#include "tools/dprobe/commands/cli.h"
#include "tools/dprobe/report/report.h"
#include "tools/dprobe/report/report_perfetto.h"
#include "tools/dprobe/report/report_pprof.h"
#include "tools/dprobe/report/trace_dat.h"
#include "tools/trace_file.h"

#include <cstdio>
#include <cerrno>
#include <cstring>

namespace dprobe::cli
{

namespace
{

int run_report(const report::report_opts &o)
{
    report::model m;
    std::string err;
    if (!report::load_model(o.input, m, &err, o.demangle)) return fail("report", err);
    if (!m.reader.warning.empty())
        std::fprintf(stderr, "dprobe report: warning: %s: %s\n", o.input.c_str(),
                     m.reader.warning.c_str());
    for (const auto &sv : m.sessions)
        for (const auto &miss : sv->syms.missing)
            std::fprintf(stderr, "dprobe report: warning: no symbols for %s\n", miss.c_str());
    if (o.format == "trace-dat") {
        // Binary: to a file only.
        if (o.output.empty() || o.output == "-")
            return fail("report", "--format trace-dat needs -o FILE");
        if (std::string e = report::write_trace_dat(m, o, o.output); !e.empty())
            return fail("report", e);
        std::fprintf(stderr, "dprobe report: wrote %s (trace-cmd report %s)\n", o.output.c_str(),
                     o.output.c_str());
        return 0;
    }
    if (o.format == "pprof") {
        // Binary: to a file only.
        if (o.output.empty() || o.output == "-")
            return fail("report", "--format pprof needs -o FILE (FILE.pb.gz)");
        report::report_counts rc;
        if (std::string e = report::write_pprof(m, o, o.output, rc); !e.empty())
            return fail("report", e);
        for (const std::string &e : rc.errors)
            std::fprintf(stderr, "dprobe report: warning: %s\n", e.c_str());
        std::fprintf(stderr, "dprobe report: wrote %s (go tool pprof -top %s)\n", o.output.c_str(),
                     o.output.c_str());
        return 0;
    }
    if (o.format == "graph") {
        bool calls_only = false, graph = false;
        for (const auto &sv : m.sessions) {
            calls_only |= sv->events.count(tracefile::FUNCTION_ID) != 0;
            graph |= sv->events.count(tracefile::FUNCGRAPH_ENTRY_ID) != 0;
        }
        if (calls_only && !graph)
            std::fprintf(stderr,
                         "dprobe report: note: %s was recorded with -p function (calls, "
                         "no returns): --format text shows it as the kernel does\n",
                         o.input.c_str());
    }
    if (o.format == "perfetto" && (o.output.empty() || o.output == "-"))
        return fail("report", "--format perfetto needs -o FILE (FILE.pftrace)");
    std::FILE *out = stdout;
    const bool to_file = !o.output.empty() && o.output != "-";
    if (to_file) {
        out = std::fopen(o.output.c_str(), "we");
        if (!out) return fail("report", "cannot write " + o.output + ": " + std::strerror(errno));
    }
    // Large writes: the output of a big trace is streamed, not built in memory.
    static char buf[1 << 16];
    std::setvbuf(out, buf, _IOFBF, sizeof buf);
    report::report_counts rc;
    if (o.format == "text")
        rc = report::format_text(m, o, out);
    else if (o.format == "graph")
        rc = report::format_graph(m, o, out);
    else if (o.format == "profile")
        rc = report::format_profile(m, o, out);
    else if (o.format == "hist")
        rc = report::format_hist(m, o, out);
    else if (o.format == "folded")
        rc = report::format_folded(m, o, out);
    else if (o.format == "flamegraph")
        rc = report::format_flamegraph(m, o, out);
    else if (o.format == "perfetto")
        rc = report::format_perfetto(m, o, out);
    else
        rc = report::format_chrome(m, o, out);
    bool ok = std::fflush(out) == 0 && !std::ferror(out);
    long size = to_file ? std::ftell(out) : 0;
    if (to_file) ok &= std::fclose(out) == 0;
    if (o.format == "hist" && !rc.errors.empty()) {
        for (const std::string &e : rc.errors)
            fail("report", e);
        return 1;
    }
    for (const std::string &e : rc.errors)
        std::fprintf(stderr, "dprobe report: warning: %s\n", e.c_str());
    if (rc.unwound)
        std::fprintf(stderr,
                     "dprobe report: %llu call%s left without returning (unwound by longjmp, "
                     "an exception or thread exit): their exits are marked \"unwound\"\n",
                     static_cast<unsigned long long>(rc.unwound), rc.unwound == 1 ? "" : "s");
    if (!ok)
        return fail("report", "cannot write " + (to_file ? o.output : std::string("the output")));
    if (to_file && size > 0)
        std::fprintf(stderr, "dprobe report: wrote %s (%ld bytes)\n", o.output.c_str(), size);
    return 0;
}

} // namespace

void setup_report(CLI::App &app)
{
    auto o = std::make_shared<report::report_opts>();
    CLI::App *sub = app.add_subcommand("report", "Show a recorded trace");
    set_usage(sub, "dprobe report [<options>] [-i FILE]");
    sub->add_option("-i,--input", o->input, "Trace file to read")
        ->capture_default_str()
        ->type_name("FILE");
    sub->add_option("-f,--format", o->format,
                    "Output: text, graph, profile, hist, chrome, perfetto, flamegraph, folded, "
                    "pprof or trace-dat")
        ->capture_default_str()
        ->check(CLI::IsMember({"text", "graph", "profile", "hist", "chrome", "perfetto",
                               "flamegraph", "folded", "pprof", "trace-dat"}))
        ->type_name("FORMAT");
    sub->add_option("-o,--output", o->output, "Write to FILE instead of stdout")->type_name("FILE");
    sub->add_option("--tid", o->tids, "Only these threads")->type_name("TID");
    sub->add_option("--hist", o->hists,
                    "hist: compute this histogram from the recorded records of EVENT, with the "
                    "syntax of a hist trigger ('fp:read:keys=len.log2:vals=hitcount if len > 0')")
        ->type_name("GROUP:EVENT:SPEC");
    sub->add_option_function<std::string>(
           "--weight",
           [o](const std::string &v) {
               o->weight = v == "calls" ? report::report_opts::weight_kind::calls
                                        : report::report_opts::weight_kind::time;
           },
           "flamegraph, folded, pprof: what a frame weighs: time (inclusive time, the default) or "
           "calls (the calls made on the path and below it)")
        ->check(CLI::IsMember({"time", "calls"}))
        ->type_name("WHAT")
        ->default_str("time");
    sub->add_flag("--per-thread", o->per_thread,
                  "flamegraph, folded, pprof: one tree per thread under the root (a frame "
                  "\"comm-tid\" each) instead of every thread's calls merged");
    sub->add_flag("--icicle", o->icicle,
                  "flamegraph: the root at the top, callees below their callers");
    sub->add_option("--title", o->title,
                    "flamegraph: the title (default: \"Flame graph of "
                    "PROG\")")
        ->type_name("TEXT");
    sub->add_flag("--no-header", o->no_header, "Leave out the header block (text, graph)");
    sub->add_flag("--no-events", o->no_events, "graph: leave out probe events between calls");
    sub->add_flag(
        "!--no-graph-time", o->graph_time,
        "profile: a call's time without its callees' (the kernel's options/graph-time 0)");
    sub->add_option_function<double>(
           "--thresh", [o](double us) { o->thresh_ns = static_cast<uint64_t>(us * 1000.0); },
           "graph: leave out calls shorter than USECS, with all they did (uftrace replay's "
           "-t); profile: functions whose average is below it (the kernel's tracing_thresh)")
        ->check(CLI::Range(0.0, 3600e6))
        ->type_name("USECS");
    sub->add_option_function<std::string>(
           "--demangle",
           [o](const std::string &v) {
               o->demangle = v == "full" ? report::demangle_mode::full
                             : v == "no" ? report::demangle_mode::none
                                         : report::demangle_mode::simple;
           },
           "C++ names: simple (without parameters and template arguments), full, or no (the "
           "symbols as they are)")
        ->check(CLI::IsMember({"simple", "full", "no"}))
        ->type_name("MODE")
        ->default_str("simple");
    sub->footer(
        "Formats:\n"
        "   text    like the kernel's trace file: one line per event\n"
        "   graph   like ftrace's function_graph tracer: nested calls with durations,\n"
        "           one block per thread (needs a recording made with -F or --graph)\n"
        "   profile like the kernel's function profiler (trace_stat/function0): calls, time,\n"
        "           average and s^2 per function, largest time first\n"
        "   hist    the kernel's hist file: the histograms the session left (--trigger\n"
        "           GROUP:EVENT:hist:...), or those --hist computes from the records\n"
        "   chrome  Chrome trace-event JSON: open it in https://ui.perfetto.dev or\n"
        "           chrome://tracing\n"
        "   perfetto  Perfetto's own protobuf trace (needs -o FILE.pftrace): interned\n"
        "           names, a track per thread, written in bounded memory; for\n"
        "           ui.perfetto.dev and trace_processor, at any size\n"
        "   flamegraph  an interactive SVG flame graph of the recorded calls (click to zoom,\n"
        "           search, tooltips): by inclusive time, or --weight calls; --per-thread,\n"
        "           --icicle\n"
        "   folded  folded stacks, \"main;parse;lex 1200\" (self ns, or calls), for\n"
        "           flamegraph.pl, inferno and speedscope\n"
        "   pprof   a pprof profile (needs -o FILE.pb.gz): calls and self time per call\n"
        "           path, for go tool pprof, Pyroscope, Parca, Grafana\n"
        "   trace-dat  trace-cmd's trace.dat (needs -o): `trace-cmd report FILE`, KernelShark\n"
        "\n"
        "Examples:\n"
        "   dprobe report                          the events in dprobe.dat\n"
        "   dprobe report -i app.dat --format graph\n"
        "   dprobe report --format profile --no-graph-time   where the time goes\n"
        "   dprobe report --format hist --hist 'fp:read:keys=common_pid:vals=len'\n"
        "   dprobe report --format chrome -o trace.json\n"
        "   dprobe report --format perfetto -o trace.pftrace\n"
        "   dprobe report --format pprof -o app.pb.gz && go tool pprof -top app.pb.gz\n"
        "   dprobe report --format flamegraph -o app.svg   then open app.svg in a browser\n"
        "   dprobe report --format folded | flamegraph.pl > app.svg\n"
        "   dprobe report --format trace-dat -o trace.dat && trace-cmd report trace.dat");
    sub->callback([o] { exit_status = run_report(*o); });
}

} // namespace dprobe::cli
