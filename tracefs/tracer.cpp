// The tracer registry and current_tracer (the kernel's trace_types list, tracing_set_tracer).
#include "tracefs/tracer.h"

#include "core/ftrace.h"
#include "core/ring_buffer.h"
#include "tracefs/function_profile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <set>

namespace dprobe
{

const tracer nop_tracer = {"nop"};

std::span<const tracer *const> tracers()
{
    static const tracer *const list[] = {&graph_tracer, &function_tracer, &nop_tracer};
    return list;
}

const tracer *tracer_by_name(std::string_view name)
{
    for (const tracer *t : tracers())
        if (name == t->name) return t;
    return nullptr;
}

int tracing_set_tracer(trace_array &tr, std::string_view name)
{
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
        name.remove_suffix(1);
    const tracer *t = tracer_by_name(name);
    if (!t) return -EINVAL;
    if (tr.current_trace == t) return 0;
    if (tr.current_trace && tr.current_trace->reset) tr.current_trace->reset(tr);
    tr.current_trace = &nop_tracer;
    // The kernel's tracer_init() empties the buffer: the trace shows one tracer's records.
    ring_buffer_reset(tr.buffer);
    if (t->init) {
        if (int err = t->init(tr)) return err;
    }
    tr.current_trace = t;
    return 0;
}

int tracing_update_tracer(trace_array &tr)
{
    if (tr.is_top()) function_profile_update(); // the profiler follows the top level's filters
    if (tr.current_trace && tr.current_trace->update) return tr.current_trace->update(tr);
    return 0;
}

namespace
{

std::vector<ftrace_site *> minus(std::vector<ftrace_site *> v,
                                 const std::vector<ftrace_site *> &out)
{
    if (out.empty()) return v;
    std::set<ftrace_site *> o(out.begin(), out.end());
    std::erase_if(v, [&](ftrace_site *s) { return o.count(s) != 0; });
    return v;
}

bool in_objects(const ftrace_site *s, std::span<const object_ptr> objs)
{
    return std::any_of(objs.begin(), objs.end(),
                       [s](const object_ptr &o) { return s->obj && s->obj->id == o->id; });
}

} // namespace

std::vector<ftrace_site *> tracer_functions(trace_array &tr)
{
    // An empty filter is every function available_filter_functions lists, as in the kernel:
    // those without a compiled-in site get a jump site now.
    std::vector<ftrace_site *> v =
        tr.filter_hash.empty() ? ftrace_match_sites("*", "") : tr.filter_hash.sites();
    return minus(std::move(v), tr.notrace_hash.sites());
}

std::vector<ftrace_site *> tracer_functions_loaded(trace_array &tr,
                                                   std::span<const object_ptr> added)
{
    bool all = tr.filter_hash.empty();
    tr.filter_hash.objects_loaded(added);
    tr.notrace_hash.objects_loaded(added);
    std::vector<ftrace_site *> v;
    if (all) {
        // Every function of the new objects (inside the loader, before they run).
        v = ftrace_match_sites_in(added, "*", "");
    } else {
        for (ftrace_site *s : tr.filter_hash.sites())
            if (in_objects(s, added)) v.push_back(s);
    }
    return minus(std::move(v), tr.notrace_hash.sites());
}

} // namespace dprobe
