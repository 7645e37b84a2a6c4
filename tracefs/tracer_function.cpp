// The function tracer (the kernel's trace_functions.c): one ftrace_ops per trace array on the
// array's functions; each call writes a `function` record (ip, parent_ip) to the array's
// buffer, followed by a kernel_stack record when options/func_stack_trace is set.
//
// Hot path (function_entry): the pid check, one reserve, five stores, one commit: the work
// of an fprobe entry handler writing one record, without the fprobe indirection.
#include "tracefs/tracer.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/func_ops.h"
#include "tracefs/stack_trace.h"

namespace dprobe
{
namespace
{

// One per array id, never freed (see func_ops.h).
func_ops *const g_ops = new func_ops[TRACE_ARRAY_MAX];

DPROBE_NOPROBE int function_entry(ftrace_ops *ops, unsigned long ip, unsigned long parent_ip,
                                  struct ftrace_regs *fregs, void *)
{
    auto *tr = static_cast<trace_array *>(ops->priv);
    const bool slow = tr->ftrace_slow();
    if (unlikely(slow) && tr->ftrace_ignore_this_task()) return 1;
    if (void *ev = ring_buffer_reserve(tr->buffer, sizeof(ftrace_entry))) {
        auto *e = static_cast<ftrace_entry *>(ev);
        e->ent = trace_entry_header{TRACE_FN, 0, 0, trace_current_tid()};
        e->ip = ip;
        e->parent_ip = parent_ip;
        ring_buffer_commit(tr->buffer, ev);
    }
    if (unlikely(slow) && tr->opt(OPT_FUNC_STACK_TRACE)) trace_stack_record(*tr, fregs);
    return 1; // no exit callback
}

int function_init(trace_array &tr)
{
    func_ops &f = g_ops[tr.id];
    f.ops.entry = function_entry;
    f.ops.exit = nullptr;
    f.ops.data_words = 0;
    f.ops.priv = &tr;
    f.want_all = [&tr] { return tracer_functions(tr); };
    f.want_loaded = [&tr](std::span<const object_ptr> added) {
        return tracer_functions_loaded(tr, added);
    };
    return f.start();
}

void function_reset(trace_array &tr)
{
    g_ops[tr.id].stop();
}

int function_update(trace_array &tr)
{
    return g_ops[tr.id].update();
}

} // namespace

const tracer function_tracer = {"function", function_init, function_reset, function_update,
                                nullptr};

} // namespace dprobe
