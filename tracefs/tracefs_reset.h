// The tracefs tree back to what a new session finds: the kernel's state after boot (the
// `nop` tracer, no events, empty filters, no triggers or function commands, no instances,
// default options and sizes, an empty buffer). It is what the kernel's ftrace selftests do
// before every test (test.d/functions, initialize_system), done here through the same files,
// so a session's teardown takes the same paths a user's echo takes.
//
// The values of the settable files (options, buffer_size_kb, trace_clock, max_graph_depth ...)
// are read once, the first time tracefs_capture_defaults() runs (before a session changes
// anything), and written back by tracefs_reset(): their defaults stay in the code that owns
// them.
#pragma once

#include <string>
#include <vector>

namespace dprobe
{

// Remembers the values of the tree's settable files, once per process (later calls do
// nothing). Call before any session writes to the tree.
void tracefs_capture_defaults();

// Resets the tree: every instance removed, function commands and triggers removed, filters
// emptied, events disabled and deleted, the tracer back to nop, the captured values written
// back, the buffers cleared. Returns the steps that failed ("rmdir instances/foo: Device or
// resource busy", ...), empty when the tree is back to its defaults.
std::vector<std::string> tracefs_reset();

} // namespace dprobe
