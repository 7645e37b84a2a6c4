// C++ names as report shows them (uftrace's --demangle, perf's default): "simple" drops the
// parameters and template arguments (_ZNSt6vectorIiSaIiEE9push_backERKi: std::vector::push_back),
// "full" is the whole demangled name, "no" the symbol as it is.
#pragma once

#include <string>

namespace dprobe::report
{

enum class demangle_mode { simple, full, none };

// NAME (a symbol) as MODE shows it; a name that is not a mangled C++ name is kept.
std::string demangle(const std::string &name, demangle_mode mode);
// The "simple" form of a fully demangled name.
std::string demangle_simplify(const std::string &full);

} // namespace dprobe::report
