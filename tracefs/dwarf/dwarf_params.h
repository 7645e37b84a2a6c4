// Where a function's parameters are at its entry, by the SysV x86-64 calling convention
// rather than by their DWARF locations: at the entry of a function built without
// optimization the DWARF location is the stack slot the prologue has not filled yet, so
// perf skips the prologue; dprobe instead reads the argument registers ($argN), which also
// keeps entry probes on the function's patch site. The dynamic_events parser uses the same
// mapping for parameter names, $arg* and the kernel's $argN renaming (tracefs/trace_btf.h).
#pragma once

#include <elfutils/libdw.h>

#include <optional>
#include <string>
#include <vector>

namespace dprobe
{

struct dwarf_param {
    std::string name;
    std::string fetch;      // "$argN" when the parameter arrives in an integer register or slot
    std::string type;       // "u32", "s64", "x64" (pointers), "" when not a scalar
    std::string why;        // why fetch is empty (a float, a struct passed by value before it, ...)
    bool floating = false;  // in an SSE register: takes no integer slot
    bool aggregate = false; // a struct, union or long double by value: the slots after it
                            // depend on its layout, so they are not mapped
    std::optional<Dwarf_Die> type_die;
};

// The parameters of the function FUNC (a DW_TAG_subprogram with code), in order.
std::vector<dwarf_param> dwarf_die_params(Dwarf_Die *func);

} // namespace dprobe
