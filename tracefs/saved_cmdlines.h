// saved_cmdlines, saved_cmdlines_size and saved_tgids (the kernel's pid -> comm and
// pid -> tgid maps that trace output uses for tasks that are gone).
//
// Here: every thread that has a buffer in a trace array (its name as the buffer recorded
// it, or the current one while it lives), and every other process that wrote a record
// through the tree (trace_marker writers). saved_tgids gives each its thread-group id (this
// process's pid for its threads). saved_cmdlines_size (default 128, as the kernel's) bounds
// how many writers of other processes are remembered.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dprobe
{

// Remembers the name and thread group of PID (a process writing to the tree).
void trace_save_cmdline(int32_t pid, std::string_view comm, int32_t tgid);
// The name remembered for PID; false when there is none.
bool trace_find_cmdline(int32_t pid, std::string &comm);

std::string saved_cmdlines_text();
std::string saved_tgids_text();
unsigned saved_cmdlines_size();
// 0 or -EINVAL (0, or more than the kernel's PID_MAX_DEFAULT).
int set_saved_cmdlines_size(unsigned long long n);

} // namespace dprobe
