// Where a function's parameters are at its entry, by the SysV x86-64 calling convention
// rather than by their DWARF locations: at the entry of a function built without
// optimization the DWARF location is the stack slot the prologue has not filled yet, so
// perf skips the prologue; dprobe instead reads the argument registers ($argN), which also
// keeps entry probes on the function's patch site.
#pragma once

#include <elfutils/libdw.h>

#include <optional>
#include <string>
#include <vector>

namespace dprobe::tools {

struct dwarf_param {
    std::string name;
    std::string fetch; // "$argN" when the parameter arrives in an integer register or slot
    std::string type;  // "u32", "s64", "x64" (pointers), "" when not a scalar
    std::string why;   // why fetch is empty (a float, a struct passed by value before it, ...)
    std::optional<Dwarf_Die> type_die;
};

// The parameters of the function FUNC (a DW_TAG_subprogram with code), in order.
std::vector<dwarf_param> dwarf_die_params(Dwarf_Die *func);

} // namespace dprobe::tools
