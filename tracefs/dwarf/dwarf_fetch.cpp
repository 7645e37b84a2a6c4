#include "tracefs/dwarf/dwarf_fetch.h"

#include "arch/x86_64/reg_names.h"
#include "tracefs/dwarf/debuginfo.h"
#include "tracefs/probe_types.h"

#include <dwarf.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{

namespace
{

bool fail(std::string *why, std::string msg)
{
    if (why) *why = std::move(msg);
    return false;
}

std::string signed_off(int64_t v)
{
    return v < 0 ? "-" + std::to_string(-static_cast<uint64_t>(v)) : "+" + std::to_string(v);
}

std::string op_name(unsigned atom)
{
    const char *n = nullptr;
    switch (atom) {
    case DW_OP_stack_value:
        n = "DW_OP_stack_value";
        break;
    case DW_OP_implicit_value:
        n = "DW_OP_implicit_value";
        break;
    case DW_OP_piece:
        n = "DW_OP_piece";
        break;
    case DW_OP_bit_piece:
        n = "DW_OP_bit_piece";
        break;
    case DW_OP_entry_value:
    case DW_OP_GNU_entry_value:
        n = "DW_OP_entry_value";
        break;
    case DW_OP_implicit_pointer:
    case DW_OP_GNU_implicit_pointer:
        n = "DW_OP_implicit_pointer";
        break;
    case DW_OP_deref_size:
        n = "DW_OP_deref_size";
        break;
    case DW_OP_plus:
        n = "DW_OP_plus";
        break;
    case DW_OP_minus:
        n = "DW_OP_minus";
        break;
    case DW_OP_and:
        n = "DW_OP_and";
        break;
    case DW_OP_GNU_parameter_ref:
        n = "DW_OP_GNU_parameter_ref";
        break;
    default:
        break;
    }
    if (n) return n;
    char buf[32];
    std::snprintf(buf, sizeof buf, "DW_OP 0x%x", atom);
    return buf;
}

bool is_const_op(const Dwarf_Op &op, uint64_t &v)
{
    if (op.atom >= DW_OP_lit0 && op.atom <= DW_OP_lit31) {
        v = op.atom - DW_OP_lit0;
        return true;
    }
    switch (op.atom) {
    case DW_OP_const1u:
    case DW_OP_const2u:
    case DW_OP_const4u:
    case DW_OP_const8u:
    case DW_OP_constu:
    case DW_OP_const1s:
    case DW_OP_const2s:
    case DW_OP_const4s:
    case DW_OP_const8s:
    case DW_OP_consts:
        v = op.number; // libdw sign-extends the signed forms into the 64-bit word
        return true;
    default:
        return false;
    }
}

bool reg_of(const Dwarf_Op &op, bool &is_breg, unsigned &regno, int64_t &off)
{
    if (op.atom >= DW_OP_reg0 && op.atom <= DW_OP_reg31) {
        is_breg = false;
        regno = op.atom - DW_OP_reg0;
        return true;
    }
    if (op.atom == DW_OP_regx) {
        is_breg = false;
        regno = static_cast<unsigned>(op.number);
        return true;
    }
    if (op.atom >= DW_OP_breg0 && op.atom <= DW_OP_breg31) {
        is_breg = true;
        regno = op.atom - DW_OP_breg0;
        off = static_cast<int64_t>(op.number);
        return true;
    }
    if (op.atom == DW_OP_bregx) {
        is_breg = true;
        regno = static_cast<unsigned>(op.number);
        off = static_cast<int64_t>(op.number2);
        return true;
    }
    return false;
}

std::string no_reg(unsigned regno)
{
    return "is in DWARF register " + std::to_string(regno) + " (" + arch::DWARF_REG_UNNAMED +
           "): fetch args read the general registers only";
}

// An address being computed: VAL (the address itself, or for an unread symbol base the
// symbol) plus PENDING.
struct addr_state {
    fetch_loc val;
    bool sym_unread = false;
    int64_t pending = 0;

    // The address becomes the value stored there.
    void read()
    {
        if (sym_unread) {
            val.sym_off = pending;
            sym_unread = false;
        } else {
            val.derefs.push_back(pending);
        }
        pending = 0;
    }
};

// Evaluates OPS as an address computation (no final read).
bool eval_address(std::span<const Dwarf_Op> ops, const location_env &env, addr_state &st,
                  std::string *why, int depth)
{
    if (depth > 2) return fail(why, "has a nested frame base dprobe does not follow");
    bool have = false;
    for (size_t i = 0; i < ops.size(); i++) {
        const Dwarf_Op &op = ops[i];
        bool is_breg;
        unsigned regno;
        int64_t off = 0;
        if (reg_of(op, is_breg, regno, off)) {
            if (have) return fail(why, "has a location expression dprobe does not follow");
            const char *r = arch::dwarf_regstr(regno);
            if (!r) return fail(why, no_reg(regno));
            st = addr_state{};
            st.val.kind = fetch_loc::base_kind::reg;
            st.val.name = r;
            // DW_OP_regN as a frame base: the frame base is the register's value.
            st.pending = is_breg ? off : 0;
            have = true;
            continue;
        }
        switch (op.atom) {
        case DW_OP_fbreg: {
            if (have) return fail(why, "has a location expression dprobe does not follow");
            if (env.frame_base.empty())
                return fail(why, "is relative to a frame base the function does not describe");
            if (!eval_address(env.frame_base, env, st, why, depth + 1)) return false;
            st.pending += static_cast<int64_t>(op.number);
            have = true;
            break;
        }
        case DW_OP_call_frame_cfa: {
            if (have) return fail(why, "has a location expression dprobe does not follow");
            std::vector<Dwarf_Op> cfa;
            if (!env.cfa || !env.cfa(cfa))
                return fail(why, "is relative to the CFA, which no call-frame information gives "
                                 "at this address");
            if (!eval_address(cfa, env, st, why, depth + 1)) return false;
            have = true;
            break;
        }
        case DW_OP_addr: {
            if (have) return fail(why, "has a location expression dprobe does not follow");
            auto sym = env.symbolize ? env.symbolize(op.number) : std::nullopt;
            if (!sym) {
                char buf[64];
                std::snprintf(buf, sizeof buf,
                              "is at address 0x%" PRIx64 ", which no data symbol covers",
                              static_cast<uint64_t>(op.number));
                return fail(why, buf);
            }
            st = addr_state{};
            st.val.kind = fetch_loc::base_kind::sym;
            st.val.name = sym->first;
            st.sym_unread = true;
            st.pending = sym->second;
            have = true;
            break;
        }
        case DW_OP_deref:
            if (!have) return fail(why, "has a location expression dprobe does not follow");
            st.read();
            break;
        case DW_OP_plus_uconst:
            if (!have) return fail(why, "has a location expression dprobe does not follow");
            st.pending += static_cast<int64_t>(op.number);
            break;
        default:
            return fail(why, "has a location dprobe can't translate (" + op_name(op.atom) + ")");
        }
    }
    if (!have) return fail(why, "has an empty location");
    return true;
}

} // namespace

std::optional<Dwarf_Die> type_of(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    Dwarf_Die t;
    if (dwarf_attr_integrate(die, DW_AT_type, &a) && dwarf_formref_die(&a, &t)) return t;
    return std::nullopt;
}

std::optional<Dwarf_Die> real_type(Dwarf_Die *type)
{
    Dwarf_Die t;
    if (dwarf_peel_type(type, &t) != 0) return std::nullopt;
    return t;
}

int64_t byte_size(Dwarf_Die *type)
{
    Dwarf_Word s;
    if (dwarf_aggregate_size(type, &s) != 0) return -1;
    return static_cast<int64_t>(s);
}

bool is_struct_tag(int tag)
{
    return tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_class_type;
}

bool is_char(Dwarf_Die *type)
{
    auto r = real_type(type);
    if (!r || dwarf_tag(&*r) != DW_TAG_base_type || dwarf_bytesize(&*r) != 1) return false;
    Dwarf_Attribute a;
    Dwarf_Word enc = 0;
    if (dwarf_attr(&*r, DW_AT_encoding, &a)) dwarf_formudata(&a, &enc);
    return enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char || enc == DW_ATE_signed ||
           enc == DW_ATE_unsigned;
}

bool is_text_char(Dwarf_Die *type)
{
    auto r = real_type(type);
    const char *n = r ? dwarf_diename(&*r) : nullptr;
    return r && dwarf_tag(&*r) == DW_TAG_base_type && n && std::strcmp(n, "char") == 0;
}

int array_shape(Dwarf_Die *array, int64_t &count)
{
    count = -1;
    int dims = 0;
    Dwarf_Die sub;
    if (dwarf_child(array, &sub) != 0) return 0;
    do {
        if (dwarf_tag(&sub) != DW_TAG_subrange_type) continue;
        if (dims++ == 0) {
            Dwarf_Attribute a;
            Dwarf_Word v;
            if (dwarf_attr_integrate(&sub, DW_AT_count, &a) && dwarf_formudata(&a, &v) == 0)
                count = static_cast<int64_t>(v);
            else if (dwarf_attr_integrate(&sub, DW_AT_upper_bound, &a) &&
                     dwarf_formudata(&a, &v) == 0)
                count = static_cast<int64_t>(v) + 1;
        }
    } while (dwarf_siblingof(&sub, &sub) == 0);
    return dims;
}

static bool member_offset(Dwarf_Die *member, int64_t &off)
{
    Dwarf_Attribute a;
    if (!dwarf_attr(member, DW_AT_data_member_location, &a)) {
        off = 0; // union members, and bitfields described by DW_AT_data_bit_offset alone
        return true;
    }
    Dwarf_Word v;
    if (dwarf_formudata(&a, &v) == 0) {
        off = static_cast<int64_t>(v);
        return true;
    }
    // DWARF 2 style: a location expression, DW_OP_plus_uconst N.
    Dwarf_Op *ops;
    size_t n;
    if (dwarf_getlocation(&a, &ops, &n) == 0 && n == 1 && ops[0].atom == DW_OP_plus_uconst) {
        off = static_cast<int64_t>(ops[0].number);
        return true;
    }
    return false;
}

bool find_member(Dwarf_Die *struct_die, const std::string &name, int64_t &off, Dwarf_Die &member,
                 std::optional<bitfield_info> &bf, std::string *why)
{
    Dwarf_Die child;
    if (dwarf_child(struct_die, &child) != 0) return false;
    do {
        int64_t moff = 0;
        if (dwarf_tag(&child) == DW_TAG_inheritance) {
            // A C++ base class: its members are members here, at its offset.
            auto t = type_of(&child);
            auto rt = t ? real_type(&*t) : std::nullopt;
            if (rt && is_struct_tag(dwarf_tag(&*rt)) && member_offset(&child, moff) &&
                find_member(&*rt, name, off, member, bf, why)) {
                off += moff;
                return true;
            }
            continue;
        }
        if (dwarf_tag(&child) != DW_TAG_member) continue;
        const char *n = dwarf_diename(&child);
        if (!n) {
            // An anonymous struct or union: its members are members here.
            auto t = type_of(&child);
            auto rt = t ? real_type(&*t) : std::nullopt;
            if (rt && is_struct_tag(dwarf_tag(&*rt)) && member_offset(&child, moff) &&
                find_member(&*rt, name, off, member, bf, why)) {
                off += moff;
                return true;
            }
            continue;
        }
        if (name != n) continue;
        member = child;
        bf.reset();
        Dwarf_Attribute a;
        Dwarf_Word bits = 0;
        if (dwarf_attr(&child, DW_AT_bit_size, &a) && dwarf_formudata(&a, &bits) == 0 && bits) {
            auto t = type_of(&child);
            int64_t tsize = t ? byte_size(&*t) : -1;
            Dwarf_Word bsize = 0;
            if (dwarf_attr(&child, DW_AT_byte_size, &a)) dwarf_formudata(&a, &bsize);
            int64_t bytes = bsize ? static_cast<int64_t>(bsize) : tsize;
            unsigned cbits = static_cast<unsigned>(bytes * 8);
            if (cbits != 8 && cbits != 16 && cbits != 32 && cbits != 64)
                return fail(why, "bitfield '" + name + "' has a container dprobe can't read");
            bitfield_info b;
            b.width = static_cast<unsigned>(bits);
            b.container = cbits;
            Dwarf_Word dbo;
            if (dwarf_attr(&child, DW_AT_data_bit_offset, &a) && dwarf_formudata(&a, &dbo) == 0) {
                // DWARF 4+: bits from the start of the struct; load the aligned container.
                uint64_t start = dbo / cbits * cbits;
                off = static_cast<int64_t>(start / 8);
                b.offset = static_cast<unsigned>(dbo - start);
            } else {
                // DWARF 2/3: DW_AT_bit_offset counts from the container's most significant bit.
                Dwarf_Word bo = 0;
                if (!dwarf_attr(&child, DW_AT_bit_offset, &a) || dwarf_formudata(&a, &bo) != 0 ||
                    !member_offset(&child, off) || bo + bits > cbits)
                    return fail(why, "bitfield '" + name + "' has a layout dprobe can't read");
                b.offset = static_cast<unsigned>(cbits - bo - bits);
            }
            if (b.offset + b.width > b.container)
                return fail(why, "bitfield '" + name + "' straddles its container (packed struct)");
            bf = b;
            return true;
        }
        if (!member_offset(&child, off))
            return fail(why, "member '" + name + "' has a location dprobe can't read");
        return true;
    } while (dwarf_siblingof(&child, &child) == 0);
    return false;
}

std::string fetch_loc::text() const
{
    std::string s;
    switch (kind) {
    case base_kind::reg:
        s = "%" + name;
        break;
    case base_kind::arg:
        s = name;
        break;
    case base_kind::imm:
        s = "\\" + name;
        break;
    case base_kind::sym:
        s = "@" + name + (sym_off ? signed_off(sym_off) : "");
        break;
    }
    for (int64_t d : derefs)
        s = signed_off(d) + "(" + s + ")";
    return s;
}

bool translate_location(std::span<const Dwarf_Op> ops, const location_env &env, fetch_loc &out,
                        std::string *why)
{
    out = fetch_loc{};
    if (ops.empty()) return fail(why, "has no location here (optimized out)");
    for (size_t i = 0; i < ops.size(); i++) {
        unsigned a = ops[i].atom;
        if (a == DW_OP_entry_value || a == DW_OP_GNU_entry_value)
            return fail(why, "is optimized out here: only its value at the function entry is "
                             "described (DW_OP_entry_value)");
        if (a == DW_OP_implicit_pointer || a == DW_OP_GNU_implicit_pointer)
            return fail(why, "is an optimized-out pointer here (DW_OP_implicit_pointer)");
        if ((a == DW_OP_piece || a == DW_OP_bit_piece) && i + 1 != ops.size())
            return fail(why, "is split into pieces here (DW_OP_piece), which fetch args "
                             "can't join");
    }
    // One piece holding the whole variable is just its location.
    if (ops.back().atom == DW_OP_piece || ops.back().atom == DW_OP_bit_piece) {
        if (ops.size() == 1) return fail(why, "is optimized out here (an empty piece)");
        ops = ops.first(ops.size() - 1);
    }
    if (ops.back().atom == DW_OP_stack_value) {
        uint64_t v;
        if (ops.size() == 2 && is_const_op(ops[0], v)) {
            // The value is a known constant here (a loop bound, a folded expression).
            out.kind = fetch_loc::base_kind::imm;
            out.name = std::to_string(static_cast<int64_t>(v));
            return true;
        }
        return fail(why, "is computed from other values here (DW_OP_stack_value), which fetch "
                         "args can't express");
    }
    if (ops.back().atom == DW_OP_implicit_value)
        return fail(why, "is an implicit value here (DW_OP_implicit_value)");
    bool is_breg;
    unsigned regno;
    int64_t off;
    if (ops.size() == 1 && reg_of(ops[0], is_breg, regno, off) && !is_breg) {
        const char *r = arch::dwarf_regstr(regno);
        if (!r) return fail(why, no_reg(regno));
        out.kind = fetch_loc::base_kind::reg;
        out.name = r;
        return true;
    }
    addr_state st;
    if (!eval_address(ops, env, st, why, 0)) return false;
    st.read(); // a memory location: the variable is what is stored there
    out = st.val;
    return true;
}

bool apply_fields(fetch_loc &loc, Dwarf_Die &type, std::optional<bitfield_info> &bitfield,
                  const std::vector<dwarf_field> &fields, const std::string &varname,
                  std::string *why)
{
    std::string cur = varname;
    bitfield.reset();
    for (const dwarf_field &f : fields) {
        if (bitfield)
            return fail(why, "'" + cur + "' is a bitfield: it has no members or elements");
        auto rt = real_type(&type);
        if (!rt) return fail(why, "'" + cur + "' has no type information");
        int tag = dwarf_tag(&*rt);
        if (f.is_index) {
            if (tag == DW_TAG_array_type) {
                int64_t count;
                if (array_shape(&*rt, count) > 1)
                    return fail(why, "'" + cur +
                                         "' is a multi-dimensional array, which dprobe "
                                         "does not index");
                auto elem = type_of(&*rt);
                int64_t sz = elem ? byte_size(&*elem) : -1;
                if (sz <= 0) return fail(why, "'" + cur + "' has elements of unknown size");
                if (!loc.in_memory()) return fail(why, "'" + cur + "' is not in memory here");
                loc.last_offset() += f.index * sz;
                type = *elem;
            } else if (tag == DW_TAG_pointer_type) {
                auto elem = type_of(&*rt);
                int64_t sz = elem ? byte_size(&*elem) : -1;
                if (sz <= 0) return fail(why, "'" + cur + "' points to elements of unknown size");
                loc.derefs.push_back(f.index * sz);
                type = *elem;
            } else {
                return fail(why, "'" + cur + "' is neither an array nor a pointer");
            }
            cur += "[" + std::to_string(f.index) + "]";
            continue;
        }
        Dwarf_Die sdie;
        if (f.arrow) {
            if (tag != DW_TAG_pointer_type)
                return fail(why, "'" + cur + "' is not a pointer: use '.' for its members");
            auto pointee = type_of(&*rt);
            auto rp = pointee ? real_type(&*pointee) : std::nullopt;
            if (!rp || !is_struct_tag(dwarf_tag(&*rp)))
                return fail(why, "'" + cur + "' does not point to a struct or union");
            sdie = *rp;
        } else {
            if (tag == DW_TAG_pointer_type)
                return fail(why, "'" + cur + "' is a pointer: use '->' for its members");
            if (!is_struct_tag(tag)) return fail(why, "'" + cur + "' is not a struct or union");
            if (!loc.in_memory())
                return fail(why, "'" + cur +
                                     "' is held in a register here: members of a struct "
                                     "in a register can't be fetched");
            sdie = *rt;
        }
        int64_t off = 0;
        Dwarf_Die member;
        std::string merr;
        if (!find_member(&sdie, f.name, off, member, bitfield, &merr))
            return fail(why, merr.empty() ? "'" + cur + "' (" + dwarf_type_name(&sdie) +
                                                ") has no member '" + f.name + "'"
                                          : merr);
        if (f.arrow)
            loc.derefs.push_back(off);
        else
            loc.last_offset() += off;
        auto mt = type_of(&member);
        if (!mt) return fail(why, "member '" + f.name + "' has no type information");
        type = *mt;
        cur += (f.arrow ? "->" : ".") + f.name;
    }
    return true;
}

bool convert_type(fetch_loc &loc, Dwarf_Die *type, const std::optional<bitfield_info> &bitfield,
                  const std::string &cast, const std::string &varname, std::string &type_out,
                  std::string *why)
{
    const bool to_string = cast == "string" || cast == "ustring";
    if (!cast.empty() && !to_string) {
        type_out = cast; // the user knows best, as in perf
        return true;
    }
    if (bitfield) {
        if (to_string) return fail(why, "'" + varname + "' is a bitfield, not a string");
        type_out = "b" + std::to_string(bitfield->width) + "@" + std::to_string(bitfield->offset) +
                   "/" + std::to_string(bitfield->container);
        return true;
    }
    auto rt = type ? real_type(type) : std::nullopt;
    if (!rt) return fail(why, "'" + varname + "' has no type information");
    const int tag = dwarf_tag(&*rt);
    const std::string tname = dwarf_type_name(type);
    if (to_string) {
        auto elem = type_of(&*rt);
        if (tag == DW_TAG_pointer_type) {
            if (!elem || !is_char(&*elem))
                return fail(why, "'" + varname + "' (" + tname + ") does not point to chars");
            loc.derefs.push_back(0);
        } else if (tag == DW_TAG_array_type) {
            if (!elem || !is_char(&*elem))
                return fail(why, "'" + varname + "' (" + tname + ") is not an array of chars");
            if (!loc.in_memory()) return fail(why, "'" + varname + "' is not in memory here");
        } else {
            return fail(why, "'" + varname + "' (" + tname +
                                 ") is neither a pointer nor an array: it can't be a string");
        }
        type_out = cast;
        return true;
    }
    switch (tag) {
    case DW_TAG_base_type:
    case DW_TAG_enumeration_type: {
        Dwarf_Attribute a;
        Dwarf_Word enc = DW_ATE_signed;
        Dwarf_Die *enc_die = &*rt;
        std::optional<Dwarf_Die> under;
        if (tag == DW_TAG_enumeration_type) {
            under = type_of(&*rt);
            under = under ? real_type(&*under) : std::nullopt;
            enc_die = under ? &*under : nullptr;
        }
        if (enc_die && dwarf_attr(enc_die, DW_AT_encoding, &a)) dwarf_formudata(&a, &enc);
        int size = dwarf_bytesize(&*rt);
        if (enc == DW_ATE_float || enc == DW_ATE_complex_float || enc == DW_ATE_decimal_float)
            return fail(why, "'" + varname + "' is a " + tname +
                                 ": fetch args have no floating-point type (give one, e.g. "
                                 ":x64, to see its bits)");
        if (size != 1 && size != 2 && size != 4 && size != 8)
            return fail(why, "'" + varname + "' is a " + std::to_string(size) + "-byte " + tname +
                                 ": fetch types hold at most 8 bytes");
        bool is_signed = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
        type_out = (is_signed ? "s" : "u") + std::to_string(size * 8);
        return true;
    }
    case DW_TAG_pointer_type: {
        // A char pointer is the text it points to (":x64" gives the pointer).
        auto pointee = type_of(&*rt);
        if (pointee && is_text_char(&*pointee)) {
            loc.derefs.push_back(0);
            type_out = "string";
            return true;
        }
        type_out = "x64";
        return true;
    }
    case DW_TAG_reference_type:
    case DW_TAG_rvalue_reference_type:
    case DW_TAG_ptr_to_member_type:
        type_out = "x64";
        return true;
    case DW_TAG_array_type: {
        int64_t count;
        int dims = array_shape(&*rt, count);
        auto elem = type_of(&*rt);
        if (!loc.in_memory()) return fail(why, "'" + varname + "' is not in memory here");
        if (dims == 1 && elem && is_char(&*elem)) {
            type_out = "string";
            return true;
        }
        if (dims != 1 || count <= 0 || count > MAX_ARRAY_LEN || !elem)
            return fail(why, "'" + varname + "' is an array (" + tname +
                                 "): name one element, VAR[INDEX]");
        fetch_loc probe = loc;
        std::string et;
        std::optional<bitfield_info> none;
        if (!convert_type(probe, &*elem, none, "", varname + "[]", et, why) || et == "string" ||
            probe.derefs.size() != loc.derefs.size())
            return fail(why, "'" + varname + "' is an array (" + tname +
                                 "): name one element, VAR[INDEX]");
        type_out = et + "[" + std::to_string(count) + "]";
        return true;
    }
    case DW_TAG_structure_type:
    case DW_TAG_union_type:
    case DW_TAG_class_type:
        return fail(why, "'" + varname + "' is a " + tname + ": name a member (" + varname +
                             ".MEMBER, or " + varname + "->MEMBER through a pointer)");
    default:
        return fail(why, "'" + varname + "' has a type fetch args can't hold (" + tname + ")");
    }
}

} // namespace dprobe
