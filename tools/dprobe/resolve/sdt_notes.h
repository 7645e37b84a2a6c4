// USDT / SDT probes as dynamic_events lines, as perf probe writes one for
// `sdt_PROVIDER:NAME` (tools/perf/util/probe-file.c, probe-event.c):
//
//   p:sdt_PROVIDER/NAME /real/path:0xFILE_OFFSET(0xSEMAPHORE_OFFSET) arg1=%di:s32 ...
//
// The notes and their operands are read by tracefs/sdt_notes.h (which tracefs also uses for
// its static USDT events).
#pragma once

#include "tracefs/sdt_notes.h"

#include <string>
#include <vector>

namespace dprobe::tools
{

using dprobe::read_sdt_probes;
using dprobe::sdt_arg_fetch;
using dprobe::sdt_probe;

// The uprobe-style dynamic_events line of probe P of PATH (its real path is used), with
// EXTRA fetch args appended; what its arguments leave out goes to NOTES.
std::string sdt_probe_line(const sdt_probe &p, const std::string &path,
                           const std::vector<std::string> &extra, std::vector<std::string> &notes);

// Whether SPEC names SDT probes ("sdt_PROVIDER:NAME", globs allowed in both) and which.
bool is_sdt_spec(const std::string &spec);
bool sdt_spec_matches(const std::string &spec, const sdt_probe &p);

// The lines of the SDT probes SPEC[0] names in the files OBJECTS, with SPEC[1..] (fetch
// args) appended to each. A probe at several sites (an inlined function's) is one event
// with a probe per site when the sites' arguments have the same types (the kernel appends
// them), else NAME_1, NAME_2... False when nothing matches (*ERR says where it looked).
bool sdt_lines(const std::vector<std::string> &spec, const std::vector<std::string> &objects,
               std::vector<std::string> &lines, std::vector<std::string> &notes, std::string *err);

} // namespace dprobe::tools
