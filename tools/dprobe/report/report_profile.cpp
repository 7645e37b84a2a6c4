// dprobe report --format profile: the kernel's function profiler (trace_stat/function<CPU>'s text,
// see tracefs/function_stat.h) computed from a recorded function graph: per function, its calls,
// the time they took, the average and s^2, over every thread shown (--tid to pick some).
// As with the kernel's options/graph-time, a call's time includes its callees' unless
// --no-graph-time is given (then it is the function's own time, what uftrace report calls
// self time). A recursive function's nested calls count on their own, as in the kernel.
// A recording of the function tracer (`record -p function`) has calls and no returns: the
// hits alone are counted.
#include "tools/dprobe/report/report.h"

#include "tracefs/function_stat.h"

#include <map>

namespace dprobe::report
{

namespace
{

struct open_call {
    uint64_t func;
    int32_t depth;
    uint64_t ts;
    uint64_t callees = 0; // time of the calls it made that returned, ns
};

void add_call(std::map<std::string, function_stat> &rows, std::string name, uint64_t ns)
{
    function_stat &r = rows[name];
    if (r.name.empty()) r.name = std::move(name);
    r.hits++;
    r.time += ns;
    r.time_sq += ns * ns;
}

} // namespace

report_counts format_profile(const model &m, const report_opts &o, std::FILE *out)
{
    report_counts rc;
    std::map<std::string, function_stat> rows; // by the name shown
    for (size_t si : m.stream_order) {
        const tracefile::thread_stream &t = m.reader.streams[si];
        if (!o.wants(t.tid)) continue;
        const session_view &sv = *m.sessions[t.session];
        tracefile::trace_reader::cursor cur(m.reader, si);
        std::vector<open_call> open;
        tracefile::event e;
        while (cur.next(e)) {
            graph_event g;
            function_event f;
            if (decode_function(e, f)) {
                // -p function: calls only, no time to count.
                add_call(rows, sv.syms.name(f.ip, e.ts), 0);
                continue;
            }
            if (!decode_graph(e, g)) continue;
            if (g.entry) {
                // A call left at this depth or deeper without its exit (lost) is over.
                while (!open.empty() && open.back().depth >= g.depth)
                    open.pop_back();
                open.push_back({g.func, g.depth, e.ts});
                continue;
            }
            rc.unwound += g.unwound;
            size_t i = open.size();
            while (i-- > 0 && !(open[i].func == g.func && open[i].depth == g.depth)) {
            }
            if (i == SIZE_MAX) {
                // No entry recorded (before the recording began, or lost): not counted.
                while (!open.empty() && open.back().depth >= g.depth)
                    open.pop_back();
                continue;
            }
            const uint64_t total = e.ts - open[i].ts;
            const uint64_t own = total > open[i].callees ? total - open[i].callees : 0;
            add_call(rows, sv.syms.name(g.func, open[i].ts), o.graph_time ? total : own);
            open.resize(i);
            if (!open.empty()) open.back().callees += total;
        }
        if (!cur.error().empty()) rc.errors.push_back(cur.error());
    }
    std::vector<function_stat> v;
    v.reserve(rows.size());
    for (auto &[name, r] : rows)
        v.push_back(std::move(r));
    const std::string text = function_stat_text(std::move(v), o.thresh_ns);
    std::fwrite(text.data(), 1, text.size(), out);
    return rc;
}

} // namespace dprobe::report
