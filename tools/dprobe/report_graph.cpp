// dprobe report --format graph: ftrace's function_graph output, one block per thread.
//
//   # tracer: function_graph
//   #
//   #     TID  DURATION                  FUNCTION CALLS
//   #     |     |   |                     |   |   |   |
//      4242)               |  main() {
//      4242)   0.190 us    |    wf_hash();
//      4242) + 10.542 us   |  } /* main */
#include "tools/dprobe/report.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

namespace dprobe::report {

namespace {

// The kernel's trace_find_mark(): how much time a call took, at a glance.
char duration_mark(uint64_t ns)
{
    if (ns > 1000000000ull) return '$';
    if (ns > 100000000ull) return '@';
    if (ns > 10000000ull) return '*';
    if (ns > 1000000ull) return '#';
    if (ns > 100000ull) return '!';
    if (ns > 10000ull) return '+';
    return ' ';
}

// print_graph_duration(): "+ 10.542 us   |  " (14 columns before the bar).
std::string duration_col(uint64_t ns)
{
    char usecs[24], out[64];
    std::snprintf(usecs, sizeof usecs, "%" PRIu64, ns / 1000);
    std::string s(1, duration_mark(ns));
    s += ' ';
    s += usecs;
    size_t len = std::strlen(usecs);
    if (len < 7) {
        char nsecs[8];
        std::snprintf(nsecs, sizeof nsecs, "%03" PRIu64, ns % 1000);
        nsecs[std::min<size_t>(4, 8 - len) - 1] = '\0';
        s += '.';
        s += nsecs;
        len += std::strlen(nsecs) + 1;
    }
    s += " us ";
    for (size_t i = len; i < 8; i++)
        s += ' ';
    std::snprintf(out, sizeof out, "%s|  ", s.c_str());
    return out;
}

const char *const k_fill = "              |  ";

struct thread_key {
    const session_view *sv;
    int32_t tid;
    bool operator<(const thread_key &o) const
    {
        return sv != o.sv ? sv < o.sv : tid < o.tid;
    }
};

} // namespace

std::string format_graph(const model &m, const report_opts &o)
{
    // Threads in the order they first appear; each thread's records in time order.
    std::map<thread_key, std::vector<const record_ref *>> by_thread;
    std::vector<thread_key> order;
    for (const auto &ref : m.records) {
        if (!o.wants(ref.r->tid))
            continue;
        uint16_t t = record_type(*ref.r);
        bool graph = t == tracefile::FUNCGRAPH_ENTRY_ID || t == tracefile::FUNCGRAPH_EXIT_ID;
        if (!graph && o.no_events)
            continue;
        thread_key k{ref.sv, ref.r->tid};
        auto [it, fresh] = by_thread.try_emplace(k);
        if (fresh)
            order.push_back(k);
        it->second.push_back(&ref);
    }
    std::string out;
    if (!o.no_header)
        out = "# tracer: function_graph\n"
              "#\n"
              "#     TID  DURATION                  FUNCTION CALLS\n"
              "#     |     |   |                     |   |   |   |\n";
    char tidcol[32];
    for (size_t ti = 0; ti < order.size(); ti++) {
        const thread_key &k = order[ti];
        const auto &recs = by_thread[k];
        std::snprintf(tidcol, sizeof tidcol, "%8d) ", k.tid);
        if (!o.no_header || ti)
            out += "\n";
        out += std::string(tidcol) + " /* thread " + std::to_string(k.tid) + " (" +
               k.sv->comm_of(k.tid) + "), process " + std::to_string(k.sv->s->pid()) + " */\n";
        int cur_depth = 0;
        for (size_t i = 0; i < recs.size(); i++) {
            const tracefile::record &r = *recs[i]->r;
            uint16_t t = record_type(r);
            if (r.lost_before)
                out += std::string(tidcol) + k_fill + "/* LOST " +
                       std::to_string(r.lost_before) + " EVENTS */\n";
            if (t == tracefile::FUNCGRAPH_ENTRY_ID &&
                r.data.size() >= sizeof(tracefile::funcgraph_entry_rec)) {
                tracefile::funcgraph_entry_rec e;
                std::memcpy(&e, r.data.data(), sizeof e);
                std::string name = k.sv->syms.name(e.func);
                std::string indent(static_cast<size_t>(std::max(e.depth, 0)) * 2, ' ');
                // A leaf: its own exit comes next on this thread.
                if (i + 1 < recs.size() &&
                    record_type(*recs[i + 1]->r) == tracefile::FUNCGRAPH_EXIT_ID &&
                    !recs[i + 1]->r->lost_before &&
                    recs[i + 1]->r->data.size() >= sizeof(tracefile::funcgraph_exit_rec)) {
                    tracefile::funcgraph_exit_rec x;
                    std::memcpy(&x, recs[i + 1]->r->data.data(), sizeof x);
                    if (x.func == e.func && x.depth == e.depth) {
                        out += std::string(tidcol) + duration_col(x.rettime - x.calltime) +
                               indent + name + "();" +
                               (x.flags & tracefile::FUNCGRAPH_FL_UNWOUND ? " /* unwound */"
                                                                          : "") +
                               "\n";
                        cur_depth = e.depth;
                        i++;
                        continue;
                    }
                }
                out += std::string(tidcol) + k_fill + indent + name + "() {\n";
                cur_depth = e.depth + 1;
            } else if (t == tracefile::FUNCGRAPH_EXIT_ID &&
                       r.data.size() >= sizeof(tracefile::funcgraph_exit_rec)) {
                tracefile::funcgraph_exit_rec x;
                std::memcpy(&x, r.data.data(), sizeof x);
                std::string indent(static_cast<size_t>(std::max(x.depth, 0)) * 2, ' ');
                // A call left by longjmp or an exception: closed where dprobe noticed.
                out += std::string(tidcol) + duration_col(x.rettime - x.calltime) + indent +
                       "} /* " + k.sv->syms.name(x.func) +
                       (x.flags & tracefile::FUNCGRAPH_FL_UNWOUND ? " (unwound)" : "") +
                       " */\n";
                cur_depth = x.depth;
            } else {
                std::string indent(static_cast<size_t>(cur_depth) * 2, ' ');
                out += std::string(tidcol) + k_fill + indent + "/* " + record_text(*recs[i]) +
                       " */\n";
            }
        }
    }
    return out;
}

} // namespace dprobe::report
