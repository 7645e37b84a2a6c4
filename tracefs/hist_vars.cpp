// hist variables, expressions and references between events (the kernel's
// trace_events_hist.c: parse_var_defs, create_var_field, parse_expr, parse_unary,
// parse_atom, parse_var_ref, find_event_var, create_var_ref, create_field_var,
// resolve_var_refs, expr_str), with the kernel's errors and carets.
//
// A variable lives in each element of its trigger's map (tracing_map's vars). A reference
// ($ts0 on another event) is resolved at a hit by looking this hit's key up in the owner's
// map: no entry, or the variable unset, and the hit does nothing (that is how "latency from
// entry to exit" pairs the two events of one thread when both key on common_pid). A
// reference in another event's expression reads the value once (it is unset by the read).
//
// The registry of triggers with variables (the kernel's tr->hist_vars) is guarded by
// event_trigger_lock(), which every caller holds.
#include "tracefs/trace_events_hist.h"

#include "core/compiler.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/trace_synth_format.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace dprobe
{
namespace
{

constexpr size_t comm_len = 16;

std::vector<hist_trigger_data *> &hist_vars_list()
{
    static std::vector<hist_trigger_data *> v;
    return v;
}

bool is_var_ref(std::string_view s)
{
    return s.size() >= 2 && s[0] == '$';
}

struct op_pos {
    hist_field_op op = hist_field_op::NONE;
    size_t sep = std::string_view::npos;
};

// contains_operator(): the root operator, the rightmost of the lowest precedence (the
// expression is evaluated left to right: 14-7-5-2 is ((14-7)-5)-2).
op_pos contains_operator(std::string_view s)
{
    auto last = [&](char c) -> long {
        size_t i = s.rfind(c);
        return i == std::string_view::npos ? -1 : static_cast<long>(i);
    };
    long minus = last('-'), plus = last('+');
    if (minus == 0) return {hist_field_op::UNARY_MINUS, 0};
    if (plus >= 0 || minus >= 0) {
        if (plus > minus) return {hist_field_op::PLUS, size_t(plus)};
        return {hist_field_op::MINUS, size_t(minus)};
    }
    long div = last('/'), mult = last('*');
    if (mult > div) return {hist_field_op::MULT, size_t(mult)};
    if (div >= 0) return {hist_field_op::DIV, size_t(div)};
    return {};
}

// hist_field_name()
std::string field_name(const hist_field &f)
{
    if (f.flags & HIST_FIELD_FL_CONST) return "";
    if ((f.flags & (HIST_FIELD_FL_EXPR | HIST_FIELD_FL_VAR_REF)) && !f.system.empty())
        return f.system + "." + f.event_name + "." + f.name;
    if (f.flags & HIST_FIELD_FL_CPU) return "common_cpu";
    return f.name;
}

// expr_field_str()
std::string expr_field_str(const hist_field &f)
{
    std::string s;
    if (f.flags & HIST_FIELD_FL_VAR_REF)
        s += '$';
    else if (f.flags & HIST_FIELD_FL_CONST)
        s += std::to_string(f.constant);
    s += field_name(f);
    if (f.flags && !(f.flags & HIST_FIELD_FL_VAR_REF))
        if (const char *fl = get_hist_field_flags(f.flags)) s += std::string(".") + fl;
    return s;
}

} // namespace

// ---- the registry ----

void hist_trigger_data::save_hist_vars()
{
    if (registered_) return;
    if (vars_.empty() && var_refs_.empty() && field_vars_.empty() && save_vars_.empty()) return;
    hist_vars_list().push_back(this);
    registered_ = true;
}

void hist_trigger_data::remove_hist_vars()
{
    if (!registered_) return;
    std::erase(hist_vars_list(), this);
    registered_ = false;
}

bool hist_trigger_data::vars_referenced() const
{
    for (const hist_trigger_data *h : hist_vars_list()) {
        if (h == this) continue; // a self-reference does not keep a trigger
        for (const hist_var_ref &r : h->var_refs_)
            if (r.var_data == this) return true;
    }
    return false;
}

const hist_field *hist_trigger_data::find_var_field(std::string_view name) const
{
    // The variables the command declares, as the kernel's (its val fields flagged VAR): the
    // hidden ones made for action params and save() are not found by name.
    for (const hist_field &f : vars_)
        if (f.var_name == name) return &f;
    return nullptr;
}

// ---- variable definitions ----

int hist_trigger_data::parse_var_defs(hist_error &err)
{
    for (const std::string &a : assignments_) {
        std::string_view rest = a;
        for (unsigned j = 0; j < TRACING_MAP_VARS_MAX; j++) {
            size_t comma = rest.find(',');
            std::string_view field_str = rest.substr(0, comma);
            size_t eq = field_str.find('=');
            std::string_view var_name = field_str.substr(0, eq);
            if (eq == std::string_view::npos) {
                err = {EINVAL, hist_err::MALFORMED_ASSIGNMENT, errpos(var_name)};
                return -EINVAL;
            }
            if (var_defs_.size() == TRACING_MAP_VARS_MAX) {
                err = {EINVAL, hist_err::TOO_MANY_VARS, errpos(var_name)};
                return -EINVAL;
            }
            var_defs_.emplace_back(std::string(var_name), std::string(field_str.substr(eq + 1)));
            if (comma == std::string_view::npos) break;
            rest = rest.substr(comma + 1);
        }
    }
    return 0;
}

// find_var(): a variable of this name on this trigger or another hist of its event.
static bool var_defined(const hist_trigger_data &hd, std::string_view name)
{
    if (hd.find_var_field(name)) return true;
    for (const hist_trigger_data *h : hist_vars_list())
        if (h != &hd && h->event().array == hd.event().array &&
            h->event().system == hd.event().system && h->event().event == hd.event().event &&
            h->find_var_field(name))
            return true;
    return false;
}

int hist_trigger_data::create_var_fields(std::span<const filter_field> fields, hist_error &err)
{
    for (const auto &[name, expr] : var_defs_) {
        if (var_defined(*this, name) && !ev_.remove) {
            err = {EINVAL, hist_err::DUPLICATE_VAR, errpos(name)};
            return -EINVAL;
        }
        hist_field f;
        unsigned n_subexprs = 0;
        if (int r = parse_expr(expr, HIST_FIELD_FL_VAR, name, n_subexprs, fields, f, err)) return r;
        f.flags |= HIST_FIELD_FL_VAR;
        f.var_name = name;
        f.var_idx = static_cast<int>(n_map_vars_++);
        // A string or a stack is copied into the entry (the kernel's field_var_str).
        if (f.flags & (HIST_FIELD_FL_STRING | HIST_FIELD_FL_STACKTRACE))
            f.str_idx = static_cast<int>(n_str_++);
        vars_.push_back(std::move(f));
    }
    return 0;
}

// ---- expressions ----

bool hist_trigger_data::has_var_ref(const hist_field &f, unsigned level) const
{
    if (level > 3) return false;
    if (f.flags & (HIST_FIELD_FL_VAR | HIST_FIELD_FL_VAR_REF)) return true;
    for (int o : f.operands)
        if (o >= 0 && has_var_ref(nodes_[size_t(o)], level + 1)) return true;
    return false;
}

std::string hist_trigger_data::expr_str(const hist_field &f, unsigned level) const
{
    if (level > 1) return "";
    if (f.operands[0] < 0) return expr_field_str(f);
    const hist_field &a = nodes_[size_t(f.operands[0])];
    if (f.op == hist_field_op::UNARY_MINUS) return "-(" + expr_str(a, level + 1) + ")";
    const hist_field &b = nodes_[size_t(f.operands[1])];
    const char *op = f.op == hist_field_op::MINUS  ? "-"
                     : f.op == hist_field_op::PLUS ? "+"
                     : f.op == hist_field_op::DIV  ? "/"
                                                   : "*";
    return expr_field_str(a) + op + expr_field_str(b);
}

int hist_trigger_data::parse_expr(std::string_view str, uint32_t flags, std::string_view var_name,
                                  unsigned &n_subexprs, std::span<const filter_field> fields,
                                  hist_field &f, hist_error &err)
{
    if (n_subexprs > 3) {
        err = {EINVAL, hist_err::TOO_MANY_SUBEXPR, errpos(str)};
        return -EINVAL;
    }
    const op_pos root = contains_operator(str);
    if (root.op == hist_field_op::NONE) return parse_atom(str, flags, var_name, fields, f, err);

    hist_field expr;
    if (root.op == hist_field_op::UNARY_MINUS) {
        // parse_unary(): only -(EXPR), at the top of an expression.
        if (++n_subexprs > 3) {
            err = {EINVAL, hist_err::TOO_MANY_SUBEXPR, errpos(str)};
            return -EINVAL;
        }
        std::string_view s = str.substr(1);
        if (s.find('(') == std::string_view::npos) {
            err = {EINVAL};
            return -EINVAL;
        }
        s.remove_prefix(1);
        size_t close = s.rfind(')');
        if (close == std::string_view::npos) {
            err = {EINVAL};
            return -EINVAL;
        }
        if (close + 1 != s.size()) {
            err = {EINVAL, hist_err::UNARY_MINUS_SUBEXPR, errpos(s)};
            return -EINVAL;
        }
        s = s.substr(0, close);
        hist_field a;
        if (int r = parse_expr(s, 0, {}, n_subexprs, fields, a, err)) return r;
        if (a.flags & HIST_FIELD_FL_STRING) {
            err = {EINVAL, hist_err::INVALID_STR_OPERAND, errpos(s)};
            return -EINVAL;
        }
        expr.flags = flags | HIST_FIELD_FL_EXPR |
                     (a.flags & (HIST_FIELD_FL_TIMESTAMP | HIST_FIELD_FL_TIMESTAMP_USECS));
        expr.fn = hist_field_fn::UMINUS;
        expr.op = hist_field_op::UNARY_MINUS;
        expr.size = a.size;
        expr.is_signed = a.is_signed;
        expr.type = a.type;
        nodes_.push_back(std::move(a));
        expr.operands[0] = static_cast<int16_t>(nodes_.size() - 1);
        expr.name = expr_str(expr, 0);
        f = std::move(expr);
        return 0;
    }

    ++n_subexprs;
    std::string_view s1 = str.substr(0, root.sep), s2 = str.substr(root.sep + 1);
    if (s1.empty() || s2.empty()) {
        err = {EINVAL};
        return -EINVAL;
    }
    hist_field a, b;
    if (int r = parse_expr(s1, 0, {}, n_subexprs, fields, a, err)) return r;
    if (a.flags & HIST_FIELD_FL_STRING) {
        err = {EINVAL, hist_err::INVALID_STR_OPERAND, errpos(s1)};
        return -EINVAL;
    }
    if (int r = parse_expr(s2, 0, {}, n_subexprs, fields, b, err)) return r;
    if (b.flags & HIST_FIELD_FL_STRING) {
        err = {EINVAL, hist_err::INVALID_STR_OPERAND, errpos(s2)};
        return -EINVAL;
    }
    // check_expr_operands(): a reference counts with its variable's flags.
    auto var_of = [&](const hist_field &x) -> const hist_field * {
        if (!(x.flags & (HIST_FIELD_FL_VAR_REF | HIST_FIELD_FL_ALIAS))) return nullptr;
        const hist_var_ref &r = var_refs_[x.var_ref_idx];
        return r.var_data ? r.var_data->find_var_field(x.name) : nullptr;
    };
    const hist_field *v1 = var_of(a), *v2 = var_of(b);
    const uint32_t f1 = v1 ? v1->flags : a.flags, f2 = v2 ? v2->flags : b.flags;
    if ((f1 & HIST_FIELD_FL_TIMESTAMP_USECS) != (f2 & HIST_FIELD_FL_TIMESTAMP_USECS)) {
        err = {EINVAL, hist_err::TIMESTAMP_MISMATCH, 0};
        return -EINVAL;
    }
    const bool consts = f1 & f2 & HIST_FIELD_FL_CONST;
    // A reference read inside an expression consumes the variable (read_once).
    for (const hist_field *x : {&a, &b})
        if (x->flags & HIST_FIELD_FL_VAR_REF) var_refs_[x->var_ref_idx].read_once = true;
    const uint64_t c2 = v2 ? v2->constant : b.constant;
    if (root.op == hist_field_op::DIV && (f2 & HIST_FIELD_FL_CONST) && !c2) {
        err = {EDOM, hist_err::DIVISION_BY_ZERO, errpos(s2)};
        return -EDOM;
    }
    expr.flags = flags | (consts ? HIST_FIELD_FL_CONST : HIST_FIELD_FL_EXPR) |
                 (a.flags & (HIST_FIELD_FL_TIMESTAMP | HIST_FIELD_FL_TIMESTAMP_USECS));
    expr.op = root.op;
    expr.fn = root.op == hist_field_op::MINUS  ? hist_field_fn::MINUS
              : root.op == hist_field_op::PLUS ? hist_field_fn::PLUS
              : root.op == hist_field_op::DIV  ? hist_field_fn::DIV
                                               : hist_field_fn::MULT;
    if (consts) {
        // Both constant: folded into one.
        const uint64_t c1 = v1 ? v1->constant : a.constant;
        hist_field ca, cb;
        ca.fn = cb.fn = hist_field_fn::CONST;
        ca.constant = c1;
        cb.constant = c2;
        nodes_.push_back(ca);
        expr.operands[0] = static_cast<int16_t>(nodes_.size() - 1);
        nodes_.push_back(cb);
        expr.operands[1] = static_cast<int16_t>(nodes_.size() - 1);
        expr.constant = value(expr, nullptr, 0, hist_hit_ctx{}, nullptr, nullptr);
        expr.fn = hist_field_fn::CONST;
        expr.operands[0] = expr.operands[1] = -1;
        expr.size = 8;
        expr.type = "u64";
        expr.name = expr_str(expr, 0);
        f = std::move(expr);
        return 0;
    }
    expr.size = a.size;
    expr.is_signed = a.is_signed;
    expr.type = a.type;
    nodes_.push_back(std::move(a));
    expr.operands[0] = static_cast<int16_t>(nodes_.size() - 1);
    nodes_.push_back(std::move(b));
    expr.operands[1] = static_cast<int16_t>(nodes_.size() - 1);
    expr.name = expr_str(expr, 0);
    f = std::move(expr);
    return 0;
}

int hist_trigger_data::parse_atom(std::string_view str, uint32_t flags, std::string_view var_name,
                                  std::span<const filter_field> fields, hist_field &f,
                                  hist_error &err)
{
    if (!str.empty() && str[0] >= '0' && str[0] <= '9') {
        // parse_const()
        unsigned long long c = 0;
        if (kstrtoull(str, 0, c)) {
            err = {EINVAL, hist_err::EXPECT_NUMBER, errpos(str)};
            return -EINVAL;
        }
        f = hist_field{};
        f.flags = flags | HIST_FIELD_FL_CONST;
        f.fn = hist_field_fn::CONST;
        f.constant = c;
        f.size = 8;
        f.type = "u64";
        return 0;
    }
    std::string_view ref_system, ref_event, ref_var = str;
    if (size_t d1 = str.find('.'); d1 != std::string_view::npos) {
        if (size_t d2 = str.find('.', d1 + 1); d2 != std::string_view::npos) {
            ref_system = str.substr(0, d1);
            ref_event = str.substr(d1 + 1, d2 - d1 - 1);
            ref_var = str.substr(d2 + 1);
        }
    }
    // local_field_var_ref(): $X where X=FIELD is a plain field variable of this trigger
    // reads the field itself.
    std::string_view local;
    const bool own_event = (ref_system.empty() && ref_event.empty()) ||
                           (ref_system == ev_.system && ref_event == ev_.event);
    if (own_event && is_var_ref(ref_var)) {
        for (const auto &[name, expr] : var_defs_)
            if (name == ref_var.substr(1) && contains_operator(expr).op == hist_field_op::NONE &&
                !is_var_ref(expr)) {
                local = expr;
                break;
            }
    }
    hist_error pending;
    if (local.empty()) {
        if (is_var_ref(ref_var)) {
            // parse_var_ref()
            std::string_view name = ref_var.substr(1);
            hist_trigger_data *owner = nullptr;
            if (const hist_field *var = find_event_var(ref_system, ref_event, name, &owner, err)) {
                unsigned idx = create_var_ref(owner, *var, ref_system, ref_event);
                f = var_refs_[idx].field;
                if (!var_name.empty()) {
                    // create_alias(): X=$Y
                    f.flags = HIST_FIELD_FL_ALIAS | HIST_FIELD_FL_VAR |
                              (f.flags & (HIST_FIELD_FL_TIMESTAMP | HIST_FIELD_FL_TIMESTAMP_USECS));
                    f.var_name = std::string(var_name);
                }
                return 0;
            }
            if (err.logged()) return -EINVAL; // VAR_NOT_UNIQUE
            pending = {EINVAL, hist_err::VAR_NOT_FOUND, errpos(name)};
        }
    } else {
        str = local;
    }
    unsigned long buckets = 0;
    (void)buckets;
    if (int r = parse_field(str, flags, fields, f, err)) {
        if (pending.logged()) err = pending.then(err.err, err.pos, err.errnum);
        return r;
    }
    return 0;
}

// ---- references ----

unsigned hist_trigger_data::create_var_ref(hist_trigger_data *owner, const hist_field &var,
                                           std::string_view system, std::string_view event)
{
    for (unsigned i = 0; i < var_refs_.size(); i++)
        if (var_refs_[i].var_data == owner && int(var_refs_[i].var_idx) == var.var_idx) return i;
    hist_var_ref r;
    r.var_data = owner;
    r.var_idx = static_cast<unsigned>(var.var_idx);
    hist_field &f = r.field;
    f.flags = HIST_FIELD_FL_VAR_REF |
              (var.flags & (HIST_FIELD_FL_TIMESTAMP | HIST_FIELD_FL_TIMESTAMP_USECS));
    f.fn = hist_field_fn::VAR_REF;
    f.size = var.size;
    f.is_signed = var.is_signed;
    f.type = var.type;
    f.name = var.var_name;
    f.system = std::string(system);
    f.event_name = std::string(event);
    f.var_ref_idx = static_cast<unsigned>(var_refs_.size());
    var_refs_.push_back(std::move(r));
    return var_refs_.back().field.var_ref_idx;
}

const hist_field *hist_trigger_data::find_event_var(std::string_view system, std::string_view event,
                                                    std::string_view name,
                                                    hist_trigger_data **owner, hist_error &err)
{
    // find_file_var(): the variable on a hist of SYS/EV in this array.
    auto file_var = [&](std::string_view sys, std::string_view ev) -> const hist_field * {
        for (hist_trigger_data *h : hist_vars_list())
            if (h->ev_.array == ev_.array && h->ev_.system == sys && h->ev_.event == ev)
                if (const hist_field *v = h->find_var_field(name)) {
                    *owner = h;
                    return v;
                }
        return nullptr;
    };
    if (system.empty() || event.empty()) {
        // find_match_var(): on the event of an onmatch() of this trigger.
        const hist_field *found = nullptr;
        hist_trigger_data *found_owner = nullptr;
        for (const hist_action &a : actions_) {
            if (a.handler != hist_action::handler_id::ONMATCH) continue;
            if (const hist_field *v = file_var(a.match_system, a.match_event)) {
                if (found && found != v) {
                    err = {EINVAL, hist_err::VAR_NOT_UNIQUE, errpos(name)};
                    return nullptr;
                }
                found = v;
                found_owner = *owner;
            }
        }
        if (found) {
            *owner = found_owner;
            return found;
        }
        // find_var_file() without a system: the one event whose hist has the variable.
        const hist_trigger_data *file = nullptr;
        for (hist_trigger_data *h : hist_vars_list()) {
            if (h->ev_.array != ev_.array || !h->find_var_field(name)) continue;
            if (file && (file->ev_.system != h->ev_.system || file->ev_.event != h->ev_.event)) {
                err = {EINVAL, hist_err::VAR_NOT_UNIQUE, errpos(name)};
                return nullptr;
            }
            file = h;
        }
        if (!file) return nullptr;
        return file_var(file->ev_.system, file->ev_.event);
    }
    return file_var(system, event);
}

int hist_trigger_data::create_field_var(std::string_view field_name,
                                        std::span<const filter_field> fields, bool save,
                                        const hist_field **var, hist_error &err)
{
    std::vector<hist_field> &list = save ? save_vars_ : field_vars_;
    if (list.size() >= SYNTH_FIELDS_MAX) {
        err = {EINVAL, hist_err::TOO_MANY_FIELD_VARS, errpos(field_name)};
        return -EINVAL;
    }
    hist_field f;
    if (parse_atom(field_name, 0, {}, fields, f, err)) {
        err = err.then(hist_err::FIELD_VAR_PARSE_FAIL, errpos(field_name));
        return -EINVAL;
    }
    if (var_defined(*this, field_name)) {
        err = {EINVAL, hist_err::VAR_CREATE_FIND_FAIL, errpos(field_name)};
        return -EINVAL;
    }
    f.flags |= HIST_FIELD_FL_VAR;
    f.var_name = std::string(field_name);
    f.var_idx = static_cast<int>(n_map_vars_++);
    if (f.flags & HIST_FIELD_FL_STRING) f.str_idx = static_cast<int>(n_str_++);
    list.push_back(std::move(f));
    *var = &list.back();
    return 0;
}

// ---- the hit ----

DPROBE_NOPROBE bool hist_trigger_data::resolve_var_refs(const uint8_t *key, uint64_t *vals,
                                                        bool self,
                                                        tracing_map_elt *own) const noexcept
{
    for (size_t i = 0; i < var_refs_.size(); i++) {
        const hist_var_ref &r = var_refs_[i];
        if (!r.var_data) return false;
        if ((self && r.var_data != this) || (!self && r.var_data == this)) continue;
        // The hit's own element is the one its key finds in this trigger's map.
        tracing_map_elt *elt = self && own ? own : r.var_data->map_->lookup(key);
        if (!elt) return false;
        if (self || !r.read_once) {
            if (!tracing_map::var_set(elt, r.var_idx)) return false;
            vals[i] = tracing_map::read_var(elt, r.var_idx);
        } else if (!tracing_map::read_var_once(elt, r.var_idx, vals[i])) {
            return false;
        }
    }
    return true;
}

DPROBE_NOPROBE void hist_trigger_data::update_vars(tracing_map_elt *elt, const uint8_t *rec,
                                                   size_t len, const hist_hit_ctx &ctx,
                                                   const uint64_t *refs,
                                                   std::span<const hist_field> vars) const noexcept
{
    for (const hist_field &v : vars) {
        if (v.str_idx >= 0 && (v.flags & HIST_FIELD_FL_STACKTRACE)) {
            // The hit's stack, as the kernel saves it: the count of addresses, then the
            // addresses (the hit's own first), ended by a zero word when there is room.
            auto *w = reinterpret_cast<uint64_t *>(elt->private_data + comm_len +
                                                   size_t(v.str_idx) * STR_VAR_LEN_MAX);
            size_t n = 0;
            if (ctx.regs && hist_environment.stack_save)
                n = hist_environment.stack_save(ctx.regs, w + 1, SYNTH_STACK_WORDS_MAX - 1);
            w[0] = n;
            w[1 + n] = 0;
            tracing_map::set_var(elt, static_cast<unsigned>(v.var_idx),
                                 static_cast<uint64_t>(reinterpret_cast<uintptr_t>(w)));
            continue;
        }
        uint64_t val = value(v, rec, len, ctx, refs, elt);
        if (v.str_idx >= 0) {
            // A string is copied into the element (the kernel's field_var_str).
            char *dst = reinterpret_cast<char *>(elt->private_data) + comm_len +
                        size_t(v.str_idx) * STR_VAR_LEN_MAX;
            const char *src = reinterpret_cast<const char *>(static_cast<uintptr_t>(val));
            size_t max = std::min<size_t>(v.size ? v.size : STR_VAR_LEN_MAX, STR_VAR_LEN_MAX) - 1;
            size_t n = 0;
            if (src)
                while (n < max && src[n]) {
                    dst[n] = src[n];
                    n++;
                }
            dst[n] = 0;
            val = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(dst));
        }
        tracing_map::set_var(elt, static_cast<unsigned>(v.var_idx), val);
    }
}

} // namespace dprobe
