// Event filter compiler and evaluator; the parsing follows the kernel's
// trace_events_filter.c (calc_stack, predicate_parse, parse_pred) so that accepted
// expressions, error names and error positions match.
#include "tracefs/event_filter.h"

#include "tracefs/trace_synth_format.h"

#include "core/compiler.h"
#include "core/glob.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"

#include <cctype>
#include <cerrno>
#include <cstring>

namespace dprobe
{
namespace
{

#define C(name, text) #name,
constexpr const char *filt_names[] = {DPROBE_FILTER_ERRORS};
#undef C
#define C(name, text) text,
constexpr const char *filt_texts[] = {DPROBE_FILTER_ERRORS};
#undef C
constexpr size_t n_filt = sizeof(filt_names) / sizeof(filt_names[0]);

using op = event_filter::op;

// Operators in the kernel's matching order: "<=" before "<", ">=" before ">".
constexpr struct {
    const char *text;
    op o;
} ops[] = {{"~", op::GLOB}, {"!=", op::NE}, {"==", op::EQ}, {"<=", op::LE},
           {"<", op::LT},   {">=", op::GE}, {">", op::GT},  {"&", op::BAND}};

bool is_space(char c)
{
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}
bool is_alnum(char c)
{
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
}
bool is_digit(char c)
{
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// Called after a '!': "!=" and "!~" are operators, not negations.
bool is_not(const char *s)
{
    return s[1] != '=' && s[1] != '~';
}

bool is_string_field(const filter_field &f)
{
    using t = filter_field::type;
    return f.kind == t::dyn_string || f.kind == t::static_string || f.kind == t::comm;
}

const filter_field *find_field(std::span<const filter_field> fields, std::string_view name)
{
    for (const auto &f : fields)
        if (f.name == name) return &f;
    return nullptr;
}

struct compiler {
    std::span<const filter_field> fields;
    filter_parse_error &pe;
    std::string patterns;

    void error(filter_err e, int pos)
    {
        pe.err = e;
        pe.pos = pos;
    }

    // parse_pred(): STR is the rest of the expression from the predicate's first character,
    // POS the offset the kernel reports positions from (one past that character). Returns the
    // characters consumed, or -1 (error set in pe, or "no field" with no error).
    int parse_pred(const char *str, int pos, event_filter::pred &p)
    {
        int i = 0;
        while (is_space(str[i]))
            i++;
        int s = i;
        while (is_alnum(str[i]) || str[i] == '_')
            i++;
        int len = i - s;
        if (!len) return -1;
        const filter_field *field = find_field(fields, std::string_view(str + s, size_t(len)));
        if (!field) {
            error(filter_err::FIELD_NOT_FOUND, pos + i);
            return -1;
        }
        while (is_space(str[i]))
            i++;
        size_t k = 0;
        for (; k < std::size(ops); k++)
            if (std::strncmp(str + i, ops[k].text, std::strlen(ops[k].text)) == 0) break;
        if (k == std::size(ops)) {
            error(filter_err::INVALID_OP, pos + i);
            return -1;
        }
        p.o = ops[k].o;
        i += static_cast<int>(std::strlen(ops[k].text));
        while (is_space(str[i]))
            i++;
        s = i;
        p.kind = field->kind;
        p.offset = field->offset;
        p.is_signed = field->is_signed;

        if (str[i] == '\'' || str[i] == '"') {
            char q = str[i];
            switch (p.o) {
            case op::NE:
                p.negate = true;
                break;
            case op::GLOB:
            case op::EQ:
                break;
            default:
                error(filter_err::ILLEGAL_FIELD_OP, pos + i);
                return -1;
            }
            if (!is_string_field(*field)) {
                error(filter_err::EXPECT_DIGIT, pos + i);
                return -1;
            }
            for (i++; str[i]; i++)
                if (str[i] == q) break;
            if (!str[i]) {
                error(filter_err::MISSING_QUOTE, pos + i);
                return -1;
            }
            s++;
            len = i - s;
            if (static_cast<size_t>(len) >= MAX_FILTER_STR_VAL) {
                error(filter_err::OPERAND_TOO_LONG, pos + i);
                return -1;
            }
            std::string_view pat(str + s, size_t(len));
            if (p.o == op::GLOB) {
                // filter_parse_regex(): a leading '!' inverts the match.
                if (!pat.empty() && pat[0] == '!') {
                    p.negate = true;
                    pat.remove_prefix(1);
                }
                p.glob = true;
            }
            p.pattern_off = static_cast<uint32_t>(patterns.size());
            p.pattern_len = static_cast<uint32_t>(pat.size());
            patterns.append(pat);
            patterns.push_back('\0');
            if (field->kind == filter_field::type::static_string) p.field_len = field->size;
            i++; // past the closing quote
        } else if (is_digit(str[i]) || str[i] == '-') {
            if (is_string_field(*field)) {
                error(filter_err::EXPECT_STRING, pos + i);
                return -1;
            }
            if (p.o == op::GLOB) {
                error(filter_err::ILLEGAL_FIELD_OP, pos + i);
                return -1;
            }
            if (str[i] == '-') i++;
            while (is_alnum(str[i]))
                i++;
            len = i - s;
            if (len >= 24) { // the kernel's num_buf[24]
                error(filter_err::OPERAND_TOO_LONG, pos + i);
                return -1;
            }
            std::string_view num(str + s, size_t(len));
            int r;
            if (field->is_signed) {
                long long v = 0;
                r = kstrtoll(num, 0, v);
                p.val = static_cast<uint64_t>(v);
            } else {
                unsigned long long v = 0;
                r = kstrtoull(num, 0, v);
                p.val = v;
            }
            if (r) {
                error(filter_err::ILLEGAL_INTVAL, pos + s);
                return -1;
            }
            if (field->kind == filter_field::type::number) {
                // Only sizes a comparison function exists for (select_comparison_fn).
                if (field->size != 1 && field->size != 2 && field->size != 4 && field->size != 8) {
                    error(filter_err::ILLEGAL_FIELD_OP, pos + s);
                    return -1;
                }
                p.size = static_cast<uint8_t>(field->size);
            }
            if (p.o == op::NE) p.negate = true;
        } else {
            error(filter_err::INVALID_VALUE, pos + i);
            return -1;
        }
        return i;
    }
};

// calc_stack(): counts predicates and parenthesis depth, and finds unbalanced parentheses
// and quotes. Returns 0 or the error (with its position).
filter_err calc_stack(const char *str, int &parens, int &preds, int &errpos)
{
    bool is_pred = false;
    int nr_preds = 0, open = 1, max_open = 1, last_quote = 0;
    char quote = 0;
    int i;
    errpos = 0;
    for (i = 0; str[i]; i++) {
        if (is_space(str[i])) continue;
        if (quote) {
            if (str[i] == quote) quote = 0;
            continue;
        }
        switch (str[i]) {
        case '\'':
        case '"':
            quote = str[i];
            last_quote = i;
            break;
        case '|':
        case '&':
            if (str[i + 1] != str[i]) break;
            is_pred = false;
            continue;
        case '(':
            is_pred = false;
            open++;
            if (open > max_open) max_open = open;
            continue;
        case ')':
            is_pred = false;
            if (open == 1) {
                errpos = i;
                return filter_err::TOO_MANY_CLOSE;
            }
            open--;
            continue;
        }
        if (!is_pred) {
            nr_preds++;
            is_pred = true;
        }
    }
    if (quote) {
        errpos = last_quote;
        return filter_err::MISSING_QUOTE;
    }
    if (open != 1) {
        int level = open;
        for (i--; i; i--) {
            if (quote) {
                if (str[i] == quote) quote = 0;
                continue;
            }
            switch (str[i]) {
            case '(':
                if (level == open) {
                    errpos = i;
                    return filter_err::TOO_MANY_OPEN;
                }
                level--;
                break;
            case ')':
                level++;
                break;
            case '\'':
            case '"':
                quote = str[i];
                break;
            }
        }
        errpos = 0;
        return filter_err::TOO_MANY_OPEN;
    }
    parens = max_open;
    preds = nr_preds;
    return filter_err::NONE;
}

enum { INVERT = 1, PROCESS_AND = 2, PROCESS_OR = 4 };

void update_preds(std::vector<event_filter::entry> &prog, int n, int invert)
{
    int t = prog[size_t(n)].target;
    int s = prog[size_t(t)].target;
    prog[size_t(t)].when_to_branch = invert;
    prog[size_t(t)].target = n;
    prog[size_t(n)].target = s;
}

std::string_view strip(std::string_view s)
{
    while (!s.empty() && is_space(s.front()))
        s.remove_prefix(1);
    while (!s.empty() && is_space(s.back()))
        s.remove_suffix(1);
    return s;
}

DPROBE_NOPROBE inline uint64_t load_le(const uint8_t *p, unsigned size) noexcept
{
    switch (size) {
    case 1:
        return p[0];
    case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        return v;
    }
    default: {
        uint64_t v;
        std::memcpy(&v, p, 8);
        return v;
    }
    }
}

DPROBE_NOPROBE inline int64_t sign_extend(uint64_t v, unsigned size) noexcept
{
    switch (size) {
    case 1:
        return static_cast<int8_t>(v);
    case 2:
        return static_cast<int16_t>(v);
    case 4:
        return static_cast<int32_t>(v);
    default:
        return static_cast<int64_t>(v);
    }
}

DPROBE_NOPROBE inline uint64_t truncate(uint64_t v, unsigned size) noexcept
{
    return size >= 8 ? v : v & ((uint64_t{1} << (size * 8)) - 1);
}

template <typename T> DPROBE_NOPROBE inline bool compare(op o, T a, T b) noexcept
{
    switch (o) {
    case op::LT:
        return a < b;
    case op::LE:
        return a <= b;
    case op::GT:
        return a > b;
    case op::GE:
        return a >= b;
    case op::BAND:
        return (a & b) != 0;
    default:
        return a == b;
    }
}

// strnlen that stops at LIMIT without reading past it.
DPROBE_NOPROBE inline size_t bounded_len(const char *s, size_t limit) noexcept
{
    size_t n = 0;
    while (n < limit && s[n])
        n++;
    return n;
}

DPROBE_NOPROBE bool string_match(const event_filter::pred &p, const char *pattern, const char *str,
                                 size_t len) noexcept
{
    std::string_view subject(str, len);
    bool m;
    if (p.glob)
        m = glob_match(std::string_view(pattern, p.pattern_len), subject);
    else
        m = subject == std::string_view(pattern, p.pattern_len);
    return m != p.negate;
}

} // namespace

const char *filter_err_name(filter_err e) noexcept
{
    auto i = static_cast<size_t>(e);
    return i < n_filt ? filt_names[i] : "ERRNO";
}

const char *filter_err_text(filter_err e) noexcept
{
    auto i = static_cast<size_t>(e);
    return i < n_filt ? filt_texts[i] : "Error";
}

std::vector<filter_field> probe_filter_fields(const probe_definition &def)
{
    if (def.kind == probe_kind::synth) return synth_filter_fields(def);
    using t = filter_field::type;
    std::vector<filter_field> f;
    probe_event_layout l = probe_layout(def);
    // The event's own fields first, as trace_find_event_field() looks them up.
    if (def.kind == probe_kind::eprobe) {
        // No probe address in an event probe's record.
    } else if (def.is_return) {
        f.push_back({"__probe_func", t::number, uint16_t(l.ip_off), 8, false});
        f.push_back({"__probe_ret_ip", t::number, uint16_t(l.ret_ip_off), 8, false});
    } else {
        f.push_back({"__probe_ip", t::number, uint16_t(l.ip_off), 8, false});
    }
    for (const auto &a : def.args) {
        filter_field ff;
        ff.name = a.name;
        ff.offset = static_cast<uint16_t>(l.args_off + a.offset);
        ff.size = static_cast<uint16_t>(a.field_size());
        ff.is_signed = a.type->is_signed;
        if (a.type->is_string && !a.count) {
            ff.kind = t::dyn_string;
        } else if (a.count && a.type->id == fetch_type_id::char_) {
            ff.kind = t::static_string;
        } else if (a.count && a.type->is_string) {
            continue; // arrays of strings: no filter predicate in the kernel either
        } else {
            ff.kind = t::number;
        }
        f.push_back(std::move(ff));
    }
    f.push_back({"CPU", t::cpu, 0, 4, true});
    f.push_back({"cpu", t::cpu, 0, 4, true});
    f.push_back({"COMM", t::comm, 0, 16, false});
    f.push_back({"comm", t::comm, 0, 16, false});
    f.push_back({"common_type", t::number, 0, 2, false});
    f.push_back({"common_flags", t::number, 2, 1, false});
    f.push_back({"common_preempt_count", t::number, 3, 1, false});
    f.push_back({"common_pid", t::number, 4, 4, true});
    return f;
}

std::unique_ptr<event_filter> event_filter::compile(std::string_view text,
                                                    std::span<const filter_field> fields,
                                                    filter_parse_error &pe)
{
    pe = {};
    std::string s(strip(text));
    const char *str = s.c_str();
    int nr_parens = 0, nr_preds = 0, errpos = 0;
    if (filter_err e = calc_stack(str, nr_parens, nr_preds, errpos); e != filter_err::NONE) {
        pe.err = e;
        pe.pos = errpos;
        return nullptr;
    }
    if (!nr_preds) {
        pe.err = filter_err::ERRNO;
        return nullptr;
    }

    compiler cc{fields, pe, {}};
    std::vector<entry> prog(size_t(nr_preds) + 2);
    std::vector<int> inverts(size_t(nr_preds) + 2);
    std::vector<int> op_stack(size_t(nr_parens) + 1);
    size_t top = 0;
    op_stack[0] = 0;
    int invert = 0;
    int n = 0;
    const char *ptr = str;
    auto fail = [&](filter_err e, long pos) -> std::unique_ptr<event_filter> {
        pe.err = e;
        pe.pos = static_cast<int>(pos);
        return nullptr;
    };

    // First pass (predicate_parse()).
    while (*ptr) {
        const char *next = ptr++;
        if (is_space(*next)) continue;
        if (*next == '(') {
            if (top + 1 >= op_stack.size()) return fail(filter_err::TOO_MANY_OPEN, next - str);
            op_stack[++top] = invert;
            continue;
        }
        if (*next == '!' && is_not(next)) {
            invert = !invert;
            continue;
        }
        if (n >= nr_preds + 2) return fail(filter_err::TOO_MANY_PREDS, next - str);
        inverts[size_t(n)] = invert;
        prog[size_t(n)].target = n - 1;
        int len = cc.parse_pred(next, static_cast<int>(ptr - str), prog[size_t(n)].p);
        if (len < 0) {
            if (pe.err == filter_err::NONE) pe.err = filter_err::ERRNO;
            return nullptr;
        }
        ptr = next + len;
        n++;
        for (;;) {
            next = ptr++;
            if (is_space(*next)) continue;
            switch (*next) {
            case ')':
            case '\0':
                break;
            case '&':
            case '|':
                if (next[1] == next[0]) {
                    ptr++;
                    break;
                }
                [[fallthrough]];
            default:
                return fail(filter_err::TOO_MANY_PREDS, next - str);
            }
            invert = op_stack[top] & INVERT;
            if (op_stack[top] & PROCESS_AND) {
                update_preds(prog, n - 1, invert);
                op_stack[top] &= ~PROCESS_AND;
            }
            if (*next == '&') {
                op_stack[top] |= PROCESS_AND;
                break;
            }
            if (op_stack[top] & PROCESS_OR) {
                update_preds(prog, n - 1, !invert);
                op_stack[top] &= ~PROCESS_OR;
            }
            if (*next == '|') {
                op_stack[top] |= PROCESS_OR;
                break;
            }
            if (!*next) goto out;
            if (top == 0) return fail(filter_err::TOO_MANY_CLOSE, ptr - str);
            top--;
        }
    }
out:
    if (top != 0) return fail(filter_err::TOO_MANY_OPEN, ptr - str);
    if (!n) return fail(filter_err::NO_FILTER, ptr - str);

    prog.resize(size_t(n) + 2);
    prog[size_t(n)].target = 1;     // TRUE
    prog[size_t(n) + 1].target = 0; // FALSE
    prog[size_t(n) - 1].target = n;
    prog[size_t(n) - 1].when_to_branch = false;
    // Second pass: a jump to a label with the same condition goes to that label's target.
    for (int i = n - 1; i--;) {
        int target = prog[size_t(i)].target;
        // A predicate that no && or || linked keeps its "previous" target (-1 for the first
        // one): the kernel reads prog[-1] there and only then finds the program invalid.
        // Found by dynevent_fuzz ("a == 1 || b == 9 &&").
        if (target < 0 || target > n + 1) return fail(filter_err::INVALID_FILTER, 0);
        if (prog[size_t(i)].when_to_branch == prog[size_t(target)].when_to_branch)
            prog[size_t(i)].target = prog[size_t(target)].target;
    }
    // Third pass: fold the inversions into the branch conditions.
    for (int i = 0; i < n; i++) {
        prog[size_t(i)].when_to_branch =
            (inverts[size_t(i)] != 0) != prog[size_t(i)].when_to_branch;
        if (prog[size_t(i)].target <= i) return fail(filter_err::INVALID_FILTER, 0);
    }

    auto f = std::unique_ptr<event_filter>(new event_filter);
    f->text_ = std::move(s);
    prog.resize(size_t(n));
    f->prog_ = std::move(prog);
    f->patterns_ = std::move(cc.patterns);
    return f;
}

DPROBE_NOPROBE bool event_filter::match(const uint8_t *record, size_t size,
                                        const context &ctx) const noexcept
{
    const int n = static_cast<int>(prog_.size());
    const char *patterns = patterns_.data();
    int i;
    for (i = 0; i < n; i++) {
        const entry &e = prog_[size_t(i)];
        const pred &p = e.p;
        bool m;
        switch (p.kind) {
        case filter_field::type::number: {
            if (p.offset + p.size > size) {
                m = false;
                break;
            }
            uint64_t raw = load_le(record + p.offset, p.size);
            if (p.o == op::EQ || p.o == op::NE)
                m = (raw == truncate(p.val, p.size)) != p.negate;
            else if (p.is_signed)
                m = compare<int64_t>(p.o, sign_extend(raw, p.size),
                                     sign_extend(truncate(p.val, p.size), p.size));
            else
                m = compare<uint64_t>(p.o, raw, truncate(p.val, p.size));
            break;
        }
        case filter_field::type::cpu: {
            int64_t cpu = static_cast<int64_t>(ctx.cpu);
            int64_t v = static_cast<int64_t>(p.val);
            m = p.o == op::NE ? cpu != v : compare<int64_t>(p.o, cpu, v);
            break;
        }
        case filter_field::type::dyn_string: {
            if (p.offset + 4u > size) {
                m = false;
                break;
            }
            uint32_t dl;
            std::memcpy(&dl, record + p.offset, sizeof(dl));
            uint32_t off = data_loc_offset(dl), len = data_loc_len(dl);
            // A faulted fetch stores length 0: it compares as the empty string.
            const char *s = "";
            size_t sl = 0;
            if (len && off < size) {
                s = reinterpret_cast<const char *>(record + off);
                sl = bounded_len(s, std::min<size_t>(len, size - off));
            }
            m = string_match(p, patterns + p.pattern_off, s, sl);
            break;
        }
        case filter_field::type::static_string: {
            if (p.offset + p.field_len > size) {
                m = false;
                break;
            }
            // A field of size 0 (ftrace/print's `char buf[]`) runs to its NUL, as the
            // kernel's regex match of a zero length.
            const char *s = reinterpret_cast<const char *>(record + p.offset);
            const size_t max = p.field_len ? p.field_len : size - p.offset;
            m = string_match(p, patterns + p.pattern_off, s, bounded_len(s, max));
            break;
        }
        case filter_field::type::comm: {
            const char *c = ctx.comm ? ctx.comm : fetch_current_comm();
            m = string_match(p, patterns + p.pattern_off, c, bounded_len(c, 16));
            break;
        }
        default:
            m = false;
        }
        if (m == e.when_to_branch) i = e.target;
    }
    // i == n: fell through to TRUE; i == n + 1: jumped past it to FALSE.
    return i == n;
}

std::string filter_error_text(std::string_view text, const filter_parse_error &err)
{
    std::string s(strip(text));
    int pos = err.pos;
    int len = static_cast<int>(s.size());
    if (pos > len) pos = len;
    if (pos) // "indexing is off by one"
        pos++;
    if (err.err != filter_err::NONE && err.err != filter_err::ERRNO) {
        s += '\n';
        if (pos > 1) s.append(size_t(pos - 1), ' ');
        s += "^\nparse_error: ";
        s += filter_err_text(err.err);
        s += '\n';
    } else {
        s += "\nError: (" + std::to_string(-EINVAL) + ")\n";
    }
    return s;
}

} // namespace dprobe
