#include "tools/dprobe/report_model.h"

#include "tracefs/event_format.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe::report {

void offline_symbols::add(const std::string &path, uintptr_t bias)
{
    if (path.empty() || path[0] != '/')
        return; // the vdso and anonymous objects have no file to read
    std::string err;
    auto o = read_object_file(path, bias, &err);
    if (!o) {
        missing.push_back(path + (err.empty() ? "" : ": " + err));
        return;
    }
    objs_.push_back(std::move(o));
}

const ksym *offline_symbols::find(uintptr_t addr, const loaded_object **obj) const
{
    for (const auto &o : objs_)
        if (o->contains(addr)) {
            if (const ksym *s = o->func_at(addr)) {
                if (obj)
                    *obj = o.get();
                return s;
            }
        }
    return nullptr;
}

std::string offline_symbols::sym(uintptr_t addr, bool with_offset) const
{
    char buf[64];
    const loaded_object *o = nullptr;
    const ksym *s = find(addr, &o);
    if (!s) {
        std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, addr);
        return buf;
    }
    if (!with_offset)
        return s->name;
    std::snprintf(buf, sizeof buf, "+0x%" PRIxPTR "/0x%" PRIx64, addr - s->addr, s->size);
    return s->name + buf;
}

std::string offline_symbols::name(uintptr_t addr) const { return sym(addr, false); }

std::string session_view::comm_of(int32_t tid) const
{
    auto it = s->comms.find(tid);
    if (it != s->comms.end())
        return it->second;
    return s->get("comm", "<...>");
}

namespace {
const offline_symbols *g_current;
}

void set_current_symbols(const offline_symbols *syms) { g_current = syms; }

size_t current_symbolize(char *buf, size_t len, uintptr_t addr)
{
    std::string s;
    if (g_current) {
        s = g_current->sym(addr);
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

bool load_model(const std::string &path, model &m, std::string *err)
{
    if (!tracefile::read_trace(path, m.data, err))
        return false;
    for (const auto &s : m.data.sessions) {
        auto sv = std::make_unique<session_view>();
        sv->s = &s;
        sv->in_ns = s.get("clock_in_ns", "1") != "0";
        for (const auto &o : s.objects)
            if (!o.unloaded)
                sv->syms.add(o.path, o.load_bias);
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
                auto argv = argv_split(e.definition);
                d.has_def = parse_probe_definition(argv, po, d.def).ok();
                if (d.has_def && !e.format.empty())
                    probe_args_from_format(d.def, e.format);
            }
            sv->events.emplace(id, std::move(d));
        }
        for (const auto &r : s.records)
            m.records.push_back({&r, sv.get()});
        m.sessions.push_back(std::move(sv));
    }
    std::stable_sort(m.records.begin(), m.records.end(),
                     [](const record_ref &a, const record_ref &b) { return a.r->ts < b.r->ts; });
    return true;
}

uint16_t record_type(const tracefile::record &r)
{
    uint16_t t = 0;
    if (r.data.size() >= 2)
        std::memcpy(&t, r.data.data(), 2);
    return t;
}

std::string record_event_name(const record_ref &ref)
{
    uint16_t t = record_type(*ref.r);
    if (t == tracefile::FUNCGRAPH_ENTRY_ID)
        return "funcgraph_entry";
    if (t == tracefile::FUNCGRAPH_EXIT_ID)
        return "funcgraph_exit";
    auto it = ref.sv->events.find(t);
    return it == ref.sv->events.end() ? std::string() : it->second.event;
}

std::string record_text(const record_ref &ref)
{
    const tracefile::record &r = *ref.r;
    uint16_t t = record_type(r);
    char buf[256];
    if (t == tracefile::FUNCGRAPH_ENTRY_ID && r.data.size() >= sizeof(tracefile::funcgraph_entry_rec)) {
        tracefile::funcgraph_entry_rec e;
        std::memcpy(&e, r.data.data(), sizeof e);
        std::snprintf(buf, sizeof buf, "funcgraph_entry: --> %s (%d)",
                      ref.sv->syms.name(e.func).c_str(), e.depth);
        return buf;
    }
    if (t == tracefile::FUNCGRAPH_EXIT_ID && r.data.size() >= sizeof(tracefile::funcgraph_exit_rec)) {
        tracefile::funcgraph_exit_rec x;
        std::memcpy(&x, r.data.data(), sizeof x);
        uint64_t d = x.rettime - x.calltime;
        std::snprintf(buf, sizeof buf, "funcgraph_exit: <-- %s (%d) %" PRIu64 ".%03" PRIu64 " us",
                      ref.sv->syms.name(x.func).c_str(), x.depth, d / 1000, d % 1000);
        return buf;
    }
    auto it = ref.sv->events.find(t);
    if (it == ref.sv->events.end()) {
        std::snprintf(buf, sizeof buf, "Unknown type %u", t);
        return buf;
    }
    const event_decoder &d = it->second;
    if (!d.has_def)
        return d.event + ": (no definition recorded)";
    set_current_symbols(&ref.sv->syms);
    std::string s = format_probe_record(d.def, reinterpret_cast<const uint8_t *>(r.data.data()),
                                        r.data.size(), current_symbolize);
    set_current_symbols(nullptr);
    return s;
}

} // namespace dprobe::report
