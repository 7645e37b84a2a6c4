// Trace arrays (the kernel's struct trace_array): the top-level tracing directory and each
// instances/<name> directory. Each has its own trace buffer (and snapshot buffer), tracer,
// trace options, function filters, pid filters and event enables; dynamic events, the
// function-graph filters, the profiler and the stack tracer are the process's, as in the
// kernel.
//
// Locking: trace_types_lock() (the kernel's name) serialises every change of tracers,
// filters, options with side effects, snapshots and instances. It is taken before the event
// registry's own mutex, never after.
//
// Lifetime: arrays are handed out as shared_ptr (an open file keeps its array alive);
// the hot path reaches an array through trace_array_by_id() only while it has a tracer or an
// event enabled there, and removal turns those off and waits for quiescence first.
#pragma once

#include "tracefs/ftrace_filter.h"
#include "tracefs/ftrace_pid.h"

#include <atomic>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

struct trace_buffer;
struct tracer;

// At most this many arrays (the top level included): event enables are a bit mask.
inline constexpr unsigned TRACE_ARRAY_MAX = 64;

// Trace options (trace_options and options/): the kernel's trace flags that mean something
// for a process, then the tracers' own options (all listed always, as in recent kernels).
enum trace_opt : unsigned {
    OPT_PRINT_PARENT,
    OPT_SYM_OFFSET,
    OPT_SYM_ADDR,
    OPT_CONTEXT_INFO,
    OPT_RECORD_TGID,
    OPT_OVERWRITE,
    OPT_IRQ_INFO,
    OPT_MARKERS,
    OPT_STACKTRACE,
    OPT_FUNC_STACK_TRACE,
    OPT_FUNCGRAPH_OVERRUN,
    OPT_FUNCGRAPH_CPU,
    OPT_FUNCGRAPH_OVERHEAD,
    OPT_FUNCGRAPH_PROC,
    OPT_FUNCGRAPH_DURATION,
    OPT_FUNCGRAPH_ABSTIME,
    OPT_FUNCGRAPH_TAIL,
    OPT_FUNCGRAPH_RETVAL,
    OPT_FUNCGRAPH_RETVAL_HEX,
    OPT_GRAPH_TIME,
    OPT__COUNT
};
struct trace_opt_info {
    const char *name;
    bool dflt;
};
const trace_opt_info &trace_opt_info_of(trace_opt o);
std::optional<trace_opt> trace_opt_by_name(std::string_view name);

class trace_array
{
  public:
    trace_array(std::string name, unsigned id, trace_buffer *buffer);
    ~trace_array();
    trace_array(const trace_array &) = delete;
    trace_array &operator=(const trace_array &) = delete;

    const std::string name; // "" for the top level
    const unsigned id;      // 0 for the top level
    trace_buffer *const buffer;
    // The snapshot buffer once allocated (`echo 1 > snapshot`); trace_types_lock.
    trace_buffer *max_buffer = nullptr;

    bool is_top() const noexcept { return id == 0; }

    // ---- options (hot-path readable) ----
    bool opt(trace_opt o) const noexcept
    {
        return (flags_.load(std::memory_order_relaxed) >> o) & 1;
    }
    // Sets an option with its side effects (overwrite reaches the ring buffer; a tracer
    // option reaches the running tracer). trace_types_lock held. 0 or -errno.
    int set_opt(trace_opt o, bool on);
    // The trace_options file: every option, "no" before those that are off.
    std::string options_text() const;

    // ---- tracer (trace_types_lock) ----
    const tracer *current_trace = nullptr;
    void *tracer_private = nullptr; // the running tracer's state

    // ---- function filters (trace_types_lock): set_ftrace_filter / set_ftrace_notrace ----
    ftrace_hash filter_hash;
    ftrace_hash notrace_hash;

    // ---- pid filters ----
    pid_filter function_pids;    // set_ftrace_pid
    pid_filter function_no_pids; // set_ftrace_notrace_pid
    pid_filter event_pids;       // set_event_pid
    pid_filter event_no_pids;    // set_event_notrace_pid
    // Whether the function tracer's callback has anything to check beyond writing its
    // record: pid filters, a stack trace to add. One load on its fast path.
    bool ftrace_slow() const noexcept { return fn_slow_.load(std::memory_order_relaxed); }
    // The same for event records (the handlers of trace events): set_event_pid lists, the
    // stacktrace option.
    bool event_slow() const noexcept { return ev_slow_.load(std::memory_order_relaxed); }
    // Recomputes both after a pid list or an option changed.
    void update_ftrace_slow() noexcept;
    // Whether the calling thread's functions are traced here (hot path).
    bool ftrace_ignore_this_task() const noexcept
    {
        return function_no_pids.contains_current() ||
               (function_pids.active() && !function_pids.contains_current());
    }
    bool event_ignore_this_task() const noexcept
    {
        return event_no_pids.contains_current() ||
               (event_pids.active() && !event_pids.contains_current());
    }

    // ---- events/ftrace/<name>/filter: the file's text by name, absent "none" (they filter
    // nothing, see ftrace_event_check_filter()); trace_types_lock ----
    std::map<std::string, std::string, std::less<>> ftrace_event_filter;

    // ---- open files (rmdir answers EBUSY while one is open) ----
    std::atomic<int> ref{0};

  private:
    std::atomic<uint64_t> flags_;
    std::atomic<bool> fn_slow_{false};
    std::atomic<bool> ev_slow_{false};
};

std::mutex &trace_types_lock();

// The top-level array.
trace_array &trace_array_top();
std::shared_ptr<trace_array> trace_array_top_ptr();
// The array of an instance (or the top level for ""), nullptr when there is none.
std::shared_ptr<trace_array> trace_array_get(std::string_view name);
// Instance names, sorted.
std::vector<std::string> trace_array_names();
// The array with ID, or nullptr. Hot path (an atomic load).
trace_array *trace_array_by_id(unsigned id) noexcept;
// Every array (the top level first); trace_types_lock held.
std::vector<std::shared_ptr<trace_array>> trace_arrays();

// mkdir instances/NAME: 0, -EEXIST, -EINVAL (a bad name), -ENOSPC (TRACE_ARRAY_MAX or no trace
// buffer left).
int trace_array_create(std::string_view name);
// rmdir instances/NAME: the instance's tracer set to nop, its events disabled, its function
// probes removed, its buffers freed. 0, -ENODEV (no such instance), -EBUSY (a file of it is
// open).
int trace_array_destroy(std::string_view name);

// Waits until no probe handler or tracer callback that started before can still be running
// (ftrace dispatch and the kprobe int3 path).
void trace_synchronize();

} // namespace dprobe
