// dprobe report: a recorded trace as the kernel's `trace` file (text), as ftrace's
// function_graph output (graph), or as Chrome trace-event JSON for Perfetto (chrome).
#include "tools/dprobe/cli.h"
#include "tools/dprobe/report.h"
#include "tools/dprobe/trace_dat.h"

#include <cstdio>
#include <fstream>

namespace dprobe::cli {

namespace {

int run_report(const report::report_opts &o)
{
    report::model m;
    std::string err;
    if (!report::load_model(o.input, m, &err))
        return fail("report", err);
    if (!m.data.warning.empty())
        std::fprintf(stderr, "dprobe report: warning: %s: %s\n", o.input.c_str(),
                     m.data.warning.c_str());
    for (const auto &sv : m.sessions)
        for (const auto &miss : sv->syms.missing)
            std::fprintf(stderr, "dprobe report: warning: no symbols for %s\n", miss.c_str());
    if (o.format == "trace-dat") {
        // Binary: to a file only.
        if (o.output.empty() || o.output == "-")
            return fail("report", "--format trace-dat needs -o FILE");
        if (std::string e = report::write_trace_dat(m, o, o.output); !e.empty())
            return fail("report", e);
        std::fprintf(stderr, "dprobe report: wrote %s (trace-cmd report %s)\n",
                     o.output.c_str(), o.output.c_str());
        return 0;
    }
    std::string out;
    if (o.format == "text")
        out = report::format_text(m, o);
    else if (o.format == "graph")
        out = report::format_graph(m, o);
    else
        out = report::format_chrome(m, o);
    if (o.output.empty() || o.output == "-") {
        std::fwrite(out.data(), 1, out.size(), stdout);
        return 0;
    }
    std::ofstream f(o.output, std::ios::trunc | std::ios::binary);
    if (!f || !f.write(out.data(), static_cast<std::streamsize>(out.size())) || !f.flush())
        return fail("report", "cannot write " + o.output);
    std::fprintf(stderr, "dprobe report: wrote %s (%zu bytes)\n", o.output.c_str(), out.size());
    return 0;
}

} // namespace

void setup_report(CLI::App &app)
{
    auto o = std::make_shared<report::report_opts>();
    CLI::App *sub = app.add_subcommand("report", "Show a recorded trace");
    set_usage(sub, "dprobe report [<options>] [-i FILE]");
    sub->add_option("-i,--input", o->input, "Trace file to read")->capture_default_str()->type_name("FILE");
    sub->add_option("-f,--format", o->format, "Output: text, graph, chrome or trace-dat")
        ->capture_default_str()
        ->check(CLI::IsMember({"text", "graph", "chrome", "trace-dat"}))
        ->type_name("FORMAT");
    sub->add_option("-o,--output", o->output, "Write to FILE instead of stdout")->type_name("FILE");
    sub->add_option("--tid", o->tids, "Only these threads")->type_name("TID");
    sub->add_flag("--no-header", o->no_header, "Leave out the header block (text, graph)");
    sub->add_flag("--no-events", o->no_events, "graph: leave out probe events between calls");
    sub->footer(
        "Formats:\n"
        "   text    like the kernel's trace file: one line per event\n"
        "   graph   like ftrace's function_graph tracer: nested calls with durations,\n"
        "           one block per thread (needs a recording made with -F or --graph)\n"
        "   chrome  Chrome trace-event JSON: open it in https://ui.perfetto.dev or\n"
        "           chrome://tracing\n"
        "   trace-dat  trace-cmd's trace.dat (needs -o): `trace-cmd report FILE`, KernelShark\n"
        "\n"
        "Examples:\n"
        "   dprobe report                          the events in dprobe.dat\n"
        "   dprobe report -i app.dat --format graph\n"
        "   dprobe report --format chrome -o trace.json\n"
        "   dprobe report --format trace-dat -o trace.dat && trace-cmd report trace.dat");
    sub->callback([o] { exit_status = run_report(*o); });
}

} // namespace dprobe::cli
