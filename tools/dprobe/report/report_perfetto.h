// dprobe report --format perfetto: the recording as a Perfetto trace (a protobuf `Trace` of
// TracePackets with TrackEvents), what ui.perfetto.dev and trace_processor read natively,
// whatever its size.
//
//   - a track per process (ProcessDescriptor: pid, name) and per thread (ThreadDescriptor,
//     its process's track as parent);
//   - each thread's events in a packet sequence of their own, its names interned there
//     (InternedData: a function's or an event's name, a category, an argument's name is
//     written once per thread, then referred to by number);
//   - calls as SLICE_BEGIN / SLICE_END pairs on the thread's track, nested as
//     --format chrome nests them (unexited calls closed at the thread's last event, an exit
//     whose entry was lost an instant "name (return)"); probe events, `-p function` calls,
//     stack traces and markers as instant events with their arguments as debug annotations
//     (integers as integers, the rest as text); a process killed by a signal an instant;
//   - timestamps in nanoseconds of the recording's trace clock.
// Written as the trace is read, one thread after another: memory is one chunk of events, a
// thread's open calls and its interned names, whatever the trace's size. The message
// definitions of the fields written: tools/dprobe/report/proto/perfetto_trace.proto.
#pragma once

#include "tools/dprobe/report/report.h"

namespace dprobe::report
{

report_counts format_perfetto(const model &m, const report_opts &o, std::FILE *out);

} // namespace dprobe::report
