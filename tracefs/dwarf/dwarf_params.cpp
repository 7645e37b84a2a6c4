#include "tracefs/dwarf/dwarf_params.h"

#include <dwarf.h>
#include <elfutils/libdw.h>

namespace dprobe
{

namespace
{

// SysV x86-64 classification, simplified: integers, enums and pointers take the next
// integer register (or stack slot: $argN reads those too); floating point takes an SSE
// register and does not count; anything else (structs by value, long double) ends the
// mapping, because where it goes depends on its layout.
void classify(Dwarf_Die *type_die, dwarf_param &p, bool &integer, bool &floating)
{
    integer = floating = false;
    Dwarf_Die t;
    if (!type_die || dwarf_peel_type(type_die, &t) != 0) {
        p.why = "unknown type";
        return;
    }
    int tag = dwarf_tag(&t);
    int size = dwarf_bytesize(&t);
    if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type ||
        tag == DW_TAG_rvalue_reference_type) {
        integer = true;
        p.type = "x64";
        return;
    }
    if (tag == DW_TAG_enumeration_type) {
        integer = true;
        p.type = "s" + std::to_string(size > 0 ? size * 8 : 32);
        return;
    }
    if (tag == DW_TAG_base_type) {
        Dwarf_Attribute a;
        Dwarf_Word enc = 0;
        if (dwarf_attr(&t, DW_AT_encoding, &a)) dwarf_formudata(&a, &enc);
        if (enc == DW_ATE_float) {
            floating = size <= 8;
            p.why = "a floating-point parameter (in an SSE register)";
            return;
        }
        if (size < 1 || size > 8) {
            p.why = "a " + std::to_string(size) + "-byte scalar";
            return;
        }
        integer = true;
        bool is_signed = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
        p.type = std::string(is_signed ? "s" : "u") + std::to_string(size * 8);
        return;
    }
    p.why = "passed by value as an aggregate";
}

} // namespace

std::vector<dwarf_param> dwarf_die_params(Dwarf_Die *func)
{
    std::vector<dwarf_param> out;
    Dwarf_Die p;
    unsigned next_int = 1;
    bool mapped = true;
    if (dwarf_child(func, &p) != 0) return out;
    do {
        if (dwarf_tag(&p) != DW_TAG_formal_parameter) continue;
        dwarf_param dp;
        const char *pn = dwarf_diename(&p);
        dp.name = pn ? pn : "";
        Dwarf_Attribute ta;
        Dwarf_Die td;
        bool integer = false, floating = false;
        Dwarf_Die *tdp = dwarf_attr_integrate(&p, DW_AT_type, &ta) && dwarf_formref_die(&ta, &td)
                             ? &td
                             : nullptr;
        if (tdp) dp.type_die = td;
        classify(tdp, dp, integer, floating);
        dp.floating = floating;
        dp.aggregate = !integer && !floating;
        if (integer && mapped)
            dp.fetch = "$arg" + std::to_string(next_int++);
        else if (integer)
            dp.why = "follows a parameter passed by value";
        else if (!floating)
            mapped = false;
        out.push_back(std::move(dp));
    } while (dwarf_siblingof(&p, &p) == 0);
    return out;
}

} // namespace dprobe
