// Event probes, `e[:[EGRP/][EEVENT]] GRP.EVENT [FETCHARGS] [if FILTER]` (the kernel's
// trace_eprobe.c): an event made of another event's records. When the attached event
// fires, each event probe enabled on it that passes its "if" filter (a filter on the
// attached record) writes its own record, its arguments fetched from the attached record's
// fields ($FIELD) or through them (+8($ptr):string).
//
// As in the kernel, enabling an event probe puts the attached event in soft mode: its
// probes are armed and its handlers run the event probes, but its own records are written
// only if it is enabled itself (in each trace array where it is). An event probe's records
// go to the arrays where the event probe is enabled. Unlike the kernel's, which attach to
// static events only, dprobe's attach to any dynamic event but another event probe: user
// space has no static tracepoints besides SDT probes, which dprobe makes dynamic events.
//
// Invariants: an event read by an event probe is not deleted (EBUSY); the enabled event
// probes of an event are an immutable list the handlers load (old ones are kept until the
// event is freed), and a deleted event probe stays with its attached event until then, so
// a handler that loaded an old list never reads freed memory.
#include "tracefs/event_format.h"
#include "tracefs/trace_events.h"
#include "tracefs/trace_events_internal.h"

#include <algorithm>
#include <cerrno>

namespace dprobe
{

namespace
{

// Publishes ATTACHED's enabled event probes with TP added (or removed).
void publish(trace_event &attached, const trace_probe *tp, bool add)
{
    auto l = std::make_unique<eprobe_list>();
    if (const eprobe_list *old = attached.eprobes.load(std::memory_order_relaxed))
        l->probes = old->probes;
    if (add)
        l->probes.push_back(tp);
    else
        std::erase(l->probes, tp);
    attached.eprobes.store(l->probes.empty() ? nullptr : l.get(), std::memory_order_release);
    attached.eprobe_lists.push_back(std::move(l));
}

} // namespace

int trace_events::create_eprobe(std::unique_ptr<trace_probe> tp, std::span<const std::string> argv,
                                const char *loc)
{
    auto fail = [&](probe_error e) {
        errors_.append(loc, argv, e);
        return -e.errnum;
    };
    probe_definition &d = tp->def;
    trace_event *attached = find(d.place.object, d.place.symbol);
    if (!attached || attached->attached)
        return fail(probe_error::make(probe_err::BAD_ATTACH_EVENT, 1, 0, ENODEV));
    std::unique_ptr<event_filter> f;
    if (!d.filter.empty()) {
        // The filter reads the attached event's fields (trace_eprobe_parse_filter()).
        filter_parse_error pe;
        f = event_filter::compile(d.filter, attached->fields, pe);
        if (!f) {
            bool positioned = pe.err != filter_err::NONE && pe.err != filter_err::ERRNO;
            errors_.append_message("event filter parse error",
                                   filter_err_text(positioned ? pe.err : filter_err::ERRNO),
                                   d.filter, positioned ? size_t(pe.pos) : 0);
            return -EINVAL;
        }
    }
    if (probe_error e = resolve_probe_args(*tp)) return fail(e);

    auto ev = std::make_unique<trace_event>();
    ev->group = d.group;
    ev->name = d.event;
    ev->id = alloc_id();
    ev->fields = probe_filter_fields(d);
    ev->attached = attached;
    ev->attach_filter = std::move(f);
    tp->event = ev.get();
    tp->id = ev->id;
    tp->has_dyn = d.has_dynamic_args();
    tp->fixed_size = static_cast<uint32_t>(probe_layout(d).fixed_size);
    {
        std::lock_guard<std::mutex> g(fmt_mutex_);
        formats_[ev->id] = std::make_shared<const probe_definition>(d);
    }
    ev->probes.push_back(tp.get());
    add_event_locked(ev.release());
    probes_.push_back(tp.release());
    return 0;
}

int trace_events::enable_eprobe_locked(trace_event &ev, bool on)
{
    // EV is armed while it is enabled in some array (or held by a soft-mode command): its
    // handler then runs on every record of the event it reads, and writes its own record in
    // the arrays where it records.
    trace_event &a = *ev.attached;
    const trace_probe *tp = ev.probes.front();
    if (on) {
        if (!a.armed()) {
            if (int err = arm_locked(a, true)) return err;
        }
        a.soft++;
        publish(a, tp, true);
    } else {
        publish(a, tp, false);
        if (--a.soft == 0 && !a.armed())
            arm_locked(a, false); // (waits for the handlers still running)
    }
    return 0;
}

void trace_events::bury_eprobe(trace_probe *tp)
{
    trace_event *ev = tp->event;
    trace_event &a = *ev->attached;
    events_.erase(std::remove(events_.begin(), events_.end(), ev), events_.end());
    forget_event_locked(ev);
    a.dead_eprobes.emplace_back(tp);
    a.dead_eprobe_events.emplace_back(ev);
}

} // namespace dprobe
