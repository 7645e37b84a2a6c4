// Tracepoints in user space: the USDT probes (<sys/sdt.h>, `.note.stapsdt`) of every object
// the process has loaded are static events, as the kernel's tracepoints are: listed in
// available_events as PROVIDER:NAME, with events/PROVIDER/NAME/{enable,filter,format,id,
// trigger,hist}, in no dynamic_events file and never deleted. Their fields are the note's
// arguments, arg1..argN, typed by the note's size prefix (s32, u64...) and fetched with its
// operands (tracefs/sdt_notes.h); `t:` events attach to them (trace_eprobe.cpp).
//
// An event is a uprobe-style probe per site (file offset, with the note's semaphore as its
// reference counter): its records and trace lines are the uprobe's. Unlike a p line, its
// kprobe is registered only while the event is armed (a tracepoint costs nothing until it is
// enabled, and the process's objects carry dozens of notes: libc's, libstdc++'s), and
// unregistered when it is disarmed, which gives its semaphore back.
//
// Notes of an object loaded later become events in its dlopen (the registry's loader
// notifier, trace_events_notify.cpp); an unloaded object's events stay, their probes [GONE]
// and placed again when it comes back, as p lines on a library are. The same PROVIDER:NAME
// at several sites (an inlined function) is one event with a probe per site when their
// arguments have the same types, else NAME_1, NAME_2... A name a dynamic event already has
// is left to it.
// Invariant: everything here runs with the registry's lock held.
#include "tracefs/trace_events.h"

#include "core/symbols.h"
#include "tracefs/event_filter.h"
#include "tracefs/sdt_notes.h"
#include "tracefs/trace_kprobe.h"
#include "tracefs/trace_probe.h"

#include <dprobe/kprobes.h>

#include <cinttypes>
#include <cstdio>

namespace dprobe
{

namespace
{

// The uprobe kind's own entries, at run time (their tables are another file's statics).
trace_probe *usdt_alloc()
{
    return trace_uprobe_ops.alloc();
}

void usdt_free(trace_probe *tp, std::unique_ptr<trace_event> emptied)
{
    trace_uprobe_ops.free(tp, std::move(emptied));
}

// Nothing registered yet: that waits for the event to be armed.
int usdt_create(trace_events &te, trace_probe &tp, bool armed, probe_error &err)
{
    if (!armed) return 0;
    return trace_uprobe_ops.create(te, tp, armed, err);
}

bool usdt_match(const delete_request &, const trace_probe &)
{
    return false; // static: "-:PROVIDER/NAME" finds nothing to delete (ENOENT)
}

// Registered (armed, the semaphore taken) on arm; disarmed and unregistered on disarm.
int usdt_arm(trace_events &te, std::span<trace_probe *const> tps, bool on)
{
    if (!on) {
        trace_kprobe_arm(te, tps, false);
        std::vector<trace_probe *> regd;
        for (trace_probe *tp : tps)
            if (static_cast<trace_kprobe *>(tp)->registered) regd.push_back(tp);
        trace_kprobe_unregister(regd);
        for (trace_probe *tp : tps) {
            auto &tk = static_cast<trace_kprobe &>(*tp);
            tk.registered = false;
            tk.pending = false;
            tk.obj.reset();
        }
        return 0;
    }
    for (size_t i = 0; i < tps.size(); i++) {
        auto &tk = static_cast<trace_kprobe &>(*tps[i]);
        probe_error err;
        if (int r = register_trace_kprobe(tk, true, err)) {
            usdt_arm(te, tps.first(i), false);
            return r;
        }
    }
    return 0;
}

void usdt_rescan(trace_events &te, trace_probe &tp)
{
    auto &tk = static_cast<trace_kprobe &>(tp);
    if (tk.registered || tk.pending) trace_kprobe_rescan(te, tp);
}

} // namespace

const dyn_event_operations trace_usdt_ops = {
    .kind = probe_kind::uprobe,
    .accept = 0, // in no *_events file
    .alloc = usdt_alloc,
    .free = usdt_free,
    .create = usdt_create,
    .show = trace_kprobe_show,
    .is_busy = trace_probe_is_busy,
    .match = usdt_match,
    .arm = usdt_arm,
    .unregister = trace_kprobe_unregister,
    .waits_for_objects = trace_kprobe_waits_for_objects,
    .rescan = usdt_rescan,
    .list_line = nullptr,
    .reads = nullptr,
};

namespace
{

// The uprobe-style command of note P of PATH, its event named EVENT.
std::vector<std::string> usdt_argv(const sdt_probe &p, const std::string &path,
                                   const std::string &event)
{
    std::vector<std::string> argv;
    argv.push_back("p:" + p.provider + "/" + event);
    char place[64];
    std::snprintf(place, sizeof place, ":0x%" PRIx64, p.pc_offset);
    std::string pl = path + place;
    if (p.semaphore) {
        std::snprintf(place, sizeof place, "(0x%" PRIx64 ")", p.sem_offset);
        pl += place;
    }
    argv.push_back(pl);
    for (size_t i = 0; i < p.args.size(); i++) {
        std::string a = sdt_arg_fetch(p.args[i], static_cast<int>(i + 1), p, path, nullptr);
        if (!a.empty()) argv.push_back(a); // what fetch args cannot say is left out
    }
    return argv;
}

bool is_usdt_event(const trace_event *ev)
{
    return ev && !ev->probes.empty() && ev->probes.front()->ops == &trace_usdt_ops;
}

} // namespace

void trace_events::usdt_start()
{
    events_lock g(*this);
    usdt_on_ = true;
    usdt_scan_locked();
    update_dl_notifier();
}

std::string trace_events::usdt_listing() const
{
    events_lock g(*this);
    std::string s;
    for (const trace_event *ev : events_)
        if (is_usdt_event(ev)) s += ev->probes.front()->ops->show(*ev->probes.front()) + "\n";
    return s;
}

bool trace_events::usdt_tracepoint_locked(std::string_view name, std::string &group,
                                          std::vector<filter_field> &fields) const
{
    for (const trace_event *ev : events_) {
        if (ev->name != name || !is_usdt_event(ev)) continue;
        group = ev->group;
        fields = ev->fields;
        return true;
    }
    return false;
}

void trace_events::usdt_scan_locked()
{
    if (!usdt_on_) return;
    auto objs = kallsyms::instance().objects();
    for (const object_ptr &o : *objs) {
        if (o->is_vdso || o->path.empty() || !usdt_scanned_.insert(o->id).second) continue;
        std::vector<sdt_probe> notes;
        std::string err;
        if (!read_sdt_probes(o->path, notes, &err)) continue;
        parse_options opts;
        opts.accept = ACCEPT_UPROBE;
        opts.check_files = false;
        for (const sdt_probe &p : notes) {
            // dprobe's own code and what it runs on (its C++ runtime, when the program links
            // libdprobe.so): no probe may go there, so no tracepoint is offered either.
            if (within_kprobe_blacklist(o->load_bias + p.pc)) continue;
            // NAME, or NAME_1, NAME_2... for sites whose arguments differ in type.
            for (int n = 0; n < 16; n++) {
                std::string event = n ? p.name + "_" + std::to_string(n) : p.name;
                std::vector<std::string> argv = usdt_argv(p, o->path, event);
                probe_definition def;
                if (parse_probe_definition(argv, opts, def)) break; // a name tracefs refuses
                trace_event *ev = find(def.group, def.event);
                if (ev && !is_usdt_event(ev)) break; // a dynamic event's name
                if (ev) {
                    std::vector<const probe_definition *> existing;
                    for (trace_probe *tp : ev->probes)
                        existing.push_back(&tp->def);
                    probe_error e = check_append(existing, def);
                    if (e.err == probe_err::SAME_PROBE) break; // this object seen already
                    if (e) continue;                           // other types: next name
                }
                if (create(def, argv, nullptr, &trace_usdt_ops) == 0) usdt_added_.store(true);
                break;
            }
        }
    }
}

} // namespace dprobe
