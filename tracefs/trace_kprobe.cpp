// p/r events on symbols and addresses (the kernel's trace_kprobe.c): `p[:[GRP/][EVENT]]
// [LIB:]SYM[+OFF]|ADDR [FETCHARGS]`, `r[MAXACTIVE][:...] [LIB:]SYM[+0] [FETCHARGS]`, and
// what they share with the PATH:OFFSET events dprobe serves with a kprobe too
// (trace_uprobe.cpp): registration, arming in batches, the handlers, pending probes.
//  - SYM[+OFF], lib:SYM[+OFF] and ADDR places get a kprobe at that address, path:OFFSET
//    places one at the address the file offset is mapped at (trace_uprobe.cpp);
//  - the kprobe is registered disabled on creation, so a bad place is reported then
//    (BAD_PROBE_ADDR, NON_UNIQ_SYMBOL, BAD_INSN_BNDRY, FAIL_REG_PROBE), and armed on enable;
//  - a place in an object the process has not mapped (a lib:SYM whose lib is not loaded, a
//    path:OFFSET whose file is not mapped) is accepted and pending, as the kernel accepts a
//    probe on a module not loaded yet and a uprobe on any file: listed, enabled like any
//    event, and registered when the object is loaded (in its dlopen, before its
//    constructors run; the registry's loader notifier, trace_events_notify.cpp); a probe
//    whose object is unloaded keeps its kprobe marked [GONE], as the kernel keeps one in an
//    unloaded module, and gets a new one when the object is loaded again;
//  - both have a [GONE] line in kprobes/list; their *_events lines are the definition alone,
//    as the kernel's (no state: perf probe -l parses them).
// The handlers (kprobe_trace_func / kretprobe_trace_func) are hot path: noexcept,
// allocation-free, lock-free, DPROBE_NOPROBE.
#include "tracefs/trace_kprobe.h"
#include "tracefs/tree_node.h"

#include "core/compiler.h"
#include "core/proc_maps.h" // file_offset_to_addr()
#include "core/symbols.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/trace_events.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstddef>
#include <cstdio>
#include <set>
#include <vector>

namespace dprobe
{

namespace
{

// ---- the handlers (hot path) ----

trace_kprobe &owner_of(struct kretprobe *rp) noexcept
{
    return *reinterpret_cast<trace_kprobe_hook *>(reinterpret_cast<char *>(rp) -
                                                  offsetof(trace_kprobe_hook, rp))
                ->owner;
}

trace_kprobe &owner_of(struct kprobe *kp) noexcept
{
    static_assert(offsetof(struct kretprobe, kp) == 0);
    return owner_of(reinterpret_cast<struct kretprobe *>(kp));
}

DPROBE_NOPROBE int kprobe_pre_handler(struct kprobe *kp, struct pt_regs *regs)
{
    trace_kprobe &tk = owner_of(kp);
    tk.nhit.fetch_add(1, std::memory_order_relaxed);
    fetch_context ctx;
    ctx.regs = regs;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tk, ctx, reinterpret_cast<uintptr_t>(kp->addr), 0);
    return 0;
}

DPROBE_NOPROBE int kretprobe_entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    store_entry_args(owner_of(get_kretprobe(ri)).def.entry_args, regs, ri->data);
    return 0;
}

DPROBE_NOPROBE int kretprobe_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    struct kretprobe *rp = get_kretprobe(ri);
    trace_kprobe &tk = owner_of(rp);
    tk.nhit.fetch_add(1, std::memory_order_relaxed);
    fetch_context ctx;
    ctx.regs = regs;
    ctx.edata = ri->data;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tk, ctx, reinterpret_cast<uintptr_t>(rp->kp.addr),
                      reinterpret_cast<uintptr_t>(ri->ret_addr));
    return 0;
}

// ---- where the kprobe goes ----

// Whether a loaded object is named LIB (the lib of lib:sym).
bool object_loaded(std::string_view lib)
{
    auto objs = kallsyms::instance().objects();
    for (const object_ptr &o : *objs)
        if (o->matches(lib)) return true;
    return false;
}

bool object_still_loaded(const object_ptr &obj)
{
    auto objs = kallsyms::instance().objects();
    for (const object_ptr &o : *objs)
        if (o->id == obj->id) return true;
    return false;
}

// SYM[+OFF], lib:SYM[+OFF] (pending while lib is not loaded) and ADDR places.
int kprobe_place(trace_kprobe &tk, probe_error &err)
{
    const probe_definition &d = tk.def;
    auto &ks = kallsyms::instance();
    // Not mapped: pending, the arguments resolved when it is (they may name its symbols).
    if (d.place.kind == probe_place::form::symbol && !d.place.object.empty() &&
        ks.lookup_func(d.place.qualified_symbol()).empty() && !object_loaded(d.place.object)) {
        tk.pending = true;
        return 0;
    }
    if (probe_error e = trace_probe_resolve_args(tk)) {
        err = e;
        return -e.errnum;
    }
    trace_probe_compile(tk);
    struct kprobe &kp = tk.hook.rp.kp;
    if (d.place.kind == probe_place::form::address) {
        kp.addr = reinterpret_cast<kprobe_opcode_t *>(d.place.address);
        tk.obj = ks.object_of(d.place.address);
        return 0;
    }
    tk.symbol = d.place.qualified_symbol();
    // As the dynamic linker binds the name: the program's step, not libc's compatibility
    // step@GLIBC_2.2.5 (register_kprobe resolves it the same way).
    probe_error uniq;
    auto hits = trace_probe_func_places(tk.symbol, &uniq);
    if (hits.empty()) {
        err = registration_error(probe_err::BAD_PROBE_ADDR, ENOENT);
        return -ENOENT;
    }
    if (uniq) {
        err = uniq;
        return -uniq.errnum;
    }
    kp.symbol_name = tk.symbol.c_str();
    kp.offset = d.place.offset;
    tk.obj = hits.front().obj;
    return 0;
}

const trace_kprobe_place_ops kprobe_place_ops = {kprobe_place, nullptr};

trace_probe *trace_kprobe_alloc()
{
    auto *tk = new trace_kprobe;
    tk->place = &kprobe_place_ops;
    return tk;
}

void trace_kprobe_free(trace_probe *tp, std::unique_ptr<trace_event>)
{
    delete static_cast<trace_kprobe *>(tp);
}

// kprobes/list's line of a pending lib:SYM probe.
std::string kprobe_list_line(const trace_probe &tp)
{
    const trace_kprobe &tk = static_cast<const trace_kprobe &>(tp);
    if (!tk.pending) return "";
    const probe_place &pl = tk.def.place;
    char line[PATH_MAX + 128];
    std::snprintf(line, sizeof line, "%016x  %s  %s+0x%x  %s [GONE]\n", 0u,
                  tk.def.is_return ? "r" : "k", pl.symbol.c_str(), pl.offset, pl.object.c_str());
    return line;
}

} // namespace

const dyn_event_operations trace_kprobe_ops = {
    .kind = probe_kind::kprobe,
    .accept = ACCEPT_KPROBE,
    .alloc = trace_kprobe_alloc,
    .free = trace_kprobe_free,
    .create = trace_kprobe_create,
    .show = trace_kprobe_show,
    .is_busy = trace_probe_is_busy,
    .match = trace_probe_match,
    .arm = trace_kprobe_arm,
    .unregister = trace_kprobe_unregister,
    .waits_for_objects = trace_kprobe_waits_for_objects,
    .rescan = trace_kprobe_rescan,
    .list_line = kprobe_list_line,
    .reads = nullptr,
};

trace_kprobe *as_trace_kprobe(trace_probe *tp)
{
    return tp->ops == &trace_kprobe_ops || tp->ops == &trace_uprobe_ops ||
                   tp->ops == &trace_usdt_ops
               ? static_cast<trace_kprobe *>(tp)
               : nullptr;
}

const trace_kprobe *as_trace_kprobe(const trace_probe *tp)
{
    return as_trace_kprobe(const_cast<trace_probe *>(tp));
}

// The kernel's kprobe_on_func_entry(): unknown symbols count as entries here, so the
// registration reports them (BAD_PROBE_ADDR), not the parser (BAD_RETPROBE).
bool trace_kprobe_on_func_entry(const probe_place &pl)
{
    int r;
    switch (pl.kind) {
    case probe_place::form::symbol:
        r = kprobe_on_func_entry(nullptr, pl.qualified_symbol().c_str(), pl.offset);
        break;
    case probe_place::form::address:
        r = kprobe_on_func_entry(reinterpret_cast<kprobe_opcode_t *>(pl.address), nullptr, 0);
        break;
    default: {
        auto a = file_offset_to_addr(pl.object, pl.file_offset);
        if (!a) return false;
        r = kprobe_on_func_entry(reinterpret_cast<kprobe_opcode_t *>(*a), nullptr, 0);
    }
    }
    return r != -EINVAL;
}

bool trace_kprobe_gone(const trace_kprobe &tk)
{
    return tk.pending || (tk.registered && tk.obj && !object_still_loaded(tk.obj));
}

int register_trace_kprobe(trace_kprobe &tk, bool armed, probe_error &err)
{
    const probe_definition &d = tk.def;
    tk.pending = false;
    tk.obj.reset();
    // A fresh kprobe each time, as a kprobe is registered only once (the kernel clears it).
    tk.hook.rp = {};
    if (int r = tk.place->place(tk, err); r || tk.pending) return r;
    struct kretprobe &rp = tk.hook.rp;
    struct kprobe &kp = rp.kp;
    // register_kprobe() writes the resolved address back: the place as asked, for the
    // boundary check below.
    kprobe_opcode_t *const kp_addr = kp.addr;
    const char *const kp_sym = kp.symbol_name;
    const unsigned int kp_off = kp.offset;
    // Registered disabled; enabling the event arms it. An enabled event's new probe starts
    // armed (the kernel's append to an enabled event, and its module notifier).
    if (!armed) kp.flags = KPROBE_FLAG_DISABLED;
    int r;
    if (d.is_return) {
        rp.handler = kretprobe_handler;
        if (!d.entry_args.empty()) {
            rp.entry_handler = kretprobe_entry_handler;
            rp.data_size = d.entry_args.size();
        }
        rp.maxactive = static_cast<int>(d.maxactive);
        r = register_kretprobe(&rp);
    } else {
        kp.pre_handler = kprobe_pre_handler;
        r = register_kprobe(&kp);
    }
    if (r == -EINVAL) {
        // dprobe's register_kprobe() says -EINVAL where the kernel's arch check says -EILSEQ,
        // an address inside an instruction (sym+off past sym's end included): tell which.
        if (kprobe_insn_boundary(kp_sym ? nullptr : kp_addr, kp_sym, kp_sym ? kp_off : 0) ==
            -EILSEQ)
            r = -EILSEQ;
    }
    if (r < 0) {
        tk.obj.reset();
        // __trace_kprobe_create(): EILSEQ -> BAD_INSN_BNDRY, ENOENT -> BAD_PROBE_ADDR,
        // anything else but ENOMEM/EEXIST -> FAIL_REG_PROBE; the errno stays.
        if (r == -EILSEQ)
            err = registration_error(probe_err::BAD_INSN_BNDRY, EILSEQ);
        else if (r == -ENOENT)
            err = registration_error(probe_err::BAD_PROBE_ADDR, ENOENT);
        else if (r != -ENOMEM && r != -EEXIST)
            err = registration_error(probe_err::FAIL_REG_PROBE, -r);
        return err.logged() ? -err.errnum : r;
    }
    tk.registered = true;
    if (armed && tk.place->armed) tk.place->armed(tk, true);
    return 0;
}

// p/r events register their kprobe now (disabled unless the event they join is enabled),
// or wait for their object to be loaded.
int trace_kprobe_create(trace_events &, trace_probe &tp, bool armed, probe_error &err)
{
    return register_trace_kprobe(static_cast<trace_kprobe &>(tp), armed, err);
}

// The definition alone, pending or not: the kernel's *_events lines carry no state (perf
// probe -l splits them into words); kprobes/list shows a pending probe [GONE].
std::string trace_kprobe_show(const trace_probe &tp)
{
    return tp.def.listing();
}

// Arms (or disarms) the kprobes and kretprobes of TPS in one batch: one text patch and one
// wait for thousands of p/r events. A probe whose object is not mapped is armed when it is.
int trace_kprobe_arm(trace_events &, std::span<trace_probe *const> tps, bool on)
{
    std::vector<struct kprobe *> kps;
    if (!on) {
        for (trace_probe *tp : tps) {
            auto &tk = static_cast<trace_kprobe &>(*tp);
            if (!tk.registered) continue;
            if (tk.place->armed) tk.place->armed(tk, false);
            if (!trace_kprobe_gone(tk)) kps.push_back(&tk.hook.rp.kp);
        }
        if (!kps.empty()) disable_kprobes(kps.data(), static_cast<int>(kps.size()));
        return 0;
    }
    std::vector<trace_kprobe *> armed;
    for (trace_probe *tp : tps) {
        auto &tk = static_cast<trace_kprobe &>(*tp);
        if (!trace_kprobe_gone(tk)) {
            kps.push_back(&tk.hook.rp.kp);
            armed.push_back(&tk);
        }
    }
    if (!kps.empty())
        if (int err = enable_kprobes(kps.data(), static_cast<int>(kps.size()))) return err;
    for (trace_kprobe *tk : armed)
        if (tk->place->armed) tk->place->armed(*tk, true);
    return 0;
}

// The kprobes and kretprobes go in one batch each (one text patch, one wait).
void trace_kprobe_unregister(std::span<trace_probe *const> tps)
{
    std::vector<struct kprobe *> kps;
    std::vector<struct kretprobe *> rps;
    for (trace_probe *tp : tps) {
        auto &tk = static_cast<trace_kprobe &>(*tp);
        if (!tk.registered) continue;
        if (tk.def.is_return)
            rps.push_back(&tk.hook.rp);
        else
            kps.push_back(&tk.hook.rp.kp);
    }
    if (!kps.empty()) unregister_kprobes(kps.data(), static_cast<int>(kps.size()));
    if (!rps.empty()) unregister_kretprobes(rps.data(), static_cast<int>(rps.size()));
}

// Fixed once registered: pending and library probes go back and forth between the two.
bool trace_kprobe_waits_for_objects(const trace_probe &tp)
{
    const auto &tk = static_cast<const trace_kprobe &>(tp);
    return tk.pending || (tk.obj && !tk.obj->is_main);
}

void trace_kprobe_rescan(trace_events &te, trace_probe &tp)
{
    auto &tk = static_cast<trace_kprobe &>(tp);
    if (!trace_kprobe_gone(tk)) return;
    if (tk.registered) {
        // Its object was unloaded: the old kprobe goes, a new one comes if it is back.
        if (tk.place->armed) tk.place->armed(tk, false);
        if (tk.def.is_return)
            unregister_kretprobe(&tk.hook.rp);
        else
            unregister_kprobe(&tk.hook.rp.kp);
        tk.registered = false;
        tk.obj.reset();
    }
    probe_error e;
    if (register_trace_kprobe(tk, tk.event->armed(), e) && e.logged()) {
        // Nobody wrote this command now: its listing is what the log shows.
        tk.pending = true;
        te.errors().append(tk.def.error_loc(), argv_split(tk.def.listing()), e);
    }
}

// kprobe_profile: "  %-44s %15lu %15lu\n" per p/r event on a symbol or an address (event
// name, hits, misses).
std::string trace_events::kprobe_profile() const
{
    events_lock g(*this);
    std::string s;
    char line[256];
    for (const trace_probe *p : probes_) {
        if (p->ops != &trace_kprobe_ops) continue;
        const auto &tk = static_cast<const trace_kprobe &>(*p);
        unsigned long missed = tk.hook.rp.kp.nmissed;
        if (tk.def.is_return) missed += static_cast<unsigned long>(tk.hook.rp.nmissed);
        std::snprintf(line, sizeof line, "  %-44s %15lu %15lu\n", tk.def.event.c_str(),
                      tk.nhit.load(std::memory_order_relaxed), missed);
        s += line;
    }
    return s;
}

// kprobe_events and kprobe_profile (the kernel's init_kprobe_trace), and kprobes/ (the
// kernel's debugfs kprobes/ directory, kernel/kprobes.c).
void tree::trace_kprobe_files()
{
    top_file("kprobe_events", [] { return dynevent_file(ACCEPT_KPROBE); });
    top_file("kprobe_profile",
             [] { return ro([] { return trace_events::instance().kprobe_profile(); }); });
    top_dir("kprobes", [](const std::vector<std::string> &p) -> std::optional<node> {
        if (p.size() == 1)
            return dir([] {
                return std::vector<std::string>{"blacklist", "enabled", "list", "optimization"};
            });
        if (p.size() != 2) return std::nullopt;
        if (p[1] == "list")
            return ro([] {
                return kprobes_list_text() + trace_events::instance().pending_kprobes_list();
            });
        if (p[1] == "blacklist") return ro([] { return kprobes_blacklist_text(); });
        if (p[1] == "enabled")
            return rw([] { return std::string(kprobes_enabled() ? "1\n" : "0\n"); },
                      [](std::string_view s) {
                          bool on;
                          if (parse_bool(s, on)) return -EINVAL;
                          return kprobes_set_enabled(on ? 1 : 0);
                      });
        if (p[1] == "optimization")
            return rw([] { return std::string(kprobes_optimization() ? "1\n" : "0\n"); },
                      [](std::string_view s) {
                          // proc_dointvec_minmax over 0..1, as the sysctl.
                          unsigned long long v;
                          if (parse_ulong(s, v) || v > 1) return -EINVAL;
                          return kprobes_set_optimization(int(v));
                      });
        return std::nullopt;
    });
}

} // namespace dprobe
