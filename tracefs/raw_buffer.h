// The kernel's binary ring-buffer format for the kernel's own tools (libtraceevent's kbuffer,
// libtracefs, trace-cmd): per_cpu/cpuN/trace_pipe_raw, events/header_page and
// events/header_event.
//
// The page format and its encoder are in raw_page.h. Reads return whole 4096-byte pages (as
// many as the read asks for and are ready), as the kernel's trace_pipe_raw does.
//
// CPUs, not threads: dprobe's buffers are per thread, while libtracefs and trace-cmd open
// per_cpu/cpu0 .. cpuN-1 for N configured CPUs. Every record carries the CPU it was written
// on, so per_cpu/cpuN has exactly the records written on CPU N, in time order. Reading any of
// them consumes the array's buffer (like trace_pipe) and sorts the records into per-CPU page
// queues; a queue holds at most buffer_size_kb, beyond which its oldest pages are dropped
// and the next page says how many events were missed, as an overwritten kernel page would.
//
// Records go out as the kernel lays them out: the agent's compact graph and function records
// expanded into the full ones the format files describe (ftrace_entries.h), raw_data without
// the length word dprobe's buffers keep after its bytes.
#pragma once

#include "tracefs/raw_page.h"
#include "tracefs/tracefs_tree.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dprobe
{

class trace_array;

// per_cpu/cpuN/trace_pipe_raw of TR.
std::unique_ptr<tracefs_file> raw_pipe_open(std::shared_ptr<trace_array> tr, unsigned cpu);
// per_cpu/cpuN/stats of TR.
std::string per_cpu_stats(trace_array &tr, unsigned cpu);

} // namespace dprobe
