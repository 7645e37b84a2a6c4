// perf-probe syntax to dynamic_events lines, checked offline against the binary.
//
//   [[GROUP:]EVENT=]POINT [[NAME=]ARG[:TYPE] ...]
//   POINT: FUNC[@SRC][+OFF|%return|:RLN]  or  SRC:ALN           (see probe_point.h)
//   ARG:   VAR[->FIELD|.FIELD|[N]]... | $vars | $params | any dynamic_events fetch arg
//          (%REG, $argN, $retval, $stackN, $comm, @SYM, +OFF(ARG), \IMM)
//
// Source lines, files and variables come from the binary's DWARF (probe_finder.h). The
// place becomes `MODULE:SYMBOL[+OFF]` where MODULE is the binary's file name, which dprobe
// resolves in the traced process like a kernel module name; the group defaults to
// probe_<binary> and the event to FUNC, FUNC_OFF, FUNC_L<RLN> or FUNC__return, as perf does.
#pragma once

#include "tools/dprobe/resolve/elf_image.h"
#include "tracefs/error_log.h"
#include "tracefs/probe_parse.h"

#include <string>
#include <vector>

namespace dprobe::tools
{

struct perf_probe_result {
    bool ok = false;
    std::string line;               // the dynamic_events line
    probe_definition def;           // parsed from line
    std::string message;            // on failure: what is wrong, one line
    std::string error_log;          // on failure in the generated line: the error_log entry (caret)
    std::vector<std::string> notes; // on success: what $vars/$params left out, and why
};

// The perf group name of a binary: "probe_" + its file name up to the first '.' or '-'.
std::string perf_group_for(const std::string &module_name);

// Translates SPEC (the words of one probe definition) for IMG.
perf_probe_result translate_perf_probe(const std::vector<std::string> &spec, const elf_image &img);

// Checks a dynamic_events LINE: parse errors and, when IMG is given, the registration errors
// the place would get in a process running IMG (unknown symbol, not unique, not an
// instruction boundary). Fills def and error_log.
perf_probe_result check_dynevent_line(const std::string &line, const elf_image *img);

} // namespace dprobe::tools
