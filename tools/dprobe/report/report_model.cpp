// The report model (see report_model.h).
#include "tools/dprobe/report/report_model.h"

#include "tracefs/event_format.h"
#include "tracefs/ftrace_entries.h"
#include "tools/dprobe/report/report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dprobe::report
{

void offline_symbols::build(const std::vector<tracefile::object_info> &objects,
                            const std::vector<std::pair<uint64_t, std::string>> &names)
{
    for (const auto &[a, name] : names)
        names_[a] = ksym{a, 1, 0, 0, name};
    for (const tracefile::object_info &o : objects) {
        if (o.unloaded) {
            // The open span of that file at that address ends here.
            for (auto it = spans_.rbegin(); it != spans_.rend(); ++it)
                if (it->to == UINT64_MAX && it->obj->path == o.path &&
                    it->obj->load_bias == o.load_bias) {
                    it->to = o.ts;
                    break;
                }
            continue;
        }
        if (o.path.empty() || o.path[0] != '/')
            continue; // the vdso and anonymous objects have no file to read
        auto key = std::make_pair(o.path, static_cast<uintptr_t>(o.load_bias));
        auto it = files_.find(key);
        if (it == files_.end()) {
            std::string err;
            // Names from debug files too, for every object (only names here).
            auto obj = read_object_file(o.path, o.load_bias, &err, true);
            if (!obj) {
                missing.push_back(o.path + (err.empty() ? "" : ": " + err));
                files_[key] = nullptr;
                continue;
            }
            it = files_.emplace(key, std::move(obj)).first;
        }
        if (it->second) spans_.push_back({it->second, o.ts, UINT64_MAX});
    }
}

const ksym *offline_symbols::find(uintptr_t addr, uint64_t ts) const
{
    if (auto it = names_.find(addr); it != names_.end()) return &it->second;
    // The latest load that held the address at TS (loads at one address do not overlap).
    for (auto it = spans_.rbegin(); it != spans_.rend(); ++it)
        if (ts >= it->from && ts < it->to && it->obj->contains(addr))
            if (const ksym *s = it->obj->func_at(addr)) return s;
    // An address outside every span of its time (an event stamped a moment before its
    // object's load was described): any object that ever held it.
    for (auto it = spans_.rbegin(); it != spans_.rend(); ++it)
        if (it->obj->contains(addr))
            if (const ksym *s = it->obj->func_at(addr)) return s;
    return nullptr;
}

bool offline_symbols::where(uintptr_t addr, uint64_t ts, origin *out) const
{
    const ksym *s = find(addr, ts);
    if (!s || names_.count(addr)) return false;
    for (auto it = spans_.rbegin(); it != spans_.rend(); ++it)
        if (it->obj->contains(addr) && it->obj->func_at(addr) == s) {
            *out = {it->obj->path, it->obj->load_bias, s->name, s->addr};
            return true;
        }
    return false;
}

const std::string &offline_symbols::shown(const ksym *s) const
{
    auto it = shown_.find(s);
    if (it == shown_.end()) it = shown_.emplace(s, demangle(s->name, demangle_)).first;
    return it->second;
}

std::string offline_symbols::sym(uintptr_t addr, uint64_t ts, bool with_offset) const
{
    char buf[64];
    const ksym *s = find(addr, ts);
    if (!s) {
        std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, addr);
        return buf;
    }
    if (!with_offset) return shown(s);
    std::snprintf(buf, sizeof buf, "+0x%" PRIxPTR "/0x%" PRIx64, addr - s->addr, s->size);
    return shown(s) + buf;
}

std::string session_view::comm_of(int32_t tid) const
{
    auto it = comms.find(tid);
    if (it != comms.end() && !it->second.empty()) return it->second;
    return s->get("comm", "<...>");
}

namespace
{
const offline_symbols *g_current;
uint64_t g_current_ts;
} // namespace

void set_current_symbols(const offline_symbols *syms, uint64_t ts)
{
    g_current = syms;
    g_current_ts = ts;
}

size_t current_symbolize(char *buf, size_t len, uintptr_t addr)
{
    std::string s;
    if (g_current) {
        s = g_current->sym(addr, g_current_ts);
    } else {
        char tmp[32];
        std::snprintf(tmp, sizeof tmp, "0x%" PRIxPTR, addr);
        s = tmp;
    }
    if (len) {
        size_t n = std::min(len - 1, s.size());
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return s.size();
}

bool load_model(const std::string &path, model &m, std::string *err, demangle_mode demangle)
{
    if (!m.reader.open(path, err)) return false;
    for (const auto &s : m.reader.sessions) {
        auto sv = std::make_unique<session_view>();
        sv->s = &s;
        sv->in_ns = s.get("clock_in_ns", "1") != "0";
        sv->syms.set_demangle(demangle);
        sv->syms.build(s.objects, s.names);
        for (const auto &[id, e] : s.events) {
            event_decoder d;
            d.info = e;
            auto slash = e.name.find('/');
            d.group = slash == std::string::npos ? std::string() : e.name.substr(0, slash);
            d.event = slash == std::string::npos ? e.name : e.name.substr(slash + 1);
            if (!e.definition.empty()) {
                parse_options po;
                po.check_files = false;
                po.btf_unchecked = true; // names resolved in the traced process: see format
                // record -a/-A/-R's values: probes at a function's address, its entry.
                if (d.group == tracefile::GRAPH_ARGS_GROUP)
                    po.is_func_entry = [](const probe_place &) { return true; };
                auto argv = argv_split(e.definition);
                d.has_def = parse_probe_definition(argv, po, d.def).ok();
                if (d.has_def && !e.format.empty()) probe_args_from_format(d.def, e.format);
            }
            sv->events.emplace(id, std::move(d));
        }
        m.sessions.push_back(std::move(sv));
    }
    for (size_t i = 0; i < m.reader.streams.size(); i++) {
        const auto &t = m.reader.streams[i];
        m.sessions[t.session]->comms[t.tid] = t.comm;
        m.stream_order.push_back(i);
    }
    std::stable_sort(m.stream_order.begin(), m.stream_order.end(), [&](size_t a, size_t b) {
        return m.reader.streams[a].first_ts < m.reader.streams[b].first_ts;
    });
    return true;
}

uint16_t event_type(const tracefile::event &e)
{
    uint16_t t = 0;
    if (e.len >= 2) std::memcpy(&t, e.payload, 2);
    return t;
}

bool decode_graph(const tracefile::event &e, graph_event &g)
{
    const uint16_t t = event_type(e);
    if (t != TRACE_GRAPH_ENT && t != TRACE_GRAPH_RET) return false;
    g.entry = t == TRACE_GRAPH_ENT;
    g.unwound = false;
    if (ftrace_compact_type(e.payload, e.len)) {
        // The agent's graph.
        tracefile::funcgraph_rec r;
        std::memcpy(&r, e.payload, sizeof r);
        g.unwound = !g.entry && (r.depth & tracefile::FUNCGRAPH_FL_UNWOUND);
        g.depth = r.depth & tracefile::FUNCGRAPH_DEPTH_MAX;
        g.func = r.func;
        return true;
    }
    // The function_graph tracer's (echo function_graph > current_tracer).
    if (g.entry && e.len >= sizeof(ftrace_graph_ent_entry)) {
        ftrace_graph_ent_entry r;
        std::memcpy(&r, e.payload, sizeof r);
        g.depth = r.depth;
        g.func = r.func;
        return true;
    }
    if (!g.entry && e.len >= sizeof(ftrace_graph_ret_entry)) {
        ftrace_graph_ret_entry r;
        std::memcpy(&r, e.payload, sizeof r);
        g.depth = r.depth;
        g.func = r.func;
        return true;
    }
    return false;
}

bool decode_function(const tracefile::event &e, function_event &f)
{
    if (event_type(e) != TRACE_FN) return false;
    if (ftrace_compact_type(e.payload, e.len)) { // record -p function
        tracefile::function_rec r;
        std::memcpy(&r, e.payload, sizeof r);
        f.ip = r.ip;
        f.parent_ip = r.parent_ip;
        return true;
    }
    if (e.len < sizeof(ftrace_entry)) return false;
    ftrace_entry r; // the function tracer's (echo function > current_tracer)
    std::memcpy(&r, e.payload, sizeof r);
    f.ip = r.ip;
    f.parent_ip = r.parent_ip;
    return true;
}

int32_t record_pid(const tracefile::event &e)
{
    if (ftrace_compact_type(e.payload, e.len) || e.len < sizeof(trace_entry_header)) return e.tid;
    trace_entry_header h;
    std::memcpy(&h, e.payload, sizeof h);
    return h.pid > 0 ? h.pid : e.tid;
}

int killed_by(const tracefile::session &s)
{
    auto r = s.end.find("reason");
    auto n = s.end.find("signal");
    if (r == s.end.end() || r->second != "signal" || n == s.end.end()) return 0;
    return std::atoi(n->second.c_str());
}

std::string signal_name(int sig)
{
    const char *abbrev = sigabbrev_np(sig);
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

void call_stack::entry(const graph_event &g, uint64_t ts)
{
    // A frame left at this depth or deeper without its exit (lost) is over.
    while (!frames_.empty() && frames_.back().depth >= g.depth)
        frames_.pop_back();
    frames_.push_back({g.func, g.depth, ts});
}

bool call_stack::exit(const graph_event &g, uint64_t *calltime)
{
    for (size_t i = frames_.size(); i-- > 0;)
        if (frames_[i].func == g.func && frames_[i].depth == g.depth) {
            *calltime = frames_[i].ts;
            frames_.resize(i);
            return true;
        }
    // No entry: everything at that depth or deeper is over anyway.
    while (!frames_.empty() && frames_.back().depth >= g.depth)
        frames_.pop_back();
    return false;
}

std::string event_name(const session_view &sv, const tracefile::event &e)
{
    const uint16_t t = event_type(e);
    if (t == TRACE_GRAPH_ENT) return "funcgraph_entry";
    if (t == TRACE_GRAPH_RET) return "funcgraph_exit";
    if (t == TRACE_FN) return "function";
    if (t == TRACE_STACK) return "kernel_stack";
    if (t == TRACE_PRINT) return "print";
    if (t == TRACE_RAW_DATA) return "raw_data";
    auto it = sv.events.find(t);
    return it == sv.events.end() ? std::string() : it->second.event;
}

bool decode_graph_values(const session_view &sv, const tracefile::event &e, graph_values &out)
{
    const uint16_t t = event_type(e);
    if (t < tracefile::GRAPH_ARGS_FIRST_ID || t > tracefile::GRAPH_ARGS_LAST_ID) return false;
    auto it = sv.events.find(t);
    if (it == sv.events.end() || it->second.group != tracefile::GRAPH_ARGS_GROUP ||
        !it->second.has_def)
        return false;
    out.retval = it->second.def.is_return;
    out.values.clear();
    std::string place;
    split_probe_text(event_text(sv, e), place, out.values);
    return true;
}

std::string graph_values::inline_text() const
{
    std::string s;
    for (const auto &[name, value] : values)
        s += (s.empty() ? "" : ", ") + value;
    return s;
}

std::string event_text(const session_view &sv, const tracefile::event &e, uint64_t duration_ns)
{
    char buf[256];
    graph_event g;
    function_event f;
    if (decode_function(e, f)) {
        // The kernel's function tracer: "func <-parent".
        return sv.syms.name(f.ip, e.ts) + " <-" + sv.syms.name(f.parent_ip, e.ts);
    }
    if (decode_graph(e, g)) {
        const std::string name = sv.syms.name(g.func, e.ts);
        if (g.entry) {
            std::snprintf(buf, sizeof buf, "funcgraph_entry: --> %s (%d)", name.c_str(), g.depth);
            return buf;
        }
        std::string dur;
        if (duration_ns != UINT64_MAX) {
            char d[48];
            std::snprintf(d, sizeof d, " %" PRIu64 ".%03" PRIu64 " us", duration_ns / 1000,
                          duration_ns % 1000);
            dur = d;
        }
        std::snprintf(buf, sizeof buf, "funcgraph_exit: <-- %s (%d)%s%s", name.c_str(), g.depth,
                      dur.c_str(), g.unwound ? " (unwound)" : "");
        return buf;
    }
    const uint16_t t = event_type(e);
    if (is_ftrace_type(t)) {
        // ftrace's other records (stack traces of triggers and func_stack_trace,
        // trace_marker's print and raw_data), as the trace file prints them; addresses named
        // from the recording's objects.
        std::string s;
        ftrace_print_flags f;
        f.symbolize = current_symbolize;
        set_current_symbols(&sv.syms, e.ts);
        const bool known = ftrace_print_entry(s, static_cast<const uint8_t *>(e.payload), e.len, f);
        set_current_symbols(nullptr, 0);
        if (known) return s;
    }
    auto it = sv.events.find(t);
    if (it == sv.events.end()) {
        std::snprintf(buf, sizeof buf, "Unknown type %u", t);
        return buf;
    }
    const event_decoder &d = it->second;
    if (!d.has_def) return d.event + ": (no definition recorded)";
    set_current_symbols(&sv.syms, e.ts);
    std::string s = format_probe_record(d.def, static_cast<const uint8_t *>(e.payload), e.len,
                                        current_symbolize);
    set_current_symbols(nullptr, 0);
    return s;
}

} // namespace dprobe::report
