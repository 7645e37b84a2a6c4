// dprobe report --format text: the kernel's `trace` file, every thread's events merged in
// time order.
#include "tools/dprobe/report/report.h"

#include "tracefs/trace_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>

namespace dprobe::report
{

bool report_opts::wants(int32_t tid) const
{
    return tids.empty() || std::find(tids.begin(), tids.end(), tid) != tids.end();
}

report_counts format_text(const model &m, const report_opts &o, std::FILE *out)
{
    report_counts rc;
    if (!o.no_header) {
        // Entries from the recording's counts (the STATS chunks), not from reading them all.
        uint64_t entries = 0, lost = 0;
        int cpus = 1;
        // A recording of `record -p function` is the kernel's function tracer's trace.
        const char *tracer = "nop";
        for (const auto &sv : m.sessions)
            if (sv->events.count(tracefile::FUNCTION_ID)) tracer = "function";
        for (const auto &s : m.reader.sessions) {
            for (const auto &t : s.stats)
                if (o.wants(t.tid)) {
                    entries += t.written;
                    lost += t.dropped + t.lost;
                }
            cpus = std::max(cpus, std::atoi(s.get("nr_cpus", "1").c_str()));
        }
        std::string h = trace_print_header(entries, entries + lost, cpus, tracer);
        std::fwrite(h.data(), 1, h.size(), out);
    }
    std::map<size_t, call_stack> stacks; // per stream
    tracefile::trace_reader::merged all(m.reader);
    tracefile::event e;
    size_t si;
    char buf[512];
    while (all.next(e, si)) {
        const tracefile::thread_stream &t = m.reader.streams[si];
        if (!o.wants(t.tid)) continue;
        const session_view &sv = *m.sessions[t.session];
        if (e.lost_before)
            std::fprintf(out, "TID:%d [LOST %" PRIu64 " EVENTS]\n", t.tid, e.lost_before);
        uint64_t dur = UINT64_MAX;
        graph_event g;
        if (decode_graph(e, g)) {
            call_stack &cs = stacks[si];
            uint64_t calltime;
            if (g.entry)
                cs.entry(g, e.ts);
            else if (cs.exit(g, &calltime))
                dur = e.ts - calltime;
            rc.unwound += g.unwound;
        }
        // A trace_marker write's record is its writer's, another process's (written for it by
        // the tracefs server thread): "<...>" as the kernel prints a pid it has no name for.
        const int32_t pid = record_pid(e);
        std::string comm = pid == t.tid || sv.comms.count(pid) ? sv.comm_of(pid) : "<...>";
        size_t n = trace_print_context(buf, sizeof buf, comm.c_str(), pid, e.cpu, e.ts, sv.in_ns);
        std::fwrite(buf, 1, std::min(n, sizeof buf - 1), out);
        std::string text = event_text(sv, e, dur);
        text += '\n';
        std::fwrite(text.data(), 1, text.size(), out);
    }
    return rc;
}

} // namespace dprobe::report
