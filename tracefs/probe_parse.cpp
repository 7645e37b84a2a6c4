// Per-kind command parsers: kprobe (p/r on symbols and addresses), fprobe (f) and
// uprobe-style (p/r on path:offset) lines, deletion requests, listing and append rules.
#include "tracefs/probe_parse.h"

#include "tracefs/event_filter.h"
#include "tracefs/event_format.h"

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <sys/stat.h>

namespace dprobe
{
namespace
{

constexpr int ECANCELED_NOT_MINE = ECANCELED;

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}
bool is_alpha(char c)
{
    return std::isalpha(static_cast<unsigned char>(c)) != 0;
}
bool is_alnum(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

bool is_good_name(std::string_view s)
{
    if (s.empty() || (!is_alpha(s[0]) && s[0] != '_')) return false;
    for (char c : s.substr(1))
        if (!is_alnum(c) && c != '_') return false;
    return true;
}

bool is_good_system_name(std::string_view s)
{
    if (s.empty() || (!is_alpha(s[0]) && s[0] != '_' && s[0] != '-')) return false;
    for (char c : s.substr(1))
        if (!is_alnum(c) && c != '_' && c != '-') return false;
    return true;
}

probe_error not_mine()
{
    return probe_error::plain(ECANCELED_NOT_MINE);
}

probe_error perr(probe_err e, int index, int offset, int errnum = EINVAL)
{
    return probe_error::make(e, index, offset, errnum);
}

std::string hex_padded(uint64_t v)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
    return buf;
}

std::string hex(uint64_t v)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
    return buf;
}

// The kernel's traceprobe_parse_event_name(): TEXT is what follows the first ':' of argv[0],
// found at OFFSET. An empty event after a separator means "generate one".
probe_error parse_event_name(std::string_view text, int offset, std::string &group,
                             std::string &event)
{
    size_t sep = text.find('/');
    if (sep == std::string_view::npos) sep = text.find('.');
    std::string_view ev = text;
    if (sep != std::string_view::npos) {
        if (sep == 0) return perr(probe_err::NO_GROUP_NAME, 0, offset);
        if (sep + 1 > static_cast<size_t>(MAX_EVENT_NAME_LEN))
            return perr(probe_err::GROUP_TOO_LONG, 0, offset);
        std::string_view grp = text.substr(0, sep);
        if (!is_good_system_name(grp)) return perr(probe_err::BAD_GROUP_NAME, 0, offset);
        group = std::string(grp);
        ev = text.substr(sep + 1);
        offset += static_cast<int>(sep + 1);
    }
    if (ev.empty()) {
        if (sep != std::string_view::npos) return {};
        return perr(probe_err::NO_EVENT_NAME, 0, offset);
    }
    if (ev.size() >= static_cast<size_t>(MAX_EVENT_NAME_LEN))
        return perr(probe_err::EVENT_TOO_LONG, 0, offset);
    if (!is_good_name(ev)) return perr(probe_err::BAD_EVENT_NAME, 0, offset);
    event = std::string(ev);
    return {};
}

std::string truncate_name(std::string s)
{
    if (s.size() > static_cast<size_t>(MAX_EVENT_NAME_LEN - 1)) s.resize(MAX_EVENT_NAME_LEN - 1);
    return s;
}

bool tparg_entry_or_return(unsigned flags)
{
    if (!(flags & TPARG_FL_KERNEL)) return false;
    return ((flags & TPARG_FL_FENTRY) != 0) != ((flags & TPARG_FL_RETURN) != 0);
}

// Whether argument TOK may need the function's types: a name, $arg or $retval in it.
bool mentions_names(std::string_view tok)
{
    std::string_view body =
        tok.substr(tok.find('=') == std::string_view::npos ? 0 : tok.find('=') + 1);
    if (body.find("$arg") != std::string_view::npos ||
        body.find("$retval") != std::string_view::npos)
        return true;
    auto name_start = [](char c) { return is_alpha(c) || c == '_'; };
    if (!body.empty() && name_start(body[0])) return true;
    for (size_t p = body.find('('); p != std::string_view::npos; p = body.find('(', p + 1))
        if (p + 1 < body.size() && name_start(body[p + 1])) return true;
    return false;
}

// One argument after the meta-argument expansion, with the argv index its errors point at.
struct arg_token {
    std::string text;
    int index;
};

// The kernel's traceprobe_expand_meta_args(): $arg* becomes every parameter (by name) and a
// bare $argN[:TYPE] the parameter in that slot, when the function's debug info is known.
// Without it, $argN stays a register read and $arg* is NOSUP_BTFARG.
probe_error expand_meta_args(std::span<const std::string> argv, unsigned flags,
                             const btf_context &btf, std::vector<arg_token> &out)
{
    const size_t nargs = argv.size() - 2;
    int args_idx = -1;
    bool found = false;
    for (size_t i = 0; i < nargs; i++) {
        const std::string &tok = argv[i + 2];
        if (!tok.starts_with("$arg")) continue;
        int idx = static_cast<int>(i + 2);
        if (!tparg_entry_or_return(flags)) return perr(probe_err::NOFENTRY_ARGS, idx, 0);
        found = true;
        if (tok.size() > 4 && is_digit(tok[4])) continue;
        if (tok.size() <= 4 || tok[4] != '*') return perr(probe_err::BAD_VAR, idx, 0);
        if (args_idx >= 0) return perr(probe_err::DOUBLE_ARGS, idx, 0);
        args_idx = idx;
    }
    out.clear();
    const func_proto *fn = btf.m == btf_context::mode::resolve ? btf.func : nullptr;
    if (!found || !fn || fn->params.empty()) {
        if (args_idx >= 0 && btf.m != btf_context::mode::unchecked)
            return perr(probe_err::NOSUP_BTFARG, args_idx, 0, EOPNOTSUPP);
        for (size_t i = 0; i < nargs; i++)
            if (static_cast<int>(i + 2) != args_idx) // unchecked: $arg* is checked later
                out.push_back({argv[i + 2], static_cast<int>(i + 2)});
        return {};
    }
    // The kernel writes the new arguments into a MAX_BTF_ARGS_LEN buffer.
    size_t used = 0;
    auto add = [&](std::string text, int idx) -> probe_error {
        if (used + text.size() + 1 > static_cast<size_t>(MAX_BTF_ARGS_LEN))
            return perr(probe_err::ARGS_2LONG, idx, 0, E2BIG);
        used += text.size() + 1;
        out.push_back({std::move(text), idx});
        return {};
    };
    for (size_t i = 0; i < nargs; i++) {
        const std::string &tok = argv[i + 2];
        const int idx = static_cast<int>(i + 2);
        if (idx == args_idx) {
            // Every parameter a register holds; the others (floats, structs by value) have
            // nothing to fetch.
            for (const func_proto::param &p : fn->params)
                if (p.slot >= 0 && !p.name.empty())
                    if (probe_error e = add(p.name, idx)) return e;
            continue;
        }
        if (!tok.starts_with("$arg")) {
            out.push_back({tok, idx});
            continue;
        }
        size_t end = 4;
        while (end < tok.size() && is_digit(tok[end]))
            end++;
        if (end < tok.size() && tok[end] != ':') return perr(probe_err::BAD_VAR, idx, 0, ENOENT);
        unsigned long long n = 0;
        kstrtoull(std::string_view(tok).substr(4, end - 4), 10, n);
        const func_proto::param *p = n >= 1 && n <= static_cast<unsigned long long>(PARAM_MAX_STACK)
                                         ? fn->at_slot(static_cast<int>(n - 1))
                                         : nullptr;
        if (p && !p->name.empty()) {
            if (probe_error e = add(p->name + tok.substr(end), idx)) return e;
        } else if (!p && fn->slots_complete && n >= 1) {
            return perr(probe_err::NO_BTFARG, idx, 0, ENOENT); // beyond the parameters
        } else {
            out.push_back({tok, idx}); // a slot the debug info can't name: a register read
        }
    }
    return {};
}

// Fetch args argv[2..]: count limit, meta-argument expansion, then each argument.
probe_error parse_args(std::span<const std::string> argv, unsigned flags, probe_definition &def,
                       const parse_options &opts)
{
    const size_t nargs = argv.size() - 2;
    if (nargs > static_cast<size_t>(MAX_TRACE_ARGS))
        return perr(probe_err::TOO_MANY_ARGS, 2, 0, E2BIG);

    // Type information for names: only probes at a function entry or exit have any.
    btf_context btf;
    func_proto_ptr fn;
    if (opts.func_info) {
        btf.m = btf_context::mode::resolve;
        // Only names, $arg and $retval need the function (looking it up opens its object's
        // debug info).
        bool wants = false;
        for (size_t i = 2; i < argv.size() && !wants; i++)
            wants = mentions_names(argv[i]);
        if (wants && tparg_entry_or_return(flags)) {
            std::optional<func_proto_ptr> f = opts.func_info(def);
            if (f)
                fn = *f;
            else
                btf.m = btf_context::mode::unchecked;
        }
        btf.func = fn.get();
    } else if (opts.btf_unchecked) {
        btf.m = btf_context::mode::unchecked;
    }

    if (flags & TPARG_FL_TEVENT)
        btf.event_fields =
            opts.event_fields && opts.event_fields(def.place.object, def.place.symbol)
                ? opts.event_fields(def.place.object, def.place.symbol)
                : nullptr;
    std::vector<arg_token> tokens;
    if (flags & TPARG_FL_TEVENT) {
        // Event probes take no meta-arguments: "$arg1" is a field like any other.
        for (size_t i = 2; i < argv.size(); i++)
            tokens.push_back({argv[i], static_cast<int>(i)});
    } else if (probe_error e = expand_meta_args(argv, flags, btf, tokens)) {
        return e;
    }
    if (tokens.size() > static_cast<size_t>(MAX_TRACE_ARGS))
        return perr(probe_err::TOO_MANY_ARGS, 2, 0, E2BIG);

    def.args.clear();
    def.args.reserve(tokens.size());
    uint32_t size = 0;
    for (size_t i = 0; i < tokens.size(); i++) {
        probe_arg a;
        const arg_token &tok = tokens[i];
        probe_error e = parse_probe_arg(tok.text, tok.index, static_cast<int>(i), def.args, flags,
                                        def.entry_args, a, btf);
        if (e) {
            // An expanded argument's error points at the $arg* or $argN it came from.
            if (tok.text != argv[tok.index]) e.offset = 0;
            return e;
        }
        size += a.field_size();
        if (size > static_cast<uint32_t>(MAX_PROBE_EVENT_SIZE))
            return perr(probe_err::EVENT_TOO_BIG, tok.index, 0, E2BIG);
        def.args.push_back(std::move(a));
    }
    def.args_size = layout_probe_args(def.args);
    return {};
}

// ---- kprobe: p[:[GRP/][EV]] PLACE | r[N][:[GRP/][EV]] PLACE ------------------------------

probe_error parse_kprobe(std::span<const std::string> argv, const parse_options &opts,
                         probe_definition &def)
{
    const std::string &a0 = argv[0];
    if (argv.size() < 2 || (a0[0] != 'p' && a0[0] != 'r')) return not_mine();
    def = probe_definition{};
    def.kind = probe_kind::kprobe;
    def.is_return = a0[0] == 'r';

    size_t colon = a0.find(':');
    std::string_view head =
        std::string_view(a0).substr(1, colon == std::string::npos ? std::string::npos : colon - 1);
    if (!head.empty()) {
        if (!is_digit(head[0])) return perr(probe_err::BAD_MAXACT, 0, 1);
        if (!def.is_return) return perr(probe_err::BAD_MAXACT_TYPE, 0, 1);
        if (head.size() > static_cast<size_t>(MAX_EVENT_NAME_LEN - 1))
            return perr(probe_err::BAD_MAXACT, 0, 1);
        unsigned long long n = 0;
        if (kstrtoull(head, 0, n) || n == 0 || n > UINT_MAX)
            return perr(probe_err::BAD_MAXACT, 0, 1);
        if (n > static_cast<unsigned long long>(KRETPROBE_MAXACTIVE_MAX))
            return perr(probe_err::MAXACT_TOO_BIG, 0, 1);
        def.maxactive = static_cast<unsigned>(n);
    }

    // Place.
    std::string_view place = argv[1];
    unsigned long long addr = 0;
    probe_place &pl = def.place;
    if (kstrtoull(place, 0, addr) == 0) {
        pl.kind = probe_place::form::address;
        pl.address = static_cast<uintptr_t>(addr);
    } else {
        if (place.find('/') != std::string_view::npos && place.find(':') != std::string_view::npos)
            return not_mine(); // an uprobe line
        if (size_t pct = place.find('%'); pct != std::string_view::npos) {
            if (place.substr(pct) != "%return")
                return perr(probe_err::BAD_ADDR_SUFFIX, 1, static_cast<int>(pct));
            def.is_return = true;
            place = place.substr(0, pct);
        }
        if (kstrtoull(place, 0, addr) == 0) {
            pl.kind = probe_place::form::address;
            pl.address = static_cast<uintptr_t>(addr);
        } else {
            pl.kind = probe_place::form::symbol;
            std::string_view sym = place;
            if (size_t c = sym.find(':'); c != std::string_view::npos) {
                pl.object = std::string(sym.substr(0, c));
                sym = sym.substr(c + 1);
                if (pl.object.empty()) return perr(probe_err::BAD_PROBE_ADDR, 1, 0);
            }
            long long off = 0;
            if (size_t p = sym.find_first_of("+-"); p != std::string_view::npos) {
                if (kstrtoll(sym.substr(p), 0, off) || off < 0 || off > UINT_MAX)
                    return perr(probe_err::BAD_PROBE_ADDR, 1, 0);
                sym = sym.substr(0, p);
            }
            if (sym.empty()) return perr(probe_err::BAD_PROBE_ADDR, 1, 0);
            pl.symbol = std::string(sym);
            pl.offset = static_cast<uint32_t>(off);
        }
    }

    unsigned flags = TPARG_FL_KERNEL;
    if (def.is_return) flags |= TPARG_FL_RETURN;
    bool known = opts.is_func_entry || pl.kind == probe_place::form::symbol;
    bool entry = opts.is_func_entry ? opts.is_func_entry(pl)
                                    : (pl.kind == probe_place::form::symbol && pl.offset == 0);
    if (entry && !def.is_return) flags |= TPARG_FL_FENTRY;
    if (def.is_return && known && !entry) return perr(probe_err::BAD_RETPROBE, 1, 0);
    def.at_func_entry = entry;

    // Event name.
    if (colon != std::string::npos)
        if (probe_error e = parse_event_name(std::string_view(a0).substr(colon + 1),
                                             static_cast<int>(colon + 1), def.group, def.event))
            return e;
    if (def.group.empty()) def.group = "kprobes";
    if (def.event.empty()) {
        char c = def.is_return ? 'r' : 'p';
        std::string name;
        if (pl.kind == probe_place::form::address)
            name = std::string(1, c) + "_" + hex_padded(pl.address);
        else
            name =
                std::string(1, c) + "_" + pl.qualified_symbol() + "_" + std::to_string(pl.offset);
        def.event = sanitize_event_name(truncate_name(std::move(name)));
    }
    return parse_args(argv, flags, def, opts);
}

// ---- fprobe: f[:[GRP/][EV]] SYM[%return] -------------------------------------------------

probe_error parse_fprobe(std::span<const std::string> argv, const parse_options &opts,
                         probe_definition &def)
{
    const std::string &a0 = argv[0];
    if (argv.size() < 2 || a0[0] != 'f') return not_mine();
    def = probe_definition{};
    def.kind = probe_kind::fprobe;
    if (a0.size() > 1 && a0[1] != ':') return perr(probe_err::BAD_MAXACT, 0, 1);

    std::string_view place = argv[1];
    if (size_t pct = place.find('%'); pct != std::string_view::npos) {
        if (place.substr(pct) != "%return")
            return perr(probe_err::BAD_ADDR_SUFFIX, 1, static_cast<int>(pct));
        def.is_return = true;
        place = place.substr(0, pct);
    }
    probe_place &pl = def.place;
    pl.kind = probe_place::form::symbol;
    std::string_view sym = place;
    if (size_t c = sym.find(':'); c != std::string_view::npos) {
        pl.object = std::string(sym.substr(0, c));
        sym = sym.substr(c + 1);
    }
    unsigned long long dummy;
    // fprobes sit on function entries: no offset, no raw address (ENOENT like the kernel's
    // failed lookup of such a "symbol").
    if (sym.empty() || sym.find_first_of("+-") != std::string_view::npos ||
        (place.find(':') != std::string_view::npos && pl.object.empty()) ||
        kstrtoull(sym, 0, dummy) == 0)
        return perr(probe_err::BAD_PROBE_ADDR, 1, 0, ENOENT);
    pl.symbol = std::string(sym);

    // An argument reading $retval makes it an exit probe.
    for (size_t i = 2; i < argv.size() && !def.is_return; i++) {
        size_t p = argv[i].find("$retval");
        if (p == std::string::npos) continue;
        char next = p + 7 < argv[i].size() ? argv[i][p + 7] : '\0';
        if (!is_alnum(next) && next != '_') def.is_return = true;
    }
    def.at_func_entry = true;

    size_t colon = a0.find(':');
    if (colon != std::string::npos)
        if (probe_error e = parse_event_name(std::string_view(a0).substr(colon + 1),
                                             static_cast<int>(colon + 1), def.group, def.event))
            return e;
    if (def.group.empty()) def.group = "fprobes";
    if (def.event.empty())
        def.event = sanitize_event_name(
            truncate_name(pl.qualified_symbol() + (def.is_return ? "__exit" : "__entry")));

    unsigned flags =
        TPARG_FL_KERNEL | TPARG_FL_FPROBE | (def.is_return ? TPARG_FL_RETURN : TPARG_FL_FENTRY);
    if (probe_error e = parse_args(argv, flags, def, opts)) return e;
    if (def.is_return && def.entry_args.size() > static_cast<size_t>(MAX_FPROBE_DATA_SIZE))
        return perr(probe_err::TOO_MANY_EARGS, 2, 0, E2BIG);
    return {};
}

// ---- tprobe: t[:[GRP/][EV]] TRACEPOINT -----------------------------------------------------
// The tracepoints of a process are its USDT probes (trace_usdt.cpp), whose fields are
// arg1..argN: an argument names one as the kernel's t events name a tracepoint's parameters,
// by name (arg2, +8(arg2)) or by position ($arg2, $arg*). Both read the field of the
// tracepoint's record (TP_ARG); a bare $argN or argN gets the field's type.

// Bare names argK in BODY (at its start or right after a '(') become $argK; where a '$' went
// in, for carets.
std::string tprobe_dollar_names(std::string_view body, std::vector<size_t> &inserted)
{
    std::string out;
    for (size_t i = 0; i < body.size(); i++) {
        const bool starts = i == 0 || body[i - 1] == '(';
        if (starts && body.substr(i).starts_with("arg") && i + 3 < body.size() &&
            is_digit(body[i + 3])) {
            size_t end = i + 3;
            while (end < body.size() && is_digit(body[end]))
                end++;
            if (end == body.size() || body[end] == ':' || body[end] == ')' || body[end] == '-' ||
                body[end] == '.') {
                inserted.push_back(i);
                out += '$';
            }
        }
        out += body[i];
    }
    return out;
}

// "argK" when TEXT is $argK or argK, else "".
std::string tprobe_arg_ref(std::string_view text)
{
    if (text.starts_with("$")) text.remove_prefix(1);
    if (!text.starts_with("arg") || text.size() < 4) return "";
    for (char c : text.substr(3))
        if (!is_digit(c)) return "";
    return std::string(text);
}

std::string field_type(const filter_field &f)
{
    return (f.is_signed ? "s" : "u") + std::to_string(f.size * 8);
}

const filter_field *field_named(const std::vector<filter_field> &fields, std::string_view n)
{
    for (const filter_field &f : fields)
        if (f.name == n) return &f;
    return nullptr;
}

probe_error parse_tprobe(std::span<const std::string> argv, const parse_options &opts,
                         probe_definition &def)
{
    const std::string &a0 = argv[0];
    if (argv.size() < 2 || a0[0] != 't') return not_mine();
    def = probe_definition{};
    def.kind = probe_kind::tprobe;
    if (a0.size() > 1 && a0[1] != ':') return perr(probe_err::BAD_MAXACT, 0, 1);
    const std::string &tp = argv[1];
    for (size_t i = 0; i < tp.size(); i++) {
        if (tp[i] == '%') return perr(probe_err::BAD_ADDR_SUFFIX, 1, static_cast<int>(i));
        if (!is_alnum(tp[i]) && tp[i] != '_')
            return perr(probe_err::BAD_TP_NAME, 1, static_cast<int>(i));
    }
    size_t colon = a0.find(':');
    if (colon != std::string::npos)
        if (probe_error e = parse_event_name(std::string_view(a0).substr(colon + 1),
                                             static_cast<int>(colon + 1), def.group, def.event))
            return e;
    if (def.group.empty()) def.group = "tracepoints";
    if (def.event.empty()) def.event = sanitize_event_name(truncate_name(tp));
    def.place.kind = probe_place::form::symbol;
    def.place.symbol = tp;
    def.at_func_entry = true;

    std::vector<filter_field> fields;
    const bool known = static_cast<bool>(opts.tracepoint);
    if (known && !opts.tracepoint(tp, def.place.object, fields))
        return perr(probe_err::NO_TRACEPOINT, 1, 0);
    size_t nargs = 0;
    while (field_named(fields, "arg" + std::to_string(nargs + 1)))
        nargs++;

    // The arguments as the fetch-arg parser takes them: $arg* expanded, names made $argK,
    // bare ones typed by their field.
    struct token {
        std::string user_body; // as written, for the listing
        bool named;            // NAME= given
        std::vector<size_t> inserted;
        size_t prefix = 0; // length of NAME= in the original
    };
    std::vector<std::string> rewritten(argv.begin(), argv.begin() + 2);
    std::vector<token> toks;
    for (size_t i = 2; i < argv.size(); i++) {
        const std::string &t = argv[i];
        if (t == "$arg*" && known) {
            for (size_t k = 1; k <= nargs; k++) {
                const filter_field *f = field_named(fields, "arg" + std::to_string(k));
                rewritten.push_back("$arg" + std::to_string(k) + ":" + field_type(*f));
                toks.push_back({"arg" + std::to_string(k), false, {}, 0});
            }
            continue;
        }
        token tk;
        size_t eq = t.find('=');
        tk.named = eq != std::string::npos;
        tk.prefix = tk.named ? eq + 1 : 0;
        std::string_view body = std::string_view(t).substr(tk.prefix);
        tk.user_body = std::string(body);
        std::string nb = tprobe_dollar_names(body, tk.inserted);
        const size_t tcolon = nb.find(':');
        const std::string ref = tprobe_arg_ref(std::string_view(nb).substr(0, tcolon));
        if (tcolon == std::string::npos && !ref.empty())
            if (const filter_field *f = field_named(fields, ref)) nb += ":" + field_type(*f);
        rewritten.push_back(t.substr(0, tk.prefix) + nb);
        toks.push_back(std::move(tk));
    }
    parse_options o; // no function types: a tracepoint's are its fields
    o.accept = opts.accept;
    const unsigned flags = TPARG_FL_KERNEL | TPARG_FL_FPROBE | TPARG_FL_FENTRY;
    if (probe_error e = parse_args(rewritten, flags, def, o)) {
        // Carets into the text as written.
        if (e.index >= 2 && static_cast<size_t>(e.index) < argv.size() &&
            static_cast<size_t>(e.index - 2) < toks.size() && rewritten[e.index] != argv[e.index]) {
            const token &tk = toks[e.index - 2];
            int shift = 0;
            for (size_t p : tk.inserted)
                if (e.offset > static_cast<int>(tk.prefix + p)) shift++;
            e.offset -= shift;
        }
        return e;
    }
    for (size_t i = 0; i < def.args.size() && i < toks.size(); i++) {
        probe_arg &a = def.args[i];
        if (!toks[i].named) {
            std::string ref =
                tprobe_arg_ref(toks[i].user_body.substr(0, toks[i].user_body.find(':')));
            if (!ref.empty()) a.name = ref;
        }
        a.comm = toks[i].user_body;
        // $argK: the field argK of the tracepoint's record.
        for (fetch_insn &in : a.prog.code) {
            if (in.op != fetch_op::ARG || !known) continue;
            const filter_field *f = field_named(fields, "arg" + std::to_string(in.param + 1));
            if (!f) return perr(probe_err::NO_BTFARG, static_cast<int>(i + 2), 0, ENOENT);
            in.op = fetch_op::TP_ARG;
            in.offset = f->offset;
            in.size = static_cast<uint8_t>(f->size);
            in.param = f->is_signed ? 1 : 0;
        }
    }
    return {};
}

// ---- uprobe: p|r[:[GRP/][EV]] PATH:OFFSET[%return][(REF)] --------------------------------

probe_error parse_uprobe(std::span<const std::string> argv, const parse_options &opts,
                         probe_definition &def)
{
    const std::string &a0 = argv[0];
    if (argv.size() < 2 || (a0[0] != 'p' && a0[0] != 'r')) return not_mine();
    if (a0.size() > 1 && a0[1] != ':') return not_mine();
    const std::string &place = argv[1];
    size_t last = place.rfind(':');
    if (place.find('/') == std::string::npos || last == std::string::npos ||
        last + 1 >= place.size() || !is_digit(place[last + 1]))
        return not_mine();

    def = probe_definition{};
    def.kind = probe_kind::uprobe;
    def.is_return = a0[0] == 'r';
    probe_place &pl = def.place;
    pl.kind = probe_place::form::file_offset;
    pl.object = place.substr(0, last);

    if (opts.check_files) {
        struct stat st {
        };
        if (stat(pl.object.c_str(), &st) != 0)
            return perr(probe_err::FILE_NOT_FOUND, 1, 0, errno ? errno : ENOENT);
        if (!S_ISREG(st.st_mode)) return perr(probe_err::NO_REGULAR_FILE, 1, 0);
    }

    std::string_view rest = std::string_view(place).substr(last + 1);
    const int rest_off = static_cast<int>(last + 1);
    if (size_t lp = rest.find('('); lp != std::string_view::npos) {
        size_t rp = rest.find(')', lp);
        if (rp == std::string_view::npos)
            return perr(probe_err::REFCNT_OPEN_BRACE, 1, static_cast<int>(place.size()));
        if (rp + 1 != rest.size())
            return perr(probe_err::BAD_REFCNT_SUFFIX, 1, rest_off + static_cast<int>(rp + 1));
        unsigned long long ref = 0;
        if (int r = kstrtoull(rest.substr(lp + 1, rp - lp - 1), 0, ref))
            return perr(probe_err::BAD_REFCNT, 1, rest_off + static_cast<int>(lp + 1), -r);
        pl.ref_ctr_offset = ref;
        rest = rest.substr(0, lp);
    }
    if (size_t pct = rest.find('%'); pct != std::string_view::npos) {
        if (rest.substr(pct) != "%return")
            return perr(probe_err::BAD_ADDR_SUFFIX, 1, rest_off + static_cast<int>(pct));
        def.is_return = true;
        rest = rest.substr(0, pct);
    }
    unsigned long long off = 0;
    if (int r = kstrtoull(rest, 0, off)) return perr(probe_err::BAD_UPROBE_OFFS, 1, rest_off, -r);
    pl.file_offset = off;

    size_t colon = a0.find(':');
    if (colon != std::string::npos)
        if (probe_error e = parse_event_name(std::string_view(a0).substr(colon + 1),
                                             static_cast<int>(colon + 1), def.group, def.event))
            return e;
    if (def.group.empty()) def.group = "uprobes";
    if (def.event.empty()) {
        std::string tail = pl.object.substr(pl.object.rfind('/') + 1);
        if (size_t cut = tail.find_first_of(".-_"); cut != std::string::npos) tail.resize(cut);
        def.event = sanitize_event_name(truncate_name("p_" + tail + "_" + hex(off)));
    }
    unsigned flags = TPARG_FL_USER | (def.is_return ? unsigned{TPARG_FL_RETURN} : 0u);
    return parse_args(argv, flags, def, opts);
}

// ---- eprobe: e[:[EGRP/][EEV]] GRP.EVENT [ARGS] [if FILTER] ------------------------------

probe_error parse_eprobe(std::span<const std::string> argv, const parse_options &opts,
                         probe_definition &def)
{
    const std::string &a0 = argv[0];
    if (argv.size() < 2 || a0[0] != 'e') return not_mine();
    def = probe_definition{};
    def.kind = probe_kind::eprobe;
    // The event name: whatever follows the first ':' (the kernel looks no closer).
    if (size_t colon = a0.find(':', 1); colon != std::string::npos)
        if (probe_error e = parse_event_name(std::string_view(a0).substr(colon + 1),
                                             static_cast<int>(colon + 1), def.group, def.event))
            return e;
    // The attached event, GRP.EVENT or GRP/EVENT: both parts needed.
    std::string ag, ae;
    if (parse_event_name(argv[1], 0, ag, ae) || ag.empty() || ae.empty())
        return perr(probe_err::NO_EVENT_INFO, 1, 0);
    def.place.kind = probe_place::form::symbol;
    def.place.object = ag;
    def.place.symbol = ae;
    if (def.group.empty()) def.group = "eprobes";
    if (def.event.empty()) def.event = truncate_name(ae);
    if (opts.event_fields && !opts.event_fields(ag, ae))
        return perr(probe_err::BAD_ATTACH_EVENT, 1, 0, ENODEV);

    // "if FILTER": a filter on the attached event's records, checked where its fields are.
    size_t argc = argv.size();
    for (size_t i = 2; i < argv.size(); i++) {
        if (argv[i] != "if") continue;
        if (i + 1 == argv.size()) return perr(probe_err::NO_EP_FILTER, static_cast<int>(i + 1), 0);
        for (size_t k = i + 1; k < argv.size(); k++)
            def.filter += (def.filter.empty() ? "" : " ") + argv[k];
        argc = i;
        break;
    }
    return parse_args(argv.first(argc), TPARG_FL_KERNEL | TPARG_FL_TEVENT, def, opts);
}

// Each kind's place, as listed and as a delete request names it (the kernel's per-kind
// show and match).
std::string place_text(const probe_definition &def)
{
    return def.place.text();
}
bool place_text_is(std::string_view place, const probe_definition &def)
{
    return place == def.place.text();
}
std::string fprobe_place(const probe_definition &def)
{
    return def.place.qualified_symbol() + (def.is_return ? "%return" : "");
}
bool fprobe_place_is(std::string_view place, const probe_definition &def)
{
    return place == def.place.qualified_symbol();
}
std::string tprobe_place(const probe_definition &def)
{
    return def.place.symbol;
}
bool tprobe_place_is(std::string_view place, const probe_definition &def)
{
    return place == def.place.symbol;
}
std::string eprobe_place(const probe_definition &def)
{
    return def.place.object + "." + def.place.symbol; // the kernel does not list the filter
}
bool eprobe_place_is(std::string_view place, const probe_definition &def)
{
    // The attached event, written GRP.EVENT or GRP/EVENT (eprobe_dyn_event_match).
    return place == def.place.object + "." + def.place.symbol ||
           place == def.place.object + "/" + def.place.symbol;
}

bool args_match(std::span<const std::string> tokens, const probe_definition &def)
{
    if (tokens.size() > def.args.size()) return false;
    for (size_t i = 0; i < tokens.size(); i++)
        if (tokens[i] != def.args[i].name + "=" + def.args[i].comm) return false;
    return true;
}

} // namespace

// ------------------------------------------------------------------------------------------

std::string probe_place::qualified_symbol() const
{
    return object.empty() ? symbol : object + ":" + symbol;
}

std::string probe_place::text() const
{
    switch (kind) {
    case form::address:
        return hex_padded(address);
    case form::file_offset: {
        std::string s = object + ":" + hex_padded(file_offset);
        if (ref_ctr_offset) s += "(" + hex(ref_ctr_offset) + ")";
        return s;
    }
    case form::symbol:
        break;
    }
    std::string s = qualified_symbol();
    if (offset) s += "+" + std::to_string(offset);
    return s;
}

char probe_definition::type_char() const
{
    const probe_kind_ops &ops = probe_kind_ops_of(kind);
    return is_return ? ops.ret_type : ops.type;
}

const char *probe_definition::error_loc() const
{
    return probe_kind_ops_of(kind).error_loc;
}

bool probe_definition::has_dynamic_args() const
{
    for (const auto &a : args)
        if (a.dynamic) return true;
    return false;
}

std::string probe_definition::listing() const
{
    const probe_kind_ops &ops = probe_kind_ops_of(kind);
    if (ops.format) return ops.format->listing(*this);
    std::string s(1, type_char());
    if (ops.lists_maxactive && is_return && maxactive) s += std::to_string(maxactive);
    s += ":" + group + "/" + event + " " + ops.show_place(*this);
    for (const auto &a : args)
        s += " " + a.name + "=" + a.comm;
    return s;
}

bool delete_matches(const delete_request &req, const probe_definition &def)
{
    if (!req.event.empty() && req.event != def.event) return false;
    if (req.group && *req.group != def.group) return false;
    const probe_kind_ops &ops = probe_kind_ops_of(def.kind);
    if (req.head.empty() || !ops.match_place) return true;
    if (!ops.match_place(req.head[0], def)) return false;
    return args_match(std::span<const std::string>(req.head).subspan(1), def);
}

probe_error parse_probe_definition(std::span<const std::string> argv, const parse_options &opts,
                                   probe_definition &out, const char **loc)
{
    if (argv.empty() || argv[0].empty()) return probe_error::plain(EINVAL);
    // Each kind the file accepts tries the line in turn, as the kernel's create_dyn_event()
    // tries each dyn_event_operations: -ECANCELED says it is another kind's.
    probe_error e = not_mine();
    for (const probe_kind_ops *k : probe_kinds()) {
        if (!k->create || !(opts.accept & k->accept)) continue;
        e = k->create(argv, opts, out);
        if (loc) *loc = k->error_loc;
        if (e.errnum != ECANCELED_NOT_MINE) break;
    }
    if (e.errnum == ECANCELED_NOT_MINE)
        return probe_error::plain(EINVAL); // nobody's line: EINVAL, nothing logged
    return e;
}

probe_error parse_dynevent(std::span<const std::string> argv, const parse_options &opts,
                           dynevent_command &out, const char **loc)
{
    if (argv.empty() || argv[0].empty()) return probe_error::plain(EINVAL);
    const std::string &a0 = argv[0];
    if (a0[0] != '-' && a0[0] != '!') {
        out.kind = dynevent_command::type::create;
        return parse_probe_definition(argv, opts, out.def, loc);
    }
    out.kind = dynevent_command::type::remove;
    out.del = delete_request{};
    std::string_view ev;
    if (a0[0] == '-') {
        if (a0.size() < 2 || a0[1] != ':') return probe_error::plain(EINVAL);
        ev = std::string_view(a0).substr(2);
    } else {
        size_t c = a0.find(':');
        if (c == std::string::npos) return probe_error::plain(EINVAL);
        ev = std::string_view(a0).substr(c + 1);
    }
    if (size_t slash = ev.find('/'); slash != std::string_view::npos) {
        out.del.group = std::string(ev.substr(0, slash));
        ev = ev.substr(slash + 1);
    }
    if (!out.del.group && ev.empty()) return probe_error::plain(EINVAL);
    out.del.event = std::string(ev);
    out.del.head.assign(argv.begin() + 1, argv.end());
    return {};
}

int parse_dynevent_logged(std::span<const std::string> argv, const parse_options &opts,
                          error_log &log, dynevent_command &out)
{
    const char *loc = "trace_kprobe";
    probe_error e = parse_dynevent(argv, opts, out, &loc);
    if (e.logged()) log.append(loc, argv, e);
    return -e.errnum;
}

probe_error check_append(std::span<const probe_definition *const> existing,
                         const probe_definition &newdef)
{
    if (existing.empty()) return {};
    const probe_definition &to = *existing[0];
    const probe_kind_ops &old_ops = probe_kind_ops_of(to.kind),
                         &ops = probe_kind_ops_of(newdef.kind);
    // Kinds of one family (f and t lines, both the kernel's trace_fprobe) differ by type.
    if (to.kind != newdef.kind && old_ops.family == ops.family)
        return perr(probe_err::DIFF_PROBE_TYPE, 0, 0, EEXIST);
    // An event probe is one probe: nothing appends to it, it appends to nothing.
    if (to.kind != newdef.kind || !ops.appends) return perr(probe_err::EVENT_EXIST, 0, 0, EEXIST);
    if (to.is_return != newdef.is_return) return perr(probe_err::DIFF_PROBE_TYPE, 0, 0, EEXIST);

    // The kernel's trace_probe_compare_arg_type(): 1-based position of the first difference.
    size_t a = newdef.args.size(), b = to.args.size(), diff = 0;
    if (a != b) {
        diff = (a < b ? a : b) + 1;
    } else {
        for (size_t i = 0; i < a; i++) {
            const auto &x = newdef.args[i], &y = to.args[i];
            if (x.type != y.type || x.count != y.count || x.name != y.name) {
                diff = i + 1;
                break;
            }
        }
    }
    if (diff) return perr(probe_err::DIFF_ARG_TYPE, static_cast<int>(diff + 1), 0, EEXIST);

    for (const probe_definition *p : existing) {
        if (p->place.text() != newdef.place.text() || p->args.size() != newdef.args.size())
            continue;
        bool same = true;
        for (size_t i = 0; i < p->args.size() && same; i++)
            same = p->args[i].comm == newdef.args[i].comm;
        if (same) return perr(probe_err::SAME_PROBE, 0, 0, EEXIST);
    }
    return {};
}

probe_error registration_error(probe_err err, int errnum)
{
    return perr(err, 1, 0, errnum < 0 ? -errnum : errnum);
}

std::vector<std::string> argv_split(std::string_view line)
{
    std::vector<std::string> argv;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])))
            i++;
        size_t start = i;
        while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i])))
            i++;
        if (i > start) argv.emplace_back(line.substr(start, i - start));
    }
    return argv;
}

std::string sanitize_event_name(std::string name)
{
    for (char &c : name)
        if (!is_alnum(c) && c != '_') c = '_';
    // An fprobe on "9lives" or "3d.so:f" (user-space symbols and objects may start with a
    // digit) would otherwise get a name that no command can name again.
    if (!name.empty() && name[0] >= '0' && name[0] <= '9') name = truncate_name("_" + name);
    return name;
}

// ------------------------------------------------------------------------------------------
// The kinds (probe_kind_ops): one entry each, in the order a create command tries them.

namespace
{

constexpr probe_kind_ops kprobe_kind = {.kind = probe_kind::kprobe,
                                        .type = 'p',
                                        .ret_type = 'r',
                                        .lists_maxactive = true,
                                        .accept = ACCEPT_KPROBE,
                                        .error_loc = "trace_kprobe",
                                        .print = probe_print_type::normal,
                                        .raw_addresses = false,
                                        .family = probe_kind::kprobe,
                                        .appends = true,
                                        .create = parse_kprobe,
                                        .show_place = place_text,
                                        .match_place = place_text_is,
                                        .format = nullptr};
constexpr probe_kind_ops uprobe_kind = {.kind = probe_kind::uprobe,
                                        .type = 'p',
                                        .ret_type = 'r',
                                        .lists_maxactive = false,
                                        .accept = ACCEPT_UPROBE,
                                        .error_loc = "trace_uprobe",
                                        .print = probe_print_type::normal,
                                        .raw_addresses = true,
                                        .family = probe_kind::uprobe,
                                        .appends = true,
                                        .create = parse_uprobe,
                                        .show_place = place_text,
                                        .match_place = place_text_is,
                                        .format = nullptr};
constexpr probe_kind_ops fprobe_kind = {.kind = probe_kind::fprobe,
                                        .type = 'f',
                                        .ret_type = 'f',
                                        .lists_maxactive = false,
                                        .accept = ACCEPT_FPROBE,
                                        .error_loc = "trace_fprobe",
                                        .print = probe_print_type::normal,
                                        .raw_addresses = false,
                                        .family = probe_kind::fprobe,
                                        .appends = true,
                                        .create = parse_fprobe,
                                        .show_place = fprobe_place,
                                        .match_place = fprobe_place_is,
                                        .format = nullptr};
// t lines: the kernel's trace_fprobe too (tracepoint probes), in dynamic_events only.
constexpr probe_kind_ops tprobe_kind = {.kind = probe_kind::tprobe,
                                        .type = 't',
                                        .ret_type = 't',
                                        .lists_maxactive = false,
                                        .accept = ACCEPT_FPROBE,
                                        .error_loc = "trace_fprobe",
                                        .print = probe_print_type::normal,
                                        .raw_addresses = false,
                                        .family = probe_kind::fprobe,
                                        .appends = true,
                                        .create = parse_tprobe,
                                        .show_place = tprobe_place,
                                        .match_place = tprobe_place_is,
                                        .format = nullptr};
constexpr probe_kind_ops eprobe_kind = {.kind = probe_kind::eprobe,
                                        .type = 'e',
                                        .ret_type = 'e',
                                        .lists_maxactive = false,
                                        .accept = ACCEPT_EPROBE,
                                        .error_loc = "event_probe",
                                        .print = probe_print_type::event,
                                        .raw_addresses = false,
                                        .family = probe_kind::eprobe,
                                        .appends = false,
                                        .create = parse_eprobe,
                                        .show_place = eprobe_place,
                                        .match_place = eprobe_place_is,
                                        .format = nullptr};
constexpr probe_kind_ops synth_kind = {.kind = probe_kind::synth,
                                       .type = 's',
                                       .ret_type = 's',
                                       .lists_maxactive = false,
                                       .accept = ACCEPT_SYNTH,
                                       .error_loc = "synthetic_events",
                                       .print = probe_print_type::event,
                                       .raw_addresses = false,
                                       .family = probe_kind::synth,
                                       .appends = true,
                                       .create = nullptr,
                                       .show_place = nullptr,
                                       .match_place = nullptr,
                                       .format = &synth_probe_format};

constexpr const probe_kind_ops *create_order[] = {&kprobe_kind, &uprobe_kind, &fprobe_kind,
                                                  &tprobe_kind, &eprobe_kind, &synth_kind};

} // namespace

// By probe_kind's value.
constexpr const probe_kind_ops *by_kind[] = {&kprobe_kind, &fprobe_kind, &uprobe_kind,
                                             &eprobe_kind, &synth_kind,  &tprobe_kind};
constexpr bool table_in_kind_order()
{
    for (size_t i = 0; i < std::size(by_kind); i++)
        if (static_cast<size_t>(by_kind[i]->kind) != i) return false;
    return true;
}
static_assert(table_in_kind_order());
const probe_kind_ops *const probe_kind_table[] = {by_kind[0], by_kind[1], by_kind[2],
                                                  by_kind[3], by_kind[4], by_kind[5]};
static_assert(std::size(probe_kind_table) == static_cast<size_t>(probe_kind::tprobe) + 1);

std::span<const probe_kind_ops *const> probe_kinds()
{
    return std::span<const probe_kind_ops *const>(create_order);
}

int trace_parse_run_command(std::string_view buf,
                            const std::function<int(std::span<const std::string>)> &create)
{
    size_t pos = 0;
    while (pos < buf.size()) {
        size_t nl = buf.find('\n', pos);
        std::string_view line =
            nl == std::string_view::npos ? buf.substr(pos) : buf.substr(pos, nl - pos);
        // WRITE_BUFSIZE - 2 characters with the '\n', one more for an unterminated last line.
        size_t limit = static_cast<size_t>(WRITE_BUFSIZE) - (nl == std::string_view::npos ? 1 : 2);
        if (line.size() > limit) return -EINVAL;
        pos = nl == std::string_view::npos ? buf.size() : nl + 1;
        if (size_t hash = line.find('#'); hash != std::string_view::npos)
            line = line.substr(0, hash);
        std::vector<std::string> argv = argv_split(line);
        if (argv.empty()) continue;
        if (int r = create(argv)) return r < 0 ? r : -r;
    }
    return 0;
}

} // namespace dprobe
