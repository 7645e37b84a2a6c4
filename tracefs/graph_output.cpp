// The function graph layout (see graph_output.h).
#include "tracefs/graph_output.h"

#include "tracefs/ftrace_entries.h"
#include "tracefs/trace_array.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

constexpr int TRACE_GRAPH_INDENT = 2;
constexpr int TRACE_GRAPH_PROCINFO_LENGTH = 14;
enum { FILL_NONE, FILL_FULL, FILL_START, FILL_END };

int32_t pid_of(const trace_iter::entry &e)
{
    trace_entry_header h{};
    if (e.data.size() >= sizeof h) std::memcpy(&h, e.data.data(), sizeof h);
    return h.pid ? h.pid : e.rec.tid;
}

uint16_t type_of(const trace_iter::entry &e)
{
    trace_entry_header h{};
    if (e.data.size() >= sizeof h) std::memcpy(&h, e.data.data(), sizeof h);
    return h.type;
}

void indent(std::string &out, int depth)
{
    if (depth > 0) out.append(size_t(depth) * TRACE_GRAPH_INDENT, ' ');
}

std::string sym(uint64_t ip)
{
    std::string s;
    print_ip_sym(s, ip, ftrace_print_flags{});
    return s;
}

// The kernel's print_graph_retval(): " ret=0x.." or " ret=-22" for an error value.
void retval_text(std::string &out, uint64_t retval, bool hex)
{
    char buf[48];
    int64_t err = 0;
    if (!hex && retval) {
        uint64_t v = retval;
        if ((v & (uint64_t{1} << 31)) && (v >> 32) == 0) // an int returned as a long
            v = uint64_t(int64_t(int32_t(uint32_t(v))));
        if (v >= uint64_t(-4095)) // IS_ERR_VALUE
            err = int64_t(v);
    }
    if (hex || !err)
        std::snprintf(buf, sizeof buf, " ret=0x%" PRIx64, retval);
    else
        std::snprintf(buf, sizeof buf, " ret=%" PRId64, err);
    out += buf;
}

} // namespace

graph_printer::graph_printer(trace_array &tr) : tr_(tr)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    cpu_width_ = std::snprintf(nullptr, 0, "%ld", n > 1 ? n - 1 : 0);
}

std::string graph_printer::header() const
{
    if (!tr_.opt(OPT_CONTEXT_INFO)) return "";
    std::string a = "#", b = "#";
    if (tr_.opt(OPT_FUNCGRAPH_ABSTIME)) {
        a += "     TIME       ";
        b += "      |         ";
    }
    if (tr_.opt(OPT_FUNCGRAPH_CPU)) {
        a += " CPU";
        b += " |  ";
    }
    if (tr_.opt(OPT_FUNCGRAPH_PROC)) {
        a += "  TASK/PID       ";
        b += "   |    |        ";
    }
    if (tr_.opt(OPT_FUNCGRAPH_DURATION)) {
        a += "  DURATION   ";
        b += "   |   |      ";
    }
    a += "               FUNCTION CALLS\n";
    b += "               |   |   |   |\n";
    return a + b;
}

void graph_printer::proc(std::string &out, int32_t pid, const char *recorded)
{
    std::string comm = it_ ? it_->comms_.lookup(pid, recorded) : "<...>";
    comm.resize(std::min<size_t>(comm.size(), 7));
    std::string s = comm + "-" + std::to_string(pid);
    int spaces = int(s.size()) < TRACE_GRAPH_PROCINFO_LENGTH
                     ? TRACE_GRAPH_PROCINFO_LENGTH - int(s.size())
                     : 0;
    out.append(size_t(spaces / 2), ' ');
    out += s;
    out.append(size_t(spaces - spaces / 2), ' ');
}

void graph_printer::duration(std::string &out, uint64_t ns, int fill) const
{
    if (!tr_.opt(OPT_FUNCGRAPH_DURATION) || !tr_.opt(OPT_CONTEXT_INFO)) return;
    switch (fill) {
    case FILL_FULL:
        out += "              |  ";
        return;
    case FILL_START:
        out += "  ";
        return;
    case FILL_END:
        out += " |";
        return;
    }
    out += tr_.opt(OPT_FUNCGRAPH_OVERHEAD) ? trace_find_mark(ns) : ' ';
    out += ' ';
    trace_print_graph_duration(out, ns);
    out += "|  ";
}

void graph_printer::prologue(std::string &out, const trace_iter::entry &e, int32_t pid)
{
    char buf[64];
    const unsigned cpu = e.rec.cpu;
    const char *recorded = pid == e.rec.tid ? e.rec.comm : "";
    // verif_pid(): a line where this CPU's records switch threads.
    auto it = last_pid_.find(cpu);
    if (it == last_pid_.end()) {
        last_pid_[cpu] = pid;
    } else if (it->second != pid) {
        int32_t prev = it->second;
        it->second = pid;
        out += " ------------------------------------------\n";
        std::snprintf(buf, sizeof buf, " %*u) ", cpu_width_, cpu);
        out += buf;
        proc(out, prev, "");
        out += " => ";
        proc(out, pid, recorded);
        out += "\n ------------------------------------------\n\n";
    }
    if (!tr_.opt(OPT_CONTEXT_INFO)) return;
    if (tr_.opt(OPT_FUNCGRAPH_ABSTIME)) {
        std::snprintf(buf, sizeof buf, "%5" PRIu64 ".%06" PRIu64 " |  ", e.rec.ts / 1000000000,
                      e.rec.ts % 1000000000 / 1000);
        out += buf;
    }
    if (tr_.opt(OPT_FUNCGRAPH_CPU)) {
        std::snprintf(buf, sizeof buf, " %*u) ", cpu_width_, cpu);
        out += buf;
    }
    if (tr_.opt(OPT_FUNCGRAPH_PROC)) {
        proc(out, pid, recorded);
        out += " | ";
    }
}

bool graph_printer::print(std::string &out, trace_iter &it, const trace_iter::entry &e)
{
    it_ = &it;
    const uint16_t type = type_of(e);
    const int32_t pid = pid_of(e);
    thread_state &ts = threads_[e.rec.tid];
    const bool retval = tr_.opt(OPT_FUNCGRAPH_RETVAL);
    const bool hex = tr_.opt(OPT_FUNCGRAPH_RETVAL_HEX);

    if (type == TRACE_GRAPH_ENT && e.data.size() >= sizeof(ftrace_graph_ent_entry)) {
        ftrace_graph_ent_entry ent;
        std::memcpy(&ent, e.data.data(), sizeof ent);
        prologue(out, e, pid);
        // A leaf: the thread's next record is this call's return.
        size_t idx;
        ftrace_graph_ret_entry ret{};
        bool leaf = false;
        if (it.next_of_tid(e.rec.tid, 0, idx)) {
            const trace_iter::entry &n = it.ahead_[idx];
            if (type_of(n) == TRACE_GRAPH_RET && n.data.size() >= sizeof ret) {
                std::memcpy(&ret, n.data.data(), sizeof ret);
                leaf = ret.func == ent.func && pid_of(n) == pid;
            }
        }
        if (ent.depth >= 0 && size_t(ent.depth) >= ts.enter_funcs.size())
            ts.enter_funcs.resize(size_t(ent.depth) + 1);
        if (leaf) {
            it.ahead_.erase(it.ahead_.begin() + long(idx));
            ts.depth = ent.depth - 1;
            if (ent.depth >= 0) ts.enter_funcs[size_t(ent.depth)] = 0;
            duration(out, ret.rettime - ret.calltime, FILL_NONE);
            indent(out, ent.depth);
            out += sym(ent.func) + "();";
            if (retval) {
                out += " /*";
                retval_text(out, ret.retval, hex);
                out += " */";
            }
            out += '\n';
        } else {
            ts.depth = ent.depth;
            if (ent.depth >= 0) ts.enter_funcs[size_t(ent.depth)] = ent.func;
            duration(out, 0, FILL_FULL);
            indent(out, ent.depth);
            out += sym(ent.func) + "() {\n";
        }
        return true;
    }

    if (type == TRACE_GRAPH_RET && e.data.size() >= sizeof(ftrace_graph_ret_entry)) {
        ftrace_graph_ret_entry ret;
        std::memcpy(&ret, e.data.data(), sizeof ret);
        bool match = true;
        ts.depth = ret.depth - 1;
        if (ret.depth >= 0 && size_t(ret.depth) < ts.enter_funcs.size()) {
            match = ts.enter_funcs[size_t(ret.depth)] == ret.func;
            ts.enter_funcs[size_t(ret.depth)] = 0;
        } else {
            match = false;
        }
        prologue(out, e, pid);
        duration(out, ret.rettime - ret.calltime, FILL_NONE);
        indent(out, ret.depth);
        if (retval) {
            out += "} /* " + sym(ret.func);
            retval_text(out, ret.retval, hex);
            out += " */";
        } else if (match && !tr_.opt(OPT_FUNCGRAPH_TAIL)) {
            out += "}";
        } else {
            // No entry seen for it (lost, or tracing_thresh): name the function.
            out += "} /* " + sym(ret.func) + " */";
        }
        out += '\n';
        if (tr_.opt(OPT_FUNCGRAPH_OVERRUN)) {
            char buf[48];
            std::snprintf(buf, sizeof buf, " (Overruns: %u)\n", ret.overrun);
            out += buf;
        }
        return true;
    }

    if (type == TRACE_FN || type == TRACE_STACK) return false; // their default lines

    // Anything else, between the calls of its thread: a comment.
    prologue(out, e, pid);
    duration(out, 0, FILL_FULL);
    if (ts.depth > 0) out.append(size_t(ts.depth + 1) * TRACE_GRAPH_INDENT, ' ');
    out += "/* ";
    std::string text;
    if (type == TRACE_PRINT && e.data.size() >= sizeof(print_entry)) {
        const char *s = e.data.data() + sizeof(print_entry);
        text.assign(s, strnlen(s, e.data.size() - sizeof(print_entry)));
    } else {
        it.print_text(text, e);
    }
    while (!text.empty() && text.back() == '\n')
        text.pop_back();
    out += text + " */\n";
    return true;
}

} // namespace dprobe
