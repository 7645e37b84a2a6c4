// The function graph tracer's process-wide settings (the kernel's set_graph_function,
// set_graph_notrace, max_graph_depth and tracing_thresh are global too).
//
//   set_graph_function   only calls made (directly or not) from these functions are
//                        traced; empty: every call
//   set_graph_notrace    these functions and everything they call are not traced
//   max_graph_depth      calls deeper than this are not traced (0: no limit)
//   tracing_thresh       (microseconds) only calls that took at least this long are
//                        recorded, by their return record alone (0: off)
#pragma once

#include "tracefs/ftrace_filter.h"

#include <cstdint>

namespace dprobe
{

ftrace_hash &ftrace_graph_hash();
ftrace_hash &ftrace_graph_notrace_hash();
unsigned fgraph_max_depth() noexcept;
void fgraph_set_max_depth(unsigned depth) noexcept;
// In nanoseconds.
uint64_t tracing_thresh() noexcept;
// Sets it; a running function_graph tracer restarts to switch between its entry+return and
// return-only modes (the kernel's update_thresh). trace_types_lock held.
void tracing_set_thresh(uint64_t ns);

} // namespace dprobe
