// Function commands (the kernel's function probes, kernel/trace/trace_functions.c and the
// event and snapshot ones): written to set_ftrace_filter as GLOB:COMMAND[:PARAM], they run
// when a matching function is called, in the array whose set_ftrace_filter took them.
//
//   traceon[:N]     turns tracing_on back on (N times: counts only calls that change it)
//   traceoff[:N]    turns tracing_on off
//   stacktrace[:N]  writes a kernel_stack record of the calling thread's stack
//   snapshot[:N]    takes a snapshot (swaps the buffer with the snapshot buffer, which the
//                   command allocates)
//   enable_event:GROUP:EVENT[:N]   switches the event on in this array (the event is held in
//   disable_event:GROUP:EVENT[:N]  soft mode while the command exists: its enable reads 0*/1*)
//   dump            writes the array's trace to the process's standard error (the kernel's
//                   console), after turning tracing off as the kernel's ftrace_dump does
//   cpudump         the same, only the records of the calling thread's CPU
//
// "!GLOB:COMMAND[:...]" removes the command from the functions it holds whose name GLOB
// matches ("*": all), as the kernel's unregister_ftrace_function_probe_func(); a command
// made with a count is removed only by a removal with a parameter ("!f:traceoff:0"), one
// without only by one without (the kernel's separate *_count_probe_ops). They read back
// after the filter's functions as "func:traceon:unlimited", "func:traceoff:count=3",
// "func:enable_event:grp:ev:unlimited", "func:dump".
#pragma once

#include "tracefs/ftrace_filter.h"

#include <string>

namespace dprobe
{

class trace_array;

// Runs one command token of TR's set_ftrace_filter. trace_types_lock held. 0 or -errno.
int ftrace_run_command(trace_array &tr, const ftrace_command_request &req);
// Their lines for set_ftrace_filter.
std::string ftrace_probes_show(trace_array &tr);
// rmdir: every command of TR removed.
void ftrace_probes_remove_array(trace_array &tr);

} // namespace dprobe
