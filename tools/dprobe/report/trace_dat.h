// dprobe report --format trace-dat: a recording as trace-cmd's trace.dat (file format
// version 6, trace-cmd.dat.v6(5)), so that `trace-cmd report` and KernelShark open it.
//
// What goes in: events/header_page and header_event as dprobe's tracefs serves them; the
// format of every event the recording holds (ftrace's own in the ftrace section, probe
// events by group); a kallsyms section built from the functions of the recorded objects
// (so %ps and the function-graph plugin print names); saved_cmdlines from the recorded
// thread names; the trace_clock option; and per CPU the records written on that CPU, in
// the kernel's ring-buffer page format (tracefs/raw_buffer.h). Records of every session
// (forked children, exec'd images) are merged: each keeps its thread id. The recording's
// compact function-graph records are written as the kernel's funcgraph_entry/exit records
// (common header, and the exit's call time taken from its entry).
//
// libtracecmd's public API (trace-cmd.h, 3.1) reads trace.dat files but has no writer:
// the file is written here, and read back with libtracecmd in the tests.
#pragma once

#include "tools/dprobe/report/report.h"

#include <string>

namespace dprobe::report
{

// Writes M to PATH. Returns "" or what went wrong.
std::string write_trace_dat(const model &m, const report_opts &o, const std::string &path);

} // namespace dprobe::report
