// Fetch-arg compiler (the kernel's traceprobe_parse_probe_arg and friends) and interpreter
// (process_fetch_insn), for user-space probes.
#include "tracefs/fetch_arg.h"

#include "arch/x86_64/uaccess.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <csignal>
#include <mutex>
#include <sys/prctl.h>

#include "core/compiler.h"
#include "core/signal_chain.h"
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

namespace
{

// Whether running PROG may read memory through a pointer from the traced program.
bool reads_memory(const fetch_prog &prog)
{
    for (const fetch_insn &in : prog.code) {
        switch (in.op) {
        case fetch_op::STACK:
        case fetch_op::DEREF:
        case fetch_op::UDEREF:
        case fetch_op::ST_MEM:
        case fetch_op::ST_UMEM:
        case fetch_op::ST_STRING:
        case fetch_op::ST_USTRING:
            return true;
        case fetch_op::ARG:
            if (in.param >= PT_REGS_ARG_COUNT) return true;
            break;
        case fetch_op::END:
            return false;
        default:
            break;
        }
    }
    return false;
}

} // namespace

probe_error resolve_fetch_args(std::span<probe_arg> args, const fetch_resolver &resolver,
                               int first_argv_index)
{
    // A probe about to be registered: make sure bad pointers fault softly.
    for (const auto &a : args) {
        if (reads_memory(a.prog)) {
            fetch_install_fault_handler();
            break;
        }
    }
    for (size_t i = 0; i < args.size(); i++) {
        auto &a = args[i];
        auto err =
            probe_error::make(probe_err::BAD_PROBE_ADDR, first_argv_index + static_cast<int>(i),
                              a.sym_pos < 0 ? 0 : a.sym_pos, ENOENT);
        for (size_t k = 0; k + 1 < a.prog.code.size(); k++) {
            fetch_insn &in = a.prog.code[k];
            if (in.op == fetch_op::END) break;
            if (in.op == fetch_op::NOP_SYMBOL) {
                if (!resolver.symbol) continue;
                // "sym", "sym+off", "sym-off": the kernel's traceprobe_split_symbol_offset.
                std::string_view text(a.prog.data);
                long long off = 0;
                size_t p = text.find_first_of("+-");
                std::string_view name = text.substr(0, p);
                if (p != std::string_view::npos && kstrtoll(text.substr(p), 0, off)) return err;
                if (name.empty()) return err;
                auto addr = resolver.symbol(name);
                if (!addr) return err;
                a.prog.code[k + 1].immediate = *addr + static_cast<uint64_t>(off);
            } else if (in.op == fetch_op::FOFFS && resolver.file_offset) {
                auto addr = resolver.file_offset(static_cast<uint64_t>(in.offset));
                if (!addr)
                    return probe_error::make(probe_err::BAD_FILE_OFFS,
                                             first_argv_index + static_cast<int>(i), 0, ENOENT);
                in.immediate = *addr;
            }
        }
    }
    return {};
}

// ------------------------------------------------------------------------------------------
// Interpreter (hot path: noexcept, no allocation, nofault reads only)

namespace
{

constexpr const char hexdig[] = "0123456789abcdef";

DPROBE_NOPROBE inline bool read_word(unsigned long &val, uintptr_t addr) noexcept
{
    return copy_from_user_nofault(&val, reinterpret_cast<const void *>(addr), sizeof(val)) == 0;
}

DPROBE_NOPROBE inline unsigned long reg_at(const pt_regs *regs, uint32_t off) noexcept
{
    if (off > offsetof(pt_regs, ss)) return 0;
    unsigned long v;
    std::memcpy(&v, reinterpret_cast<const char *>(regs) + off, sizeof(v));
    return v;
}

// Function argument N (0-based) at function entry, SysV x86-64.
DPROBE_NOPROBE inline bool read_arg(const fetch_context &ctx, uint32_t n,
                                    unsigned long &val) noexcept
{
    const pt_regs *regs = ctx.regs;
    if (!regs) return false;
    switch (n) {
    case 0:
        val = regs->di;
        return true;
    case 1:
        val = regs->si;
        return true;
    case 2:
        val = regs->dx;
        return true;
    case 3:
        val = regs->cx;
        return true;
    case 4:
        val = regs->r8;
        return true;
    case 5:
        val = regs->r9;
        return true;
    default:
        // Above the return address the caller pushed: word (N - 6 + 1).
        return read_word(val, regs->sp + (n - PT_REGS_ARG_COUNT + 1) * sizeof(unsigned long));
    }
}

// An event probe's field of the attached event's record (the kernel's get_event_field()):
// a number sign- or zero-extended from its size, a string as its address.
DPROBE_NOPROBE inline bool get_event_field(const fetch_insn *code, const fetch_context &ctx,
                                           unsigned long &val) noexcept
{
    if (!ctx.event_rec) return false;
    const uint8_t *p = ctx.event_rec + code->offset;
    switch (code->param) {
    case 2: { // __data_loc: the offset from the record start in the low 16 bits
        uint32_t dl;
        std::memcpy(&dl, p, sizeof dl);
        val = reinterpret_cast<uintptr_t>(ctx.event_rec + (dl & 0xffff));
        return true;
    }
    case 3:
        val = reinterpret_cast<uintptr_t>(p);
        return true;
    default:
        break;
    }
    const bool sign = code->param == 1;
    switch (code->size) {
    case 1: {
        uint8_t v;
        std::memcpy(&v, p, 1);
        val = sign ? static_cast<unsigned long>(static_cast<int8_t>(v)) : v;
        break;
    }
    case 2: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        val = sign ? static_cast<unsigned long>(static_cast<int16_t>(v)) : v;
        break;
    }
    case 4: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        val = sign ? static_cast<unsigned long>(static_cast<int32_t>(v)) : v;
        break;
    }
    default:
        std::memcpy(&val, p, sizeof val);
        break;
    }
    return true;
}

// Stage 1. False when the value cannot be read.
DPROBE_NOPROBE inline bool fetch_stage1(const fetch_insn *&code, const fetch_prog &prog,
                                        const fetch_context &ctx, unsigned long &val) noexcept
{
    if (code->op == fetch_op::NOP_SYMBOL) code++; // the resolved address follows as an IMM
    const pt_regs *regs = ctx.regs;
    switch (code->op) {
    case fetch_op::REG:
        if (!regs) return false;
        val = reg_at(regs, code->param);
        return true;
    case fetch_op::STACK:
        return regs && read_word(val, regs->sp + code->param * sizeof(unsigned long));
    case fetch_op::STACKP:
        if (!regs) return false;
        val = regs->sp;
        return true;
    case fetch_op::RETVAL:
        if (!regs) return false;
        val = regs->ax;
        return true;
    case fetch_op::IMM:
        val = code->immediate;
        return true;
    case fetch_op::FOFFS:
        val = code->immediate;
        return val != 0;
    case fetch_op::COMM:
        val = reinterpret_cast<uintptr_t>(fetch_current_comm());
        return true;
    case fetch_op::DATA:
        val = reinterpret_cast<uintptr_t>(prog.data);
        return true;
    case fetch_op::ARG:
        return read_arg(ctx, code->param, val);
    case fetch_op::EDATA:
        if (!ctx.edata) return false;
        std::memcpy(&val, static_cast<const char *>(ctx.edata) + code->offset, sizeof(val));
        return true;
    case fetch_op::TP_ARG:
        return get_event_field(code, ctx, val);
    default:
        return false;
    }
}

DPROBE_NOPROBE inline void store_raw(uint8_t *dest, unsigned long val, uint8_t size) noexcept
{
    std::memcpy(dest, &val, size <= sizeof(val) ? size : sizeof(val)); // little-endian
}

DPROBE_NOPROBE inline void apply_bitfield(const fetch_insn *bf, uint8_t *dest) noexcept
{
    switch (bf->basesize) {
    case 1: {
        uint8_t v;
        std::memcpy(&v, dest, 1);
        v = static_cast<uint8_t>(static_cast<uint8_t>(v << bf->lshift) >> bf->rshift);
        std::memcpy(dest, &v, 1);
        break;
    }
    case 2: {
        uint16_t v;
        std::memcpy(&v, dest, 2);
        v = static_cast<uint16_t>(static_cast<uint16_t>(v << bf->lshift) >> bf->rshift);
        std::memcpy(dest, &v, 2);
        break;
    }
    case 4: {
        uint32_t v;
        std::memcpy(&v, dest, 4);
        v = (v << bf->lshift) >> bf->rshift;
        std::memcpy(dest, &v, 4);
        break;
    }
    case 8: {
        uint64_t v;
        std::memcpy(&v, dest, 8);
        v = (v << bf->lshift) >> bf->rshift;
        std::memcpy(dest, &v, 8);
        break;
    }
    default:
        break;
    }
}

// "0x<hex>" into buf; returns the length.
DPROBE_NOPROBE size_t print_hex(char *buf, size_t len, uintptr_t v) noexcept
{
    char tmp[2 + 16 + 1];
    size_t n = 0;
    tmp[n++] = '0';
    tmp[n++] = 'x';
    int shift = 60;
    while (shift > 0 && ((v >> shift) & 0xf) == 0)
        shift -= 4;
    for (; shift >= 0; shift -= 4)
        tmp[n++] = hexdig[(v >> shift) & 0xf];
    if (!len) return 0;
    size_t c = n < len - 1 ? n : len - 1;
    std::memcpy(buf, tmp, c);
    buf[c] = '\0';
    return c;
}

// Stores one string element. DEST NULL = length pass. Returns the bytes used (incl. NUL),
// 0 on a fault.
DPROBE_NOPROBE size_t store_string(const fetch_insn *st, unsigned long val,
                                   const fetch_context &ctx, uint8_t *record, uint8_t *dl,
                                   size_t dyn_off, size_t avail) noexcept
{
    const uintptr_t addr = val + static_cast<uintptr_t>(st->offset);
    size_t maxlen = avail < static_cast<size_t>(MAX_STRING_SIZE) ? avail : MAX_STRING_SIZE;
    if (!record) {
        // Length pass.
        if (st->op == fetch_op::ST_SYMSTR) {
            char buf[512];
            size_t n = ctx.symbolize ? ctx.symbolize(buf, sizeof(buf), addr)
                                     : print_hex(buf, sizeof(buf), addr);
            return n + 1;
        }
        long n = strnlen_user_nofault(reinterpret_cast<const void *>(addr), MAX_STRING_SIZE);
        if (n < 0) return 0;
        return static_cast<size_t>(n) + 1 > static_cast<size_t>(MAX_STRING_SIZE)
                   ? MAX_STRING_SIZE
                   : static_cast<size_t>(n) + 1;
    }
    uint32_t loc = make_data_loc(0, static_cast<uint32_t>(dyn_off));
    size_t used = 0;
    if (maxlen > 0) {
        char *dst = reinterpret_cast<char *>(record + dyn_off);
        long n;
        if (st->op == fetch_op::ST_SYMSTR) {
            n = static_cast<long>(ctx.symbolize ? ctx.symbolize(dst, maxlen, addr)
                                                : print_hex(dst, maxlen, addr));
        } else {
            n = strncpy_from_user_nofault(dst, reinterpret_cast<const void *>(addr),
                                          static_cast<long>(maxlen));
        }
        if (n >= 0) {
            used = static_cast<size_t>(n) + 1;
            loc = make_data_loc(static_cast<uint32_t>(used), static_cast<uint32_t>(dyn_off));
        }
    }
    std::memcpy(dl, &loc, sizeof(loc));
    return used;
}

// Runs PROG; RECORD NULL = length pass (returns the dynamic bytes it would use).
DPROBE_NOPROBE size_t run_prog(const fetch_prog &prog, const fetch_context &ctx, uint8_t *record,
                               size_t field_off, size_t dyn_off, size_t dyn_avail) noexcept
{
    uint8_t *dest = record ? record + field_off : nullptr;
    if (dest) std::memset(dest, 0, prog.field_size);

    const fetch_insn *code = prog.code.data();
    unsigned long val = 0;
    if (!fetch_stage1(code, prog, ctx, val)) goto fault;
    code++;

    {
        // Stage 2.
        unsigned long lval = val;
        const fetch_insn *last_deref = nullptr;
        for (; code->op == fetch_op::DEREF || code->op == fetch_op::UDEREF; code++) {
            lval = val;
            last_deref = code;
            if (!read_word(val, val + static_cast<uintptr_t>(code->offset))) goto fault;
        }
        const fetch_insn *st = code;
        const fetch_insn *bf = (st + 1)->op == fetch_op::MOD_BF ? st + 1 : nullptr;
        const fetch_insn *lp = (bf ? bf + 1 : st + 1);
        uint32_t count = lp->op == fetch_op::LP_ARRAY ? lp->param : 1;
        const bool is_str = st->op == fetch_op::ST_STRING || st->op == fetch_op::ST_USTRING ||
                            st->op == fetch_op::ST_SYMSTR;
        size_t total = 0;

        for (uint32_t i = 0; i < count; i++) {
            uint8_t *edest = dest ? dest + static_cast<size_t>(i) * st->size : nullptr;
            if (is_str) {
                bool ok = true;
                if (i > 0) {
                    // Next string pointer: the slot after the previous one.
                    ok = last_deref &&
                         read_word(val, lval + i * sizeof(char *) +
                                            static_cast<uintptr_t>(last_deref->offset));
                }
                size_t off = dyn_off + total;
                size_t avail = dyn_avail > total ? dyn_avail - total : 0;
                if (record && off > 0xffff) avail = 0; // __data_loc offsets are 16-bit
                if (ok) {
                    total += store_string(st, val, ctx, record, edest, off, avail);
                } else if (edest) {
                    uint32_t loc = make_data_loc(0, static_cast<uint32_t>(off));
                    std::memcpy(edest, &loc, sizeof(loc));
                }
                continue;
            }
            if (!edest) continue;
            switch (st->op) {
            case fetch_op::ST_RAW:
                store_raw(edest, val, st->size);
                break;
            case fetch_op::ST_MEM:
            case fetch_op::ST_UMEM: {
                uintptr_t a =
                    val + static_cast<uintptr_t>(st->offset) + static_cast<uintptr_t>(i) * st->size;
                if (copy_from_user_nofault(edest, reinterpret_cast<const void *>(a), st->size))
                    std::memset(edest, 0, st->size);
                break;
            }
            default:
                break;
            }
            if (bf) apply_bitfield(bf, edest);
        }
        return total;
    }

fault:
    if (dest) {
        // Scalars stay zero; strings get __data_loc with length 0.
        const fetch_insn *st = prog.code.data();
        while (st->op != fetch_op::END && st->op != fetch_op::ST_STRING &&
               st->op != fetch_op::ST_USTRING && st->op != fetch_op::ST_SYMSTR)
            st++;
        if (st->op != fetch_op::END) {
            uint32_t loc = make_data_loc(0, static_cast<uint32_t>(dyn_off));
            for (size_t off = 0; off + 4 <= prog.field_size; off += 4)
                std::memcpy(dest + off, &loc, sizeof(loc));
        }
    }
    return 0;
}

constexpr size_t comm_len = 16; // TASK_COMM_LEN

struct comm_cache {
    char name[comm_len];
    bool valid;
};
__attribute__((tls_model("initial-exec"))) thread_local comm_cache current_comm;

} // namespace

DPROBE_NOPROBE const char *fetch_current_comm() noexcept
{
    comm_cache &c = current_comm;
    if (__builtin_expect(!c.valid, 0)) {
        char buf[comm_len] = {};
        if (prctl(PR_GET_NAME, buf, 0, 0, 0) != 0) buf[0] = '\0';
        buf[comm_len - 1] = '\0';
        std::memcpy(c.name, buf, comm_len);
        c.valid = true;
    }
    return c.name;
}

DPROBE_NOPROBE size_t fetch_run(const fetch_prog &prog, const fetch_context &ctx, uint8_t *record,
                                size_t field_off, size_t dyn_off, size_t dyn_avail) noexcept
{
    if (!record) return 0;
    return run_prog(prog, ctx, record, field_off, dyn_off, dyn_avail);
}

DPROBE_NOPROBE size_t fetch_dynamic_size(const fetch_prog &prog, const fetch_context &ctx) noexcept
{
    return run_prog(prog, ctx, nullptr, 0, 0, SIZE_MAX);
}

DPROBE_NOPROBE size_t store_trace_args(std::span<const probe_arg> args, uint32_t args_size,
                                       const fetch_context &ctx, uint8_t *record, size_t args_off,
                                       size_t capacity) noexcept
{
    size_t dyn = args_off + args_size;
    if (dyn > capacity) return 0;
    for (const auto &a : args) {
        size_t avail = capacity - dyn;
        dyn += fetch_run(a.prog, ctx, record, args_off + a.offset, dyn, avail);
    }
    return dyn;
}

DPROBE_NOPROBE size_t trace_args_dynamic_size(std::span<const probe_arg> args,
                                              const fetch_context &ctx) noexcept
{
    size_t n = 0;
    for (const auto &a : args)
        if (a.dynamic) n += fetch_dynamic_size(a.prog, ctx);
    return n;
}

DPROBE_NOPROBE void store_entry_args(const entry_arg_table &eargs, const pt_regs *regs,
                                     void *edata) noexcept
{
    auto *out = static_cast<unsigned char *>(edata);
    fetch_context ctx;
    ctx.regs = regs;
    for (uint16_t i = 0; i < eargs.count; i++) {
        unsigned long v = 0;
        if (!read_arg(ctx, eargs.arg[i], v)) v = 0;
        std::memcpy(out + i * sizeof(v), &v, sizeof(v));
    }
}

void fetch_install_fault_handler()
{
    static std::once_flag once;
    std::call_once(once, [] {
        signal_chain_add_hook(SIGSEGV, uaccess_fixup_fault);
        signal_chain_add_hook(SIGBUS, uaccess_fixup_fault);
    });
}

} // namespace dprobe
