// dprobe report --format graph: ftrace's function_graph output, one block per thread.
//
//   # tracer: function_graph
//   #
//   #     TID  DURATION                  FUNCTION CALLS
//   #     |     |   |                     |   |   |   |
//      4242)               |  main() {
//      4242)   0.190 us    |    wf_hash();
//      4242) + 10.542 us   |  } /* main */
//
// A process killed by a signal ends the blocks of its threads that were inside calls, and of
// its main thread, with "/* killed by signal 11 (SIGSEGV) */" where they were.
#include "tools/dprobe/report/report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe::report
{

namespace
{

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

// --thresh: the calls of one thread shorter than the threshold (by their index among the
// thread's function-graph entries), found by reading the thread once before it is shown, and
// the calls that are left without anything to show inside (every callee shorter, no event
// shown): those are shown on one line, as a leaf. A call whose exit was not recorded is
// kept. One bit a call, and a record per collapsed call (each at least the threshold long).
struct time_filter {
    std::vector<bool> is_short;
    struct collapsed_call {
        size_t index;
        uint64_t duration;
        bool unwound;
    };
    std::vector<collapsed_call> collapsed; // by index
};

time_filter filter_calls(const model &m, size_t si, uint64_t thresh_ns, bool events_shown)
{
    const session_view &sv = *m.sessions[m.reader.streams[si].session];
    time_filter f;
    struct open_call {
        uint64_t func;
        int32_t depth;
        uint64_t ts;
        size_t index;
        bool shows_inside; // a callee kept, or an event shown
    };
    std::vector<open_call> open;
    auto lost = [&](int32_t depth) {
        // Calls left at DEPTH or deeper without an exit (lost) stay on show: so does what
        // they are in.
        while (!open.empty() && open.back().depth >= depth) {
            open.pop_back();
            if (!open.empty()) open.back().shows_inside = true;
        }
    };
    tracefile::trace_reader::cursor cur(m.reader, si);
    tracefile::event e;
    while (cur.next(e)) {
        graph_event g;
        if (!decode_graph(e, g)) {
            graph_values v;
            if (events_shown && !open.empty() && !decode_graph_values(sv, e, v))
                open.back().shows_inside = true;
            continue;
        }
        if (g.entry) {
            lost(g.depth);
            open.push_back({g.func, g.depth, e.ts, f.is_short.size(), false});
            f.is_short.push_back(false);
            continue;
        }
        size_t i = open.size();
        while (i-- > 0 && !(open[i].func == g.func && open[i].depth == g.depth)) {
        }
        if (i == SIZE_MAX) {
            lost(g.depth);
            continue;
        }
        lost(open[i].depth + 1);
        const open_call c = open[i];
        open.resize(i);
        if (e.ts - c.ts < thresh_ns) {
            f.is_short[c.index] = true;
            continue;
        }
        if (!open.empty()) open.back().shows_inside = true;
        if (!c.shows_inside) f.collapsed.push_back({c.index, e.ts - c.ts, g.unwound});
    }
    std::sort(f.collapsed.begin(), f.collapsed.end(),
              [](const auto &a, const auto &b) { return a.index < b.index; });
    return f;
}

// One thread's block: its events in order, one event of lookahead to print a call with no
// traced callee on one line ("leaf();").
void thread_block(const model &m, size_t si, const report_opts &o, std::FILE *out,
                  report_counts &rc)
{
    const tracefile::thread_stream &t = m.reader.streams[si];
    const session_view &sv = *m.sessions[t.session];
    char tidcol[32];
    std::snprintf(tidcol, sizeof tidcol, "%8d) ", t.tid);
    std::fprintf(out, "%s /* thread %d (%s), process %d */\n", tidcol, t.tid,
                 sv.comm_of(t.tid).c_str(), sv.s->pid());
    const time_filter tf =
        o.thresh_ns ? filter_calls(m, si, o.thresh_ns, !o.no_events) : time_filter();
    size_t entries = 0;   // graph entries read so far
    size_t collapsed = 0; // the next of tf.collapsed
    int32_t hiding = -1;  // the depth of the call whose inside is left out, or -1
    uint64_t hidden_func = 0;
    tracefile::trace_reader::cursor cur(m.reader, si);
    call_stack cs;
    int cur_depth = 0;
    tracefile::event e, next;
    bool have = cur.next(e);
    while (have) {
        // E's payload lives in the cursor's chunk until the cursor moves: decode it first.
        graph_event g;
        const bool is_graph = decode_graph(e, g);
        if (is_graph && g.entry && hiding >= 0 && g.depth <= hiding)
            hiding = -1; // the short call's exit was lost: what follows is outside it
        if (hiding < 0 && is_graph && g.entry && entries < tf.is_short.size()) {
            while (collapsed < tf.collapsed.size() && tf.collapsed[collapsed].index < entries)
                collapsed++;
            if (tf.is_short[entries]) {
                hiding = g.depth;
                hidden_func = g.func;
            } else if (collapsed < tf.collapsed.size() &&
                       tf.collapsed[collapsed].index == entries) {
                // Nothing left to show inside: one line, as a leaf.
                const auto &c = tf.collapsed[collapsed];
                std::string indent(static_cast<size_t>(std::max(g.depth, 0)) * 2, ' ');
                std::string name = sv.syms.name(g.func, e.ts);
                const char *parens =
                    o.demangle == demangle_mode::full && name.find('(') != std::string::npos ? ""
                                                                                             : "()";
                if (e.lost_before)
                    std::fprintf(out, "%s%s/* LOST %" PRIu64 " EVENTS */\n", tidcol, k_fill,
                                 e.lost_before);
                std::fprintf(out, "%s%s%s%s%s;%s\n", tidcol, duration_col(c.duration).c_str(),
                             indent.c_str(), name.c_str(), parens,
                             c.unwound ? " /* unwound */" : "");
                cur_depth = g.depth;
                hiding = g.depth;
                hidden_func = g.func;
                entries++;
                have = cur.next(e);
                continue;
            }
        }
        entries += is_graph && g.entry;
        if (hiding >= 0) {
            // Inside a call shorter than --thresh: it and all it did are left out.
            if (is_graph && !g.entry && g.depth == hiding && g.func == hidden_func) hiding = -1;
            rc.unwound += is_graph && !g.entry && g.unwound;
            have = cur.next(e);
            continue;
        }
        std::string text;
        if (!is_graph && !o.no_events) text = event_text(sv, e);
        bool have_next = cur.next(next);
        // record -a/-A/-R: the call's arguments follow its entry, its return value its exit.
        graph_values vals;
        std::string args, ret;
        bool got_args = false;
        if (is_graph && have_next && !next.lost_before && decode_graph_values(sv, next, vals) &&
            vals.retval == !g.entry) {
            (g.entry ? args : ret) = vals.inline_text();
            got_args = g.entry;
            have_next = cur.next(next);
        }
        if (e.lost_before)
            std::fprintf(out, "%s%s/* LOST %" PRIu64 " EVENTS */\n", tidcol, k_fill, e.lost_before);
        if (is_graph) {
            std::string indent(static_cast<size_t>(std::max(g.depth, 0)) * 2, ' ');
            std::string name = sv.syms.name(g.func, e.ts);
            // "()" after the name, unless it has its parameters (--demangle=full).
            const char *parens =
                o.demangle == demangle_mode::full && name.find('(') != std::string::npos ? ""
                                                                                         : "()";
            if (g.entry) {
                cs.entry(g, e.ts);
                graph_event x;
                const std::string call = got_args ? name + "(" + args + ")" : name + parens;
                // A leaf: its own exit comes next on this thread.
                if (have_next && !next.lost_before && decode_graph(next, x) && !x.entry &&
                    x.func == g.func && x.depth == g.depth) {
                    uint64_t calltime = e.ts;
                    cs.exit(x, &calltime);
                    rc.unwound += x.unwound;
                    const uint64_t dur = next.ts - e.ts;
                    have = cur.next(e);
                    if (have && !e.lost_before && decode_graph_values(sv, e, vals) && vals.retval) {
                        ret = " = " + vals.inline_text();
                        have = cur.next(e);
                    }
                    std::fprintf(out, "%s%s%s%s%s;%s\n", tidcol, duration_col(dur).c_str(),
                                 indent.c_str(), call.c_str(), ret.c_str(),
                                 x.unwound ? " /* unwound */" : "");
                    cur_depth = g.depth;
                    continue;
                }
                std::fprintf(out, "%s%s%s%s {\n", tidcol, k_fill, indent.c_str(), call.c_str());
                cur_depth = g.depth + 1;
            } else {
                uint64_t calltime;
                bool known = cs.exit(g, &calltime);
                rc.unwound += g.unwound;
                // A call left by longjmp or an exception: closed where dprobe noticed.
                std::fprintf(out, "%s%s%s} /* %s%s%s */\n", tidcol,
                             known ? duration_col(e.ts - calltime).c_str() : k_fill, indent.c_str(),
                             name.c_str(), ret.empty() ? "" : (" = " + ret).c_str(),
                             g.unwound ? " (unwound)" : "");
                cur_depth = g.depth;
            }
        } else if (!o.no_events) {
            std::string indent(static_cast<size_t>(cur_depth) * 2, ' ');
            std::fprintf(out, "%s%s%s/* %s */\n", tidcol, k_fill, indent.c_str(), text.c_str());
        }
        e = next;
        have = have_next;
    }
    if (!cur.error().empty()) rc.errors.push_back(cur.error());
    // A process killed by a signal: where its threads were (its calls left open), and its
    // main thread in any case.
    if (const int sig = killed_by(*sv.s); sig && (cur_depth > 0 || t.tid == sv.s->pid())) {
        std::string indent(static_cast<size_t>(std::max(cur_depth, 0)) * 2, ' ');
        std::fprintf(out, "%s%s%s/* killed by signal %d (%s) */\n", tidcol, k_fill, indent.c_str(),
                     sig, signal_name(sig).c_str());
    }
}

} // namespace

report_counts format_graph(const model &m, const report_opts &o, std::FILE *out)
{
    report_counts rc;
    if (!o.no_header)
        std::fputs("# tracer: function_graph\n"
                   "#\n"
                   "#     TID  DURATION                  FUNCTION CALLS\n"
                   "#     |     |   |                     |   |   |   |\n",
                   out);
    bool first = true;
    for (size_t si : m.stream_order) {
        if (!o.wants(m.reader.streams[si].tid)) continue;
        if (!o.no_header || !first) std::fputc('\n', out);
        first = false;
        thread_block(m, si, o, out, rc);
    }
    return rc;
}

} // namespace dprobe::report
