#include "tools/dprobe/dwarf_params.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace dprobe::tools {

namespace {

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
        if (dwarf_attr(&t, DW_AT_encoding, &a))
            dwarf_formudata(&a, &enc);
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

std::vector<dwarf_param> dwarf_function_params(const std::string &path, const std::string &func,
                                               std::string *err)
{
    std::vector<dwarf_param> out;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = path + ": " + std::strerror(errno);
        return out;
    }
    Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
    if (!dw) {
        ::close(fd);
        *err = path + " has no debug info (build with -g to name parameters)";
        return out;
    }
    bool found = false;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (!found && dwarf_nextcu(dw, off, &next, &hsize, nullptr, nullptr, nullptr) == 0) {
        Dwarf_Die cu, child;
        if (dwarf_offdie(dw, off + hsize, &cu) && dwarf_child(&cu, &child) == 0) {
            do {
                if (dwarf_tag(&child) != DW_TAG_subprogram)
                    continue;
                const char *n = dwarf_diename(&child);
                if (!n || func != n || dwarf_hasattr(&child, DW_AT_declaration))
                    continue;
                found = true;
                Dwarf_Die p;
                unsigned next_int = 1;
                bool mapped = true;
                if (dwarf_child(&child, &p) == 0) {
                    do {
                        if (dwarf_tag(&p) != DW_TAG_formal_parameter)
                            continue;
                        dwarf_param dp;
                        const char *pn = dwarf_diename(&p);
                        dp.name = pn ? pn : "";
                        Dwarf_Attribute ta;
                        Dwarf_Die td;
                        bool integer = false, floating = false;
                        Dwarf_Die *tdp = dwarf_attr(&p, DW_AT_type, &ta) && dwarf_formref_die(&ta, &td)
                                             ? &td : nullptr;
                        classify(tdp, dp, integer, floating);
                        if (integer && mapped)
                            dp.fetch = "$arg" + std::to_string(next_int++);
                        else if (integer)
                            dp.why = "follows a parameter passed by value";
                        else if (!floating)
                            mapped = false;
                        out.push_back(std::move(dp));
                    } while (dwarf_siblingof(&p, &p) == 0);
                }
                break;
            } while (dwarf_siblingof(&child, &child) == 0);
        }
        off = next;
    }
    dwarf_end(dw);
    ::close(fd);
    if (!found)
        *err = "no debug info for function '" + func + "' in " + path;
    return out;
}

} // namespace dprobe::tools
