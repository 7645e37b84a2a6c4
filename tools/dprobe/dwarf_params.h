// Function parameters by name from a binary's DWARF, so perf-probe style specs can say
// `parse len` instead of `parse len=$arg2:u64`.
#pragma once

#include <string>
#include <vector>

namespace dprobe::tools {

struct dwarf_param {
    std::string name;
    std::string fetch; // "$argN" when the parameter arrives in an integer register or slot
    std::string type;  // "u32", "s64", "x64" (pointers), "" when not a scalar
    std::string why;   // why fetch is empty (a float, a struct passed by value before it, ...)
};

// The parameters of FUNC in the file PATH, in order. Empty (and *err set) without DWARF or
// without FUNC in it.
std::vector<dwarf_param> dwarf_function_params(const std::string &path, const std::string &func,
                                               std::string *err);

} // namespace dprobe::tools
