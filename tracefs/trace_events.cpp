// Dynamic-event registry: commands, events, their files. Everything a kind of event does
// differently goes through its operations table (trace_probe.h); the record writer is in
// trace_probe_handlers.cpp, the loader notifier for probes on objects the process loads in
// trace_events_notify.cpp.
#include "tracefs/trace_events.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "core/symbols.h"
#include "core/task_ctx.h"
#include "core/trace_clock.h"
#include "tracefs/btf_lookup.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_marker.h"
#include "tracefs/trace_probe.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_set>

namespace dprobe
{

namespace
{

// Whether a file taking the kinds ACCEPT lists and deletes TP.
bool accepts(unsigned accept, const trace_probe *tp)
{
    return accept & tp->ops->accept;
}

// A new probe freed through its kind's table.
using probe_ptr = std::unique_ptr<trace_probe, void (*)(trace_probe *)>;

std::string_view strip(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

constexpr const char default_sys_filter_message[] =
    "### global filter ###\n"
    "# Use this to set filters for multiple events.\n"
    "# Only events with the given fields will be affected.\n"
    "# If no events are modified, an error message will be displayed here\n";

constexpr const char filter_err_loc[] = "event filter parse error";

} // namespace

// ---------------------------------------------------------------------------------------

trace_events &trace_events::instance()
{
    static trace_events *inst = new trace_events; // never destroyed
    return *inst;
}

trace_events::trace_events()
{
    trace_clock_init();
}

std::string trace_events::key(std::string_view group, std::string_view event)
{
    std::string k;
    k.reserve(group.size() + 1 + event.size());
    k.append(group).append(1, '/').append(event);
    return k;
}

trace_event *trace_events::find(std::string_view group, std::string_view event) const
{
    auto it = by_name_.find(key(group, event));
    return it == by_name_.end() ? nullptr : it->second;
}

namespace
{

// ftrace/print, the ftrace event with triggers (trace_marker.h): outside the registry, found
// by name where the trigger framework looks events up.
trace_event *ftrace_event_find(std::string_view group, std::string_view event)
{
    return group == "ftrace" && event == "print" ? &ftrace_print_event() : nullptr;
}

} // namespace

void trace_events::add_event_locked(trace_event *ev)
{
    events_.push_back(ev);
    by_name_[key(ev->group, ev->name)] = ev;
    id_used_[ev->id] = true;
    next_id_ = ev->id == UINT16_MAX ? TRACE_EVENT_FIRST_ID : uint16_t(ev->id + 1);
}

void trace_events::forget_event_locked(const trace_event *ev)
{
    by_name_.erase(key(ev->group, ev->name));
    id_used_[ev->id] = false;
}

uint16_t trace_events::peek_id() const
{
    for (uint16_t id = next_id_;; id = id == UINT16_MAX ? TRACE_EVENT_FIRST_ID : uint16_t(id + 1))
        if (!id_used_[id]) return id;
}

namespace
{
std::atomic<void (*)()> g_commands_hook{nullptr};
}

void trace_events::set_commands_hook(void (*hook)())
{
    g_commands_hook.store(hook);
}

void trace_events::run_commands_hook()
{
    if (auto hook = g_commands_hook.load()) hook();
}

void trace_events::use_fast_stores(bool on)
{
    trace_probe_use_fast_stores(on);
}

int trace_events::write_commands(std::string_view buf, unsigned accept)
{
    int r = trace_parse_run_command(
        buf, [&](std::span<const std::string> argv) { return run_command(argv, accept); });
    run_commands_hook();
    return r;
}

int trace_events::run_command(std::span<const std::string> argv, unsigned accept)
{
    if (argv.empty()) return 0;
    if ((accept & ACCEPT_SYNTH) && argv[0].starts_with("s:")) {
        // The kernel's synthetic parser takes the raw line (its fields are ';'-separated).
        std::string raw;
        for (const std::string &a : argv)
            raw += (raw.empty() ? "" : " ") + a;
        return run_synth_command(raw, true);
    }
    parse_options opts;
    opts.accept = accept;
    opts.is_func_entry = trace_kprobe_on_func_entry;
    opts.func_info = func_proto_of_place;
    opts.event_fields = [this](std::string_view group,
                               std::string_view event) -> const std::vector<filter_field> * {
        const trace_event *ev = find(group, event);
        return ev && !ev->reads() ? &ev->fields : nullptr; // no event probe on an event probe
    };
    opts.tracepoint = [this](std::string_view name, std::string &group,
                             std::vector<filter_field> &fields) {
        return usdt_tracepoint_locked(name, group, fields);
    };
    dynevent_command cmd;
    const char *loc = nullptr;
    events_lock g(*this);
    probe_error e = parse_dynevent(argv, opts, cmd, &loc);
    if (e) {
        if (e.logged()) errors_.append(loc ? loc : "trace_probe", argv, e);
        return -e.errnum;
    }
    if (cmd.kind == dynevent_command::type::remove) return remove(cmd.del, accept);
    return create(cmd.def, argv, loc ? loc : cmd.def.error_loc());
}

int trace_events::create(const probe_definition &def, std::span<const std::string> argv,
                         const char *loc, const dyn_event_operations *kind_ops)
{
    auto fail = [&](probe_error e) {
        if (loc) errors_.append(loc, argv, e);
        return -e.errnum;
    };

    // ftrace's own events are taken (the kernel's EEXIST for an existing event call).
    if (def.group == "ftrace" && ftrace_event_id(def.event) >= 0) return -EEXIST;
    trace_event *ev = find(def.group, def.event);
    if (ev) {
        std::vector<const probe_definition *> existing;
        for (trace_probe *p : ev->probes)
            existing.push_back(&p->def);
        if (probe_error e = check_append(existing, def)) return fail(e);
    }

    // Everything a handler reads is set before the kind can register anything: the probe,
    // and a new event (published only when the kind has accepted the probe, so a failed
    // command takes no id).
    const dyn_event_operations &ops = kind_ops ? *kind_ops : dyn_event_ops_of(def.kind);
    probe_ptr tp(ops.alloc(), trace_probe_free);
    tp->ops = &ops;
    tp->def = def;
    const probe_definition &d = tp->def;
    std::unique_ptr<trace_event> fresh;
    if (!ev) {
        fresh = std::make_unique<trace_event>();
        fresh->group = d.group;
        fresh->name = d.event;
        fresh->id = peek_id();
        fresh->fields = probe_filter_fields(d);
        ev = fresh.get();
    }
    tp->event = ev;
    tp->id = ev->id;
    tp->has_dyn = d.has_dynamic_args();
    tp->fixed_size = static_cast<uint32_t>(probe_layout(d).fixed_size);

    probe_error e;
    if (int r = ops.create(*this, *tp, ev->armed(), e)) return e.logged() ? fail(e) : r;

    if (fresh) {
        add_event_locked(fresh.release());
        std::lock_guard<std::mutex> g(fmt_mutex_);
        formats_[ev->id] = std::make_shared<const probe_definition>(d);
    }
    // Only a probe that waits for objects can change whether the loader notifier is
    // installed: scanning every probe at each creation made creating N events cost N^2.
    const bool dl = ops.waits_for_objects && ops.waits_for_objects(*tp);
    ev->probes.push_back(tp.get());
    probes_.push_back(tp.release());
    if (dl) update_dl_notifier();
    return 0;
}

int trace_events::remove(const delete_request &req, unsigned accept)
{
    std::vector<trace_probe *> hit;
    for (trace_probe *p : probes_)
        if (accepts(accept, p) && p->ops->match(req, *p)) hit.push_back(p);
    if (hit.empty()) return -ENOENT;
    for (trace_probe *p : hit)
        if (p->ops->is_busy(*p)) return -EBUSY;
    // An event an event probe reads stays while that event probe does (the kernel holds a
    // reference on it).
    for (const trace_event *e : events_) {
        const trace_event *read = e->reads();
        if (!read) continue;
        bool reader_goes =
            std::any_of(hit.begin(), hit.end(), [&](trace_probe *p) { return p->event == e; });
        bool read_goes =
            std::any_of(hit.begin(), hit.end(), [&](trace_probe *p) { return p->event == read; });
        if (read_goes && !reader_goes) return -EBUSY;
    }
    const bool dl = std::any_of(hit.begin(), hit.end(), [](const trace_probe *p) {
        return p->ops->waits_for_objects && p->ops->waits_for_objects(*p);
    });
    std::unordered_set<trace_probe *> gone(hit.begin(), hit.end());
    probes_.erase(std::remove_if(probes_.begin(), probes_.end(),
                                 [&](trace_probe *p) { return gone.count(p) != 0; }),
                  probes_.end());
    // In the order of the kinds' list: event probes go first, to the event they read.
    std::stable_sort(hit.begin(), hit.end(), [](const trace_probe *a, const trace_probe *b) {
        return dyn_event_ops_rank(a->ops) < dyn_event_ops_rank(b->ops);
    });
    // Unregistered in one batch per unregister function (one text patch, one wait).
    for (size_t i = 0; i < hit.size();) {
        size_t j = i;
        while (j < hit.size() && hit[j]->ops->unregister == hit[i]->ops->unregister)
            ++j;
        hit[i]->ops->unregister(std::span(hit).subspan(i, j - i));
        i = j;
    }
    // Then freed, each with its event when it was the event's last probe: no handler runs.
    std::vector<std::unique_ptr<trace_event>> emptied(hit.size());
    std::unordered_set<trace_event *> dead;
    for (size_t i = 0; i < hit.size(); ++i) {
        trace_event *ev = hit[i]->event;
        std::erase(ev->probes, hit[i]);
        if (ev->probes.empty()) {
            forget_event_locked(ev);
            dead.insert(ev);
            emptied[i].reset(ev);
        }
    }
    if (!dead.empty()) std::erase_if(events_, [&](trace_event *e) { return dead.count(e) != 0; });
    for (size_t i = 0; i < hit.size(); ++i)
        hit[i]->ops->free(hit[i], std::move(emptied[i]));
    if (dl) update_dl_notifier();
    return 0;
}

int trace_events::release_all(unsigned accept)
{
    events_lock g(*this);
    for (trace_probe *p : probes_)
        if (accepts(accept, p) && p->ops->is_busy(*p)) return -EBUSY;
    delete_request all; // no group, empty event: every event
    bool any = std::any_of(probes_.begin(), probes_.end(),
                           [&](trace_probe *p) { return accepts(accept, p); });
    if (!any) return 0;
    return remove(all, accept);
}

std::string trace_events::listing(unsigned accept) const
{
    events_lock g(*this);
    std::string s;
    for (const trace_probe *p : probes_)
        if (accepts(accept, p)) s += p->ops->show(*p) + "\n";
    return s;
}

std::string trace_events::listing_of(std::string_view group, std::string_view event) const
{
    events_lock g(*this);
    const trace_event *ev = find(group, event);
    return ev ? ev->probes.front()->ops->show(*ev->probes.front()) : std::string();
}

std::string trace_events::pending_kprobes_list() const
{
    events_lock g(*this);
    std::string out;
    for (const trace_probe *p : probes_)
        if (p->ops->list_line) out += p->ops->list_line(*p);
    return out;
}

std::vector<std::string> trace_events::groups() const
{
    events_lock g(*this);
    std::set<std::string> s;
    for (const trace_event *ev : events_)
        s.insert(ev->group);
    return {s.begin(), s.end()};
}

std::vector<std::string> trace_events::events(std::string_view group) const
{
    events_lock g(*this);
    std::set<std::string> s;
    for (const trace_event *ev : events_)
        if (ev->group == group) s.insert(ev->name);
    return {s.begin(), s.end()};
}

bool trace_events::has_group(std::string_view group) const
{
    events_lock g(*this);
    return std::any_of(events_.begin(), events_.end(),
                       [&](const trace_event *ev) { return ev->group == group; });
}

bool trace_events::has_event(std::string_view group, std::string_view event) const
{
    if (ftrace_event_find(group, event)) return true;
    events_lock g(*this);
    return find(group, event) != nullptr;
}

int trace_events::event_id(std::string_view group, std::string_view event) const
{
    events_lock g(*this);
    const trace_event *ev = find(group, event);
    return ev ? ev->id : -ENOENT;
}

std::optional<std::string> trace_events::format(std::string_view group,
                                                std::string_view event) const
{
    events_lock g(*this);
    const trace_event *ev = find(group, event);
    if (!ev) return std::nullopt;
    return probe_format_file(ev->probes.front()->def, ev->id);
}

int trace_events::enable_locked(trace_event &ev, bool on, unsigned array)
{
    trace_event *one[1] = {&ev};
    return enable_many_locked(one, on, array);
}

namespace
{

// EV's enable in the array of BIT, and what its handlers record there.
void set_enable_bit(trace_event &ev, uint64_t bit, bool on)
{
    if (on) {
        ev.enabled_mask |= bit;
        ev.record_mask.fetch_or(bit, std::memory_order_release);
        return;
    }
    ev.enabled_mask &= ~bit;
    // Off is off, soft mode or not: in soft mode the kernel sets SOFT_DISABLED (the event
    // stays armed for its triggers and reads "0*"; an enable_event trigger turns it on again).
    ev.record_mask.fetch_and(~bit, std::memory_order_release);
}

// Whether EV stays armed once it is disabled in the array of BIT.
bool armed_without(const trace_event &ev, uint64_t bit)
{
    return (ev.enabled_mask & ~bit) || ev.soft_mask || ev.soft > 0;
}

} // namespace

// Enables (or disables) EVS in ARRAY together, all or nothing. The probes of plain events
// whose arming changes are armed as one batch (arm_many_locked); event probes, and events
// armed anyway (enabled in another array, or kept armed by event probes or a soft-mode
// command), go one by one.
int trace_events::enable_many_locked(std::span<trace_event *const> evs, bool on, unsigned array)
{
    if (array >= TRACE_ARRAY_MAX) return -EINVAL;
    (void)trace_array_top(); // the handlers find the arrays by id: the top one must exist
    const uint64_t bit = uint64_t{1} << array;
    std::vector<trace_event *> plain, single;
    std::unordered_set<trace_event *> seen;
    for (trace_event *ev : evs) {
        if (!seen.insert(ev).second) continue;
        if (bool(ev->enabled_mask & bit) == on) {
            // In soft mode the enable file still switches recording, as writing it sets or
            // clears the kernel's SOFT_DISABLED bit: "0" after an enable_event command fired
            // reads "0*" again (and the command, if counted, switches it on once more).
            if (ev->soft_mask & bit) set_enable_bit(*ev, bit, on);
            continue;
        }
        const bool arming = on ? !ev->armed() : !armed_without(*ev, bit);
        (arming && !ev->reads() ? plain : single).push_back(ev);
    }
    auto set_plain = [&plain, bit](bool state) {
        // Recording stops before the probes are disarmed and starts after they are armed.
        for (trace_event *ev : plain)
            set_enable_bit(*ev, bit, state);
    };
    if (!on) set_plain(false);
    if (int err = arm_many_locked(plain, on)) {
        if (!on) set_plain(true);
        return err;
    }
    if (on) set_plain(true);
    for (size_t i = 0; i < single.size(); ++i) {
        int err = enable_one_locked(*single[i], on, array);
        if (!err) continue;
        while (i-- > 0)
            enable_one_locked(*single[i], !on, array);
        if (on) set_plain(false);
        arm_many_locked(plain, !on);
        if (!on) set_plain(true);
        return err;
    }
    return 0;
}

int trace_events::enable_one_locked(trace_event &ev, bool on, unsigned array)
{
    const uint64_t bit = uint64_t{1} << array;
    if (bool(ev.enabled_mask & bit) == on) return 0;
    if (on) {
        if (!ev.armed())
            if (int err = arm_locked(ev, true)) return err;
        set_enable_bit(ev, bit, true);
        return 0;
    }
    const bool disarm = !armed_without(ev, bit);
    set_enable_bit(ev, bit, false);
    if (disarm) arm_locked(ev, false);
    return 0;
}

int trace_events::arm_locked(trace_event &ev, bool on)
{
    trace_event *one[1] = {&ev};
    return arm_many_locked(one, on);
}

// The probes of EVS go to their tables' arm functions in the order of the kinds' list, one
// batch per function (kprobe and uprobe events share one: one text patch and one wait for
// thousands of p/r events). Arming is all or nothing: when a batch fails, the batches
// before it are disarmed.
int trace_events::arm_many_locked(std::span<trace_event *const> evs, bool on)
{
    std::vector<trace_probe *> tps;
    for (trace_event *ev : evs)
        tps.insert(tps.end(), ev->probes.begin(), ev->probes.end());
    std::stable_sort(tps.begin(), tps.end(), [](const trace_probe *a, const trace_probe *b) {
        return dyn_event_ops_rank(a->ops) < dyn_event_ops_rank(b->ops);
    });
    std::vector<std::span<trace_probe *const>> batches;
    for (size_t i = 0; i < tps.size();) {
        size_t j = i;
        while (j < tps.size() && tps[j]->ops->arm == tps[i]->ops->arm)
            ++j;
        batches.push_back(std::span<trace_probe *const>(tps).subspan(i, j - i));
        i = j;
    }
    for (size_t b = 0; b < batches.size(); ++b) {
        auto arm = batches[b].front()->ops->arm;
        if (int err = arm(*this, batches[b], on); err && on) {
            while (b-- > 0)
                batches[b].front()->ops->arm(*this, batches[b], false);
            return err;
        }
    }
    return 0;
}

int trace_events::set_enabled(std::span<const event_ref> events, bool on, size_t *failed,
                              unsigned array)
{
    events_lock g(*this);
    if (array >= TRACE_ARRAY_MAX) return -EINVAL;
    const uint64_t bit = uint64_t{1} << array;
    std::vector<trace_event *> evs;
    evs.reserve(events.size());
    for (size_t i = 0; i < events.size(); ++i) {
        trace_event *ev = find(events[i].group, events[i].event);
        if (!ev) {
            if (failed) *failed = i;
            return -ENOENT;
        }
        evs.push_back(ev);
    }
    int err = enable_many_locked(evs, on, array);
    if (err && failed) {
        // Which one: the first that fails on its own (the others put back).
        std::vector<trace_event *> turned;
        *failed = 0;
        for (size_t i = 0; i < evs.size(); ++i) {
            const bool was = evs[i]->enabled_mask & bit;
            if (enable_locked(*evs[i], on, array)) {
                *failed = i;
                break;
            }
            if (bool(evs[i]->enabled_mask & bit) != was) turned.push_back(evs[i]);
        }
        for (trace_event *ev : turned)
            enable_locked(*ev, !on, array);
    }
    return err;
}

int trace_events::set_enabled(std::string_view group, std::string_view event, bool on,
                              unsigned array)
{
    events_lock g(*this);
    trace_event *ev = find(group, event);
    if (!ev) return -ENOENT;
    return enable_locked(*ev, on, array);
}

int trace_events::enabled(std::string_view group, std::string_view event, unsigned array) const
{
    events_lock g(*this);
    const trace_event *ev = find(group, event);
    if (!ev) return -ENOENT;
    return array < TRACE_ARRAY_MAX && ((ev->enabled_mask >> array) & 1) ? 1 : 0;
}

std::string trace_events::enable_text(std::string_view group, std::string_view event,
                                      unsigned array) const
{
    events_lock g(*this);
    const trace_event *ev = find(group, event);
    if (!ev || array >= TRACE_ARRAY_MAX) return "";
    const uint64_t bit = uint64_t{1} << array;
    std::string s = (ev->record_mask.load(std::memory_order_relaxed) & bit) ? "1" : "0";
    if (ev->soft_mask & bit) s += '*';
    return s + "\n";
}

int trace_events::set_group_enabled(std::string_view group, bool on, unsigned array)
{
    events_lock g(*this);
    std::vector<trace_event *> evs;
    for (trace_event *ev : events_)
        if (group.empty() || ev->group == group) evs.push_back(ev);
    if (enable_many_locked(evs, on, array) == 0) return 0;
    // One of them cannot: the others still change, one by one (the kernel's
    // __ftrace_set_clr_event() goes on past a failing event and returns its error).
    int ret = 0;
    for (trace_event *ev : evs)
        if (int r = enable_locked(*ev, on, array); r && !ret) ret = r;
    return ret;
}

char trace_events::group_enabled(std::string_view group, unsigned array) const
{
    events_lock g(*this);
    unsigned set = 0;
    for (const trace_event *ev : events_)
        if (group.empty() || ev->group == group) set |= 1u << ((ev->enabled_mask >> array) & 1);
    static constexpr char set_to_char[4] = {'?', '0', '1', 'X'};
    return set_to_char[set];
}

std::vector<std::string> trace_events::enabled_events(unsigned array) const
{
    events_lock g(*this);
    std::vector<std::string> v;
    for (const trace_event *ev : events_)
        if ((ev->enabled_mask >> array) & 1) v.push_back(ev->group + ":" + ev->name);
    return v;
}

std::vector<std::string> trace_events::all_events() const
{
    events_lock g(*this);
    std::vector<std::string> v;
    for (const trace_event *ev : events_)
        v.push_back(ev->group + ":" + ev->name);
    std::sort(v.begin(), v.end());
    return v;
}

int trace_events::set_event_matching(std::string_view spec, bool on, unsigned array)
{
    // The kernel's ftrace_set_clr_event(): "sys:event", "sys:*", "*:event" or a bare word,
    // which names an event or a whole system; "*" is anything.
    std::string_view sys, evname, any;
    if (size_t c = spec.find(':'); c != std::string_view::npos) {
        sys = spec.substr(0, c);
        evname = spec.substr(c + 1);
    } else {
        any = spec;
    }
    auto is_any = [](std::string_view x) { return x.empty() || x == "*"; };
    events_lock g(*this);
    std::vector<trace_event *> evs;
    for (trace_event *ev : events_) {
        if (!any.empty()) {
            if (!is_any(any) && any != ev->name && any != ev->group) continue;
        } else {
            if (!is_any(sys) && sys != ev->group) continue;
            if (!is_any(evname) && evname != ev->name) continue;
        }
        evs.push_back(ev);
    }
    if (evs.empty()) return -EINVAL;
    if (enable_many_locked(evs, on, array) == 0) return 0;
    int ret = 0;
    for (trace_event *ev : evs)
        if (int r = enable_locked(*ev, on, array); r && !ret) ret = r;
    return ret;
}

int trace_events::soft_mode(std::string_view group, std::string_view event, unsigned array,
                            bool ref)
{
    // ftrace/print has nothing to arm: its records are written by trace_marker.
    if (ftrace_event_find(group, event)) return array < TRACE_ARRAY_MAX ? 0 : -ENOENT;
    events_lock g(*this);
    trace_event *ev = find(group, event);
    if (!ev || array >= TRACE_ARRAY_MAX) return -ENOENT;
    const uint64_t bit = uint64_t{1} << array;
    int &n = ev->soft_refs[array];
    if (ref) {
        if (n++ == 0) {
            if (!ev->armed()) {
                if (int err = arm_locked(*ev, true)) {
                    n--;
                    return err;
                }
            }
            ev->soft_mask |= bit;
            if (!(ev->enabled_mask & bit))
                ev->record_mask.fetch_and(~bit, std::memory_order_release);
        }
        return 0;
    }
    if (n == 0) return 0;
    if (--n == 0) {
        // The last command gone, the event stays as the commands or the enable file left it
        // (the kernel's sm_ref reaching 0: disabled only if SOFT_DISABLED): an event that
        // an enable_event command switched on is enabled, one switched off is disabled.
        ev->soft_mask &= ~bit;
        if (ev->record_mask.load(std::memory_order_relaxed) & bit)
            ev->enabled_mask |= bit;
        else
            ev->enabled_mask &= ~bit;
        if (!ev->armed()) arm_locked(*ev, false);
    }
    return 0;
}

trace_event *trace_events::find_event(std::string_view group, std::string_view event) const
{
    if (trace_event *ev = ftrace_event_find(group, event)) return ev;
    events_lock g(*this);
    return find(group, event);
}

trace_event *trace_events::pin_event(std::string_view group, std::string_view event)
{
    events_lock g(*this);
    trace_event *ev = find(group, event);
    if (!ev) ev = ftrace_event_find(group, event);
    if (ev) ev->pins++;
    return ev;
}

void trace_events::unpin_event(trace_event *ev)
{
    events_lock g(*this);
    ev->pins--;
}

DPROBE_NOPROBE void trace_events::soft_enable(trace_event *ev, unsigned array, bool on) noexcept
{
    const uint64_t bit = uint64_t{1} << array;
    if (on)
        ev->record_mask.fetch_or(bit, std::memory_order_release);
    else
        ev->record_mask.fetch_and(~bit, std::memory_order_release);
}

DPROBE_NOPROBE bool trace_events::soft_enabled(const trace_event *ev, unsigned array) noexcept
{
    return (ev->record_mask.load(std::memory_order_acquire) >> array) & 1;
}

void trace_events::remove_array(unsigned array)
{
    events_lock g(*this);
    if (array >= TRACE_ARRAY_MAX) return;
    const uint64_t bit = uint64_t{1} << array;
    for (trace_event *ev : events_) {
        const bool was = ev->armed();
        ev->enabled_mask &= ~bit;
        ev->soft_mask &= ~bit;
        ev->soft_refs.erase(array);
        ev->record_mask.fetch_and(~bit, std::memory_order_release);
        ev->filter[array].store(nullptr, std::memory_order_release);
        ev->filter_file.erase(array);
        if (was && !ev->armed()) arm_locked(*ev, false);
    }
    const std::string prefix = std::to_string(array) + ":";
    std::erase_if(group_filter_text_, [&](const auto &kv) { return kv.first.starts_with(prefix); });
}

int trace_events::set_filter(std::string_view group, std::string_view event, std::string_view text,
                             unsigned array)
{
    events_lock g(*this);
    trace_event *ev = find(group, event);
    if (!ev || array >= TRACE_ARRAY_MAX) return -ENOENT;
    std::string_view s = strip(text);
    if (s == "0") {
        ev->filter[array].store(nullptr, std::memory_order_release);
        ev->filter_file.erase(array);
        return 0;
    }
    filter_parse_error pe;
    auto f = event_filter::compile(s, ev->fields, pe);
    if (!f) {
        // The kernel disables the event's filter and shows the error in the file.
        ev->filter[array].store(nullptr, std::memory_order_release);
        ev->filter_file[array] = filter_error_text(s, pe);
        bool positioned = pe.err != filter_err::NONE && pe.err != filter_err::ERRNO;
        errors_.append_message(filter_err_loc,
                               filter_err_text(positioned ? pe.err : filter_err::ERRNO),
                               std::string(s), positioned ? size_t(pe.pos) : 0);
        return -EINVAL;
    }
    ev->filter_file[array] = std::string(s) + "\n";
    ev->filter[array].store(f.get(), std::memory_order_release);
    ev->filters.push_back(std::move(f));
    return 0;
}

std::optional<std::string> trace_events::filter_text(std::string_view group, std::string_view event,
                                                     unsigned array) const
{
    events_lock g(*this);
    const trace_event *ev = find(group, event);
    if (!ev) return std::nullopt;
    return ev->filter_text(array);
}

int trace_events::set_group_filter(std::string_view group, std::string_view text, unsigned array)
{
    events_lock g(*this);
    if (array >= TRACE_ARRAY_MAX) return -ENOENT;
    std::string_view s = strip(text);
    std::string key = std::to_string(array) + ":" + std::string(group);
    std::vector<trace_event *> evs;
    for (trace_event *ev : events_)
        if (ev->group == group) evs.push_back(ev);
    if (evs.empty()) return -ENOENT;
    if (s == "0") {
        for (trace_event *ev : evs) {
            ev->filter[array].store(nullptr, std::memory_order_release);
            ev->filter_file.erase(array);
        }
        group_filter_text_.erase(key);
        return 0;
    }
    bool any = false;
    filter_parse_error sub{filter_err::BAD_SUBSYS_FILTER, 0};
    for (trace_event *ev : evs) {
        filter_parse_error pe;
        auto f = event_filter::compile(s, ev->fields, pe);
        if (!f) {
            ev->filter[array].store(nullptr, std::memory_order_release);
            ev->filter_file[array] = filter_error_text(s, sub);
            continue;
        }
        any = true;
        ev->filter_file[array] = std::string(s) + "\n";
        ev->filter[array].store(f.get(), std::memory_order_release);
        ev->filters.push_back(std::move(f));
    }
    if (!any) {
        group_filter_text_[key] = filter_error_text(s, sub);
        errors_.append_message(filter_err_loc, filter_err_text(filter_err::BAD_SUBSYS_FILTER),
                               std::string(s), 0);
        return -EINVAL;
    }
    group_filter_text_.erase(key);
    return 0;
}

std::string trace_events::group_filter_text(std::string_view group, unsigned array) const
{
    events_lock g(*this);
    auto it = group_filter_text_.find(std::to_string(array) + ":" + std::string(group));
    return it != group_filter_text_.end() ? it->second : default_sys_filter_message;
}

std::string trace_events::format_record(const void *payload, size_t len) const
{
    trace_entry_header h{};
    if (len < sizeof(h)) return "Unknown type 0";
    std::memcpy(&h, payload, sizeof(h));
    std::shared_ptr<const probe_definition> def;
    {
        std::lock_guard<std::mutex> g(fmt_mutex_);
        auto it = formats_.find(h.type);
        if (it != formats_.end()) def = it->second;
    }
    if (!def) return "Unknown type " + std::to_string(h.type);
    return format_probe_record(*def, static_cast<const uint8_t *>(payload), len, trace_symbolize);
}

size_t trace_events::payload_fn(char *buf, size_t len, const void *payload, size_t payload_len,
                                void *)
{
    std::string s = instance().format_record(payload, payload_len);
    if (len) {
        size_t n = std::min(s.size(), len - 1);
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return s.size();
}

size_t trace_events::nr_events() const
{
    events_lock g(*this);
    return events_.size();
}

} // namespace dprobe
