// dprobe report --format pprof: the recorded calls as a pprof profile (profile.proto,
// gzipped), what `go tool pprof`, Pyroscope, Parca and Grafana read.
//
// A profile from a function graph is exact, not sampled: one sample per call path of the
// call tree (call_tree.h), with two values, the calls that ended on that path ("calls",
// count) and their own time ("time", nanoseconds: inclusive time less the callees'). So
// pprof's flat column is a function's self time and its cum column the inclusive time
// (pprof adds a sample to every function on its stack once), as `uftrace report` shows
// them. --weight calls makes "calls" the default sample type. --per-thread puts each
// thread's calls under a frame of its own ("comm-tid"), which pprof's -focus can pick.
//
// Each function is one Function and one Location (the graph knows its entry only, not the
// call sites): its name as --demangle shows it, its symbol (system_name), and from the
// DWARF of its object its source file and the line of its declaration. The message
// definitions of the fields written are in tools/dprobe/report/proto/profile.proto.
#pragma once

#include "tools/dprobe/report/report.h"

#include <string>

namespace dprobe::report
{

// Writes M's profile to PATH. "" or what went wrong; warnings go to RC.
std::string write_pprof(const model &m, const report_opts &o, const std::string &path,
                        report_counts &rc);

} // namespace dprobe::report
