// perf-probe syntax to dynamic_events lines, checked offline against the binary.
//
//   [[GROUP:]EVENT=]FUNC[+OFF|%return] [[NAME=]ARG[:TYPE] ...]
//
// ARG is anything a dynamic_events fetch arg accepts (%REG, $argN, $retval, $stackN, $comm,
// @SYM, +OFF(ARG), \IMM). The place becomes `MODULE:FUNC[+OFF]` where MODULE is the binary's
// file name, which dprobe resolves in the traced process like a kernel module name; the group
// defaults to probe_<binary> and the event to FUNC, FUNC_OFF or FUNC__return, as perf does.
#pragma once

#include "tools/dprobe/elf_image.h"
#include "tracefs/error_log.h"
#include "tracefs/probe_parse.h"

#include <string>
#include <vector>

namespace dprobe::tools {

struct perf_probe_result {
    bool ok = false;
    std::string line;      // the dynamic_events line
    probe_definition def;  // parsed from line
    std::string message;   // on failure: what is wrong, one line
    std::string error_log; // on failure in the generated line: the error_log entry (caret)
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
