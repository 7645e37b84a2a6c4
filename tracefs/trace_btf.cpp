// DWARF argument resolution for dynamic_events (see trace_btf.h).
#include "tracefs/trace_btf.h"

#include "tracefs/dwarf/dwarf_params.h"

#include <dwarf.h>

#include <cerrno>

namespace dprobe
{

const func_proto::param *func_proto::named(std::string_view n) const
{
    for (const param &p : params)
        if (!p.name.empty() && p.name == n) return &p;
    return nullptr;
}

const func_proto::param *func_proto::at_slot(int slot) const
{
    for (const param &p : params)
        if (p.slot == slot) return &p;
    return nullptr;
}

func_proto_ptr func_proto_at(std::shared_ptr<const debuginfo> di, uint64_t vaddr)
{
    if (!di) return nullptr;
    auto f = di->function_at(vaddr);
    if (!f || f->entry != vaddr) return nullptr;
    auto pf = std::make_shared<func_proto>();
    pf->di = std::move(di);
    pf->die = f->die;
    pf->name = f->name;
    for (dwarf_param &dp : dwarf_die_params(&pf->die)) {
        func_proto::param p;
        p.name = dp.name;
        p.type = dp.type_die;
        p.aggregate = dp.aggregate;
        p.why = dp.why;
        if (dp.fetch.starts_with("$arg")) p.slot = std::stoi(dp.fetch.substr(4)) - 1;
        if (dp.aggregate) pf->slots_complete = false;
        pf->params.push_back(std::move(p));
    }
    pf->ret_type = type_of(&pf->die);
    return pf;
}

namespace
{

bool tparg_entry(unsigned f)
{
    return (f & (TPARG_FL_KERNEL | TPARG_FL_FENTRY | TPARG_FL_RETURN)) ==
           (TPARG_FL_KERNEL | TPARG_FL_FENTRY);
}

bool tparg_return(unsigned f)
{
    return (f & (TPARG_FL_KERNEL | TPARG_FL_FENTRY | TPARG_FL_RETURN)) ==
           (TPARG_FL_KERNEL | TPARG_FL_RETURN);
}

// The kernel's split_next_field(): the text before the first '.' or "->" of S, and where
// the next step starts. 1: "->", 0: '.' or the end, -1: a '-' without '>' at *BAD.
int split_next_field(std::string_view s, std::string_view &name, std::string_view &next,
                     size_t &bad)
{
    size_t sep = s.find_first_of(".-");
    name = s.substr(0, sep);
    next = {};
    if (sep == std::string_view::npos) return 0;
    if (s[sep] == '-') {
        if (sep + 1 >= s.size() || s[sep + 1] != '>') {
            bad = sep;
            return -1;
        }
        next = s.substr(sep + 2);
        return 1;
    }
    next = s.substr(sep + 1);
    return 0;
}

bool is_pointer_like(int tag)
{
    return tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type ||
           tag == DW_TAG_rvalue_reference_type;
}

struct field_parser {
    int argv_index;
    fetch_insn *&code;
    fetch_insn *end;
    btf_last &last;

    probe_error err(probe_err e, int off, int errnum = EINVAL) const
    {
        return probe_error::make(e, argv_index, off, errnum);
    }

    // The kernel's parse_btf_field(): FIELDS follows a "->" from a value of type TYPE.
    probe_error parse(std::string_view fields, int offset, Dwarf_Die type)
    {
        std::string_view rest = fields;
        do {
            // Outer loop: one "->" (a memory read) per turn.
            auto rt = real_type(&type);
            if (!rt || !is_pointer_like(dwarf_tag(&*rt)))
                return err(probe_err::NO_PTR_STRCT, offset);
            auto pointee = type_of(&*rt);
            auto st = pointee ? real_type(&*pointee) : std::nullopt;
            if (!st || !is_struct_tag(dwarf_tag(&*st))) return err(probe_err::NO_PTR_STRCT, offset);
            Dwarf_Die cur = *st;
            bool cur_known = true;
            int64_t bytes = 0;
            std::optional<bitfield_info> bf;
            int is_ptr = 0;
            for (;;) {
                // Inner loop: '.' steps accumulate their offsets.
                std::string_view name, next;
                size_t bad = 0;
                is_ptr = split_next_field(rest, name, next, bad);
                if (is_ptr < 0) return err(probe_err::BAD_HYPHEN, offset + static_cast<int>(bad));
                if (bf || !cur_known || !is_struct_tag(dwarf_tag(&cur)))
                    return err(probe_err::BAD_BTF_TID, offset); // '.' into a non-struct
                int64_t moff = 0;
                Dwarf_Die member;
                std::string why;
                if (name.empty() || !find_member(&cur, std::string(name), moff, member, bf, &why))
                    return err(why.empty() ? probe_err::NO_BTF_FIELD : probe_err::BAD_BTF_TID,
                               offset, why.empty() ? ENOENT : EINVAL);
                bytes += moff;
                auto mt = type_of(&member);
                if (!mt) return err(probe_err::BAD_BTF_TID, offset);
                type = *mt;
                last.offset = offset;
                auto r = real_type(&type);
                cur_known = r.has_value();
                if (r) cur = *r;
                if (!next.data()) {
                    rest = {};
                    break;
                }
                offset += static_cast<int>(next.data() - rest.data());
                rest = next;
                if (is_ptr) {
                    if (rest.empty())
                        return err(probe_err::NO_BTF_FIELD, offset, ENOENT); // "p->a->"
                    break;
                }
            }
            if (++code == end) return err(probe_err::TOO_MANY_OPS, offset);
            code->op = fetch_op::DEREF;
            code->offset = bytes;
            last.type = type;
            last.bitfield = bf;
            if (bf && !rest.empty())
                return err(probe_err::NO_PTR_STRCT, offset); // "->" from a bitfield
        } while (!rest.empty());
        return {};
    }
};

// Integer fetch type of SIZE bytes: "u32", "s8"; "" for other sizes.
std::string int_type(bool is_signed, int size)
{
    if (size != 1 && size != 2 && size != 4 && size != 8) return "";
    return (is_signed ? "s" : "u") + std::to_string(size * 8);
}

// The fetch type of a scalar: integers, enums, pointers; "" otherwise.
std::string scalar_type(Dwarf_Die *rt)
{
    const int tag = dwarf_tag(rt);
    if (is_pointer_like(tag) || tag == DW_TAG_ptr_to_member_type) return "x64";
    if (tag == DW_TAG_enumeration_type) {
        // The kernel types enums as signed; the size comes from the enum.
        return int_type(true, dwarf_bytesize(rt));
    }
    if (tag != DW_TAG_base_type) return "";
    Dwarf_Attribute a;
    Dwarf_Word enc = DW_ATE_signed;
    if (dwarf_attr(rt, DW_AT_encoding, &a)) dwarf_formudata(&a, &enc);
    const int size = dwarf_bytesize(rt);
    if (enc == DW_ATE_float) // the bits, sized right (fetch args have no float type)
        return size == 4 ? "x32" : size == 8 ? "x64" : "";
    if (enc == DW_ATE_boolean || enc == DW_ATE_unsigned || enc == DW_ATE_unsigned_char ||
        enc == DW_ATE_UTF)
        return int_type(false, size);
    if (enc == DW_ATE_signed || enc == DW_ATE_signed_char) return int_type(true, size);
    return "";
}

} // namespace

probe_error parse_btf_arg(std::string_view varname, int offset, int argv_index, unsigned flags,
                          const btf_context &btf, entry_arg_table &eargs, fetch_insn *&pcode,
                          fetch_insn *end, btf_last &last)
{
    auto err = [&](probe_err e, int off, int errnum = EINVAL) {
        return probe_error::make(e, argv_index, off, errnum);
    };
    fetch_insn *code = pcode;
    std::string_view head, field;
    size_t bad = 0;
    int is_ptr = split_next_field(varname, head, field, bad);
    if (is_ptr < 0) return err(probe_err::BAD_HYPHEN, offset + static_cast<int>(bad));
    const int field_off = offset + static_cast<int>(head.size()) + (is_ptr ? 2 : 1);
    if (!is_ptr && field.data())
        // A member of a struct held in registers: not readable as one value. The caret is on
        // the member's name, after the '.', as the kernel's (field - varname).
        return err(probe_err::NOSUP_DAT_ARG, field_off, EOPNOTSUPP);

    const bool is_retval = (flags & TPARG_FL_RETURN) && head == "$retval";
    if (btf.m == btf_context::mode::unchecked) {
        // Syntax only: the probe is checked again where its function's types are known.
        if (is_retval) {
            code->op = fetch_op::RETVAL;
        } else {
            code->op = fetch_op::IMM;
            code->immediate = 0;
        }
        return {};
    }

    std::optional<Dwarf_Die> type;
    if (is_retval) {
        code->op = fetch_op::RETVAL;
        if (btf.m == btf_context::mode::resolve && btf.func) {
            if (!btf.func->ret_type) return err(probe_err::NO_RETVAL, offset, ENOENT);
            type = btf.func->ret_type;
            auto rt = real_type(&*type);
            Dwarf_Attribute a;
            Dwarf_Word enc = 0;
            if (rt && dwarf_tag(&*rt) == DW_TAG_base_type && dwarf_attr(&*rt, DW_AT_encoding, &a) &&
                dwarf_formudata(&a, &enc) == 0 &&
                (enc == DW_ATE_float || enc == DW_ATE_complex_float))
                // Returned in xmm0 (or on the x87 stack): no fetch reads it.
                return err(probe_err::NOSUP_BTFARG, offset, EOPNOTSUPP);
        } else {
            if (field.data()) return err(probe_err::NO_BTF_ENTRY, field_off, ENOENT);
            return {};
        }
    } else {
        if (btf.m == btf_context::mode::unsupported)
            return err(probe_err::NOSUP_BTFARG, offset, EOPNOTSUPP);
        if (!btf.func || btf.func->params.empty())
            return err(probe_err::NO_BTF_ENTRY, offset, ENOENT);
        const func_proto::param *p = btf.func->named(head);
        if (!p) return err(probe_err::NO_BTFARG, offset, ENOENT);
        if (p->slot < 0)
            return p->aggregate ? err(probe_err::NOSUP_DAT_ARG, offset, EOPNOTSUPP)
                                : err(probe_err::NOSUP_BTFARG, offset, EOPNOTSUPP);
        if (tparg_entry(flags)) {
            code->op = fetch_op::ARG;
            code->param = static_cast<uint32_t>(p->slot);
        } else if (tparg_return(flags)) {
            int slot = eargs.slot_for(static_cast<unsigned>(p->slot));
            if (slot < 0) return err(probe_err::TOO_MANY_EARGS, 0, E2BIG);
            code->op = fetch_op::EDATA;
            code->offset = slot * static_cast<int64_t>(sizeof(unsigned long));
        } else {
            return err(probe_err::NOSUP_BTFARG, offset);
        }
        type = p->type;
    }
    if (!type) return err(probe_err::BAD_BTF_TID, offset);
    last.type = type;
    last.bitfield.reset();
    last.offset = offset;
    if (field.data()) {
        field_parser fp{argv_index, pcode, end, last};
        return fp.parse(field, field_off, *type);
    }
    return {};
}

btf_type_choice btf_infer_type(const btf_last &last)
{
    btf_type_choice c;
    if (last.bitfield) {
        const bitfield_info &b = *last.bitfield;
        c.type = "b" + std::to_string(b.width) + "@" + std::to_string(b.offset) + "/" +
                 std::to_string(b.container);
        return c;
    }
    if (!last.type) return c;
    Dwarf_Die t = *last.type;
    auto rt = real_type(&t);
    if (!rt) return c;
    const int tag = dwarf_tag(&*rt);
    if (tag == DW_TAG_pointer_type) {
        auto pointee = type_of(&*rt);
        if (pointee && is_text_char(&*pointee)) {
            // perf probe's typing: a char pointer is the text it points to.
            c.type = "string";
            c.deref = true;
            return c;
        }
    }
    if (tag == DW_TAG_array_type) {
        int64_t count = 0;
        auto elem = type_of(&*rt);
        auto relem = elem ? real_type(&*elem) : std::nullopt;
        if (array_shape(&*rt, count) != 1 || !relem) return c;
        if (is_char(&*relem)) {
            c.type = "string"; // a char array in place
            return c;
        }
        std::string et = scalar_type(&*relem);
        if (!et.empty() && count > 0 && count <= MAX_ARRAY_LEN) {
            c.type = et;
            c.count = static_cast<uint32_t>(count);
        }
        return c;
    }
    c.type = scalar_type(&*rt);
    return c;
}

probe_error btf_string_fetch(const btf_last &last, int argv_index, bool &deref)
{
    deref = false;
    if (!last.type) return {};
    Dwarf_Die t = *last.type;
    auto rt = real_type(&t);
    if (rt && !last.bitfield) {
        const int tag = dwarf_tag(&*rt);
        auto elem = type_of(&*rt);
        auto relem = elem ? real_type(&*elem) : std::nullopt;
        if (tag == DW_TAG_array_type && relem && is_char(&*relem))
            return {}; // char[] is read in place
        if (tag == DW_TAG_pointer_type && relem && is_char(&*relem)) {
            deref = true; // char * is followed to its text
            return {};
        }
    }
    return probe_error::make(probe_err::BAD_TYPE4STR, argv_index, last.offset, EINVAL);
}

} // namespace dprobe
