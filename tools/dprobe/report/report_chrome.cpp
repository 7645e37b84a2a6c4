// dprobe report --format chrome: the Chrome trace-event format (JSON object form) that
// Perfetto and chrome://tracing open. Function-graph calls become B/E pairs, properly
// nested per thread (frames whose exit was never seen are closed where their parent ends,
// or at the thread's last event); an exit whose entry was lost (its start is not known)
// becomes an instant event "name (return)"; probe events become thread-scoped instant
// events with their arguments (ftrace's stack traces and trace_marker writes with their
// text); a process killed by a signal gets an instant saying so where its threads ended.
// Written as each thread's events are read.
#include "tools/dprobe/report/report.h"

#include "tracefs/ftrace_entries.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>

namespace dprobe::report
{

namespace
{

void json_str(std::string &out, std::string_view s)
{
    out += '"';
    for (char c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (u < 0x20) {
                char b[8];
                std::snprintf(b, sizeof b, "\\u%04x", u);
                out += b;
            } else {
                out += c;
            }
        }
    }
    out += '"';
}

std::string ts_us(uint64_t ns)
{
    char b[40];
    std::snprintf(b, sizeof b, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
    return b;
}

} // namespace

void split_probe_text(const std::string &text, std::string &place,
                      std::vector<std::pair<std::string, std::string>> &args)
{
    size_t open = text.find('(');
    if (open == std::string::npos) return;
    int level = 0;
    size_t close = std::string::npos;
    for (size_t i = open; i < text.size(); i++) {
        if (text[i] == '(')
            level++;
        else if (text[i] == ')' && --level == 0) {
            close = i;
            break;
        }
    }
    if (close == std::string::npos) return;
    place = text.substr(open + 1, close - open - 1);
    size_t i = close + 1;
    while (i < text.size()) {
        while (i < text.size() && text[i] == ' ')
            i++;
        size_t start = i;
        bool quoted = false;
        while (i < text.size() && (quoted || text[i] != ' ')) {
            if (text[i] == '"') quoted = !quoted;
            i++;
        }
        std::string tok = text.substr(start, i - start);
        size_t eq = tok.find('=');
        if (eq != std::string::npos) args.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
    }
}

namespace
{

struct frame {
    uint64_t func;
    int32_t depth;
    uint64_t ts;
};

struct emitter {
    std::FILE *out;
    bool first = true;
    std::string buf;
    // The last B or E event is left open until the next one: the values `record -a` put after
    // a call's entry or exit become its "args".
    bool open = false;
    void close()
    {
        if (open) buf += "}";
        open = false;
    }
    void begin()
    {
        close();
        buf += first ? "\n" : ",\n";
        first = false;
    }
    void flush()
    {
        std::fwrite(buf.data(), 1, buf.size(), out);
        buf.clear();
    }
    void dur(const char *ph, const std::string &name, int pid, int tid, uint64_t ts,
             bool unwound = false)
    {
        begin();
        buf += "{\"name\":";
        json_str(buf, name);
        buf += ",\"cat\":\"function\",\"ph\":\"" + std::string(ph) +
               "\",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
               ",\"ts\":" + ts_us(ts) + (unwound ? ",\"args\":{\"unwound\":true}" : "");
        open = !unwound;
        if (unwound) buf += "}";
    }
    // A call's arguments or return value, as the args of the B or E event just written.
    bool values(const graph_values &v)
    {
        if (!open) return false;
        buf += ",\"args\":{";
        bool comma = false;
        for (const auto &[k, val] : v.values) {
            buf += comma ? "," : "";
            comma = true;
            json_str(buf, k);
            buf += ":";
            json_str(buf, val);
        }
        buf += "}";
        close();
        return true;
    }
};

// One thread's events: calls as B/E pairs, properly nested.
void thread_events(const model &m, size_t si, const report_opts &o, emitter &em, report_counts &rc)
{
    const tracefile::thread_stream &t = m.reader.streams[si];
    const session_view &sv = *m.sessions[t.session];
    const int pid = sv.s->pid();
    tracefile::trace_reader::cursor cur(m.reader, si);
    std::vector<frame> st;
    uint64_t last_ts = 0;
    tracefile::event e;
    while (cur.next(e)) {
        last_ts = e.ts;
        graph_event g;
        if (decode_graph(e, g)) {
            if (g.entry) {
                // Frames left at this depth or deeper without an exit (lost) end here.
                while (!st.empty() && st.back().depth >= g.depth) {
                    em.dur("E", sv.syms.name(st.back().func, e.ts), pid, t.tid, e.ts);
                    st.pop_back();
                }
                st.push_back({g.func, g.depth, e.ts});
                em.dur("B", sv.syms.name(g.func, e.ts), pid, t.tid, e.ts);
                continue;
            }
            rc.unwound += g.unwound;
            size_t match = st.size();
            for (size_t i = st.size(); i-- > 0;)
                if (st[i].func == g.func && st[i].depth == g.depth) {
                    match = i;
                    break;
                }
            if (match < st.size()) {
                // Frames above the match never returned normally (longjmp, exception).
                while (st.size() > match) {
                    em.dur("E", sv.syms.name(st.back().func, e.ts), pid, t.tid, e.ts,
                           st.size() > match + 1 || g.unwound);
                    st.pop_back();
                }
            } else {
                // The entry was not recorded: an instant at the exit, after closing the
                // frames that started later than this call.
                while (!st.empty() && st.back().depth >= g.depth) {
                    em.dur("E", sv.syms.name(st.back().func, e.ts), pid, t.tid, e.ts);
                    st.pop_back();
                }
                em.begin();
                em.buf += "{\"name\":";
                json_str(em.buf, sv.syms.name(g.func, e.ts) + " (return)");
                em.buf += ",\"cat\":\"function\",\"ph\":\"i\",\"s\":\"t\",\"pid\":" +
                          std::to_string(pid) + ",\"tid\":" + std::to_string(t.tid) +
                          ",\"ts\":" + ts_us(e.ts) + "}";
            }
        } else if (graph_values v; decode_graph_values(sv, e, v) && em.values(v)) {
            // record -a/-A/-R: the args of the call's B (arguments) or E (return value).
        } else if (function_event f; decode_function(e, f)) {
            // -p function: each call an instant event, with its caller.
            em.begin();
            em.buf += "{\"name\":";
            json_str(em.buf, sv.syms.name(f.ip, e.ts));
            em.buf +=
                ",\"cat\":\"function\",\"ph\":\"i\",\"s\":\"t\",\"pid\":" + std::to_string(pid) +
                ",\"tid\":" + std::to_string(t.tid) + ",\"ts\":" + ts_us(e.ts) +
                ",\"args\":{\"parent\":";
            json_str(em.buf, sv.syms.name(f.parent_ip, e.ts));
            em.buf += "}}";
        } else if (!o.no_events) {
            const uint16_t type = event_type(e);
            std::string text = event_text(sv, e);
            std::string place;
            std::vector<std::pair<std::string, std::string>> args;
            if (is_ftrace_type(type))
                args.emplace_back("text", text); // a stack trace, a trace_marker write
            else
                split_probe_text(text, place, args);
            std::string name = event_name(sv, e);
            if (name.empty()) name = "type " + std::to_string(type);
            auto dit = sv.events.find(type);
            std::string cat = dit == sv.events.end() ? "event" : dit->second.group;
            em.begin();
            em.buf += "{\"name\":";
            json_str(em.buf, name);
            em.buf += ",\"cat\":";
            json_str(em.buf, cat);
            em.buf += ",\"ph\":\"i\",\"s\":\"t\",\"pid\":" + std::to_string(pid) +
                      ",\"tid\":" + std::to_string(t.tid) + ",\"ts\":" + ts_us(e.ts) +
                      ",\"args\":{\"place\":";
            json_str(em.buf, place);
            for (const auto &[k, v] : args) {
                em.buf += ",";
                json_str(em.buf, k);
                em.buf += ":";
                json_str(em.buf, v);
            }
            em.buf += "}}";
        }
        if (em.buf.size() > 1 << 16) em.flush();
    }
    // A process killed by a signal: an instant where its threads were (inside calls), and on
    // its main thread in any case.
    if (const int sig = killed_by(*sv.s); sig && (!st.empty() || t.tid == pid)) {
        em.begin();
        em.buf += "{\"name\":";
        json_str(em.buf, "killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")");
        em.buf += ",\"cat\":\"process\",\"ph\":\"i\",\"s\":\"t\",\"pid\":" + std::to_string(pid) +
                  ",\"tid\":" + std::to_string(t.tid) + ",\"ts\":" + ts_us(last_ts) + "}";
    }
    // Calls still open when the recording ended close at the thread's last event.
    while (!st.empty()) {
        em.dur("E", sv.syms.name(st.back().func, last_ts), pid, t.tid, last_ts);
        st.pop_back();
    }
    em.close();
    if (!cur.error().empty()) rc.errors.push_back(cur.error());
    em.flush();
}

} // namespace

report_counts format_chrome(const model &m, const report_opts &o, std::FILE *out)
{
    report_counts rc;
    emitter em{out, true, {}};
    em.buf = "{\"traceEvents\":[";
    // Names of processes and threads.
    std::set<std::pair<int, int>> named;
    std::set<int> procs;
    for (size_t si : m.stream_order) {
        const tracefile::thread_stream &t = m.reader.streams[si];
        const session_view &sv = *m.sessions[t.session];
        const int pid = sv.s->pid();
        if (!o.wants(t.tid)) continue;
        if (procs.insert(pid).second) {
            em.begin();
            em.buf += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                      ",\"tid\":" + std::to_string(pid) + ",\"args\":{\"name\":";
            json_str(em.buf, sv.s->get("comm", "?") + " (" + std::to_string(pid) + ")");
            em.buf += "}}";
        }
        if (!named.insert({pid, t.tid}).second) continue;
        em.begin();
        em.buf += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                  ",\"tid\":" + std::to_string(t.tid) + ",\"args\":{\"name\":";
        json_str(em.buf, sv.comm_of(t.tid));
        em.buf += "}}";
    }
    for (size_t si : m.stream_order)
        if (o.wants(m.reader.streams[si].tid)) thread_events(m, si, o, em, rc);
    em.close();
    em.buf += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"dprobe\"}}\n";
    em.flush();
    return rc;
}

} // namespace dprobe::report
