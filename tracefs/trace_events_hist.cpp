// hist trigger parsing, the hot-path update and the text of the trigger and hist files,
// following the kernel's trace_events_hist.c function by function (parse_hist_trigger_attrs,
// parse_field, create_val_fields, create_key_field, create_sort_keys, event_hist_trigger,
// hist_trigger_print_key, hist_trigger_entry_print, event_hist_trigger_print) so that the
// accepted syntax, the limits, the error names and their carets and the printed text are
// the kernel's. Variables and expressions are parsed in hist_vars.cpp, actions in
// hist_actions.cpp.
#include "tracefs/trace_events_hist.h"

#include "dprobe/ptrace.h"

#include "core/compiler.h"
#include "core/symbols.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_synth_format.h"

#include <algorithm>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

#define C(name, text) #name,
constexpr const char *hist_names[] = {DPROBE_HIST_ERRORS};
#undef C
#define C(name, text) text,
constexpr const char *hist_texts[] = {DPROBE_HIST_ERRORS};
#undef C

constexpr size_t comm_len = 16; // TASK_COMM_LEN

bool has_prefix(std::string_view s, std::string_view p, size_t *len = nullptr)
{
    if (s.substr(0, p.size()) != p) return false;
    if (len) *len = p.size();
    return true;
}

// strsep(&s, delim) on a string_view: the token, and S past the delimiter (or null).
struct sep_view {
    std::string_view rest;
    bool null = false;
    bool next(char delim, std::string_view &tok)
    {
        if (null) return false;
        size_t i = rest.find(delim);
        if (i == std::string_view::npos) {
            tok = rest;
            null = true;
        } else {
            tok = rest.substr(0, i);
            rest.remove_prefix(i + 1);
        }
        return true;
    }
};

// kstrtoul(str, 0, &v)
bool parse_ulong(std::string_view s, unsigned long &v)
{
    unsigned long long x = 0;
    if (kstrtoull(s, 0, x)) return false;
    v = static_cast<unsigned long>(x);
    return true;
}

unsigned ilog2_roundup(unsigned long v)
{
    if (v <= 1) return 0;
    return 64u - static_cast<unsigned>(__builtin_clzl(v - 1));
}

const filter_field *find_field(std::span<const filter_field> fields, std::string_view name)
{
    for (const auto &f : fields)
        if (f.name == name) return &f;
    return nullptr;
}

hist_field_fn select_value_fn(unsigned size, bool is_signed)
{
    switch (size) {
    case 8:
        return is_signed ? hist_field_fn::S64 : hist_field_fn::U64;
    case 4:
        return is_signed ? hist_field_fn::S32 : hist_field_fn::U32;
    case 2:
        return is_signed ? hist_field_fn::S16 : hist_field_fn::U16;
    case 1:
        return is_signed ? hist_field_fn::S8 : hist_field_fn::U8;
    default:
        return hist_field_fn::NOP;
    }
}

std::string num_type(unsigned size, bool is_signed)
{
    return std::string(is_signed ? "s" : "u") + std::to_string(size * 8);
}

// ---- hot path ----

DPROBE_NOPROBE inline uint64_t load_field(const uint8_t *rec, size_t len,
                                          const hist_field &f) noexcept
{
    if (unlikely(size_t{f.rec_offset} + f.rec_size > len)) return 0;
    const uint8_t *p = rec + f.rec_offset;
    switch (f.fn) {
    case hist_field_fn::U8:
        return p[0];
    case hist_field_fn::S8:
        return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(p[0])));
    case hist_field_fn::U16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
    }
    case hist_field_fn::S16: {
        int16_t v;
        std::memcpy(&v, p, 2);
        return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case hist_field_fn::U32: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
    }
    case hist_field_fn::S32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case hist_field_fn::U64:
    case hist_field_fn::S64: {
        uint64_t v;
        std::memcpy(&v, p, 8);
        return v;
    }
    default:
        return 0;
    }
}

// The numeric value of F (hist_fn_call), with .log2 / .buckets applied.
DPROBE_NOPROBE inline uint64_t field_value(const hist_field &f, const uint8_t *rec, size_t len,
                                           const hist_hit_ctx &ctx, bool usecs) noexcept
{
    uint64_t v;
    switch (f.fn) {
    case hist_field_fn::COUNTER:
        return 1;
    case hist_field_fn::TIMESTAMP:
        v = ctx.ts;
        if (usecs && (!hist_environment.clock_in_ns || hist_environment.clock_in_ns())) v /= 1000;
        break;
    case hist_field_fn::CPU:
        v = ctx.cpu;
        break;
    default:
        v = load_field(rec, len, f);
    }
    if (f.flags & HIST_FIELD_FL_LOG2) return v ? ilog2_roundup(v) : 0;
    if (f.flags & HIST_FIELD_FL_BUCKET) return v / f.buckets * f.buckets;
    return v;
}

// A string key: at most SIZE - 1 bytes, NUL-terminated (add_to_key()).
DPROBE_NOPROBE inline void copy_str(uint8_t *dst, unsigned size, const char *s,
                                    size_t avail) noexcept
{
    size_t n = 0;
    size_t max = size ? size - 1 : 0;
    if (avail < max) max = avail;
    while (n < max && s[n]) {
        dst[n] = static_cast<uint8_t>(s[n]);
        n++;
    }
}

DPROBE_NOPROBE const char *current_comm() noexcept
{
    return hist_environment.current_comm ? hist_environment.current_comm() : fetch_current_comm();
}

DPROBE_NOPROBE void save_comm(tracing_map_elt *elt) noexcept
{
    std::memcpy(elt->private_data, current_comm(), comm_len);
    elt->private_data[comm_len - 1] = 0;
}

} // namespace

const char *get_hist_field_flags(uint32_t flags)
{
    if (flags & HIST_FIELD_FL_HEX) return "hex";
    if (flags & HIST_FIELD_FL_SYM) return "sym";
    if (flags & HIST_FIELD_FL_SYM_OFFSET) return "sym-offset";
    if (flags & HIST_FIELD_FL_EXECNAME) return "execname";
    if (flags & HIST_FIELD_FL_SYSCALL) return "syscall";
    if (flags & HIST_FIELD_FL_LOG2) return "log2";
    if (flags & HIST_FIELD_FL_BUCKET) return "buckets";
    if (flags & HIST_FIELD_FL_TIMESTAMP_USECS) return "usecs";
    if (flags & HIST_FIELD_FL_PERCENT) return "percent";
    if (flags & HIST_FIELD_FL_GRAPH) return "graph";
    return nullptr;
}

constinit hist_env hist_environment;

const char *hist_err_name(hist_err e) noexcept
{
    auto i = static_cast<size_t>(e);
    return i < std::size(hist_names) ? hist_names[i] : "NONE";
}

const char *hist_err_text(hist_err e) noexcept
{
    auto i = static_cast<size_t>(e);
    return i < std::size(hist_texts) ? hist_texts[i] : "";
}

// ---- parsing ----

unsigned hist_trigger_data::errpos(std::string_view s) const
{
    // err_pos(last_cmd, str): where STR first occurs in the command, 0 when it does not.
    if (s.empty()) return 0;
    size_t i = cmd_.find(s);
    return i == std::string::npos ? 0 : static_cast<unsigned>(i);
}

int hist_trigger_data::parse_attrs(std::string_view param, hist_error &err)
{
    sep_view sv{param};
    std::string_view str;
    while (sv.next(':', str)) {
        size_t eq = str.find('=');
        if (eq != std::string_view::npos) {
            if (eq + 1 == str.size()) {
                err = {EINVAL, hist_err::EMPTY_ASSIGNMENT, errpos(str)};
                return -EINVAL;
            }
            size_t len = 0;
            if (has_prefix(str, "key=", &len) || has_prefix(str, "keys=", &len)) {
                attrs_.keys_str = std::string(str.substr(len));
            } else if (has_prefix(str, "val=", &len) || has_prefix(str, "vals=", &len) ||
                       has_prefix(str, "values=", &len)) {
                attrs_.vals_str = std::string(str.substr(len));
            } else if (has_prefix(str, "sort=", &len)) {
                attrs_.sort_key_str = std::string(str.substr(len));
            } else if (has_prefix(str, "name=")) {
                attrs_.name = std::string(str);
            } else if (has_prefix(str, "clock=", &len)) {
                std::string_view c = str.substr(len);
                while (!c.empty() && (c.back() == ' ' || c.back() == '\t' || c.back() == '\n'))
                    c.remove_suffix(1);
                attrs_.clock = std::string(c);
            } else if (has_prefix(str, "size=", &len)) {
                unsigned long size = 0;
                if (!parse_ulong(str.substr(len), size) || !size) {
                    err = {EINVAL};
                    return -EINVAL;
                }
                unsigned bits = ilog2_roundup(size);
                if (bits < TRACING_MAP_BITS_MIN || bits > TRACING_MAP_BITS_MAX) {
                    err = {EINVAL};
                    return -EINVAL;
                }
                attrs_.map_bits = bits;
            } else {
                // A variable assignment (ts0=common_timestamp), parsed by parse_var_defs.
                if (assignments_.size() == TRACING_MAP_VARS_MAX) {
                    err = {EINVAL, hist_err::TOO_MANY_VARS, errpos(str)};
                    return -EINVAL;
                }
                assignments_.emplace_back(str);
            }
        } else if (str == "pause") {
            attrs_.pause = true;
        } else if (str == "cont" || str == "continue") {
            attrs_.cont = true;
        } else if (str == "clear") {
            attrs_.clear = true;
        } else if (action_strs_.size() < HIST_ACTIONS_MAX &&
                   (has_prefix(str, "onmatch(") || has_prefix(str, "onmax(") ||
                    has_prefix(str, "onchange("))) {
            action_strs_.emplace_back(str);
        } else {
            err = {EINVAL};
            return -EINVAL;
        }
    }
    if (attrs_.keys_str.empty()) {
        err = {EINVAL};
        return -EINVAL;
    }
    if (attrs_.clock.empty()) attrs_.clock = "global";
    return 0;
}

int hist_trigger_data::parse_field(std::string_view field_str, uint32_t flags,
                                   std::span<const filter_field> fields, hist_field &out,
                                   hist_error &err)
{
    // An atom (parse_atom has taken constants and references): a field and its modifier.
    if (field_str.empty()) {
        err = {EINVAL, hist_err::FIELD_NOT_FOUND, 0};
        return -EINVAL;
    }
    std::string_view field_name = field_str, modifier;
    bool has_mod = false;
    if (size_t dot = field_str.find('.'); dot != std::string_view::npos) {
        field_name = field_str.substr(0, dot);
        modifier = field_str.substr(dot + 1);
        has_mod = true;
    }
    unsigned long buckets = 0;
    if (has_mod) {
        if (modifier == "hex") {
            flags |= HIST_FIELD_FL_HEX;
        } else if (modifier == "sym") {
            flags |= HIST_FIELD_FL_SYM;
        } else if (modifier == "symXoffset") {
            flags |= HIST_FIELD_FL_SYM_OFFSET;
        } else if (modifier == "execname" && field_name == "common_pid") {
            flags |= HIST_FIELD_FL_EXECNAME;
        } else if (modifier == "syscall") {
            flags |= HIST_FIELD_FL_SYSCALL;
        } else if (modifier == "log2") {
            flags |= HIST_FIELD_FL_LOG2;
        } else if (modifier == "usecs") {
            flags |= HIST_FIELD_FL_TIMESTAMP_USECS;
        } else if (has_prefix(modifier, "bucket")) {
            std::string_view m = modifier.substr(6);
            if (!m.empty() && m[0] == 's') m.remove_prefix(1);
            if (m.empty() || m[0] != '=' || !parse_ulong(m.substr(1), buckets) || !buckets) {
                err = {EINVAL, hist_err::BAD_FIELD_MODIFIER, errpos(modifier)};
                return -EINVAL;
            }
            flags |= HIST_FIELD_FL_BUCKET;
        } else if (has_prefix(modifier, "percent") &&
                   !(flags & (HIST_FIELD_FL_VAR | HIST_FIELD_FL_KEY))) {
            flags |= HIST_FIELD_FL_PERCENT;
        } else if (has_prefix(modifier, "graph") &&
                   !(flags & (HIST_FIELD_FL_VAR | HIST_FIELD_FL_KEY))) {
            flags |= HIST_FIELD_FL_GRAPH;
        } else {
            err = {EINVAL, hist_err::BAD_FIELD_MODIFIER, errpos(modifier)};
            return -EINVAL;
        }
    }

    hist_field f;
    f.buckets = buckets;
    if (field_name == "common_timestamp") {
        flags |= HIST_FIELD_FL_TIMESTAMP;
        enable_timestamps_ = true;
        if (flags & HIST_FIELD_FL_TIMESTAMP_USECS) attrs_.ts_in_usecs = true;
        f.fn = hist_field_fn::TIMESTAMP;
        f.size = 8;
        f.type = "u64";
        f.name = "common_timestamp";
    } else if (field_name == "common_cpu") {
        flags |= HIST_FIELD_FL_CPU;
    } else if (field_name == "common_stacktrace" ||
               (field_name == "stacktrace" && !find_field(fields, field_name))) {
        // A variable of the hit's stack (keys take it in create_key_fields): its words are
        // saved in the entry (update_vars), for a synthetic event's stack field.
        flags |= HIST_FIELD_FL_STACKTRACE;
        f.fn = hist_field_fn::STACKTRACE;
        f.size = HIST_STACKTRACE_SIZE;
        f.type = "unsigned long[]";
        f.name = "common_stacktrace";
    } else {
        const filter_field *ff = find_field(fields, field_name);
        if (ff && ff->kind == filter_field::type::cpu) {
            flags |= HIST_FIELD_FL_CPU;
        } else if (!ff || (!ff->size && ff->kind != filter_field::type::static_string)) {
            err = {EINVAL, hist_err::FIELD_NOT_FOUND, errpos(field_name)};
            return -EINVAL;
        } else {
            f.has_field = true;
            f.name = ff->name;
            f.rec_offset = ff->offset;
            f.rec_size = ff->size;
            f.is_signed = ff->is_signed;
            switch (ff->kind) {
            case filter_field::type::static_string:
                flags |= HIST_FIELD_FL_STRING;
                f.fn = hist_field_fn::STRING;
                f.size = ff->size;
                f.type = "char[" + std::to_string(ff->size) + "]";
                if (!ff->size) {
                    // ftrace/print's `char buf[]`, read to its NUL: a key of the kernel's
                    // string size (the kernel's key of size 0 holds nothing).
                    f.size = MAX_FILTER_STR_VAL;
                    f.type = "char[]";
                }
                break;
            case filter_field::type::dyn_string:
                flags |= HIST_FIELD_FL_STRING;
                f.fn = hist_field_fn::DYNSTRING;
                f.rec_size = 4;
                f.size = MAX_FILTER_STR_VAL;
                f.type = "__data_loc char[]";
                break;
            case filter_field::type::comm:
                flags |= HIST_FIELD_FL_STRING;
                f.fn = hist_field_fn::COMM;
                f.rec_size = 0;
                f.size = comm_len;
                f.type = "char[16]";
                break;
            default:
                f.fn = select_value_fn(ff->size, ff->is_signed);
                if (f.fn == hist_field_fn::NOP) {
                    err = {EINVAL};
                    return -EINVAL;
                }
                f.size = ff->size;
                f.type = ff->name == "common_pid" ? "int" : num_type(ff->size, ff->is_signed);
            }
        }
    }
    if (flags & HIST_FIELD_FL_CPU) {
        f.fn = hist_field_fn::CPU;
        f.size = 4;
        f.type = "unsigned int";
        f.name = "common_cpu";
    }
    f.flags = flags;
    out = std::move(f);
    return 0;
}

int hist_trigger_data::create_val_fields(std::span<const filter_field> fields, hist_error &err)
{
    hist_field hc;
    hc.flags = HIST_FIELD_FL_HITCOUNT;
    hc.fn = hist_field_fn::COUNTER;
    hc.size = 8;
    hc.type = "u64";
    fields_.push_back(std::move(hc));
    n_vals_ = 1;
    if (attrs_.vals_str.empty()) return 0;

    sep_view sv{attrs_.vals_str};
    std::string_view field_str;
    for (unsigned i = 0, j = 1; i < TRACING_MAP_VALS_MAX && j < TRACING_MAP_VALS_MAX; i++) {
        if (!sv.next(',', field_str)) break;
        if (field_str == "hitcount") continue;
        hist_field f;
        unsigned n_subexprs = 0;
        if (int r = parse_expr(field_str, 0, {}, n_subexprs, fields, f, err)) return r;
        // .percent and .graph are for values only (parse_field refuses them on keys).
        constexpr uint32_t not_for_values = HIST_FIELD_FL_BUCKET | HIST_FIELD_FL_LOG2 |
                                            HIST_FIELD_FL_SYM | HIST_FIELD_FL_SYM_OFFSET |
                                            HIST_FIELD_FL_SYSCALL | HIST_FIELD_FL_STACKTRACE;
        if (f.flags & not_for_values) {
            err = {EINVAL, hist_err::BAD_FIELD_MODIFIER, errpos(field_str)};
            return -EINVAL;
        }
        // The kernel sums a string value's address; dprobe refuses it.
        if (f.flags & HIST_FIELD_FL_STRING) {
            err = {EINVAL};
            return -EINVAL;
        }
        f.size = 8;
        fields_.push_back(std::move(f));
        n_vals_++;
        j++;
    }
    if (!sv.null && sv.rest != "hitcount") {
        err = {EINVAL};
        return -EINVAL;
    }
    return 0;
}

int hist_trigger_data::create_key_fields(std::span<const filter_field> fields, hist_error &err)
{
    sep_view sv{attrs_.keys_str};
    std::string_view field_str;
    unsigned key_offset = 0;
    for (unsigned i = 0; i < TRACING_MAP_KEYS_MAX; i++) {
        if (!sv.next(',', field_str)) break;
        hist_field f;
        unsigned key_size;
        if (field_str == "stacktrace" || field_str == "common_stacktrace") {
            f.flags = HIST_FIELD_FL_KEY | HIST_FIELD_FL_STACKTRACE;
            f.fn = hist_field_fn::STACKTRACE;
            f.type = "unsigned long[]";
            key_size = HIST_STACKTRACE_SIZE;
        } else {
            unsigned n_subexprs = 0;
            if (int r = parse_expr(field_str, HIST_FIELD_FL_KEY, {}, n_subexprs, fields, f, err))
                return r;
            if (has_var_ref(f)) {
                err = {EINVAL, hist_err::INVALID_REF_KEY, errpos(field_str)};
                return -EINVAL;
            }
            key_size = f.size;
        }
        key_size = (key_size + 7) & ~7u;
        f.size = key_size;
        f.offset = key_offset;
        if (f.flags & HIST_FIELD_FL_EXECNAME) has_execname_ = true;
        key_size_ += key_size;
        if (key_size_ > HIST_KEY_SIZE_MAX) {
            err = {EINVAL};
            return -EINVAL;
        }
        fields_.push_back(std::move(f));
        n_keys_++;
        key_offset += key_size;
    }
    if (!sv.null) {
        err = {EINVAL};
        return -EINVAL;
    }
    return 0;
}

int hist_trigger_data::create_sort_keys(hist_error &err)
{
    n_sort_keys_ = 1; // hitcount, ascending
    sort_keys_[0] = {};
    if (attrs_.sort_key_str.empty()) return 0;
    sep_view sv{attrs_.sort_key_str};
    unsigned i;
    for (i = 0; i < TRACING_MAP_SORT_KEYS_MAX; i++) {
        tracing_map_sort_key &sk = sort_keys_[i];
        sk = {};
        std::string_view field_str;
        if (!sv.next(',', field_str)) break;
        if (field_str.empty()) {
            err = {EINVAL, hist_err::EMPTY_SORT_FIELD, errpos("sort=")};
            return -EINVAL;
        }
        if (i == TRACING_MAP_SORT_KEYS_MAX - 1 && !sv.null) {
            err = {EINVAL, hist_err::TOO_MANY_SORT_FIELDS, errpos("sort=")};
            return -EINVAL;
        }
        std::string_view field_name = field_str, mod;
        bool has_mod = false;
        if (size_t dot = field_str.find('.'); dot != std::string_view::npos) {
            field_name = field_str.substr(0, dot);
            mod = field_str.substr(dot + 1);
            has_mod = true;
        }
        if (field_name.empty()) {
            err = {EINVAL, hist_err::EMPTY_SORT_FIELD, errpos("sort=")};
            return -EINVAL;
        }
        auto descending = [&](bool &d) {
            d = false;
            if (!has_mod || mod == "ascending") return true;
            if (mod == "descending") {
                d = true;
                return true;
            }
            err = {EINVAL, hist_err::INVALID_SORT_MODIFIER, errpos(mod)};
            return false;
        };
        if (field_name == "hitcount") {
            if (!descending(sk.descending)) return -EINVAL;
            continue;
        }
        unsigned j;
        for (j = 1; j < fields_.size(); j++) {
            if (fields_[j].name == field_name) {
                sk.field_idx = j;
                if (!descending(sk.descending)) return -EINVAL;
                break;
            }
        }
        if (j == fields_.size()) {
            err = {EINVAL, hist_err::INVALID_SORT_FIELD, errpos(field_name)};
            return -EINVAL;
        }
    }
    n_sort_keys_ = i;
    return 0;
}

int hist_trigger_data::create(std::string_view param, std::string_view cmd,
                              std::span<const filter_field> fields,
                              std::unique_ptr<hist_trigger_data> &out, hist_error &err,
                              const hist_event_ctx *ev)
{
    err = {};
    std::unique_ptr<hist_trigger_data> hd(new hist_trigger_data);
    hd->cmd_ = std::string(cmd);
    if (ev) hd->ev_ = *ev;
    // '.sym-offset' becomes '.symXoffset' (the kernel does it to parse expressions).
    std::string p(param);
    for (size_t at = p.find(".sym-offset"); at != std::string::npos;
         at = p.find(".sym-offset", at + 11))
        p[at + 4] = 'X';
    // create_hist_data(): actions parsed, fields (values, variables, keys), sort keys; then
    // the actions are created (their variables and references) before the map is sized.
    if (int r = hd->parse_attrs(p, err)) return r;
    if (int r = hd->parse_actions(err)) return r;
    if (int r = hd->parse_var_defs(err)) return r;
    if (int r = hd->create_val_fields(fields, err)) return r;
    if (int r = hd->create_var_fields(fields, err)) return r;
    if (int r = hd->create_key_fields(fields, err)) return r;
    if (int r = hd->create_sort_keys(err)) return r;
    // A failure from here on takes back the hist triggers the actions added on other events.
    struct undo_field_var_hists {
        hist_trigger_data *hd;
        ~undo_field_var_hists()
        {
            if (hd) hd->unregister_field_var_hists();
        }
    } undo{hd.get()};
    if (!hd->ev_.remove)
        if (int r = hd->create_actions(fields, err)) return r;

    unsigned bits = hd->attrs_.map_bits ? hd->attrs_.map_bits : TRACING_MAP_BITS_DEFAULT;
    const size_t private_size = comm_len + size_t{hd->n_str_} * STR_VAR_LEN_MAX;
    if (int r = tracing_map::create(bits, hd->key_size_, private_size, hd->map_)) {
        err = {-r};
        return r;
    }
    tracing_map &m = *hd->map_;
    for (const hist_field &f : hd->fields_) {
        int idx;
        if (f.flags & HIST_FIELD_FL_KEY) {
            tracing_map_cmp_fn cmp;
            if (f.flags & HIST_FIELD_FL_STACKTRACE)
                cmp = tracing_map_cmp_none;
            else if (!f.has_field || (f.flags & HIST_FIELD_FL_CPU))
                cmp = tracing_map_cmp_num(f.size, f.is_signed);
            else if (f.flags & HIST_FIELD_FL_STRING)
                cmp = tracing_map_cmp_string;
            else
                cmp = tracing_map_cmp_num(f.rec_size, f.is_signed);
            idx = m.add_key_field(f.offset, cmp);
        } else {
            idx = m.add_sum_field();
        }
        if (idx < 0) {
            err = {EINVAL};
            return idx;
        }
    }
    for (unsigned i = 0; i < hd->n_map_vars_; i++)
        if (int r = m.add_var(); r < 0) {
            err = {EINVAL};
            return r;
        }
    if (hd->has_execname_) m.set_elt_init(save_comm);
    // Every element a hit gets has its hitcount incremented: Hits is their total.
    m.set_count_hits(false);
    if (int r = m.init()) {
        err = {-r};
        return r;
    }
    // A reference is looked up with this trigger's key in the owner's map: the key buffer
    // is cleared as far as the widest of them reads.
    hd->lookup_key_size_ = hd->key_size_;
    for (const hist_var_ref &r : hd->var_refs_)
        if (r.var_data && r.var_data != hd.get())
            hd->lookup_key_size_ = std::max(hd->lookup_key_size_, r.var_data->key_size_);
    undo.hd = nullptr;
    out = std::move(hd);
    return 0;
}

bool hist_trigger_data::same_layout(const hist_trigger_data &o) const
{
    if (n_vals_ != o.n_vals_ || fields_.size() != o.fields_.size() ||
        n_sort_keys_ != o.n_sort_keys_)
        return false;
    for (size_t i = 0; i < fields_.size(); i++) {
        const hist_field &a = fields_[i], &b = o.fields_[i];
        if (a.flags != b.flags || a.has_field != b.has_field || a.offset != b.offset ||
            a.size != b.size || a.is_signed != b.is_signed || a.buckets != b.buckets)
            return false;
        if (a.has_field && (a.name != b.name || a.rec_size != b.rec_size || a.type != b.type))
            return false;
    }
    for (unsigned i = 0; i < n_sort_keys_; i++)
        if (sort_keys_[i].field_idx != o.sort_keys_[i].field_idx ||
            sort_keys_[i].descending != o.sort_keys_[i].descending)
            return false;
    // Variables by name (the kernel compares var.name of every field) and the actions.
    if (vars_.size() != o.vars_.size()) return false;
    for (size_t i = 0; i < vars_.size(); i++)
        if (vars_[i].var_name != o.vars_[i].var_name || vars_[i].flags != o.vars_[i].flags)
            return false;
    return actions_match(o);
}

// ---- the hit (event_hist_trigger) ----

// hist_fn_call(): a field's value; a string's is the address of its bytes. ELT (may be null)
// is the element being updated (execname). Hot path.
DPROBE_NOPROBE uint64_t hist_trigger_data::value(const hist_field &f, const uint8_t *rec,
                                                 size_t len, const hist_hit_ctx &ctx,
                                                 const uint64_t *refs,
                                                 tracing_map_elt *elt) const noexcept
{
    auto operand = [&](int i) -> uint64_t {
        return value(nodes_[static_cast<size_t>(f.operands[i])], rec, len, ctx, refs, elt);
    };
    switch (f.fn) {
    case hist_field_fn::CONST:
        return f.constant;
    case hist_field_fn::VAR_REF:
        return refs ? refs[f.var_ref_idx] : 0;
    case hist_field_fn::UMINUS:
        return static_cast<uint64_t>(-static_cast<int64_t>(operand(0)));
    case hist_field_fn::MINUS:
        return operand(0) - operand(1);
    case hist_field_fn::PLUS:
        return operand(0) + operand(1);
    case hist_field_fn::MULT:
        return operand(0) * operand(1);
    case hist_field_fn::DIV: {
        uint64_t a = operand(0), b = operand(1);
        return b ? a / b : UINT64_MAX;
    }
    case hist_field_fn::STRING:
        return size_t{f.rec_offset} + f.rec_size <= len
                   ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rec + f.rec_offset))
                   : 0;
    case hist_field_fn::DYNSTRING: {
        if (size_t{f.rec_offset} + 4 > len) return 0;
        uint32_t dl;
        std::memcpy(&dl, rec + f.rec_offset, 4);
        uint32_t off = data_loc_offset(dl);
        return off < len ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(rec + off)) : 0;
    }
    case hist_field_fn::COMM:
        return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(fetch_current_comm()));
    default:
        return field_value(f, rec, len, ctx, attrs_.ts_in_usecs);
    }
}

DPROBE_NOPROBE void hist_trigger_data::hit(const uint8_t *rec, size_t len,
                                           const hist_hit_ctx &ctx) noexcept
{
    alignas(8) uint8_t key[HIST_KEY_SIZE_MAX];
    std::memset(key, 0, lookup_key_size_ > key_size_ ? lookup_key_size_ : key_size_);
    const hist_field *f = fields_.data();
    for (unsigned i = n_vals_; i < n_vals_ + n_keys_; i++) {
        const hist_field &k = f[i];
        uint8_t *dst = key + k.offset;
        switch (k.fn) {
        case hist_field_fn::STACKTRACE: {
            if (!ctx.regs || !hist_environment.stack_save) break;
            uint64_t ips[HIST_STACKTRACE_DEPTH];
            size_t n = hist_environment.stack_save(ctx.regs, ips, HIST_STACKTRACE_DEPTH);
            std::memcpy(dst, ips, n * sizeof(uint64_t));
            break;
        }
        case hist_field_fn::STRING:
            if (size_t{k.rec_offset} + k.rec_size <= len)
                copy_str(dst, k.size, reinterpret_cast<const char *>(rec + k.rec_offset),
                         k.rec_size ? k.rec_size : len - k.rec_offset);
            break;
        case hist_field_fn::DYNSTRING: {
            if (size_t{k.rec_offset} + 4 > len) break;
            uint32_t dl;
            std::memcpy(&dl, rec + k.rec_offset, 4);
            uint32_t off = data_loc_offset(dl), slen = data_loc_len(dl);
            if (slen && off < len)
                copy_str(dst, k.size, reinterpret_cast<const char *>(rec + off),
                         std::min<size_t>(slen, len - off));
            break;
        }
        case hist_field_fn::COMM:
            copy_str(dst, k.size, current_comm(), comm_len);
            break;
        default: {
            uint64_t v = value(k, rec, len, ctx, nullptr, nullptr);
            std::memcpy(dst, &v, sizeof(v));
        }
        }
    }
    // References to other events' variables: all set for this key, or no hit at all.
    uint64_t refs[TRACING_MAP_VARS_MAX];
    const bool has_refs = !var_refs_.empty();
    if (has_refs && !resolve_var_refs(key, refs, false)) return;
    tracing_map_elt *elt = map_->insert(key);
    if (unlikely(!elt)) return;
    tracing_map::update_sum(elt, HITCOUNT_IDX, 1);
    for (unsigned i = 1; i < n_vals_; i++)
        tracing_map::update_sum(elt, i, value(f[i], rec, len, ctx, refs, elt));
    if (!vars_.empty()) update_vars(elt, rec, len, ctx, refs, vars_);
    if (!field_vars_.empty()) update_vars(elt, rec, len, ctx, refs, field_vars_);
    if (!actions_.empty() && (!has_refs || resolve_var_refs(key, refs, true, elt)))
        run_actions(elt, key, rec, len, ctx, refs);
}

// ---- text ----

namespace
{

void appendf(std::string &s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string &s, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0) s.append(buf, std::min<size_t>(size_t(n), sizeof(buf) - 1));
}

// %ps: the symbol without offset; %pS: "sym+0xoff/0xsize" (sprint_symbol).
std::string sym_text(uint64_t addr, bool offset)
{
    char buf[256];
    if (hist_environment.symbolize)
        hist_environment.symbolize(buf, sizeof(buf), static_cast<uintptr_t>(addr));
    else
        sprint_symbol(buf, sizeof(buf), static_cast<uintptr_t>(addr), false);
    std::string s = buf;
    if (!offset && s.compare(0, 2, "0x") != 0) {
        size_t plus = s.find('+');
        if (plus != std::string::npos) s.resize(plus);
    }
    return s;
}

// __get_percentage(): 100 times the percentage of VAL in TOTAL.
unsigned get_percentage(uint64_t val, uint64_t total)
{
    if (!total) return val ? UINT_MAX : 0;
    if (val < UINT64_MAX / 10000) return static_cast<unsigned>(val * 10000 / total);
    total /= 10000;
    if (!total) return val ? UINT_MAX : 0;
    return static_cast<unsigned>(val / total);
}

std::string fill_bar(int size, uint64_t val, uint64_t max)
{
    unsigned len = get_percentage(val, max);
    if (len == UINT_MAX) return "[ERROR]";
    len = len * static_cast<unsigned>(size) / 10000;
    std::string s;
    int i;
    for (i = 0; i < static_cast<int>(len) && i < size; i++)
        s += '#';
    while (i++ < size)
        s += ' ';
    return s;
}

} // namespace

// hist_field_print()
void hist_trigger_data::print_field(std::string &s, const hist_field &f) const
{
    if (!f.var_name.empty()) s += f.var_name + "=";
    if (f.flags & HIST_FIELD_FL_CPU) {
        s += "common_cpu";
    } else if (f.flags & HIST_FIELD_FL_CONST) {
        s += std::to_string(f.constant);
    } else {
        if (f.flags & (HIST_FIELD_FL_VAR_REF | HIST_FIELD_FL_ALIAS)) s += '$';
        if ((f.flags & HIST_FIELD_FL_VAR_REF) && !f.system.empty())
            s += f.system + "." + f.event_name + ".";
        s += f.name;
    }
    if (!(f.flags & (HIST_FIELD_FL_VAR_REF | HIST_FIELD_FL_EXPR)))
        if (const char *fl = get_hist_field_flags(f.flags)) {
            s += '.';
            s += fl;
        }
    if (f.buckets) appendf(s, "=%ld", static_cast<long>(f.buckets));
}

void hist_trigger_data::field_text(std::string &s, const hist_field &f) const
{
    print_field(s, f);
}

std::string hist_trigger_data::print_spec(std::string_view name) const
{
    std::string s = "hist:";
    if (!name.empty()) {
        s += name;
        s += ':';
    }
    s += "keys=";
    for (unsigned i = n_vals_; i < fields_.size(); i++) {
        if (i > n_vals_) s += ',';
        if (fields_[i].flags & HIST_FIELD_FL_STACKTRACE)
            s += "common_stacktrace";
        else
            print_field(s, fields_[i]);
    }
    s += ":vals=";
    for (unsigned i = 0; i < n_vals_; i++) {
        if (i == HITCOUNT_IDX) {
            s += "hitcount";
        } else {
            s += ',';
            print_field(s, fields_[i]);
        }
    }
    // The variables, after the values (the kernel keeps them among the val fields).
    for (size_t i = 0; i < vars_.size(); i++) {
        s += i ? "," : ":";
        print_field(s, vars_[i]);
    }
    s += ":sort=";
    for (unsigned i = 0; i < n_sort_keys_; i++) {
        if (i > 0) s += ',';
        unsigned idx = sort_keys_[i].field_idx;
        if (idx == HITCOUNT_IDX)
            s += "hitcount";
        else
            print_field(s, fields_[idx]);
        if (sort_keys_[i].descending) s += ".descending";
    }
    appendf(s, ":size=%u", 1u << map_->map_bits());
    if (enable_timestamps_) s += ":clock=" + attrs_.clock;
    print_actions_spec(s);
    return s;
}

void hist_trigger_data::print_key(std::string &s, const uint8_t *key,
                                  const tracing_map_elt *elt) const
{
    bool multiline = false;
    s += "{ ";
    for (unsigned i = n_vals_; i < fields_.size(); i++) {
        const hist_field &k = fields_[i];
        if (i > n_vals_) s += ", ";
        const char *name = k.name.c_str();
        uint64_t uval;
        std::memcpy(&uval, key + k.offset, sizeof(uval));
        const auto ull = static_cast<unsigned long long>(uval);
        if (k.flags & HIST_FIELD_FL_HEX) {
            appendf(s, "%s: %llx", name, ull);
        } else if (k.flags & HIST_FIELD_FL_SYM) {
            appendf(s, "%s: [%llx] %-45s", name, ull, sym_text(uval, false).c_str());
        } else if (k.flags & HIST_FIELD_FL_SYM_OFFSET) {
            appendf(s, "%s: [%llx] %-55s", name, ull, sym_text(uval, true).c_str());
        } else if (k.flags & HIST_FIELD_FL_EXECNAME) {
            char comm[comm_len + 1] = {};
            std::memcpy(comm, elt->private_data, comm_len);
            // The key holds common_pid, sign-extended from its s32 like the kernel's.
            appendf(s, "%s: %-16s[%10llu]", name, comm, ull);
        } else if (k.flags & HIST_FIELD_FL_SYSCALL) {
            const char *sc = hist_syscall_name(uval);
            appendf(s, "%s: %-30s[%3llu]", name, sc ? sc : "unknown_syscall", ull);
        } else if (k.flags & HIST_FIELD_FL_STACKTRACE) {
            s += "common_stacktrace:\n";
            for (unsigned j = 0; j < HIST_STACKTRACE_DEPTH; j++) {
                uint64_t ip;
                std::memcpy(&ip, key + k.offset + j * 8, 8);
                if (!ip) break;
                s += "         ";
                s += sym_text(ip, true);
                s += '\n';
            }
            multiline = true;
        } else if (k.flags & HIST_FIELD_FL_LOG2) {
            appendf(s, "%s: ~ 2^%-2llu", name, ull);
        } else if (k.flags & HIST_FIELD_FL_BUCKET) {
            appendf(s, "%s: ~ %llu-%llu", name, ull, ull + k.buckets - 1);
        } else if (k.flags & HIST_FIELD_FL_STRING) {
            char str[MAX_FILTER_STR_VAL + 1] = {};
            std::memcpy(str, key + k.offset, std::min<size_t>(k.size, MAX_FILTER_STR_VAL));
            appendf(s, "%s: %-50s", name, str);
        } else {
            appendf(s, "%s: %10llu", name, ull);
        }
    }
    if (!multiline) s += ' ';
    s += '}';
}

std::string hist_trigger_data::show() const
{
    std::string s;
    std::vector<const tracing_map_elt *> entries =
        map_->sort_entries(std::span<const tracing_map_sort_key>(sort_keys_, n_sort_keys_));
    struct stat {
        uint64_t max = 0, total = 0;
    };
    std::vector<stat> stats(n_vals_);
    for (unsigned j = 0; j < n_vals_; j++) {
        if (!(fields_[j].flags & (HIST_FIELD_FL_PERCENT | HIST_FIELD_FL_GRAPH))) continue;
        for (const tracing_map_elt *e : entries) {
            uint64_t v = tracing_map::read_sum(e, j);
            stats[j].total += v;
            if (stats[j].max < v) stats[j].max = v;
        }
    }
    auto print_val = [&](unsigned idx, const char *name, uint32_t flags, const tracing_map_elt *e) {
        uint64_t val = tracing_map::read_sum(e, idx);
        const auto ull = static_cast<unsigned long long>(val);
        if (flags & HIST_FIELD_FL_PERCENT) {
            unsigned pc = get_percentage(val, stats[idx].total);
            if (pc == UINT_MAX)
                appendf(s, " %s (%%):[ERROR]", name);
            else
                appendf(s, " %s (%%): %3u.%02u", name, pc / 100, pc % 100);
        } else if (flags & HIST_FIELD_FL_GRAPH) {
            appendf(s, " %s: %20s", name, fill_bar(20, val, stats[idx].max).c_str());
        } else if (flags & HIST_FIELD_FL_HEX) {
            appendf(s, " %s: %10llx", name, ull);
        } else {
            appendf(s, " %s: %10llu", name, ull);
        }
    };
    for (const tracing_map_elt *e : entries) {
        print_key(s, e->key, e);
        print_val(HITCOUNT_IDX, "hitcount", 0, e);
        for (unsigned i = 1; i < n_vals_; i++) {
            if (fields_[i].flags & HIST_FIELD_FL_EXPR) continue; // not printed, as the kernel
            s += ' ';
            print_val(i, fields_[i].name.c_str(), fields_[i].flags, e);
        }
        print_actions(s, e);
        s += '\n';
    }
    print_snapshot(s);
    uint64_t hits = 0;
    for (const tracing_map_elt *e : entries)
        hits += tracing_map::read_sum(e, HITCOUNT_IDX);
    appendf(s, "\nTotals:\n    Hits: %llu\n    Entries: %u\n    Dropped: %llu\n",
            static_cast<unsigned long long>(hits), static_cast<unsigned>(entries.size()),
            static_cast<unsigned long long>(map_->drops()));
    return s;
}

void hist_trigger_data::debug_field(std::string &s, const hist_field &f) const
{
    s += "      flags:\n";
    if (f.flags & HIST_FIELD_FL_KEY)
        s += "        HIST_FIELD_FL_KEY\n";
    else if (f.flags & HIST_FIELD_FL_HITCOUNT)
        s += "        VAL: HIST_FIELD_FL_HITCOUNT\n";
    else if (f.flags & HIST_FIELD_FL_VAR)
        s += "        HIST_FIELD_FL_VAR\n";
    else if (f.flags & HIST_FIELD_FL_VAR_REF)
        s += "        HIST_FIELD_FL_VAR_REF\n";
    else
        s += "        VAL: normal u64 value\n";
    if (f.flags & HIST_FIELD_FL_ALIAS)
        s += "        HIST_FIELD_FL_ALIAS\n";
    else if (f.flags & HIST_FIELD_FL_CONST)
        s += "        HIST_FIELD_FL_CONST\n";
    if (f.has_field) appendf(s, "      ftrace_event_field name: %s\n", f.name.c_str());
    if (f.flags & HIST_FIELD_FL_VAR) {
        appendf(s, "      var.name: %s\n", f.var_name.c_str());
        appendf(s, "      var.idx (into tracing_map_elt.vars[]): %d\n", f.var_idx);
    }
    if (f.flags & HIST_FIELD_FL_CONST)
        appendf(s, "      constant: %llu\n", static_cast<unsigned long long>(f.constant));
    if (f.flags & HIST_FIELD_FL_VAR_REF) {
        const hist_var_ref &r = var_refs_[f.var_ref_idx];
        appendf(s, "      name: %s\n", f.name.c_str());
        appendf(s, "      var.idx (into tracing_map_elt.vars[]): %u\n", r.var_idx);
        appendf(s, "      var.hist_data: %p\n", static_cast<const void *>(r.var_data));
        appendf(s, "      var_ref_idx (into hist_data->var_refs[]): %u\n", f.var_ref_idx);
        if (!f.system.empty()) appendf(s, "      system: %s\n", f.system.c_str());
        if (!f.event_name.empty()) appendf(s, "      event_name: %s\n", f.event_name.c_str());
    }
    appendf(s, "      type: %s\n", f.type.c_str());
    appendf(s, "      size: %u\n", f.size);
    appendf(s, "      is_signed: %u\n", f.is_signed ? 1u : 0u);
}

std::string hist_trigger_data::debug_show() const
{
    std::string s;
    const unsigned n_vals = n_vals_ + static_cast<unsigned>(vars_.size());
    appendf(s, "hist_data: %p\n\n", static_cast<const void *>(this));
    appendf(s, "  n_vals: %u\n", n_vals);
    appendf(s, "  n_keys: %u\n", n_keys_);
    appendf(s, "  n_fields: %u\n", n_vals + n_keys_);
    auto field = [&](const hist_field &f) { debug_field(s, f); };
    s += "\n  val fields:\n\n";
    s += "    hist_data->fields[0]:\n";
    field(fields_[0]);
    unsigned idx = 1;
    for (unsigned i = 1; i < n_vals_; i++) {
        appendf(s, "\n    hist_data->fields[%u]:\n", idx++);
        field(fields_[i]);
    }
    for (const hist_field &v : vars_) {
        appendf(s, "\n    hist_data->fields[%u]:\n", idx++);
        field(v);
    }
    s += "\n  key fields:\n";
    for (unsigned i = n_vals_; i < fields_.size(); i++) {
        appendf(s, "\n    hist_data->fields[%u]:\n", idx++);
        field(fields_[i]);
    }
    if (!var_refs_.empty()) s += "\n  variable reference fields:\n";
    for (size_t i = 0; i < var_refs_.size(); i++) {
        appendf(s, "\n    hist_data->var_refs[%zu]:\n", i);
        field(var_refs_[i].field);
    }
    // field_var_debug_show()
    auto field_var = [&](const hist_field &v, size_t i, const char *what) {
        appendf(s, "\n    hist_data->%s[%zu]:\n", what, i);
        appendf(s, "\n      %s[%zu].var:\n", what, i);
        s += "      flags:\n        HIST_FIELD_FL_VAR\n";
        appendf(s, "      var.name: %s\n", v.var_name.c_str());
        appendf(s, "      var.idx (into tracing_map_elt.vars[]): %d\n", v.var_idx);
        appendf(s, "\n      %s[%zu].val:\n", what, i);
        appendf(s, "      ftrace_event_field name: %s\n", v.name.c_str());
        appendf(s, "      type: %s\n", v.type.c_str());
        appendf(s, "      size: %u\n", v.size);
        appendf(s, "      is_signed: %u\n", v.is_signed ? 1u : 0u);
    };
    if (!field_vars_.empty()) s += "\n  field variables:\n";
    for (size_t i = 0; i < field_vars_.size(); i++)
        field_var(field_vars_[i], i, "field_vars");
    // hist_actions_debug_show()
    if (!actions_.empty())
        s += "\n  action tracking variables (for onmax()/onchange()/onmatch()):\n";
    for (size_t i = 0; i < actions_.size(); i++) {
        const hist_action &a = actions_[i];
        if (a.handler == hist_action::handler_id::ONMATCH) {
            appendf(s, "\n    hist_data->actions[%zu].match_data.event_system: %s\n", i,
                    a.match_system.c_str());
            appendf(s, "    hist_data->actions[%zu].match_data.event: %s\n", i,
                    a.match_event.c_str());
            continue;
        }
        appendf(s, "\n    hist_data->actions[%zu].track_data.var_ref:\n", i);
        field(var_refs_[a.track_ref].field);
        appendf(s, "\n    hist_data->actions[%zu].track_data.track_var:\n", i);
        field(a.track_var);
    }
    if (!save_vars_.empty()) s += "\n  save action variables (save() params):\n";
    for (size_t i = 0; i < save_vars_.size(); i++)
        field_var(save_vars_[i], i, "save_vars");
    return s;
}

} // namespace dprobe
