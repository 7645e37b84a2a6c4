// The renderings of `dprobe report`, each streamed to OUT as the trace is read.
#pragma once

#include "tools/dprobe/report/report_model.h"

#include <cstdio>
#include <string>
#include <vector>

namespace dprobe::report
{

struct report_opts {
    std::string input = "dprobe.dat";
    std::string format = "text";
    std::string output;
    std::vector<int> tids;
    bool no_header = false;
    bool no_events = false;
    demangle_mode demangle = demangle_mode::simple;
    bool graph_time = true;         // profile: a call's time includes its callees'
    uint64_t thresh_ns = 0;         // graph: shorter calls left out; profile: functions by average
    std::vector<std::string> hists; // hist: "GROUP:EVENT:keys=..." to compute
    // flamegraph, folded, pprof: what a frame weighs (inclusive time, or calls); one tree
    // per thread under the root (else every thread's calls merged); flamegraph: the root at
    // the top (an icicle graph).
    enum class weight_kind { time, calls } weight = weight_kind::time;
    bool per_thread = false;
    bool icicle = false;
    std::string title; // flamegraph: the title ("": the program's name)
    bool wants(int32_t tid) const;
};

// What a rendering saw, for the lines report prints on stderr.
struct report_counts {
    uint64_t unwound = 0;            // function-graph exits of calls that did not return
    std::vector<std::string> errors; // streams cut short (a damaged chunk)
};

// A probe event's text, "ev: (place) a=1 s=\"x y\"", as its place and name/value pairs
// (report_chrome.cpp; the Perfetto writer uses it too).
void split_probe_text(const std::string &text, std::string &place,
                      std::vector<std::pair<std::string, std::string>> &args);

report_counts format_text(const model &m, const report_opts &o, std::FILE *out);
report_counts format_graph(const model &m, const report_opts &o, std::FILE *out);
report_counts format_chrome(const model &m, const report_opts &o, std::FILE *out);
report_counts format_profile(const model &m, const report_opts &o, std::FILE *out);
// The histograms the recording holds, or those o.hists asks for, computed from its records
// (report_hist.cpp). Its errors make the command fail.
report_counts format_hist(const model &m, const report_opts &o, std::FILE *out);
// The call tree (call_tree.h) as folded stacks, "main;parse;lex 1200" a line
// (report_folded.cpp), and as a self-contained interactive SVG flame graph
// (report_flamegraph.cpp).
report_counts format_folded(const model &m, const report_opts &o, std::FILE *out);
report_counts format_flamegraph(const model &m, const report_opts &o, std::FILE *out);

} // namespace dprobe::report
