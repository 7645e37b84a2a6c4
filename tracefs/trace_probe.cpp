// Shared probe code of the dynamic events (the kernel's trace_probe.c and dyn_event's list
// of operations): the kinds' tables in order, and the create steps every kind takes
// (resolving @SYM / @+OFFSET arguments, compiling the fetch programs).
#include "tracefs/trace_probe.h"

#include "core/proc_maps.h" // file_offset_to_addr()
#include "core/symbols.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/fetch_fast.h"

#include <algorithm>
#include <atomic>
#include <iterator>

namespace dprobe
{

namespace
{

const dyn_event_operations *const ops_list[] = {&trace_eprobe_ops, &trace_fprobe_ops,
                                                &trace_kprobe_ops, &trace_uprobe_ops};

std::atomic<bool> fast_stores{true};

} // namespace

std::span<const dyn_event_operations *const> dyn_event_ops_list()
{
    return ops_list;
}

const dyn_event_operations &dyn_event_ops_of(probe_kind kind)
{
    for (const dyn_event_operations *ops : ops_list)
        if (ops->kind == kind) return *ops;
    __builtin_unreachable(); // every probe_kind has a table
}

size_t dyn_event_ops_rank(const dyn_event_operations *ops)
{
    return static_cast<size_t>(std::find(std::begin(ops_list), std::end(ops_list), ops) -
                               std::begin(ops_list));
}

const trace_event *trace_event::reads() const
{
    const trace_probe *tp = probes.front();
    return tp->ops->reads ? tp->ops->reads(*tp) : nullptr;
}

void trace_probe_free(trace_probe *tp)
{
    tp->ops->free(tp, nullptr);
}

probe_error trace_probe_resolve_args(trace_probe &tp)
{
    probe_definition &d = tp.def;
    // @SYM: a probe placed in an object (lib:sym) reads that object's symbol when it has
    // one: its own static variables, not a namesake elsewhere.
    fetch_resolver resolver;
    std::string home = d.place.kind == probe_place::form::symbol ? d.place.object : "";
    resolver.symbol = [home](std::string_view name) -> std::optional<uintptr_t> {
        auto &ks = kallsyms::instance();
        std::vector<sym_hit> hits;
        if (!home.empty() && name.find(':') == std::string_view::npos) {
            std::string in_home = home + ":" + std::string(name);
            hits = ks.lookup_data(in_home);
            if (hits.empty()) hits = ks.lookup_func(in_home);
        }
        if (hits.empty()) hits = ks.lookup_data(name);
        if (hits.empty()) hits = ks.lookup_func(name);
        if (hits.empty()) return std::nullopt;
        return hits.front().sym->addr;
    };
    // @+OFFSET: an offset in the probed file.
    if (d.place.kind == probe_place::form::file_offset) {
        std::string path = d.place.object;
        resolver.file_offset = [path](uint64_t off) { return file_offset_to_addr(path, off); };
    }
    if (probe_error e = resolve_fetch_args(d.args, resolver, 2)) return e;
    if (!d.args.empty()) fetch_install_fault_handler();
    return {};
}

void trace_probe_use_fast_stores(bool on)
{
    fast_stores.store(on);
}

void trace_probe_compile(trace_probe &tp)
{
    tp.fast = !tp.has_dyn && fast_stores.load() &&
              fetch_fast_compile(tp.def.args, probe_layout(tp.def).args_off, tp.fast_args);
}

bool trace_probe_is_busy(const trace_probe &tp)
{
    return tp.event->in_use();
}

bool trace_probe_match(const delete_request &req, const trace_probe &tp)
{
    return delete_matches(req, tp.def);
}

} // namespace dprobe
