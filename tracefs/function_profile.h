// The function profiler (the kernel's function_profile_enabled and trace_stat/function<N>):
// per function, its hits, the time spent in it, the average and the variance (s^2).
//
// It traces the top-level array's functions (set_ftrace_filter minus set_ftrace_notrace, as
// the kernel's profiler follows the global filter) with entry and exit callbacks. Each
// thread counts in its own table, so the hot path takes no lock, and reading does not stop
// the threads: the files add up what the tables hold at that moment.
//
// Files, as the kernel's: trace_stat/function<CPU>, one per possible CPU (function0 ..
// function<N-1>, sysconf(_SC_NPROCESSORS_CONF)), each the calls that entered on that CPU,
// from every thread (threads that have exited included, until the profiler is enabled
// again). A call's time goes to the CPU it entered on, with its hit (the kernel's goes to
// the CPU it returns on: there a task moves only where it may sleep or be preempted, here a
// thread may move at any instruction, and the time staying with its hit keeps each file's
// Avg the mean of the calls it counts). Time is what the function took from entry to
// return, its callees' time included unless options/graph-time is 0. Enabling the profiler
// again starts from zero.
#pragma once

#include <string>
#include <vector>

namespace dprobe
{

bool function_profile_enabled();
// trace_types_lock held. 0 or -errno.
int function_profile_set(bool on);
// The top-level array's filters changed. trace_types_lock held.
void function_profile_update();

// The session is over and no thread can be in the profiler (the unload's quiescence): every
// thread's table is unmapped, so a detach leaves none of its memory in the program.
void function_profile_release_all() noexcept;

// trace_stat/ file names: "function<cpu>" per possible CPU (and any higher CPU a call ran on).
std::vector<std::string> trace_stat_files();
// A trace_stat file's text ("" for an unknown name).
std::string trace_stat_text(const std::string &name);

} // namespace dprobe
