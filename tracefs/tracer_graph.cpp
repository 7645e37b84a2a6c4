// The function graph tracer (the kernel's trace_functions_graph.c): one ftrace_ops per trace
// array with entry and exit callbacks on the array's functions. An entry writes a
// funcgraph_entry record {func, depth}; the return writes a funcgraph_exit record {func,
// retval, depth, calltime, rettime}. With tracing_thresh set, entries write nothing and only
// returns that took long enough are recorded.
//
// Per thread and array (trace_task.h): the depth of the calls open, and where a
// set_graph_function or set_graph_notrace function was entered. The depth recorded by an
// entry is kept in its activation's data, so a return restores the thread's depth even
// after a longjmp or an exception skipped returns in between.
#include "tracefs/tracer_graph.h"
#include "tracefs/tree_node.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/func_ops.h"
#include "tracefs/trace_task.h"
#include "tracefs/tracer.h"

#include <dprobe/ptrace.h>

namespace dprobe
{
namespace
{

func_ops *const graph_ops = new func_ops[TRACE_ARRAY_MAX];
std::atomic<uint32_t> graph_gen[TRACE_ARRAY_MAX];
std::atomic<unsigned> max_depth_limit{0};
std::atomic<uint64_t> thresh_ns{0};

ftrace_hash &graph_hash_ref()
{
    static ftrace_hash *h = new ftrace_hash;
    return *h;
}
ftrace_hash &graph_notrace_ref()
{
    static ftrace_hash *h = new ftrace_hash;
    return *h;
}
// Read on the hot path without the function-static guard.
ftrace_hash *const graph_hash = &graph_hash_ref();
ftrace_hash *const graph_notrace = &graph_notrace_ref();

// Entry data of one activation.
struct graph_data {
    uint64_t calltime;
    int32_t depth;
    uint32_t flags;
};
enum : uint32_t { GD_GRAPH_ROOT = 1, GD_NOTRACE = 2 };
static_assert(sizeof(graph_data) == 16);

DPROBE_NOPROBE inline graph_task_state *task_state(const trace_array *tr) noexcept
{
    trace_task *t = current_trace_task();
    if (unlikely(!t)) return nullptr;
    graph_task_state *st = &t->graph[tr->id];
    uint32_t gen = graph_gen[tr->id].load(std::memory_order_relaxed);
    if (unlikely(st->gen != gen)) {
        st->gen = gen;
        st->depth = 0;
        st->graph_from = -1;
        st->notrace_from = -1;
    }
    return st;
}

DPROBE_NOPROBE int graph_entry(ftrace_ops *ops, unsigned long ip, unsigned long,
                               struct ftrace_regs *, void *data)
{
    auto *tr = static_cast<trace_array *>(ops->priv);
    auto *gd = static_cast<graph_data *>(data);
    if (unlikely(tr->ftrace_ignore_this_task())) return 1;
    graph_task_state *st = task_state(tr);
    if (unlikely(!st) || st->notrace_from >= 0) return 1;
    gd->flags = 0;
    gd->depth = st->depth;
    if (unlikely(graph_notrace->has_ips()) && graph_notrace->contains_ip(ip)) {
        // Its return clears the mark: it needs its exit callback.
        st->notrace_from = st->depth;
        gd->flags = GD_NOTRACE;
        return 0;
    }
    if (unlikely(graph_hash->has_ips()) && st->graph_from < 0) {
        if (!graph_hash->contains_ip(ip)) return 1;
        gd->flags = GD_GRAPH_ROOT;
    }
    unsigned max = max_depth_limit.load(std::memory_order_relaxed);
    if (unlikely(max) && unsigned(st->depth) >= max) return 1;
    if (gd->flags & GD_GRAPH_ROOT) st->graph_from = st->depth;
    st->depth++;
    if (unlikely(thresh_ns.load(std::memory_order_relaxed))) {
        gd->calltime = trace_clock_now();
        return 0;
    }
    rb_stamp stamp;
    void *ev = ring_buffer_reserve(tr->buffer, sizeof(ftrace_graph_ent_entry), &stamp);
    if (!ev) {
        gd->calltime = trace_clock_now();
        return 0;
    }
    // The record's stamp is the call time: one clock read per event.
    gd->calltime = stamp.ts;
    auto *e = static_cast<ftrace_graph_ent_entry *>(ev);
    e->ent = trace_entry_header{TRACE_GRAPH_ENT, 0, 0, trace_current_tid()};
    e->func = ip;
    e->depth = gd->depth;
    e->pad = 0;
    ring_buffer_commit(tr->buffer, ev);
    return 0;
}

// The thread's state after activation GD ended (returned, or was unwound).
DPROBE_NOPROBE inline bool leave(graph_task_state *st, const graph_data *gd) noexcept
{
    if (gd->flags & GD_NOTRACE) {
        st->notrace_from = -1;
        return false;
    }
    st->depth = gd->depth;
    if (gd->flags & GD_GRAPH_ROOT) st->graph_from = -1;
    return true;
}

DPROBE_NOPROBE void graph_exit(ftrace_ops *ops, unsigned long ip, unsigned long,
                               struct ftrace_regs *fregs, void *data)
{
    auto *tr = static_cast<trace_array *>(ops->priv);
    auto *gd = static_cast<const graph_data *>(data);
    graph_task_state *st = task_state(tr);
    if (unlikely(!st) || !leave(st, gd)) return;
    const uint64_t thresh = thresh_ns.load(std::memory_order_relaxed);
    uint64_t rettime = 0;
    if (unlikely(thresh)) {
        rettime = trace_clock_now();
        if (rettime - gd->calltime < thresh) return;
    }
    rb_stamp stamp;
    void *ev = ring_buffer_reserve(tr->buffer, sizeof(ftrace_graph_ret_entry), &stamp);
    if (!ev) return;
    auto *e = static_cast<ftrace_graph_ret_entry *>(ev);
    e->ent = trace_entry_header{TRACE_GRAPH_RET, 0, 0, trace_current_tid()};
    e->func = ip;
    e->retval = ftrace_regs_get_return_value(fregs);
    e->depth = gd->depth;
    e->overrun = 0;
    e->calltime = gd->calltime;
    e->rettime = thresh ? rettime : stamp.ts;
    ring_buffer_commit(tr->buffer, ev);
}

// The activation left without returning (longjmp, an exception): its marks go with it.
DPROBE_NOPROBE void graph_unwound(ftrace_ops *ops, void *data)
{
    auto *tr = static_cast<trace_array *>(ops->priv);
    if (graph_task_state *st = task_state(tr)) leave(st, static_cast<const graph_data *>(data));
}

int graph_init(trace_array &tr)
{
    graph_gen[tr.id].fetch_add(1, std::memory_order_relaxed);
    func_ops &f = graph_ops[tr.id];
    f.ops.entry = graph_entry;
    f.ops.exit = graph_exit;
    f.ops.unwound = graph_unwound;
    f.ops.data_words = sizeof(graph_data) / sizeof(long);
    f.ops.priv = &tr;
    f.want_all = [&tr] { return tracer_functions(tr); };
    f.want_loaded = [&tr](std::span<const object_ptr> added) {
        return tracer_functions_loaded(tr, added);
    };
    return f.start();
}

void graph_reset(trace_array &tr)
{
    graph_ops[tr.id].stop();
}

int graph_update(trace_array &tr)
{
    return graph_ops[tr.id].update();
}

} // namespace

const tracer graph_tracer = {"function_graph", graph_init, graph_reset, graph_update, nullptr};

ftrace_hash &ftrace_graph_hash()
{
    return *graph_hash;
}
ftrace_hash &ftrace_graph_notrace_hash()
{
    return *graph_notrace;
}
unsigned fgraph_max_depth() noexcept
{
    return max_depth_limit.load(std::memory_order_relaxed);
}
void fgraph_set_max_depth(unsigned depth) noexcept
{
    max_depth_limit.store(depth, std::memory_order_relaxed);
}
uint64_t tracing_thresh() noexcept
{
    return thresh_ns.load(std::memory_order_relaxed);
}

void tracing_set_thresh(uint64_t ns)
{
    thresh_ns.store(ns, std::memory_order_relaxed);
    // Activations entered before the change keep their mode's data; a restart of the running
    // graph tracers makes every recorded return match its entry's mode.
    for (auto &tr : trace_arrays())
        if (tr->current_trace == &graph_tracer) {
            graph_reset(*tr);
            tr->current_trace = &nop_tracer;
            if (graph_init(*tr) == 0) tr->current_trace = &graph_tracer;
        }
}

// The function graph's filters and limits (the kernel's ftrace_init_tracefs and
// init_tracer_tracefs).
void tree::tracer_graph_files()
{
    top_file("set_graph_function", [] {
        return hash_node(&ftrace_graph_hash(), "#### all functions enabled ####\n", nullptr);
    });
    top_file("set_graph_notrace", [] {
        return hash_node(&ftrace_graph_notrace_hash(), "#### no functions disabled ####\n",
                         nullptr);
    });
    top_file("max_graph_depth", [] {
        return rw([] { return std::to_string(fgraph_max_depth()) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > UINT32_MAX) return -EINVAL;
                      fgraph_set_max_depth(unsigned(v));
                      return 0;
                  });
    });
    top_file("tracing_thresh", [] {
        // Microseconds in the file, nanoseconds inside, as in the kernel.
        return rw([] { return std::to_string(tracing_thresh() / 1000) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > UINT64_MAX / 1000) return -EINVAL;
                      std::lock_guard<std::mutex> g(trace_types_lock());
                      tracing_set_thresh(v * 1000);
                      return 0;
                  });
    });
}

} // namespace dprobe
