// dprobe report --format hist: the kernel's `hist` file text out of a recording. Without
// --hist, the histograms the session left (`--trigger GROUP:EVENT:hist:...`, HIST chunks);
// with --hist 'GROUP:EVENT:keys=...[:vals=...][:sort=...][ if FILTER]', the same table
// computed from the recorded records of that event by the tracefs's own hist code
// (tracefs/trace_events_hist.h: parsing, tracing_map, the text), so both read alike.
// What the recording lacks: a stack at each record (stacktrace keys stay empty), and records
// it lost (counted in the summary line of the recording, not here).
#include "tools/dprobe/report/report.h"

#include "tracefs/event_filter.h"
#include "tracefs/trace_events_hist.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace dprobe::report
{

namespace
{

// The fields of an event's `format` text, as probe_filter_fields() orders them: its own,
// then CPU, COMM and the common ones.
std::vector<filter_field> format_fields(const std::string &format)
{
    using t = filter_field::type;
    std::vector<filter_field> own, common;
    size_t pos = 0;
    while ((pos = format.find("field:", pos)) != std::string::npos) {
        size_t end = format.find('\n', pos);
        std::string line = format.substr(pos, end == std::string::npos ? end : end - pos);
        pos = end == std::string::npos ? format.size() : end;
        size_t semi = line.find(';');
        std::string decl = line.substr(6, semi - 6);
        unsigned off = 0, size = 0, sign = 0;
        const char *o = std::strstr(line.c_str(), "offset:");
        const char *z = std::strstr(line.c_str(), "size:");
        const char *g = std::strstr(line.c_str(), "signed:");
        if (!o || !z || !g) continue;
        std::sscanf(o, "offset:%u", &off);
        std::sscanf(z, "size:%u", &size);
        std::sscanf(g, "signed:%u", &sign);
        std::string name = decl.substr(decl.rfind(' ') + 1);
        filter_field f;
        f.kind = t::number;
        if (size_t br = name.find('['); br != std::string::npos) {
            name.resize(br);
            f.kind = decl.find("char") != std::string::npos ? t::static_string : t::number;
        }
        if (decl.starts_with("__data_loc")) f.kind = t::dyn_string;
        f.name = name;
        f.offset = static_cast<uint16_t>(off);
        f.size = static_cast<uint16_t>(size);
        f.is_signed = sign != 0;
        (name.starts_with("common_") ? common : own).push_back(std::move(f));
    }
    own.push_back({"CPU", t::cpu, 0, 4, true});
    own.push_back({"cpu", t::cpu, 0, 4, true});
    own.push_back({"COMM", t::comm, 0, 16, false});
    own.push_back({"comm", t::comm, 0, 16, false});
    own.insert(own.end(), common.begin(), common.end());
    return own;
}

// "GROUP:EVENT:[hist:]PARAM[ if FILTER]".
struct hist_spec {
    std::string group, event, param, filter;
};

bool parse_spec(const std::string &s, hist_spec &out, std::string *err)
{
    size_t a = s.find(':');
    size_t b = a == std::string::npos ? a : s.find(':', a + 1);
    if (a == 0 || b == std::string::npos || b == a + 1 || b + 1 == s.size()) {
        *err = "--hist '" + s + "' is not GROUP:EVENT:keys=...";
        return false;
    }
    out.group = s.substr(0, a);
    out.event = s.substr(a + 1, b - a - 1);
    std::string rest = s.substr(b + 1);
    if (rest.starts_with("hist:")) rest = rest.substr(5);
    if (size_t i = rest.find(" if "); i != std::string::npos) {
        out.filter = rest.substr(i + 4);
        rest.resize(i);
    }
    out.param = rest;
    return true;
}

// The recording's side of hist_env, for the record being counted.
const char *g_comm = "";
bool g_in_ns = true;

const char *record_comm() noexcept
{
    return g_comm;
}

bool record_clock_in_ns() noexcept
{
    return g_in_ns;
}

void record_symbolize(char *buf, size_t len, uintptr_t addr)
{
    current_symbolize(buf, len, addr);
}

// The hist of SPEC over session SI of M ("" with *ERR set when it cannot be made; "" and no
// error when the session has no such event).
std::string session_hist(const model &m, size_t si, const hist_spec &spec, std::string *err)
{
    const session_view &sv = *m.sessions[si];
    const event_decoder *ev = nullptr;
    uint32_t id = 0;
    for (const auto &[eid, d] : sv.events)
        if (d.info.name == spec.group + "/" + spec.event) {
            ev = &d;
            id = eid;
        }
    if (!ev) return "";
    const std::vector<filter_field> fields = format_fields(ev->info.format);
    std::unique_ptr<hist_trigger_data> hd;
    hist_error he;
    const std::string cmd = "hist:" + spec.param;
    if (hist_trigger_data::create(spec.param, cmd, fields, hd, he) != 0) {
        *err = "--hist '" + spec.param + "': " +
               (he.logged() ? std::string(hist_err_text(he.err)) + " (at column " +
                                  std::to_string(he.pos) + ")"
                            : std::string(std::strerror(he.errnum)));
        return "";
    }
    std::unique_ptr<event_filter> filter;
    if (!spec.filter.empty()) {
        filter_parse_error pe;
        filter = event_filter::compile(spec.filter, fields, pe);
        if (!filter) {
            *err = "--hist filter '" + spec.filter + "': " + filter_err_text(pe.err);
            return "";
        }
    }
    g_in_ns = sv.in_ns;
    hist_environment.current_comm = record_comm;
    hist_environment.clock_in_ns = record_clock_in_ns;
    hist_environment.symbolize = record_symbolize;
    uint64_t last_ts = 0;
    for (size_t stream : m.stream_order) {
        if (m.reader.streams[stream].session != si) continue;
        tracefile::trace_reader::cursor cur(m.reader, stream);
        tracefile::event e;
        while (cur.next(e)) {
            if (event_type(e) != id) continue;
            const auto *rec = static_cast<const uint8_t *>(e.payload);
            std::string comm = sv.comm_of(record_pid(e));
            event_filter::context fc;
            fc.cpu = e.cpu;
            fc.comm = comm.c_str();
            if (filter && !filter->match(rec, e.len, fc)) continue;
            g_comm = comm.c_str();
            hist_hit_ctx ctx;
            ctx.ts = e.ts;
            ctx.cpu = e.cpu;
            hd->hit(rec, e.len, ctx);
            last_ts = e.ts;
        }
    }
    g_comm = "";
    set_current_symbols(&sv.syms, last_ts);
    std::string s = "# event histogram\n#\n# trigger info: " + hd->print_spec("");
    if (!spec.filter.empty()) s += " if " + spec.filter;
    s += " [active]\n#\n\n" + hd->show();
    return s;
}

} // namespace

report_counts format_hist(const model &m, const report_opts &o, std::FILE *out)
{
    report_counts rc;
    if (o.hists.empty()) {
        size_t n = 0;
        for (const auto &sv : m.sessions)
            for (const auto &[event, text] : sv->s->hists) {
                std::fprintf(out, "# events/%s/hist of %d (%s)\n%s", event.c_str(), sv->s->pid(),
                             sv->s->get("comm").c_str(), text.c_str());
                n++;
            }
        if (!n)
            rc.errors.push_back("no histogram in " + o.input +
                                ": record with --trigger 'GROUP:EVENT:hist:keys=...', or "
                                "compute one with --hist 'GROUP:EVENT:keys=...'");
        return rc;
    }
    for (const std::string &text : o.hists) {
        hist_spec spec;
        std::string err;
        if (!parse_spec(text, spec, &err)) {
            rc.errors.push_back(err);
            continue;
        }
        size_t n = 0;
        for (size_t si = 0; si < m.sessions.size(); si++) {
            std::string h = session_hist(m, si, spec, &err);
            if (!err.empty()) {
                rc.errors.push_back(err);
                break;
            }
            if (h.empty()) continue;
            const tracefile::session &s = *m.sessions[si]->s;
            std::fprintf(out, "# events/%s/%s/hist of %d (%s)\n%s", spec.group.c_str(),
                         spec.event.c_str(), s.pid(), s.get("comm").c_str(), h.c_str());
            n++;
        }
        if (!n && err.empty())
            rc.errors.push_back("no event " + spec.group + "/" + spec.event + " in " + o.input);
    }
    return rc;
}

} // namespace dprobe::report
