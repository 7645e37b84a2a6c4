// Fetch-arg compiler (the kernel's traceprobe_parse_probe_arg and friends), for user-space
// probes. Offline: the interpreter that runs the programs is fetch_run.cpp.
#include "tracefs/fetch_arg.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/compiler.h"
#include "tracefs/event_filter.h"
#include "tracefs/trace_btf.h"

namespace dprobe
{

// ------------------------------------------------------------------------------------------
// Numbers

namespace
{

int digit_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'z') return c - 'a' + 10;
    if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
    return 99;
}

} // namespace

int kstrtoull(std::string_view s, unsigned base, unsigned long long &out) noexcept
{
    if (!s.empty() && s[0] == '+') s.remove_prefix(1);
    if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    if (base == 0 || base == 16) {
        if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') &&
            std::isxdigit(static_cast<unsigned char>(s[2]))) {
            base = 16;
            s.remove_prefix(2);
        } else if (base == 0) {
            base = (s.size() > 1 && s[0] == '0') ? 8 : 10;
        }
    }
    if (s.empty()) return -EINVAL;
    unsigned long long v = 0;
    for (char c : s) {
        int d = digit_value(c);
        if (d >= static_cast<int>(base)) return -EINVAL;
        if (v > (ULLONG_MAX - static_cast<unsigned>(d)) / base) return -ERANGE;
        v = v * base + static_cast<unsigned>(d);
    }
    out = v;
    return 0;
}

int kstrtoll(std::string_view s, unsigned base, long long &out) noexcept
{
    unsigned long long u = 0;
    if (!s.empty() && s[0] == '-') {
        int r = kstrtoull(s.substr(1), base, u);
        if (r) return r;
        if (u > static_cast<unsigned long long>(LLONG_MAX) + 1) return -ERANGE;
        out = static_cast<long long>(0 - u);
        return 0;
    }
    int r = kstrtoull(s, base, u);
    if (r) return r;
    if (u > static_cast<unsigned long long>(LLONG_MAX)) return -ERANGE;
    out = static_cast<long long>(u);
    return 0;
}

// ------------------------------------------------------------------------------------------
// Compiler

const char *fetch_op_name(fetch_op op) noexcept
{
    switch (op) {
    case fetch_op::NOP:
        return "NOP";
    case fetch_op::REG:
        return "REG";
    case fetch_op::STACK:
        return "STACK";
    case fetch_op::STACKP:
        return "STACKP";
    case fetch_op::RETVAL:
        return "RETVAL";
    case fetch_op::IMM:
        return "IMM";
    case fetch_op::COMM:
        return "COMM";
    case fetch_op::ARG:
        return "ARG";
    case fetch_op::FOFFS:
        return "FOFFS";
    case fetch_op::DATA:
        return "DATA";
    case fetch_op::EDATA:
        return "EDATA";
    case fetch_op::TP_ARG:
        return "TP_ARG";
    case fetch_op::DEREF:
        return "DEREF";
    case fetch_op::UDEREF:
        return "UDEREF";
    case fetch_op::ST_RAW:
        return "ST_RAW";
    case fetch_op::ST_MEM:
        return "ST_MEM";
    case fetch_op::ST_UMEM:
        return "ST_UMEM";
    case fetch_op::ST_STRING:
        return "ST_STRING";
    case fetch_op::ST_USTRING:
        return "ST_USTRING";
    case fetch_op::ST_SYMSTR:
        return "ST_SYMSTR";
    case fetch_op::MOD_BF:
        return "MOD_BF";
    case fetch_op::LP_ARRAY:
        return "LP_ARRAY";
    case fetch_op::END:
        return "END";
    case fetch_op::NOP_SYMBOL:
        return "NOP_SYMBOL";
    }
    return "?";
}

int entry_arg_table::slot_for(unsigned n) noexcept
{
    for (uint16_t i = 0; i < count; i++)
        if (arg[i] == n) return i;
    if (count >= arg.size()) return -1;
    arg[count] = static_cast<uint16_t>(n);
    return count++;
}

namespace
{

constexpr const char *reserved_names[] = {
    "common_type", "common_flags", "common_preempt_count", "common_pid",
    "common_tgid", "__probe_ip",   "__probe_ret_ip",       "__probe_func",
};

bool is_good_name(std::string_view s)
{
    if (s.empty()) return false;
    auto c0 = static_cast<unsigned char>(s[0]);
    if (!std::isalpha(c0) && c0 != '_') return false;
    for (char ch : s.substr(1)) {
        auto c = static_cast<unsigned char>(ch);
        if (!std::isalnum(c) && c != '_') return false;
    }
    return true;
}

bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

using insn_it = fetch_insn *;

struct arg_ctx {
    unsigned flags;
    int index;  // argv index for errors
    int offset; // caret offset of the text being parsed, inside the argv token
    entry_arg_table *eargs;
    fetch_prog *prog;
    int *sym_pos;
    const btf_context *btf;
    btf_last *last; // the type a name left (trace_btf.h)

    probe_error err(probe_err e, int off, int errnum = EINVAL) const
    {
        return probe_error::make(e, index, off, errnum);
    }
};

bool tparg_is_function_entry(unsigned f)
{
    return (f & (TPARG_FL_KERNEL | TPARG_FL_FENTRY | TPARG_FL_RETURN)) ==
           (TPARG_FL_KERNEL | TPARG_FL_FENTRY);
}
bool tparg_is_function_return(unsigned f)
{
    return (f & (TPARG_FL_KERNEL | TPARG_FL_FENTRY | TPARG_FL_RETURN)) ==
           (TPARG_FL_KERNEL | TPARG_FL_RETURN);
}

// The field NAME of an event probe's attached event (the kernel's parse_trace_event_arg):
// its own fields, not the common ones.
const filter_field *find_event_field(const arg_ctx &ctx, std::string_view name)
{
    if (!ctx.btf->event_fields) return nullptr;
    for (const filter_field &f : *ctx.btf->event_fields) {
        using t = filter_field::type;
        if (f.name == name && !f.name.starts_with("common_") &&
            (f.kind == t::number || f.kind == t::dyn_string || f.kind == t::static_string))
            return &f;
    }
    return nullptr;
}

probe_error parse_event_field(std::string_view v, insn_it code, arg_ctx &ctx)
{
    code->op = fetch_op::TP_ARG;
    if (!ctx.btf->event_fields) { // not checked here: the process checks it
        code->size = 8;
        if (v == "comm" || v == "COMM") code->op = fetch_op::COMM;
        return {};
    }
    if (const filter_field *f = find_event_field(ctx, v)) {
        using t = filter_field::type;
        code->offset = f->offset;
        code->size = static_cast<uint8_t>(f->size > 8 ? 8 : f->size);
        code->param = f->kind == t::dyn_string      ? 2
                      : f->kind == t::static_string ? 3
                      : f->is_signed                ? 1
                                                    : 0;
        return {};
    }
    code->op = fetch_op::NOP;
    if (v == "comm" || v == "COMM") {
        code->op = fetch_op::COMM;
        return {};
    }
    return ctx.err(probe_err::BAD_ATTACH_ARG, 0);
}

probe_error parse_probe_vars(std::string_view arg, insn_it &code, insn_it end, arg_ctx &ctx)
{
    std::string_view v = arg.substr(1);
    probe_err e = probe_err::BAD_VAR;
    if (ctx.flags & TPARG_FL_TEVENT) return parse_event_field(v, code, ctx);

    if (v.starts_with("retval")) {
        if (!(ctx.flags & TPARG_FL_RETURN)) return ctx.err(probe_err::RETVAL_ON_PROBE, ctx.offset);
        std::string_view rest = v.substr(6);
        // Symbol-aware probes type $retval (and follow its members) with the function's
        // debug info, as the kernel's do with BTF.
        if ((ctx.flags & TPARG_FL_KERNEL) && ctx.btf->m != btf_context::mode::unsupported &&
            (rest.empty() || rest[0] == '.' || rest[0] == '-'))
            return parse_btf_arg(arg, ctx.offset, ctx.index, ctx.flags, *ctx.btf, *ctx.eargs, code,
                                 end, *ctx.last);
        if (!rest.empty()) return ctx.err(probe_err::BAD_VAR, ctx.offset);
        code->op = fetch_op::RETVAL;
        return {};
    }
    if (v.starts_with("stack")) {
        std::string_view n = v.substr(5);
        if (n.empty()) {
            code->op = fetch_op::STACKP;
            return {};
        }
        unsigned long long param = 0;
        if (is_digit(n[0]) && kstrtoull(n, 10, param) == 0) {
            // Only symbol-aware probes bound N like the kernel; any N stays a word index.
            if (((ctx.flags & TPARG_FL_KERNEL) && param > PARAM_MAX_STACK) ||
                param > UINT32_MAX / sizeof(unsigned long))
                return ctx.err(probe_err::BAD_STACK_NUM, ctx.offset);
            code->op = fetch_op::STACK;
            code->param = static_cast<uint32_t>(param);
            return {};
        }
        return ctx.err(e, ctx.offset);
    }
    if (v == "comm" || v == "COMM") {
        code->op = fetch_op::COMM;
        return {};
    }
    if (v.starts_with("arg")) {
        unsigned long long param = 0;
        std::string_view n = v.substr(3);
        if (n == "*") // $arg* stands alone: no name, no dereference around it
            return ctx.err(probe_err::BAD_VAR_ARGS, ctx.offset);
        if (n.empty() || !is_digit(n[0]) || kstrtoull(n, 10, param))
            return ctx.err(probe_err::BAD_VAR, ctx.offset);
        if (param == 0 || param > PARAM_MAX_STACK)
            return ctx.err(probe_err::BAD_ARG_NUM, ctx.offset);
        param--; // $arg1 is argument 0
        if (tparg_is_function_entry(ctx.flags)) {
            code->op = fetch_op::ARG;
            code->param = static_cast<uint32_t>(param);
        } else if (tparg_is_function_return(ctx.flags)) {
            int slot = ctx.eargs->slot_for(static_cast<unsigned>(param));
            if (slot < 0) return ctx.err(probe_err::TOO_MANY_EARGS, 0, E2BIG);
            code->op = fetch_op::EDATA;
            code->offset = slot * static_cast<int64_t>(sizeof(unsigned long));
        } else {
            return ctx.err(probe_err::NOFENTRY_ARGS, ctx.offset);
        }
        return {};
    }
    return ctx.err(e, ctx.offset);
}

// The kernel's str_to_immediate().
bool str_to_immediate(std::string_view s, uint64_t &imm)
{
    if (s.empty()) return false;
    if (is_digit(s[0])) {
        unsigned long long u;
        if (kstrtoull(s, 0, u)) return false;
        imm = u;
        return true;
    }
    if (s[0] == '-' || s[0] == '+') {
        long long l;
        if (kstrtoll(s[0] == '+' ? s.substr(1) : s, 0, l)) return false;
        imm = static_cast<uint64_t>(l);
        return true;
    }
    return false;
}

probe_error parse_fetch(std::string_view arg, insn_it &pcode, insn_it end, arg_ctx &ctx)
{
    insn_it code = pcode;
    probe_error ret;

    if (arg.empty()) return ctx.err(probe_err::BAD_FETCH_ARG, ctx.offset);

    switch (arg[0]) {
    case '$':
        ret = parse_probe_vars(arg, code, end, ctx);
        break;

    case '%': {
        if (ctx.flags & (TPARG_FL_FPROBE | TPARG_FL_TEVENT))
            return ctx.err(probe_err::BAD_VAR, ctx.offset);
        std::string reg(arg.substr(1));
        int off = regs_query_register_offset(reg.c_str());
        if (off < 0) return ctx.err(probe_err::BAD_REG_NAME, ctx.offset);
        code->op = fetch_op::REG;
        code->param = static_cast<uint32_t>(off);
        break;
    }

    case '@': {
        if (arg.size() > 1 && is_digit(arg[1])) {
            unsigned long long addr;
            if (kstrtoull(arg.substr(1), 0, addr))
                return ctx.err(probe_err::BAD_MEM_ADDR, ctx.offset);
            code->op = fetch_op::IMM;
            code->immediate = addr;
        } else if (arg.size() > 1 && arg[1] == '+') {
            if (ctx.flags & TPARG_FL_KERNEL) return ctx.err(probe_err::FILE_ON_KPROBE, ctx.offset);
            long long foff;
            if (kstrtoll(arg.substr(2), 0, foff))
                return ctx.err(probe_err::BAD_FILE_OFFS, ctx.offset);
            code->op = fetch_op::FOFFS;
            code->offset = foff;
            code->immediate = 0; // filled by resolve_fetch_args
        } else {
            if (!(ctx.flags & TPARG_FL_KERNEL))
                return ctx.err(probe_err::SYM_ON_UPROBE, ctx.offset);
            std::string_view sym = arg.substr(1);
            if (sym.empty() || ctx.prog->data[0] != '\0' || sym.size() >= sizeof(ctx.prog->data))
                return ctx.err(probe_err::BAD_FETCH_ARG, ctx.offset);
            std::memcpy(ctx.prog->data, sym.data(), sym.size());
            ctx.prog->data[sym.size()] = '\0';
            *ctx.sym_pos = ctx.offset;
            code->op = fetch_op::NOP_SYMBOL;
            if (++code == end) return ctx.err(probe_err::TOO_MANY_OPS, ctx.offset);
            code->op = fetch_op::IMM;
            code->immediate = 0; // filled by resolve_fetch_args
        }
        // All three forms read memory at that address.
        if (++code == end) return ctx.err(probe_err::TOO_MANY_OPS, ctx.offset);
        pcode = code;
        code->op = fetch_op::DEREF;
        code->offset = 0;
        break;
    }

    case '+':
    case '-': {
        fetch_op deref = fetch_op::DEREF;
        size_t numpos = 0; // where the offset number starts
        bool neg = arg[0] == '-';
        size_t after = 1;
        if (arg.size() > 1 && arg[1] == 'u') {
            deref = fetch_op::UDEREF;
            after = 2;
        }
        numpos = after;
        size_t paren = arg.find('(');
        if (paren == std::string_view::npos)
            return ctx.err(probe_err::DEREF_NEED_BRACE, ctx.offset);
        long long off;
        std::string num = neg ? "-" : "";
        num += arg.substr(numpos, paren - numpos);
        if (paren < numpos || kstrtoll(num, 0, off))
            return ctx.err(probe_err::BAD_DEREF_OFFS, ctx.offset);
        int inner_off = ctx.offset + static_cast<int>(paren + 1);
        std::string_view inner = arg.substr(paren + 1);
        size_t close = inner.rfind(')');
        if (close == std::string_view::npos)
            return ctx.err(probe_err::DEREF_OPEN_BRACE, inner_off + static_cast<int>(inner.size()));
        if (close + 1 != inner.size())
            return ctx.err(probe_err::BAD_FETCH_ARG, inner_off + static_cast<int>(close + 1));
        inner = inner.substr(0, close);
        int saved = ctx.offset;
        ctx.offset = inner_off;
        ret = parse_fetch(inner, code, end, ctx);
        if (ret) return ret;
        ctx.offset = saved;
        *ctx.last = btf_last{}; // a dereference leaves the name's type behind
        if (code->op == fetch_op::COMM || code->op == fetch_op::DATA)
            return ctx.err(probe_err::COMM_CANT_DEREF, inner_off);
        if (++code == end) return ctx.err(probe_err::TOO_MANY_OPS, inner_off);
        pcode = code;
        code->op = deref;
        code->offset = off;
        break;
    }

    case '\\':
        if (arg.size() > 1 && arg[1] == '"') {
            std::string_view s = arg.substr(2);
            if (s.empty() || s.back() != '"')
                return ctx.err(probe_err::IMMSTR_NO_CLOSE,
                               ctx.offset + 2 + static_cast<int>(s.size()));
            s.remove_suffix(1);
            if (s.size() >= sizeof(ctx.prog->data))
                return ctx.err(probe_err::ARG_TOO_LONG, ctx.offset, E2BIG);
            std::memcpy(ctx.prog->data, s.data(), s.size());
            ctx.prog->data[s.size()] = '\0';
            code->op = fetch_op::DATA;
        } else {
            uint64_t imm;
            if (!str_to_immediate(arg.substr(1), imm))
                return ctx.err(probe_err::BAD_IMM, ctx.offset + 1);
            code->op = fetch_op::IMM;
            code->immediate = imm;
        }
        break;

    default:
        if ((std::isalpha(static_cast<unsigned char>(arg[0])) || arg[0] == '_') &&
            (ctx.flags & TPARG_FL_TEVENT)) {
            // An event probe names fields with '$': a bare field name is a mistake.
            if (!ctx.btf->event_fields || find_event_field(ctx, arg))
                return ctx.err(probe_err::BAD_FETCH_ARG, ctx.offset);
            return ctx.err(probe_err::BAD_ATTACH_ARG, ctx.offset);
        }
        if (std::isalpha(static_cast<unsigned char>(arg[0])) || arg[0] == '_') {
            // A parameter by name: the function's debug info says where it is (trace_btf.h).
            if (!tparg_is_function_entry(ctx.flags) && !tparg_is_function_return(ctx.flags))
                return ctx.err(probe_err::NOSUP_BTFARG, ctx.offset);
            ret = parse_btf_arg(arg, ctx.offset, ctx.index, ctx.flags, *ctx.btf, *ctx.eargs, code,
                                end, *ctx.last);
        }
        break;
    }
    if (ret) return ret;
    if (code->op == fetch_op::NOP) return ctx.err(probe_err::BAD_FETCH_ARG, ctx.offset);
    pcode = code;
    return {};
}

// The kernel's __parse_bitfield_probe_arg(); false on a malformed or oversized field.
bool parse_bitfield(std::string_view bf, const fetch_type &t, insn_it &pcode, insn_it end)
{
    // "b<W>@<O>/<C>": simple_strtoul-style numbers (base 0, stop at the first non-digit).
    auto strtoul_prefix = [](std::string_view s, size_t &used) {
        unsigned long long v = 0;
        size_t i = 0;
        unsigned base = 10;
        if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') &&
            std::isxdigit(static_cast<unsigned char>(s[2]))) {
            base = 16;
            i = 2;
        } else if (!s.empty() && s[0] == '0') {
            base = 8;
        }
        for (; i < s.size(); i++) {
            int d = digit_value(s[i]);
            if (d >= static_cast<int>(base)) break;
            v = v * base + static_cast<unsigned>(d);
            if (v > 1024) v = 1024; // anything this large fails the width check anyway
        }
        used = i;
        return v;
    };
    size_t used = 0;
    std::string_view s = bf.substr(1);
    unsigned long long bw = strtoul_prefix(s, used);
    if (bw == 0 || used >= s.size() || s[used] != '@') return false;
    s = s.substr(used + 1);
    unsigned long long bo = strtoul_prefix(s, used);
    if (used == 0 || used >= s.size() || s[used] != '/') return false;
    insn_it code = pcode + 1;
    if (code == end || code->op != fetch_op::NOP) return false;
    pcode = code;
    unsigned bits = t.size * 8u;
    if (bits < bw + bo) return false;
    code->op = fetch_op::MOD_BF;
    code->lshift = static_cast<uint8_t>(bits - (bw + bo));
    code->rshift = static_cast<uint8_t>(bits - bw);
    code->basesize = t.size;
    return true;
}

} // namespace

probe_error parse_probe_arg(std::string_view argtext, int argv_index, int arg_idx,
                            std::span<const probe_arg> previous, unsigned flags,
                            entry_arg_table &eargs, probe_arg &out, const btf_context &btf)
{
    out = probe_arg{};
    auto err = [&](probe_err e, int off, int errnum = EINVAL) {
        return probe_error::make(e, argv_index, off, errnum);
    };

    // Name.
    std::string_view body;
    size_t eq = argtext.find('=');
    if (eq != std::string_view::npos) {
        if (eq > static_cast<size_t>(MAX_ARG_NAME_LEN)) return err(probe_err::ARG_NAME_TOO_LONG, 0);
        if (eq == 0) return err(probe_err::NO_ARG_NAME, 0);
        out.name = std::string(argtext.substr(0, eq));
        body = argtext.substr(eq + 1);
    } else {
        // The kernel's generate_probe_arg_name(): a name ("count") names itself.
        std::string_view head = argtext.substr(0, argtext.find(':'));
        out.name = is_good_name(head) ? std::string(head) : "arg" + std::to_string(arg_idx + 1);
        body = argtext;
    }
    if (!is_good_name(out.name)) return err(probe_err::BAD_ARG_NAME, 0);
    for (const char *r : reserved_names)
        if (out.name == r) return err(probe_err::USED_ARG_NAME, 0);
    for (const auto &p : previous)
        if (p.name == out.name) return err(probe_err::USED_ARG_NAME, 0);

    const int body_off = eq == std::string_view::npos ? 0 : static_cast<int>(eq + 1);
    if (body.size() > static_cast<size_t>(MAX_ARGSTR_LEN))
        return err(probe_err::ARG_TOO_LONG, body_off, E2BIG);
    if (body.empty()) return err(probe_err::NO_ARG_BODY, body_off);
    out.comm = std::string(body);

    // Type: split at the first ':'; an array suffix "[N]" on it.
    std::string_view fetch = body, type;
    bool has_type = false;
    int type_off = 0; // offset of the type inside body
    if (size_t colon = body.find(':'); colon != std::string_view::npos) {
        has_type = true;
        fetch = body.substr(0, colon);
        type = body.substr(colon + 1);
        type_off = static_cast<int>(colon + 1);
        if (size_t br = type.find('['); br != std::string_view::npos) {
            std::string_view num = type.substr(br + 1);
            int num_off = type_off + static_cast<int>(br + 1);
            size_t close = num.find(']');
            if (close == std::string_view::npos)
                return err(probe_err::ARRAY_NO_CLOSE, body_off + static_cast<int>(body.size()));
            if (close + 1 != num.size())
                return err(probe_err::BAD_ARRAY_SUFFIX,
                           body_off + num_off + static_cast<int>(close + 1));
            unsigned long long n = 0;
            if (kstrtoull(num.substr(0, close), 0, n) || n == 0 || n > UINT32_MAX)
                return err(probe_err::BAD_ARRAY_NUM, body_off + num_off);
            if (n > static_cast<unsigned long long>(MAX_ARRAY_LEN))
                return err(probe_err::ARRAY_TOO_BIG, body_off + num_off);
            out.count = static_cast<uint32_t>(n);
            type = type.substr(0, br);
        }
    }
    out.type_text = std::string(type);

    const fetch_type *t;
    if (fetch == "$comm" || fetch == "$COMM" || fetch.starts_with("\\\"")) {
        // $comm and immediate strings can only be strings.
        if (out.count || (has_type && type != "string"))
            return err(probe_err::NEED_STRING_TYPE, body_off + type_off);
        t = find_fetch_type("string", flags & TPARG_FL_USER);
    } else {
        t = has_type ? find_fetch_type(type, flags & TPARG_FL_USER) : &default_fetch_type();
    }
    if (!t) return err(probe_err::BAD_TYPE, body_off + type_off);
    out.type = t;

    // Fetch program.
    fetch_prog &prog = out.prog;
    insn_it code = prog.code.data();
    insn_it end = prog.code.data() + FETCH_INSN_MAX - 1;
    prog.code[FETCH_INSN_MAX - 1].op = fetch_op::END;
    btf_last last;
    arg_ctx ctx{flags, argv_index, body_off, &eargs, &prog, &out.sym_pos, &btf, &last};
    if (probe_error e = parse_fetch(fetch, code, end, ctx)) return e;

    // A name's type (the kernel's find_fetch_type_from_btf_type), or the string it is.
    std::string inferred_bf; // a bitfield type inferred for a member
    if (last.type) {
        bool deref = false;
        if (!has_type) {
            btf_type_choice c = btf_infer_type(last);
            if (!c.type.empty()) {
                t = find_fetch_type(c.type, flags & TPARG_FL_USER);
                if (!t) return err(probe_err::BAD_BTF_TID, last.offset);
                out.type = t;
                out.count = c.count;
                if (c.type[0] == 'b') inferred_bf = c.type;
            }
            deref = c.deref;
        } else if (type.find("string") != std::string_view::npos) {
            if (probe_error e = btf_string_fetch(last, argv_index, deref)) return e;
        }
        if (deref) {
            const bool user = code->op == fetch_op::UDEREF || type == "ustring";
            if (++code == end) return err(probe_err::TOO_MANY_OPS, body_off);
            code->op = user ? fetch_op::UDEREF : fetch_op::DEREF;
            code->offset = 0;
        }
    }

    // Store operation.
    const int toff = body_off + type_off;
    if (t->is_string) {
        const bool symstr = t->id == fetch_type_id::symstr;
        if (symstr) {
            if (code->op != fetch_op::REG && code->op != fetch_op::STACK &&
                code->op != fetch_op::RETVAL && code->op != fetch_op::ARG &&
                code->op != fetch_op::EDATA && code->op != fetch_op::DEREF &&
                code->op != fetch_op::TP_ARG)
                return err(probe_err::BAD_SYMSTRING, toff);
        } else if (code->op != fetch_op::DEREF && code->op != fetch_op::UDEREF &&
                   code->op != fetch_op::IMM && code->op != fetch_op::COMM &&
                   code->op != fetch_op::DATA && code->op != fetch_op::TP_ARG) {
            return err(probe_err::BAD_STRING, toff);
        }
        if (out.count && code->op != fetch_op::DEREF && code->op != fetch_op::UDEREF)
            return err(probe_err::BAD_STRING, toff); // an array needs pointers in memory
        if (symstr || code->op == fetch_op::IMM || code->op == fetch_op::COMM ||
            code->op == fetch_op::DATA || code->op == fetch_op::TP_ARG || out.count) {
            // Keep the value: it is the string's address (or, for arrays, a pointer
            // to the first string pointer's target).
            code++;
            if (code == end || code->op != fetch_op::NOP)
                return err(probe_err::TOO_MANY_OPS, body_off);
        }
        if (t->id == fetch_type_id::ustring || code->op == fetch_op::UDEREF)
            code->op = fetch_op::ST_USTRING;
        else if (symstr)
            code->op = fetch_op::ST_SYMSTR;
        else
            code->op = fetch_op::ST_STRING;
        code->size = t->size;
        // ST_* after DEREF keeps the deref's offset: the string is at value + offset.
        out.dynamic = true;
    } else if (code->op == fetch_op::DEREF) {
        code->op = fetch_op::ST_MEM;
        code->size = t->size;
    } else if (code->op == fetch_op::UDEREF) {
        code->op = fetch_op::ST_UMEM;
        code->size = t->size;
    } else {
        code++;
        if (code == end || code->op != fetch_op::NOP)
            return err(probe_err::TOO_MANY_OPS, body_off, E2BIG);
        code->op = fetch_op::ST_RAW;
        code->size = t->size;
    }
    insn_it scode = code;

    // Bitfield.
    if (has_type && !type.empty() && type[0] == 'b') {
        if (!parse_bitfield(type, *t, code, end)) return err(probe_err::BAD_BITFIELD, toff);
    } else if (!inferred_bf.empty() && !parse_bitfield(inferred_bf, *t, code, end)) {
        return err(probe_err::BAD_BTF_TID, last.offset);
    }

    // Array loop.
    if (out.count) {
        if (scode->op != fetch_op::ST_MEM && scode->op != fetch_op::ST_UMEM &&
            scode->op != fetch_op::ST_STRING && scode->op != fetch_op::ST_USTRING)
            return err(probe_err::BAD_STRING, toff);
        code++;
        if (code == end || code->op != fetch_op::NOP)
            return err(probe_err::TOO_MANY_OPS, body_off, E2BIG);
        code->op = fetch_op::LP_ARRAY;
        code->param = out.count;
    }
    code++;
    code->op = fetch_op::END;

    prog.field_size = static_cast<uint16_t>(t->size * (out.count ? out.count : 1));
    if (out.count) out.fmt = std::string(t->fmttype) + "[" + std::to_string(out.count) + "]";
    return {};
}

uint32_t layout_probe_args(std::span<probe_arg> args)
{
    uint32_t off = 0;
    for (auto &a : args) {
        a.offset = off;
        off += a.field_size();
    }
    return off;
}

} // namespace dprobe
