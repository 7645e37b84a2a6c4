// `dprobe probe --line` and `--vars`: what can be probed, in perf probe's formats.
//
//   --line FUNC[@SRC][:RLN[+NUM|-RLN2]] | SRC[:ALN[+NUM|-ALN2]]
//       <FUNC@PATH:RLN> then the source, lines where a probe can go numbered (relative to
//       FUNC's declaration), the others indented without a number.
//   --vars POINT
//       Available variables at POINT, then @<SYMBOL+OFF> and one "TYPE<tab>NAME" line per
//       variable that has a value there.
#pragma once

#include "tracefs/dwarf/debuginfo.h"
#include "tools/dprobe/resolve/elf_image.h"
#include "tools/dprobe/resolve/probe_point.h"

#include <string>

namespace dprobe::tools
{

// The --line listing of RANGE (its text, as perf's -L syntax) into OUT. False with *err.
bool show_line_range(const debuginfo &di, const elf_image &img, const std::string &range,
                     std::string &out, std::string *err);

// The --vars listing at POINT (perf probe point syntax) into OUT. False with *err.
bool show_available_vars(const debuginfo &di, const elf_image &img, const std::string &point,
                         std::string &out, std::string *err);

} // namespace dprobe::tools
