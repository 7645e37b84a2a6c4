// The processes an attach session spread to: children the traced process forked while the
// session ran (and their children) each run a session of their own, written into the same
// trace file (tools/agent/lifecycle.cpp). Ending the session ends theirs too, as the kernel's
// unregistered uprobe leaves no breakpoint in the children of the process it was placed in.
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace dprobe::tools
{

// The processes other than EXCEPT (and this one) that have the dprobe runtime loaded and
// hold TRACE_PATH open for writing: the sessions forked from EXCEPT's. Ascending pids.
std::vector<pid_t> session_forks(const std::string &trace_path, pid_t except);

} // namespace dprobe::tools
