// dprobe report --format chrome: the Chrome trace-event format (JSON object form) that
// Perfetto and chrome://tracing open. Function-graph calls become B/E pairs, properly
// nested per thread (frames whose exit was never seen are closed where their parent ends,
// or at the thread's last event); an exit whose entry was lost becomes an X event; probe
// events become thread-scoped instant events with their arguments.
#include "tools/dprobe/report.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

namespace dprobe::report {

namespace {

void json_str(std::string &out, std::string_view s)
{
    out += '"';
    for (char c : s) {
        unsigned char u = static_cast<unsigned char>(c);
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
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

// "ev: (place) a=1 s=\"x y\"" -> place and name/value pairs.
void split_probe_text(const std::string &text, std::string &place,
                      std::vector<std::pair<std::string, std::string>> &args)
{
    size_t open = text.find('(');
    if (open == std::string::npos)
        return;
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
    if (close == std::string::npos)
        return;
    place = text.substr(open + 1, close - open - 1);
    size_t i = close + 1;
    while (i < text.size()) {
        while (i < text.size() && text[i] == ' ')
            i++;
        size_t start = i;
        bool quoted = false;
        while (i < text.size() && (quoted || text[i] != ' ')) {
            if (text[i] == '"')
                quoted = !quoted;
            i++;
        }
        std::string tok = text.substr(start, i - start);
        size_t eq = tok.find('=');
        if (eq != std::string::npos)
            args.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
    }
}

struct frame {
    uint64_t func;
    int32_t depth;
};

struct emitter {
    std::string &out;
    bool first = true;
    void begin()
    {
        out += first ? "\n" : ",\n";
        first = false;
    }
    void dur(const char *ph, const std::string &name, int pid, int tid, uint64_t ts,
             bool unwound = false)
    {
        begin();
        out += "{\"name\":";
        json_str(out, name);
        out += ",\"cat\":\"function\",\"ph\":\"" + std::string(ph) + "\",\"pid\":" +
               std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"ts\":" + ts_us(ts) +
               (unwound ? ",\"args\":{\"unwound\":true}" : "") + "}";
    }
};

} // namespace

std::string format_chrome(const model &m, const report_opts &o)
{
    std::string out = "{\"traceEvents\":[";
    emitter em{out};
    // Names of processes and threads.
    std::set<std::pair<int, int>> named;
    for (const auto &sv : m.sessions) {
        int pid = sv->s->pid();
        em.begin();
        out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
               ",\"tid\":" + std::to_string(pid) + ",\"args\":{\"name\":";
        json_str(out, sv->s->get("comm", "?") + " (" + std::to_string(pid) + ")");
        out += "}}";
        std::set<int32_t> tids;
        for (const auto &r : sv->s->records)
            tids.insert(r.tid);
        for (int32_t tid : tids) {
            if (!o.wants(tid) || !named.insert({pid, tid}).second)
                continue;
            em.begin();
            out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                   ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":";
            json_str(out, sv->comm_of(tid));
            out += "}}";
        }
    }

    std::map<std::pair<const session_view *, int32_t>, std::vector<frame>> stacks;
    std::map<std::pair<const session_view *, int32_t>, uint64_t> last_ts;
    for (const auto &ref : m.records) {
        const tracefile::record &r = *ref.r;
        if (!o.wants(r.tid))
            continue;
        int pid = ref.sv->s->pid();
        auto key = std::make_pair(static_cast<const session_view *>(ref.sv), r.tid);
        auto &st = stacks[key];
        last_ts[key] = r.ts;
        uint16_t t = record_type(r);
        if (t == tracefile::FUNCGRAPH_ENTRY_ID &&
            r.data.size() >= sizeof(tracefile::funcgraph_entry_rec)) {
            tracefile::funcgraph_entry_rec e;
            std::memcpy(&e, r.data.data(), sizeof e);
            st.push_back({e.func, e.depth});
            em.dur("B", ref.sv->syms.name(e.func), pid, r.tid, r.ts);
        } else if (t == tracefile::FUNCGRAPH_EXIT_ID &&
                   r.data.size() >= sizeof(tracefile::funcgraph_exit_rec)) {
            tracefile::funcgraph_exit_rec x;
            std::memcpy(&x, r.data.data(), sizeof x);
            size_t match = st.size();
            for (size_t i = st.size(); i-- > 0;)
                if (st[i].func == x.func && st[i].depth == x.depth) {
                    match = i;
                    break;
                }
            if (match < st.size()) {
                // Frames above the match never returned normally (longjmp, exception).
                const bool unwound = x.flags & tracefile::FUNCGRAPH_FL_UNWOUND;
                while (st.size() > match) {
                    em.dur("E", ref.sv->syms.name(st.back().func), pid, r.tid, r.ts,
                           st.size() > match + 1 || unwound);
                    st.pop_back();
                }
            } else {
                // The entry was not recorded: a complete event from the exit's own times,
                // after closing open frames that started later than this call.
                while (!st.empty()) {
                    em.dur("E", ref.sv->syms.name(st.back().func), pid, r.tid, r.ts);
                    st.pop_back();
                }
                em.begin();
                out += "{\"name\":";
                json_str(out, ref.sv->syms.name(x.func));
                out += ",\"cat\":\"function\",\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
                       ",\"tid\":" + std::to_string(r.tid) + ",\"ts\":" +
                       ts_us(x.calltime) + ",\"dur\":" + ts_us(x.rettime - x.calltime) + "}";
            }
        } else {
            std::string text = record_text(ref);
            std::string place;
            std::vector<std::pair<std::string, std::string>> args;
            split_probe_text(text, place, args);
            std::string name = record_event_name(ref);
            if (name.empty())
                name = "type " + std::to_string(t);
            auto dit = ref.sv->events.find(t);
            std::string cat = dit == ref.sv->events.end() ? "event" : dit->second.group;
            em.begin();
            out += "{\"name\":";
            json_str(out, name);
            out += ",\"cat\":";
            json_str(out, cat);
            out += ",\"ph\":\"i\",\"s\":\"t\",\"pid\":" + std::to_string(pid) + ",\"tid\":" +
                   std::to_string(r.tid) + ",\"ts\":" + ts_us(r.ts) + ",\"args\":{\"place\":";
            json_str(out, place);
            for (const auto &[k, v] : args) {
                out += ",";
                json_str(out, k);
                out += ":";
                json_str(out, v);
            }
            out += "}}";
        }
    }
    // Calls still open when the recording ended close at their thread's last event.
    for (auto &[key, st] : stacks)
        while (!st.empty()) {
            em.dur("E", key.first->syms.name(st.back().func), key.first->s->pid(), key.second,
                   last_ts[key]);
            st.pop_back();
        }
    out += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"dprobe\"}}\n";
    return out;
}

} // namespace dprobe::report
