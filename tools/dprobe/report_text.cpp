// dprobe report --format text: the kernel's `trace` file.
#include "tools/dprobe/report.h"

#include "tracefs/trace_output.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace dprobe::report {

bool report_opts::wants(int32_t tid) const
{
    return tids.empty() || std::find(tids.begin(), tids.end(), tid) != tids.end();
}

std::string format_text(const model &m, const report_opts &o)
{
    std::string out;
    uint64_t entries = 0, lost = 0;
    int cpus = 1;
    for (const auto &ref : m.records)
        if (o.wants(ref.r->tid)) {
            entries++;
            lost += ref.r->lost_before;
        }
    for (const auto &sv : m.sessions)
        cpus = std::max(cpus, std::atoi(sv->s->get("nr_cpus", "1").c_str()));
    if (!o.no_header)
        out = trace_print_header(entries, entries + lost, cpus);
    char buf[512];
    for (const auto &ref : m.records) {
        const tracefile::record &r = *ref.r;
        if (!o.wants(r.tid))
            continue;
        if (r.lost_before) {
            int n = std::snprintf(buf, sizeof buf, "TID:%d [LOST %" PRIu64 " EVENTS]\n", r.tid,
                                  r.lost_before);
            out.append(buf, static_cast<size_t>(n));
        }
        std::string comm = ref.sv->comm_of(r.tid);
        size_t n = trace_print_context(buf, sizeof buf, comm.c_str(), r.tid, r.cpu, r.ts,
                                       ref.sv->in_ns);
        out.append(buf, std::min(n, sizeof buf - 1));
        out += record_text(ref);
        out += '\n';
    }
    return out;
}

} // namespace dprobe::report
