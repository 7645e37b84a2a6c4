// Shared probe code of the dynamic events (the kernel's trace_probe.c and dyn_event's list
// of operations): the kinds' tables in order, and the create steps every kind takes
// (resolving @SYM / @+OFFSET arguments, compiling the fetch programs).
#include "tracefs/trace_probe.h"

#include "core/proc_maps.h" // file_offset_to_addr()
#include "core/symbols.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/fetch_fast.h"

#include <dlfcn.h>
#include <climits>
#include <cstdlib>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <atomic>
#include <iterator>

namespace dprobe
{

namespace
{

const dyn_event_operations *const ops_list[] = {&trace_eprobe_ops, &trace_tprobe_ops,
                                                &trace_fprobe_ops, &trace_kprobe_ops,
                                                &trace_uprobe_ops, &trace_synth_ops};

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

namespace
{

// Whether OBJ is the object this code is in (the agent's libdprobe-preload.so, which links
// its own copies of the C++ runtime's functions, malloc among their local names): never a
// place a user's name means.
bool is_own_object(const sym_hit &h)
{
    static const std::string own = [] {
        Dl_info info{};
        char buf[PATH_MAX];
        if (!dladdr(reinterpret_cast<void *>(&is_own_object), &info) || !info.dli_fname ||
            !realpath(info.dli_fname, buf))
            return std::string();
        // Only the agent: a program or test linked with the runtime probes its own code.
        const std::string path(buf);
        return path.find("/libdprobe-preload.so") != std::string::npos ? path : std::string();
    }();
    if (own.empty() || h.obj->path.empty()) return false;
    char buf[PATH_MAX];
    return realpath(h.obj->path.c_str(), buf) && own == buf;
}

} // namespace

std::vector<sym_hit> trace_probe_func_places(const std::string &spec, probe_error *err)
{
    std::vector<sym_hit> hits = bindable_funcs(kallsyms::instance().lookup_func(spec));
    std::erase_if(hits, is_own_object);
    std::vector<sym_hit> funcs; // one per address
    for (const sym_hit &h : hits)
        if (std::none_of(funcs.begin(), funcs.end(),
                         [&](const sym_hit &f) { return f.sym->addr == h.sym->addr; }))
            funcs.push_back(h);
    if (funcs.size() < 2) return hits;
    // Each place, and how to name it alone: LIB:NAME, or its address when its object has
    // several functions of that name (static functions of different files).
    std::string places;
    std::vector<std::string> picks;
    for (size_t i = 0; i < funcs.size(); i++) {
        const sym_hit &f = funcs[i];
        const size_t in_obj = std::count_if(
            funcs.begin(), funcs.end(), [&](const sym_hit &g) { return g.obj->id == f.obj->id; });
        char addr[32];
        std::snprintf(addr, sizeof addr, "%#" PRIxPTR, f.sym->addr);
        places += std::string(i ? (i + 1 == funcs.size() ? " and " : ", ") : "") +
                  (f.obj->path.empty() ? f.obj->name : f.obj->path) + " (" + addr + ")";
        const std::string pick = in_obj > 1 ? std::string(addr) : qualified_func_spec(f);
        if (std::find(picks.begin(), picks.end(), pick) == picks.end()) picks.push_back(pick);
    }
    std::string pick_list;
    for (size_t i = 0; i < picks.size(); i++)
        pick_list += (i ? (i + 1 == picks.size() ? " or " : ", ") : "") + picks[i];
    if (err)
        *err = probe_error::make(probe_err::NON_UNIQ_SYMBOL, 1, 0, EADDRNOTAVAIL)
                   .with_detail("'" + spec + "' names " + std::to_string(funcs.size()) +
                                " functions: in " + places + "; name one: " + pick_list);
    return hits;
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
