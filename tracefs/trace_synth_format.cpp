// Synthetic events' grammar, layout and text, following the kernel's trace_events_synth.c
// (create_or_delete_synth_event, create_synth_event, __create_synth_event,
// parse_synth_field, synth_field_size, synth_field_fmt, __set_synth_event_print_fmt,
// print_synth_event, __synth_event_show) so that the accepted commands, the errors and their
// carets, the format file and the printed text are the kernel's.
#include "tracefs/trace_synth_format.h"

#include "tracefs/event_format.h"
#include "tracefs/probe_types.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

#define C(name, text) text,
constexpr const char *synth_texts[] = {DPROBE_SYNTH_ERRORS};
#undef C

bool good_name(std::string_view s)
{
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (s.empty() || (!alpha(s[0]) && s[0] != '_')) return false;
    for (char c : s.substr(1))
        if (!alpha(c) && !(c >= '0' && c <= '9') && c != '_') return false;
    return true;
}

std::vector<std::string_view> split_blanks(std::string_view s)
{
    std::vector<std::string_view> v;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n'))
            i++;
        size_t j = i;
        while (j < s.size() && s[j] != ' ' && s[j] != '\t' && s[j] != '\n')
            j++;
        if (j > i) v.push_back(s.substr(i, j - i));
        i = j;
    }
    return v;
}

bool is_string_type(std::string_view t)
{
    return t.find("char[") != std::string_view::npos;
}
bool is_stack_type(std::string_view t)
{
    return t.find("long[") != std::string_view::npos;
}

// synth_field_string_size(): N of "char[N]", 0 for "char[]", -EINVAL when malformed.
int string_size(std::string_view type)
{
    size_t start = type.find("char[");
    if (start == std::string_view::npos) return -EINVAL;
    start += 5;
    size_t end = type.find(']');
    if (end == std::string_view::npos || end < start || end + 1 != type.size()) return -EINVAL;
    size_t len = end - start;
    if (len > 3) return -EINVAL;
    if (len == 0) return 0;
    unsigned long long v = 0;
    if (kstrtoull(type.substr(start, len), 0, v)) return -EINVAL;
    if (v > STR_VAR_LEN_MAX) return -EINVAL;
    return static_cast<int>(v);
}

// synth_field_size(): 0 for an unknown type (and for "char[]" and stacks).
int field_size(std::string_view t)
{
    static const struct {
        const char *name;
        int size;
    } sizes[] = {{"s64", 8},  {"u64", 8},           {"s32", 4},  {"u32", 4},
                 {"s16", 2},  {"u16", 2},           {"s8", 1},   {"u8", 1},
                 {"char", 1}, {"unsigned char", 1}, {"int", 4},  {"unsigned int", 4},
                 {"long", 8}, {"unsigned long", 8}, {"bool", 1}, {"pid_t", 4},
                 {"gfp_t", 4}};
    for (const auto &s : sizes)
        if (t == s.name) return s.size;
    if (is_string_type(t)) return string_size(t);
    return 0;
}

const char *field_fmt(std::string_view t)
{
    static const struct {
        const char *name, *fmt;
    } fmts[] = {{"s64", "%lld"}, {"u64", "%llu"},
                {"s32", "%d"},   {"u32", "%u"},
                {"s16", "%d"},   {"u16", "%u"},
                {"s8", "%d"},    {"u8", "%u"},
                {"char", "%d"},  {"unsigned char", "%u"},
                {"int", "%d"},   {"unsigned int", "%u"},
                {"long", "%ld"}, {"unsigned long", "%lu"},
                {"bool", "%d"},  {"pid_t", "%d"},
                {"gfp_t", "%x"}};
    for (const auto &f : fmts)
        if (t == f.name) return f.fmt;
    if (is_string_type(t)) return "%.*s";
    if (is_stack_type(t)) return "%s";
    return "%llu";
}

// synth_field_signed()
bool field_signed(std::string_view t)
{
    if (!t.empty() && t[0] == 'u') return false;
    return t != "gfp_t";
}

struct parser {
    std::string_view cmd; // the kernel's last_cmd
    synth_error &err;
    unsigned errpos(std::string_view s) const
    {
        if (s.empty()) return 0;
        size_t i = cmd.find(s);
        return i == std::string_view::npos ? 0 : static_cast<unsigned>(i);
    }
    int fail(synth_err e, unsigned pos, int errnum = EINVAL)
    {
        err = {errnum, true, e, pos};
        return -errnum;
    }

    // parse_synth_field(): one "TYPE NAME" (or "unsigned TYPE NAME") from ARGV at *CONSUMED.
    int field(std::span<const std::string_view> argv, size_t &consumed, probe_arg &out)
    {
        std::string_view type = argv[0], name;
        std::string prefix;
        if (type == "unsigned") {
            if (argv.size() < 3) return fail(synth_err::INCOMPLETE_TYPE, errpos(type));
            prefix = "unsigned ";
            type = argv[1];
            name = argv[2];
            consumed += 3;
        } else {
            if (argv.size() < 2) return fail(synth_err::INVALID_FIELD, errpos(type));
            name = argv[1];
            consumed += 2;
        }
        std::string_view array;
        std::string_view bare = name;
        if (size_t br = name.find('['); br != std::string_view::npos) {
            array = name.substr(br);
            bare = name.substr(0, br);
        }
        if (!good_name(bare)) return fail(synth_err::BAD_NAME, errpos(name));
        std::string full = prefix + std::string(type) + std::string(array);
        int size = field_size(full);
        bool dynamic = false;
        if (size < 0) {
            if (!array.empty()) return fail(synth_err::INVALID_ARRAY_SPEC, errpos(name));
            return fail(synth_err::INVALID_TYPE, errpos(type));
        }
        if (size == 0) {
            // Only strings and stacks may have no size: a dynamic string, a stack trace.
            if (!is_string_type(full) && !is_stack_type(full))
                return fail(synth_err::INVALID_TYPE, errpos(type));
            full = "__data_loc " + full;
            dynamic = true;
            size = 8;
        }
        out = probe_arg{};
        out.name = std::string(bare);
        out.type_text = full;
        out.dynamic = dynamic;
        out.fmt = field_fmt(dynamic ? std::string_view(full).substr(11) : std::string_view(full));
        const bool str = is_string_type(full);
        out.type = &fetch_type_of(str         ? fetch_type_id::string
                                  : size == 8 ? fetch_type_id::u64
                                  : size == 4 ? fetch_type_id::u32
                                  : size == 2 ? fetch_type_id::u16
                                              : fetch_type_id::u8);
        out.prog.field_size = static_cast<uint16_t>(size);
        return 0;
    }

    // __create_synth_event()
    int create(std::string_view name, std::string_view raw_fields, bool (*exists)(std::string_view),
               probe_definition &def)
    {
        if (name.empty()) return fail(synth_err::INVALID_CMD, 0);
        if (!good_name(name)) return fail(synth_err::BAD_NAME, errpos(name));
        if (exists && exists(name)) return fail(synth_err::EVENT_EXISTS, errpos(name), EEXIST);
        std::vector<probe_arg> fields;
        std::string_view rest = raw_fields;
        for (;;) {
            size_t semi = rest.find(';');
            std::string_view field_str = rest.substr(0, semi);
            std::vector<std::string_view> argv = split_blanks(field_str);
            size_t consumed = 0;
            while (argv.size() > consumed) {
                probe_arg a;
                if (int r = field(std::span(argv).subspan(consumed), consumed, a)) return r;
                if (fields.size() == SYNTH_FIELDS_MAX) return fail(synth_err::TOO_MANY_FIELDS, 0);
                fields.push_back(std::move(a));
            }
            if (consumed < argv.size()) return fail(synth_err::INVALID_CMD, 0);
            if (semi == std::string_view::npos) break;
            rest = rest.substr(semi + 1);
        }
        if (fields.empty()) return fail(synth_err::INVALID_CMD, 0);
        // synth_event_define_fields(): one u64 slot each, STR_VAR_LEN_MAX for a static string.
        uint32_t off = 0;
        for (probe_arg &a : fields) {
            a.offset = off;
            off += is_string_type(a.type_text) && !a.dynamic ? STR_VAR_LEN_MAX : 8;
        }
        def = probe_definition{};
        def.kind = probe_kind::synth;
        def.group = SYNTH_SYSTEM;
        def.event = std::string(name);
        def.args = std::move(fields);
        def.args_size = off;
        return 0;
    }
};

// check_command(): the first field group has a name and a whole field (3 words), or "!".
bool command_ok(std::string_view raw)
{
    std::string_view first = raw.substr(0, raw.find(';'));
    if (!first.empty() && first[0] == '!') return true;
    return split_blanks(first).size() >= 3;
}

std::string_view skip_spaces(std::string_view s)
{
    while (!s.empty() && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n'))
        s.remove_prefix(1);
    return s;
}

} // namespace

const char *synth_err_text(synth_err e) noexcept
{
    auto i = static_cast<size_t>(e);
    return i < std::size(synth_texts) ? synth_texts[i] : "";
}

int parse_synth_events_line(std::string_view raw, bool (*exists)(std::string_view),
                            synth_command &out, synth_error &err)
{
    err = {};
    out = synth_command{};
    raw = skip_spaces(raw);
    if (raw.empty()) return 0;
    parser p{raw, err};
    if (!command_ok(raw)) return p.fail(synth_err::INVALID_CMD, 0);
    size_t sp = raw.find_first_of(" \t");
    if (sp == std::string_view::npos && raw[0] != '!') return p.fail(synth_err::INVALID_CMD, 0);
    std::string_view name = raw.substr(0, sp);
    if (name[0] == '!') {
        out.kind = synth_command::type::remove;
        out.name = std::string(name.substr(1));
        return 0;
    }
    out.kind = synth_command::type::create;
    return p.create(name, skip_spaces(raw.substr(sp)), exists, out.def);
}

int parse_synth_dynevent(std::string_view raw, bool (*exists)(std::string_view), synth_command &out,
                         synth_error &err)
{
    err = {};
    out = synth_command{};
    raw = skip_spaces(raw);
    if (raw.empty()) return 0;
    if (raw.size() < 2 || raw[0] != 's' || raw[1] != ':') return -ECANCELED;
    parser p{raw, err};
    std::string_view name = raw.substr(2);
    size_t sp = raw.find_first_of(" \t");
    if (sp == std::string_view::npos) return p.fail(synth_err::INVALID_CMD, 0);
    std::string_view fields = skip_spaces(raw.substr(sp));
    if (name.substr(0, name.find_first_of(" \t")).find('/') != std::string_view::npos) {
        constexpr std::string_view sys = "synthetic/";
        if (name.substr(0, sys.size()) != sys) return p.fail(synth_err::INVALID_DYN_CMD, 0);
        name.remove_prefix(sys.size());
    }
    const size_t len = static_cast<size_t>(name.data() - raw.data());
    if (!command_ok(raw.substr(len))) return p.fail(synth_err::INVALID_CMD, 0);
    out.kind = synth_command::type::create;
    return p.create(raw.substr(len, sp - len), fields, exists, out.def);
}

size_t synth_fixed_size(const probe_definition &def)
{
    return TRACE_ENTRY_HEADER_SIZE + def.args_size;
}

synth_field_info synth_field_of(const probe_arg &a)
{
    synth_field_info f;
    f.type = a.type_text;
    f.size = a.prog.field_size;
    f.is_string = is_string_type(a.type_text);
    f.is_stack = !f.is_string && is_stack_type(a.type_text);
    f.is_dynamic = a.dynamic;
    f.is_signed = field_signed(a.type_text);
    return f;
}

std::string synth_print_fmt(const probe_definition &def)
{
    std::string s = "\"";
    for (size_t i = 0; i < def.args.size(); i++) {
        const probe_arg &a = def.args[i];
        s += a.name + "=" + a.fmt + (i + 1 == def.args.size() ? "" : ", ");
    }
    s += "\"";
    for (const probe_arg &a : def.args) {
        if (a.dynamic && is_stack_type(a.type_text))
            s += ", __get_stacktrace(" + a.name + ")";
        else if (a.dynamic)
            s += ", __get_str(" + a.name + ")";
        else
            s += ", REC->" + a.name;
    }
    return s;
}

std::string synth_format_file(const probe_definition &def, int id)
{
    std::string s = "name: " + def.event + "\nID: " + std::to_string(id) + "\nformat:\n";
    auto line = [&](const std::string &type, const std::string &name, size_t off, size_t size,
                    bool is_signed) {
        // A static string's type "char[16]" is printed "char name[16]", as the kernel's
        // f_show() prints array fields.
        std::string t = type, n = name;
        if (!t.starts_with("__data_loc"))
            if (size_t br = t.find('['); br != std::string::npos) {
                n += t.substr(br);
                t.resize(br);
            }
        char buf[96];
        std::snprintf(buf, sizeof buf, ";\toffset:%zu;\tsize:%zu;\tsigned:%d;\n", off, size,
                      is_signed ? 1 : 0);
        s += "\tfield:" + t + " " + n + buf;
    };
    line("unsigned short", "common_type", 0, 2, false);
    line("unsigned char", "common_flags", 2, 1, false);
    line("unsigned char", "common_preempt_count", 3, 1, false);
    line("int", "common_pid", 4, 4, true);
    s += "\n";
    for (const probe_arg &a : def.args) {
        synth_field_info f = synth_field_of(a);
        line(a.type_text, a.name, TRACE_ENTRY_HEADER_SIZE + a.offset, f.size, f.is_signed);
    }
    s += "\nprint fmt: " + synth_print_fmt(def) + "\n";
    return s;
}

std::string synth_format_record(const probe_definition &def, const uint8_t *rec, size_t size,
                                symbolize_fn sym)
{
    std::string s = def.event + ": ";
    if (size < synth_fixed_size(def)) return s + "(truncated record)";
    char buf[64];
    for (size_t i = 0; i < def.args.size(); i++) {
        const probe_arg &a = def.args[i];
        synth_field_info f = synth_field_of(a);
        const uint8_t *p = rec + TRACE_ENTRY_HEADER_SIZE + a.offset;
        const char *space = i + 1 == def.args.size() ? "" : " ";
        s += a.name + "=";
        if (f.is_stack) {
            // The words after the first (their count), as the kernel's print_synth_event.
            uint32_t dl;
            std::memcpy(&dl, p, 4);
            const size_t off = dl & 0xffff, len = dl >> 16;
            s += "STACK:\n";
            for (size_t w = 1; off + (w + 1) * 8 <= size && (w + 1) * 8 <= len; w++) {
                uint64_t ip;
                std::memcpy(&ip, rec + off + w * 8, 8);
                char b[512];
                if (sym)
                    sym(b, sizeof b, static_cast<uintptr_t>(ip));
                else
                    std::snprintf(b, sizeof b, "0x%" PRIx64, ip);
                s += "=> ";
                s += b;
                s += '\n';
            }
            continue;
        }
        if (f.is_string) {
            const char *str = reinterpret_cast<const char *>(p);
            size_t max = STR_VAR_LEN_MAX;
            if (f.is_dynamic) {
                uint32_t dl;
                std::memcpy(&dl, p, 4);
                size_t off = dl & 0xffff;
                str = off < size ? reinterpret_cast<const char *>(rec + off) : "";
                max = off < size ? size - off : 0;
            } else {
                max = std::min<size_t>(max, size - (p - rec));
            }
            s.append(str, strnlen(str, max));
            s += space;
            continue;
        }
        uint64_t v = 0;
        std::memcpy(&v, p, f.size);
        if (f.is_signed) {
            // Sign-extend from the field's size, as the kernel's casts do before printing.
            unsigned shift = 64 - 8 * f.size;
            v = static_cast<uint64_t>(static_cast<int64_t>(v << shift) >> shift);
        }
        const std::string_view fmt = a.fmt;
        if (fmt == "%x")
            std::snprintf(buf, sizeof buf, "%x", static_cast<unsigned>(v));
        else if (fmt == "%lld" || fmt == "%ld" || fmt == "%d")
            std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<int64_t>(v));
        else
            std::snprintf(buf, sizeof buf, "%" PRIu64, v);
        s += buf;
        s += space;
    }
    return s;
}

std::string synth_show(const probe_definition &def)
{
    std::string s = def.event + "\t";
    for (size_t i = 0; i < def.args.size(); i++) {
        const probe_arg &a = def.args[i];
        std::string_view t = a.type_text;
        if (t.starts_with("__data_loc ")) t.remove_prefix(11);
        s += std::string(t) + " " + a.name + (i + 1 == def.args.size() ? "" : "; ");
    }
    return s;
}

std::vector<filter_field> synth_filter_fields(const probe_definition &def)
{
    using t = filter_field::type;
    std::vector<filter_field> v;
    for (const probe_arg &a : def.args) {
        synth_field_info f = synth_field_of(a);
        filter_field ff;
        ff.name = a.name;
        ff.offset = static_cast<uint16_t>(TRACE_ENTRY_HEADER_SIZE + a.offset);
        ff.size = static_cast<uint16_t>(f.is_dynamic ? 4 : f.size);
        ff.is_signed = f.is_signed;
        // A stack is its __data_loc word to a filter, as the kernel's FILTER_OTHER field.
        ff.kind = f.is_stack     ? t::number
                  : f.is_dynamic ? t::dyn_string
                  : f.is_string  ? t::static_string
                                 : t::number;
        v.push_back(std::move(ff));
    }
    v.push_back({"CPU", t::cpu, 0, 4, true});
    v.push_back({"cpu", t::cpu, 0, 4, true});
    v.push_back({"COMM", t::comm, 0, 16, false});
    v.push_back({"comm", t::comm, 0, 16, false});
    v.push_back({"common_type", t::number, 0, 2, false});
    v.push_back({"common_flags", t::number, 2, 1, false});
    v.push_back({"common_preempt_count", t::number, 3, 1, false});
    v.push_back({"common_pid", t::number, 4, 4, true});
    return v;
}

} // namespace dprobe
