// Per-thread state of the tracers (the kernel keeps it in task_struct: curr_ret_depth, the
// graph tracer's task var, the profiler's per-CPU stats). One initial-exec TLS pointer leads
// to a block mapped on the thread's first use (mmap is async-signal-safe); blocks of exited
// threads are recycled.
//
// Each tracer that uses a part of the block keeps a generation per trace array and resets
// the thread's part when it differs (a tracer started again starts from depth 0).
#pragma once

#include "tracefs/trace_array.h"

#include <atomic>
#include <cstdint>

namespace dprobe
{

struct graph_task_state {
    uint32_t gen;         // the graph tracer run this state belongs to
    int32_t depth;        // functions open on this thread, as recorded
    int32_t graph_from;   // depth of the open set_graph_function function, -1: none
    int32_t notrace_from; // depth of the open set_graph_notrace function, -1: none
};

struct trace_task {
    trace_task *next; // global list, append-only
    std::atomic<int> in_use;
    int32_t tid;
    graph_task_state graph[TRACE_ARRAY_MAX];
    // The stack tracer's view of this thread's stack: its highest address.
    uintptr_t stack_top;
    // The function profiler's table of this thread (function_profile.cpp), nullptr until the
    // first profiled call.
    std::atomic<void *> profile;
};

// The calling thread's block (nullptr only when mmap fails). Async-signal-safe.
trace_task *current_trace_task() noexcept;
// Unmaps every block and deletes the thread-exit key: the end of dprobe in the process, when
// no tracer callback can run any more.
void trace_task_release_all() noexcept;

} // namespace dprobe
