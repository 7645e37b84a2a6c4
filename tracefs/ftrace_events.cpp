// The events/ftrace/ format files and the text of ftrace's own records (the kernel's
// trace_export.c, which prints the formats, and trace_output.c's trace_fn_trace,
// trace_stack_print, trace_print_print and trace_raw_data).
#include "tracefs/ftrace_entries.h"

#include "core/symbols.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

struct field_desc {
    const char *type;
    const char *name;
    unsigned offset, size;
    bool is_signed;
};

struct ftrace_event_desc {
    const char *name;
    trace_type id;
    std::vector<field_desc> fields;
    const char *print_fmt;
};

const std::vector<ftrace_event_desc> &descs()
{
    static const std::vector<ftrace_event_desc> d = {
        {"function",
         TRACE_FN,
         {{"unsigned long", "ip", 8, 8, false}, {"unsigned long", "parent_ip", 16, 8, false}},
         "\" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip"},
        {"kernel_stack",
         TRACE_STACK,
         {{"int", "size", 8, 4, true}, {"unsigned long[]", "caller", 16, 0, false}},
         "\"\\t=> %ps\\n\\t=> %ps\\n\\t=> %ps\\n\\t=> %ps\\n\\t=> %ps\\n\\t=> %ps\\n\\t=> "
         "%ps\\n\\t=> %ps\\n\", (void *)REC->caller[0], (void *)REC->caller[1], "
         "(void *)REC->caller[2], (void *)REC->caller[3], (void *)REC->caller[4], "
         "(void *)REC->caller[5], (void *)REC->caller[6], (void *)REC->caller[7]"},
        {"print",
         TRACE_PRINT,
         {{"unsigned long", "ip", 8, 8, false}, {"char[]", "buf", 16, 0, true}},
         "\"%ps: %s\", (void *)REC->ip, REC->buf"},
        {"funcgraph_exit",
         TRACE_GRAPH_RET,
         {{"unsigned long", "func", 8, 8, false},
          {"unsigned long", "retval", 16, 8, false},
          {"int", "depth", 24, 4, true},
          {"unsigned int", "overrun", 28, 4, false},
          {"unsigned long long", "calltime", 32, 8, false},
          {"unsigned long long", "rettime", 40, 8, false}},
         "\"<-- %ps (%d) (start: %llx  end: %llx) over: %d retval: %lx\", (void *)REC->func, "
         "REC->depth, REC->calltime, REC->rettime, REC->depth, REC->retval"},
        {"funcgraph_entry",
         TRACE_GRAPH_ENT,
         {{"unsigned long", "func", 8, 8, false}, {"int", "depth", 16, 4, true}},
         "\"--> %ps (%d)\", (void *)REC->func, REC->depth"},
        {"raw_data",
         TRACE_RAW_DATA,
         {{"unsigned int", "id", 8, 4, false}, {"char[]", "buf", 12, 0, true}},
         "\"id:%04x %08x\", REC->id, (int)REC->buf[0]"},
    };
    return d;
}

const ftrace_event_desc *desc_of(std::string_view name)
{
    for (const auto &d : descs())
        if (name == d.name) return &d;
    return nullptr;
}

uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// Its address is the ip of the print records of trace_marker writes.
extern "C" __attribute__((noinline, used, visibility("hidden"))) void tracing_mark_write(void)
{
    __asm__ volatile("");
}

} // namespace

uintptr_t trace_marker_ip() noexcept
{
    return reinterpret_cast<uintptr_t>(&tracing_mark_write);
}

const std::vector<std::string> &ftrace_event_names()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const auto &d : descs())
            v.push_back(d.name);
        return v;
    }();
    return names;
}

int ftrace_event_id(std::string_view name)
{
    const ftrace_event_desc *d = desc_of(name);
    return d ? d->id : -1;
}

bool is_ftrace_type(uint16_t type)
{
    for (const auto &d : descs())
        if (d.id == type) return true;
    return false;
}

std::string ftrace_event_format(std::string_view name)
{
    const ftrace_event_desc *d = desc_of(name);
    if (!d) return "";
    std::string s =
        std::string("name: ") + d->name + "\nID: " + std::to_string(d->id) + "\nformat:\n";
    auto line = [&s](const char *type, const char *fname, unsigned off, unsigned size, bool sgn) {
        // A dynamic array "T[]" prints as "T name[]", as the kernel's f_show() does.
        std::string_view t = type;
        const bool dyn = t.ends_with("[]");
        if (dyn) t.remove_suffix(2);
        char buf[160];
        std::snprintf(buf, sizeof buf, "\tfield:%.*s %s%s;\toffset:%u;\tsize:%u;\tsigned:%d;\n",
                      int(t.size()), t.data(), fname, dyn ? "[]" : "", off, size, sgn ? 1 : 0);
        s += buf;
    };
    line("unsigned short", "common_type", 0, 2, false);
    line("unsigned char", "common_flags", 2, 1, false);
    line("unsigned char", "common_preempt_count", 3, 1, false);
    line("int", "common_pid", 4, 4, true);
    s += "\n";
    for (const field_desc &f : d->fields)
        line(f.type, f.name, f.offset, f.size, f.is_signed);
    s += std::string("\nprint fmt: ") + d->print_fmt + "\n";
    return s;
}

int ftrace_event_check_filter(std::string_view name, std::string_view text, std::string &error_text)
{
    const ftrace_event_desc *d = desc_of(name);
    if (!d) return -ENOENT;
    using t = filter_field::type;
    const bool is_function = d->id == TRACE_FN;
    std::vector<filter_field> fields;
    if (is_function) {
        // The kernel's parse_pred(): a string compared with the function names, for perf.
        fields.push_back({"ip", t::static_string, 8, uint16_t(MAX_FILTER_STR_VAL), false});
    } else {
        for (const field_desc &f : d->fields)
            if (f.size) // the dynamic arrays (caller[], buf[]) take no predicate
                fields.push_back(
                    {f.name, t::number, uint16_t(f.offset), uint16_t(f.size), f.is_signed});
        fields.push_back({"CPU", t::cpu, 0, 4, true});
        fields.push_back({"cpu", t::cpu, 0, 4, true});
        fields.push_back({"COMM", t::comm, 0, 16, false});
        fields.push_back({"comm", t::comm, 0, 16, false});
        fields.push_back({"common_type", t::number, 0, 2, false});
        fields.push_back({"common_flags", t::number, 2, 1, false});
        fields.push_back({"common_preempt_count", t::number, 3, 1, false});
        fields.push_back({"common_pid", t::number, 4, 4, true});
    }
    filter_parse_error pe;
    if (event_filter::compile(text, fields, pe)) return 0;
    if (is_function && pe.err == filter_err::FIELD_NOT_FOUND) {
        // A field the event has, but not ip: the kernel's "Only 'ip' field ..." error.
        auto ident = [&text](size_t i) {
            return std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_';
        };
        size_t end = std::min(size_t(pe.pos), text.size());
        while (end > 0 && !ident(end - 1)) // the caret is at or just past the name
            end--;
        size_t begin = end;
        while (begin > 0 && ident(begin - 1))
            begin--;
        const std::string_view f = text.substr(begin, end - begin);
        if (f == "parent_ip" || f.starts_with("common_")) pe.err = filter_err::IP_FIELD_ONLY;
    }
    error_text = filter_error_text(text, pe);
    return -EINVAL;
}

void print_ip_sym(std::string &out, uint64_t ip, const ftrace_print_flags &f)
{
    if (!ip) {
        out += '0';
        return;
    }
    char buf[512];
    size_t n =
        f.symbolize ? f.symbolize(buf, sizeof buf, ip) : sprint_symbol(buf, sizeof buf, ip, false);
    std::string_view s(buf, std::min(n, sizeof buf - 1));
    if (!f.sym_offset && !s.starts_with("0x")) {
        if (size_t plus = s.find('+'); plus != std::string_view::npos) s = s.substr(0, plus);
    }
    out += s;
    if (f.sym_addr) {
        std::snprintf(buf, sizeof buf, " <%016" PRIx64 ">", ip);
        out += buf;
    }
}

bool ftrace_print_entry(std::string &out, const uint8_t *rec, size_t len,
                        const ftrace_print_flags &f)
{
    if (len < sizeof(trace_entry_header)) return false;
    trace_entry_header h;
    std::memcpy(&h, rec, sizeof h);
    char buf[128];
    switch (h.type) {
    case TRACE_FN: {
        if (len < sizeof(ftrace_entry)) return false;
        print_ip_sym(out, ld64(rec + offsetof(ftrace_entry, ip)), f);
        uint64_t parent = ld64(rec + offsetof(ftrace_entry, parent_ip));
        if (f.print_parent && parent) {
            out += " <-";
            print_ip_sym(out, parent, f);
        }
        return true;
    }
    case TRACE_STACK: {
        if (len < sizeof(stack_entry)) return false;
        int32_t n;
        std::memcpy(&n, rec + offsetof(stack_entry, size), 4);
        size_t room = (len - sizeof(stack_entry)) / 8;
        out += "<stack trace>";
        for (size_t i = 0; i < size_t(n > 0 ? n : 0) && i < room; i++) {
            uint64_t a = ld64(rec + sizeof(stack_entry) + 8 * i);
            if (a == ~uint64_t{0}) break;
            out += "\n => ";
            print_ip_sym(out, a, f);
        }
        return true;
    }
    case TRACE_PRINT: {
        if (len < sizeof(print_entry)) return false;
        const uint64_t ip = ld64(rec + offsetof(print_entry, ip));
        if (!f.symbolize && ip == trace_marker_ip())
            out += "tracing_mark_write";
        else
            print_ip_sym(out, ip, f);
        out += ": ";
        const char *s = reinterpret_cast<const char *>(rec + sizeof(print_entry));
        out.append(s, strnlen(s, len - sizeof(print_entry)));
        while (!out.empty() && out.back() == '\n')
            out.pop_back();
        return true;
    }
    case TRACE_RAW_DATA: {
        if (len < sizeof(raw_data_entry)) return false;
        uint32_t id, n = 0;
        std::memcpy(&id, rec + offsetof(raw_data_entry, id), 4);
        // The record keeps its data length in the padding word after the bytes' end: the
        // ring buffer's own length is rounded up to 8.
        std::memcpy(&n, rec + len - 4, 4);
        if (n > len - sizeof(raw_data_entry) - 4) n = 0;
        // The kernel prints the record's whole payload, which its ring buffer rounds up to
        // 4 bytes: the padding shows as zeros (the selftest 00basic/trace_marker_raw.tc counts
        // on it). The padding is zeroed when the record is written.
        n = std::min<uint32_t>((n + 3) & ~3u, uint32_t(len - sizeof(raw_data_entry) - 4));
        std::snprintf(buf, sizeof buf, "# %x buf:", id);
        out += buf;
        for (uint32_t i = 0; i < n; i++) {
            std::snprintf(buf, sizeof buf, " %02x", rec[sizeof(raw_data_entry) + i]);
            out += buf;
        }
        return true;
    }
    case TRACE_GRAPH_ENT: {
        if (len < sizeof(ftrace_graph_ent_entry)) return false;
        ftrace_graph_ent_entry e;
        std::memcpy(&e, rec, sizeof e);
        out += "--> ";
        print_ip_sym(out, e.func, f);
        std::snprintf(buf, sizeof buf, " (%d)", e.depth);
        out += buf;
        return true;
    }
    case TRACE_GRAPH_RET: {
        if (len < sizeof(ftrace_graph_ret_entry)) return false;
        ftrace_graph_ret_entry e;
        std::memcpy(&e, rec, sizeof e);
        out += "<-- ";
        print_ip_sym(out, e.func, f);
        std::snprintf(buf, sizeof buf,
                      " (%d) (start: %" PRIx64 "  end: %" PRIx64 ") over: %d retval: %" PRIx64,
                      e.depth, e.calltime, e.rettime, e.depth, e.retval);
        out += buf;
        return true;
    }
    default:
        return false;
    }
}

size_t ftrace_raw_data_len(const void *rec, size_t len)
{
    uint16_t type = 0;
    if (len >= sizeof(type)) std::memcpy(&type, rec, sizeof type);
    if (type != TRACE_RAW_DATA || len < sizeof(raw_data_entry) + 4) return len;
    uint32_t n;
    std::memcpy(&n, static_cast<const char *>(rec) + len - 4, 4);
    if (n > len - sizeof(raw_data_entry) - 4) return len; // not dprobe's layout
    return sizeof(raw_data_entry) + ((n + 3) & ~size_t{3});
}

bool ftrace_is_graph_values(const void *rec, size_t len)
{
    if (len < sizeof(ftrace_graph_values_compact)) return false;
    uint16_t type;
    std::memcpy(&type, rec, sizeof type);
    return type >= FTRACE_GRAPH_VALUES_FIRST_ID && type <= FTRACE_GRAPH_VALUES_LAST_ID;
}

bool ftrace_graph_values_split(const void *rec, size_t len, int32_t pid,
                               ftrace_graph_compact &graph, std::vector<uint8_t> &values)
{
    if (!ftrace_is_graph_values(rec, len)) return false;
    ftrace_graph_values_compact c;
    std::memcpy(&c, rec, sizeof c);
    const bool exit = c.depth & FTRACE_GRAPH_VALUES_FL_EXIT;
    graph.type = exit ? TRACE_GRAPH_RET : TRACE_GRAPH_ENT;
    graph.depth = c.depth & FTRACE_GRAPH_DEPTH_MAX;
    graph.func = c.func;
    // The probe record: the common header, __probe_ip (or __probe_func and a 0
    // __probe_ret_ip), then the values as they are.
    const size_t args_off =
        exit ? FTRACE_GRAPH_VALUES_EXIT_ARGS_OFF : FTRACE_GRAPH_VALUES_ENTRY_ARGS_OFF;
    const size_t n = len - FTRACE_GRAPH_VALUES_OFF;
    values.assign(args_off + n, 0);
    const trace_entry_header h{c.type, 0, 0, pid};
    std::memcpy(values.data(), &h, sizeof h);
    std::memcpy(values.data() + TRACE_ENTRY_HEADER_SIZE, &c.func, sizeof c.func);
    std::memcpy(values.data() + args_off,
                static_cast<const uint8_t *>(rec) + FTRACE_GRAPH_VALUES_OFF, n);
    return true;
}

uint16_t ftrace_compact_type(const void *rec, size_t len)
{
    if (len < sizeof(uint16_t)) return 0;
    uint16_t type;
    std::memcpy(&type, rec, sizeof type);
    switch (type) {
    case TRACE_GRAPH_ENT:
    case TRACE_GRAPH_RET:
        return len >= sizeof(ftrace_graph_compact) && len < sizeof(ftrace_graph_ent_entry) ? type
                                                                                           : 0;
    case TRACE_FN:
        return len >= sizeof(ftrace_fn_compact) && len < sizeof(ftrace_entry) ? type : 0;
    default:
        return 0;
    }
}

size_t ftrace_compact_expander::expand(const void *rec, size_t len, int32_t tid, uint64_t ts,
                                       ftrace_full_record &out, bool *unwound)
{
    uint16_t type = ftrace_compact_type(rec, len);
    const bool values = graph_values_ && ftrace_is_graph_values(rec, len);
    if (values) {
        uint16_t depth;
        std::memcpy(&depth, static_cast<const char *>(rec) + 2, sizeof depth);
        type = depth & FTRACE_GRAPH_VALUES_FL_EXIT ? TRACE_GRAPH_RET : TRACE_GRAPH_ENT;
    }
    if (unwound) *unwound = false;
    if (!type) return 0;
    out = ftrace_full_record{};
    out.ent = trace_entry_header{type, 0, 0, tid};
    if (type == TRACE_FN) {
        ftrace_fn_compact c;
        std::memcpy(&c, rec, sizeof c);
        out.fn.ip = c.ip;
        out.fn.parent_ip = c.parent_ip;
        return sizeof(ftrace_entry);
    }
    ftrace_graph_compact c;
    std::memcpy(&c, rec, sizeof c);
    if (values) c.depth &= FTRACE_GRAPH_DEPTH_MAX; // its graph part (never an unwound exit)
    const int32_t depth = c.depth & FTRACE_GRAPH_DEPTH_MAX;
    std::vector<frame> &open = open_[tid];
    if (type == TRACE_GRAPH_ENT) {
        // A call left at this depth or deeper without its exit (lost) is over.
        while (!open.empty() && open.back().depth >= depth)
            open.pop_back();
        open.push_back({c.func, depth, ts});
        out.graph_ent.func = c.func;
        out.graph_ent.depth = depth;
        return sizeof(ftrace_graph_ent_entry);
    }
    uint64_t calltime = ts; // its entry unseen: no duration to show
    size_t i = open.size();
    while (i-- > 0 && !(open[i].func == c.func && open[i].depth == depth)) {
    }
    if (i != SIZE_MAX) {
        calltime = open[i].ts;
        open.resize(i);
    } else {
        while (!open.empty() && open.back().depth >= depth)
            open.pop_back();
    }
    if (open.empty()) open_.erase(tid);
    out.graph_ret.func = c.func;
    out.graph_ret.depth = depth;
    out.graph_ret.calltime = calltime;
    out.graph_ret.rettime = ts;
    if (unwound) *unwound = (c.depth & FTRACE_GRAPH_FL_UNWOUND) != 0;
    return sizeof(ftrace_graph_ret_entry);
}

} // namespace dprobe
