#include "tracefs/event_format.h"

#include "core/compiler.h"
#include "tracefs/trace_synth_format.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace dprobe
{
namespace
{

constexpr const char probe_ip[] = "__probe_ip";
constexpr const char probe_func[] = "__probe_func";
constexpr const char probe_ret_ip[] = "__probe_ret_ip";

void field_line(std::string &out, const std::string &type, const std::string &name, size_t off,
                size_t size, bool is_signed)
{
    // An array type "u8[4]" prints as "u8 name[4]"; __data_loc types stay whole.
    std::string t = type, n = name;
    if (!t.starts_with("__data_loc")) {
        if (size_t br = t.find('['); br != std::string::npos) {
            n += t.substr(br);
            t.resize(br);
        }
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), ";\toffset:%zu;\tsize:%zu;\tsigned:%d;\n", off, size,
                  is_signed ? 1 : 0);
    out += "\tfield:" + t + " " + n + buf;
}

uint64_t load_ulong(const uint8_t *p)
{
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

std::string sym_text(uintptr_t addr, symbolize_fn sym, bool with_offset)
{
    // The kernel's seq_print_ip_sym(): 0 prints as "0".
    if (!addr) return "0";
    char buf[512];
    if (!sym) {
        std::snprintf(buf, sizeof(buf), "0x%" PRIxPTR, addr);
        return buf;
    }
    sym(buf, sizeof(buf), addr);
    std::string s = buf;
    if (!with_offset && !s.starts_with("0x")) {
        if (size_t plus = s.find('+'); plus != std::string::npos) s.resize(plus);
    }
    return s;
}

} // namespace

probe_event_layout probe_layout(const probe_definition &def)
{
    probe_event_layout l{};
    l.ip_off = TRACE_ENTRY_HEADER_SIZE;
    if (def.kind == probe_kind::eprobe || def.kind == probe_kind::synth) {
        // No probe address: the arguments follow the common header.
        l.ip_off = 0;
        l.ret_ip_off = 0;
        l.args_off = TRACE_ENTRY_HEADER_SIZE;
    } else if (def.is_return) {
        l.ret_ip_off = l.ip_off + sizeof(unsigned long);
        l.args_off = l.ret_ip_off + sizeof(unsigned long);
    } else {
        l.ret_ip_off = 0;
        l.args_off = l.ip_off + sizeof(unsigned long);
    }
    l.fixed_size = l.args_off + def.args_size;
    return l;
}

std::string probe_print_fmt(const probe_definition &def)
{
    if (def.kind == probe_kind::synth) return synth_print_fmt(def);
    std::string s = "\"";
    if (def.kind != probe_kind::eprobe) // PROBE_PRINT_EVENT: the arguments only
        s += def.is_return ? "(%lx <- %lx)" : "(%lx)";
    for (const auto &a : def.args) {
        s += " " + a.name + "=";
        if (a.count) {
            for (uint32_t j = 0; j < a.count; j++)
                s += std::string(j ? "," : "{") + a.type->fmt;
            s += "}";
        } else {
            s += a.type->fmt;
        }
    }
    s += "\"";
    if (def.kind == probe_kind::eprobe)
        ;
    else if (def.is_return)
        s += std::string(", REC->") + probe_func + ", REC->" + probe_ret_ip;
    else
        s += std::string(", REC->") + probe_ip;
    for (const auto &a : def.args) {
        if (a.count) {
            for (uint32_t j = 0; j < a.count; j++) {
                std::string elem = a.name + "[" + std::to_string(j) + "]";
                s += a.type->is_string ? ", __get_str(" + elem + ")" : ", REC->" + elem;
            }
        } else {
            s += a.type->is_string ? ", __get_str(" + a.name + ")" : ", REC->" + a.name;
        }
    }
    return s;
}

std::string probe_format_file(const probe_definition &def, int id)
{
    if (def.kind == probe_kind::synth) return synth_format_file(def, id);
    probe_event_layout l = probe_layout(def);
    std::string s = "name: " + def.event + "\nID: " + std::to_string(id) + "\nformat:\n";
    field_line(s, "unsigned short", "common_type", 0, 2, false);
    field_line(s, "unsigned char", "common_flags", 2, 1, false);
    field_line(s, "unsigned char", "common_preempt_count", 3, 1, false);
    field_line(s, "int", "common_pid", 4, 4, true);
    s += "\n";
    if (def.kind == probe_kind::eprobe) {
        // Only the arguments.
    } else if (def.is_return) {
        field_line(s, "unsigned long", probe_func, l.ip_off, sizeof(unsigned long), false);
        field_line(s, "unsigned long", probe_ret_ip, l.ret_ip_off, sizeof(unsigned long), false);
    } else {
        field_line(s, "unsigned long", probe_ip, l.ip_off, sizeof(unsigned long), false);
    }
    for (const auto &a : def.args) {
        const std::string type = a.count ? a.fmt : std::string(a.type->fmttype);
        field_line(s, type, a.name, l.args_off + a.offset, a.field_size(), a.type->is_signed);
    }
    s += "\nprint fmt: " + probe_print_fmt(def) + "\n";
    return s;
}

namespace
{

struct format_field {
    std::string name;
    size_t offset = 0, size = 0;
    uint32_t count = 0; // "u32 name[4]": 4
};

// The "\tfield:TYPE NAME[N];\toffset:O;\tsize:S;\tsigned:G;" lines of FORMAT, common ones left out.
std::vector<format_field> format_fields(std::string_view format)
{
    std::vector<format_field> out;
    size_t pos = 0;
    while ((pos = format.find("\tfield:", pos)) != std::string_view::npos) {
        size_t eol = format.find('\n', pos);
        std::string_view line = format.substr(pos, eol - pos);
        pos = eol == std::string_view::npos ? format.size() : eol;
        size_t semi = line.find(';');
        if (semi == std::string_view::npos) continue;
        std::string_view decl = line.substr(7, semi - 7); // after "\tfield:"
        size_t sp = decl.rfind(' ');
        if (sp == std::string_view::npos) continue;
        format_field f;
        std::string_view name = decl.substr(sp + 1);
        if (size_t br = name.find('['); br != std::string_view::npos) {
            f.count = static_cast<uint32_t>(
                std::strtoul(std::string(name.substr(br + 1)).c_str(), nullptr, 10));
            name = name.substr(0, br);
        }
        f.name = std::string(name);
        if (f.name.starts_with("common_")) continue;
        size_t o = line.find("\toffset:"), z = line.find("\tsize:");
        if (o == std::string_view::npos || z == std::string_view::npos) continue;
        f.offset = std::strtoul(std::string(line.substr(o + 8)).c_str(), nullptr, 10);
        f.size = std::strtoul(std::string(line.substr(z + 6)).c_str(), nullptr, 10);
        out.push_back(std::move(f));
    }
    return out;
}

// The quoted format of FORMAT's print fmt line, escapes kept as written.
std::string_view print_fmt_string(std::string_view format)
{
    size_t p = format.find("print fmt: \"");
    if (p == std::string_view::npos) return {};
    p += 12;
    size_t e = p;
    while (e < format.size() && format[e] != '"')
        e += format[e] == '\\' ? 2 : 1;
    return format.substr(p, std::min(e, format.size()) - p);
}

} // namespace

bool probe_args_from_format(probe_definition &def, std::string_view format)
{
    std::vector<format_field> fields = format_fields(format);
    std::erase_if(fields, [](const format_field &f) {
        return f.name == probe_ip || f.name == probe_func || f.name == probe_ret_ip;
    });
    std::string_view fmt = print_fmt_string(format);
    if (fields.size() != def.args.size()) return false;
    const size_t args_off = probe_layout(def).args_off;
    std::vector<probe_arg> args = def.args;
    size_t cursor = 0;
    for (size_t i = 0; i < args.size(); i++) {
        probe_arg &a = args[i];
        const format_field &f = fields[i];
        if (f.name != a.name || f.offset < args_off) return false;
        // This argument's piece of the print fmt: from " name=" to the next argument's.
        std::string key = " " + a.name + "=";
        size_t at = fmt.find(key, cursor);
        if (at == std::string_view::npos) return false;
        at += key.size();
        size_t next = i + 1 < args.size() ? fmt.find(" " + args[i + 1].name + "=", at) : fmt.size();
        std::string_view piece =
            fmt.substr(at, next == std::string_view::npos ? fmt.size() - at : next - at);
        cursor = at;
        if (f.count) {
            if (piece.size() < 2 || piece.front() != '{') return false;
            piece =
                piece.substr(1, piece.find(',') == std::string_view::npos ? piece.size() - 2
                                                                          : piece.find(',') - 1);
        }
        const size_t elem = f.count ? f.size / f.count : f.size;
        const fetch_type *t = nullptr;
        for (int id = 0; id <= static_cast<int>(fetch_type_id::symstr) && !t; id++) {
            const fetch_type &c = fetch_type_of(static_cast<fetch_type_id>(id));
            if (c.size == elem && piece == c.fmt) t = &c;
        }
        if (!t) return false;
        a.type = t;
        a.count = f.count;
        a.offset = static_cast<uint32_t>(f.offset - args_off);
        a.dynamic = t->is_string;
        a.fmt = f.count ? std::string(t->fmttype) + "[" + std::to_string(f.count) + "]" : "";
        a.prog.field_size = static_cast<uint16_t>(f.size);
    }
    uint32_t size = 0;
    for (const probe_arg &a : args)
        size = std::max<uint32_t>(size, a.offset + a.field_size());
    def.args = std::move(args);
    def.args_size = size;
    return true;
}

std::string format_probe_record(const probe_definition &def, const uint8_t *record, size_t size,
                                symbolize_fn sym)
{
    if (def.kind == probe_kind::synth) return synth_format_record(def, record, size, sym);
    probe_event_layout l = probe_layout(def);
    std::string s = def.event + ": ";
    if (size < l.fixed_size) return s + "(truncated record)";
    uintptr_t ip = l.ip_off ? load_ulong(record + l.ip_off) : 0;
    char buf[64];
    if (def.kind == probe_kind::eprobe) {
        // print_eprobe_event(): the attached event, as system.event.
        s += "(" + def.place.object + "." + def.place.symbol + ")";
    } else if (def.kind == probe_kind::uprobe) {
        // User addresses raw, as print_uprobe_event() shows them.
        if (def.is_return)
            std::snprintf(buf, sizeof(buf), "(0x%" PRIxPTR " <- 0x%" PRIxPTR ")",
                          static_cast<uintptr_t>(load_ulong(record + l.ret_ip_off)), ip);
        else
            std::snprintf(buf, sizeof(buf), "(0x%" PRIxPTR ")", ip);
        s += buf;
    } else if (def.is_return) {
        s += "(" + sym_text(load_ulong(record + l.ret_ip_off), sym, true) + " <- " +
             sym_text(ip, sym, false) + ")";
    } else {
        s += "(" + sym_text(ip, sym, true) + ")";
    }
    for (const auto &a : def.args) {
        s += " " + a.name + "=";
        const uint8_t *p = record + l.args_off + a.offset;
        if (!a.count) {
            print_fetch_value(s, *a.type, p, record, size, sym);
            continue;
        }
        s += '{';
        for (uint32_t j = 0; j < a.count; j++) {
            print_fetch_value(s, *a.type, p, record, size, sym);
            s += j + 1 == a.count ? '}' : ',';
            p += a.type->size;
        }
    }
    return s;
}

} // namespace dprobe
