// Helpers of `dprobe record`: finding the program and the agent, the end-of-run summary,
// and the last-resort cleanup of a tracefs mount the program could not remove.
#pragma once

#include <cstdio>
#include <string>
#include <sys/types.h>
#include <vector>

namespace dprobe::tools
{

// PROG as execvp would find it (PATH search when it has no '/'). False when not found or
// not executable.
bool find_program(const std::string &prog, std::string &path);
// Whether the agent can be preloaded into PATH: a dynamically linked ELF (or a script,
// whose interpreter gets it). WHY says what is wrong otherwise.
bool can_preload(const std::string &path, std::string &why);
// libdprobe-preload.so: $DPROBE_AGENT, next to the build tree's dprobe, or installed.
bool find_agent(std::string &path);
// Where a live status line may go: the controlling terminal (a descriptor the caller owns),
// when the program's output does not go there - its standard output and error are those of
// this process (PID 0: `record` passes them on) or of process PID (`attach`). -1 otherwise:
// a line redrawn with '\r' on a terminal the program writes to runs into its output.
int status_terminal(pid_t pid);
// Lazily unmounts MOUNTPOINT when it is still a mount. True when it had to.
bool unmount_if_mounted(const std::string &mountpoint);
// After a recorded process ended without its exit handlers (killed, _exit): removes its
// tracefs mount point directory (if empty) and its control socket, when MOUNTPOINT is the
// default one of a process that no longer exists.
void remove_runtime_leftovers(const std::string &mountpoint);
// "[ dprobe CMD: N events (M lost) ... ]" from the trace file.
void print_record_summary(const std::string &file, const char *cmd = "record");
// The histograms FILE's sessions left (HIST chunks: the --trigger hist:... ones), each after
// a "# events/GROUP/EVENT/hist of PID (COMM)" line, on OUT; only PID's sessions when PID is
// not 0. Returns how many.
size_t print_session_hists(const std::string &file, std::FILE *out, pid_t pid = 0);
// The libraries -F globs name ("libplugin.so:*") that no process of the recording in FILE
// ever loaded (the objects of its sessions): with --follow-loads such a glob waits for a load
// that never came. Each as "GLOB LIB". Reads the whole file: for a recording with no event.
std::vector<std::string> libraries_never_loaded(const std::string &file,
                                                const std::vector<std::string> &globs);

} // namespace dprobe::tools
