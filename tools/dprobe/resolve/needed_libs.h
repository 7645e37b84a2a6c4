// The shared libraries a program loads at start (its DT_NEEDED closure), where the dynamic
// loader finds them: what `dprobe record -e sdt_PROVIDER:NAME` searches besides the
// program, as perf probe searches a binary and the libraries it links.
#pragma once

#include <string>
#include <vector>

namespace dprobe::tools
{

// The real paths of the libraries PROG loads at start, as its interpreter (PT_INTERP)
// resolves them in `--list` mode, which maps them without running any of their code (what
// ldd does). Empty for a static program, or when the loader cannot list them.
std::vector<std::string> needed_libraries(const std::string &prog);

} // namespace dprobe::tools
