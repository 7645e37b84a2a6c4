// Trace arrays: the options, the registry of instances (see trace_array.h).
#include "tracefs/trace_array.h"

#include "core/ring_buffer.h"
#include "core/task_ctx.h"
#include "tracefs/event_trigger.h"
#include "tracefs/ftrace_commands.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracer.h"

#include <algorithm>
#include <cerrno>

namespace dprobe
{
namespace
{

const trace_opt_info opt_infos[] = {
    {"print-parent", true},
    {"sym-offset", false},
    {"sym-addr", false},
    {"context-info", true},
    {"record-tgid", false},
    {"overwrite", true},
    {"irq-info", true},
    {"markers", true},
    {"stacktrace", false},
    {"func_stack_trace", false},
    {"funcgraph-overrun", false},
    {"funcgraph-cpu", true},
    {"funcgraph-overhead", true},
    {"funcgraph-proc", false},
    {"funcgraph-duration", true},
    {"funcgraph-abstime", false},
    {"funcgraph-tail", false},
    {"funcgraph-retval", false},
    {"funcgraph-retval-hex", false},
    {"graph-time", true},
};

static_assert(sizeof(opt_infos) / sizeof(opt_infos[0]) == OPT__COUNT, "one entry per trace_opt");

// The options trace_options lists for a tracer (the kernel lists the current tracer's own).
bool opt_of_tracer(trace_opt o, const tracer *t)
{
    if (o == OPT_FUNC_STACK_TRACE) return t == &function_tracer;
    if (o >= OPT_FUNCGRAPH_OVERRUN) return t == &graph_tracer;
    return true;
}

uint64_t default_flags()
{
    uint64_t f = 0;
    for (unsigned i = 0; i < OPT__COUNT; i++)
        if (opt_infos[i].dflt) f |= uint64_t{1} << i;
    return f;
}

struct registry {
    std::shared_ptr<trace_array> top;
    std::vector<std::shared_ptr<trace_array>> instances;
};

std::atomic<trace_array *> arrays_by_id[TRACE_ARRAY_MAX];

registry &reg()
{
    static registry *r = [] {
        auto *x = new registry;
        x->top = std::make_shared<trace_array>("", 0, ring_buffer_global());
        arrays_by_id[0].store(x->top.get(), std::memory_order_release);
        return x;
    }();
    return *r;
}

// The top level exists from the start: probe handlers reach it through arrays_by_id[0] without
// ever creating it themselves.
__attribute__((constructor)) void trace_array_setup()
{
    reg();
}

bool valid_name(std::string_view n)
{
    if (n.empty() || n.size() > 255 || n == "." || n == "..") return false;
    return std::none_of(n.begin(), n.end(), [](char c) { return c == '/' || c == '\0'; });
}

} // namespace

const trace_opt_info &trace_opt_info_of(trace_opt o)
{
    return opt_infos[o];
}

std::optional<trace_opt> trace_opt_by_name(std::string_view name)
{
    for (unsigned i = 0; i < OPT__COUNT; i++)
        if (name == opt_infos[i].name) return trace_opt(i);
    return std::nullopt;
}

trace_array::trace_array(std::string n, unsigned i, trace_buffer *b)
    : name(std::move(n)), id(i), buffer(b), flags_(default_flags())
{
    current_trace = &nop_tracer;
}

trace_array::~trace_array() = default;

int trace_array::set_opt(trace_opt o, bool on)
{
    if (opt(o) == on) return 0;
    if (on && (o == OPT_FUNC_STACK_TRACE || o == OPT_STACKTRACE)) trace_stack_init();
    if (o == OPT_OVERWRITE) {
        ring_buffer_set_overwrite(buffer, on);
        if (max_buffer) ring_buffer_set_overwrite(max_buffer, on);
    }
    if (on)
        flags_.fetch_or(uint64_t{1} << o, std::memory_order_relaxed);
    else
        flags_.fetch_and(~(uint64_t{1} << o), std::memory_order_relaxed);
    update_ftrace_slow();
    if (current_trace && current_trace->option_changed) current_trace->option_changed(*this, o, on);
    return 0;
}

void trace_array::update_ftrace_slow() noexcept
{
    fn_slow_.store(function_pids.active() || function_no_pids.active() || opt(OPT_FUNC_STACK_TRACE),
                   std::memory_order_relaxed);
    ev_slow_.store(event_pids.active() || event_no_pids.active() || opt(OPT_STACKTRACE),
                   std::memory_order_relaxed);
}

std::string trace_array::options_text() const
{
    std::string s;
    for (unsigned i = 0; i < OPT__COUNT; i++) {
        if (!opt_of_tracer(trace_opt(i), current_trace)) continue;
        if (!opt(trace_opt(i))) s += "no";
        s += opt_infos[i].name;
        s += '\n';
    }
    return s;
}

std::mutex &trace_types_lock()
{
    static std::mutex *m = new std::mutex;
    return *m;
}

trace_array &trace_array_top()
{
    return *reg().top;
}
std::shared_ptr<trace_array> trace_array_top_ptr()
{
    return reg().top;
}

std::shared_ptr<trace_array> trace_array_get(std::string_view name)
{
    if (name.empty()) return reg().top;
    std::lock_guard<std::mutex> g(trace_types_lock());
    for (auto &tr : reg().instances)
        if (tr->name == name) return tr;
    return nullptr;
}

std::vector<std::string> trace_array_names()
{
    std::lock_guard<std::mutex> g(trace_types_lock());
    std::vector<std::string> v;
    for (auto &tr : reg().instances)
        v.push_back(tr->name);
    std::sort(v.begin(), v.end());
    return v;
}

std::vector<std::shared_ptr<trace_array>> trace_arrays()
{
    registry &r = reg();
    std::vector<std::shared_ptr<trace_array>> v{r.top};
    v.insert(v.end(), r.instances.begin(), r.instances.end());
    return v;
}

trace_array *trace_array_by_id(unsigned id) noexcept
{
    return id < TRACE_ARRAY_MAX ? arrays_by_id[id].load(std::memory_order_acquire) : nullptr;
}

int trace_array_create(std::string_view name)
{
    if (!valid_name(name)) return -EINVAL;
    registry &r = reg();
    std::lock_guard<std::mutex> g(trace_types_lock());
    for (auto &tr : r.instances)
        if (tr->name == name) return -EEXIST;
    unsigned id = 1;
    while (id < TRACE_ARRAY_MAX && arrays_by_id[id].load(std::memory_order_relaxed))
        id++;
    if (id == TRACE_ARRAY_MAX) return -ENOSPC;
    trace_buffer *tb = ring_buffer_alloc();
    if (!tb) return -ENOSPC;
    auto tr = std::make_shared<trace_array>(std::string(name), id, tb);
    r.instances.push_back(tr);
    arrays_by_id[id].store(tr.get(), std::memory_order_release);
    return 0;
}

int trace_array_destroy(std::string_view name)
{
    registry &r = reg();
    std::lock_guard<std::mutex> g(trace_types_lock());
    auto it = std::find_if(r.instances.begin(), r.instances.end(),
                           [&](auto &tr) { return tr->name == name; });
    if (it == r.instances.end()) return -ENODEV;
    std::shared_ptr<trace_array> tr = *it;
    if (tr->ref.load() > 0) return -EBUSY;
    // As the kernel's __remove_instance: the tracer to nop, events and probes off, buffers
    // freed once nothing can write to them.
    if (tr->current_trace && tr->current_trace->reset) tr->current_trace->reset(*tr);
    tr->current_trace = &nop_tracer;
    // Triggers hold events in soft mode (theirs and enable_event's targets): gone first.
    clear_event_triggers(tr->id);
    ftrace_probes_remove_array(*tr);
    trace_events::instance().remove_array(tr->id);
    tr->function_pids.clear();
    tr->function_no_pids.clear();
    tr->update_ftrace_slow();
    tr->event_pids.clear();
    tr->event_no_pids.clear();
    arrays_by_id[tr->id].store(nullptr, std::memory_order_release);
    r.instances.erase(it);
    trace_synchronize();
    if (tr->max_buffer) ring_buffer_free(tr->max_buffer);
    tr->max_buffer = nullptr;
    ring_buffer_free(tr->buffer);
    return 0;
}

} // namespace dprobe
