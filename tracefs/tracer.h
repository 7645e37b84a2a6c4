// Tracers (the kernel's struct tracer): available_tracers and current_tracer of each trace
// array. nop traces nothing of its own (events still record); function records every call of
// the array's functions (set_ftrace_filter minus set_ftrace_notrace, only the threads of
// set_ftrace_pid); function_graph records entries and returns with durations (see
// tracer_graph.h).
#pragma once

#include "tracefs/trace_array.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

struct tracer {
    const char *name;
    // Starts tracing in TR (trace_types_lock held). 0 or -errno.
    int (*init)(trace_array &tr) = nullptr;
    // Stops it; returns when none of its callbacks can still run.
    void (*reset)(trace_array &tr) = nullptr;
    // TR's function filters changed while it runs. 0 or -errno.
    int (*update)(trace_array &tr) = nullptr;
    // One of TR's options changed while it runs.
    void (*option_changed)(trace_array &tr, trace_opt o, bool on) = nullptr;
};

// In available_tracers order (the kernel lists the last registered first).
std::span<const tracer *const> tracers();
const tracer *tracer_by_name(std::string_view name);
extern const tracer nop_tracer;
extern const tracer function_tracer;
extern const tracer graph_tracer;

// current_tracer: switches TR to NAME (trailing white space ignored). The old tracer stops
// before the new one starts: no call is recorded by both; the buffer is emptied in between,
// as the kernel's tracer_init() does. 0, -EINVAL (unknown name) or the
// new tracer's error (TR is left with nop then).
int tracing_set_tracer(trace_array &tr, std::string_view name);
// TR's filters or pid lists changed: the running tracer follows. trace_types_lock held.
int tracing_update_tracer(trace_array &tr);

// The functions a tracer of TR traces: set_ftrace_filter (or, when it is empty, every
// function available_filter_functions lists: those with a patch site, and those a jump site
// can serve, which get one) minus set_ftrace_notrace; ADDED limits them to objects a dlopen
// just mapped (and applies pending :mod: filters to them).
std::vector<ftrace_site *> tracer_functions(trace_array &tr);
std::vector<ftrace_site *> tracer_functions_loaded(trace_array &tr,
                                                   std::span<const object_ptr> added);

} // namespace dprobe
