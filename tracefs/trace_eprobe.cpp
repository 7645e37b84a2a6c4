// Event probes, `e[:[EGRP/][EEVENT]] GRP.EVENT [FETCHARGS] [if FILTER]` (the kernel's
// trace_eprobe.c): an event made of another event's records. Tracepoint probes,
// `t[:[GRP/][EVENT]] TRACEPOINT [FETCHARGS]` on a USDT static event (trace_usdt.cpp), are
// the same machinery with the kernel's tprobe syntax (probe_parse.cpp, parse_tprobe) and the
// probe's address in their records. When the attached event
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
// a handler that loaded an old list never reads freed memory. eprobe_write is hot path.
#include "tracefs/trace_probe.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/event_commit.h"
#include "tracefs/event_format.h"
#include "tracefs/event_trigger.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"

#include <algorithm>
#include <cerrno>

namespace dprobe
{

// The kernel's struct trace_eprobe.
struct trace_eprobe : trace_probe {
    trace_event *attached = nullptr;             // the event it reads
    std::unique_ptr<event_filter> attach_filter; // its "if FILTER" on that event's records
    // t events: where the attached record keeps its probe's address (__probe_ip), which
    // their own records carry as the kernel's tprobes carry the tracepoint's stub; 0: none.
    size_t src_ip_off = 0;
};

namespace
{

// ---- the writer (hot path) ----

// An event probe's record in array TR from the attached event's record in CTX (the
// kernel's __eprobe_trace_func()): its arguments from that record's fields, its filter in
// TR on the result. OWN false: only TR's triggers of the event (TL) want it, and it is built
// on the stack.
DPROBE_NOPROBE void eprobe_write_one(const trace_eprobe &ep, fetch_context &ctx, trace_array &tr,
                                     uint16_t cpu, bool own, const event_trigger_list *tl,
                                     const struct pt_regs *regs, uintptr_t ip) noexcept
{
    const trace_event &e = *ep.event;
    event_trigger_hit hit;
    if (unlikely(tl != nullptr)) {
        hit.tr = &tr;
        hit.event = ep.event;
        hit.regs = regs;
        hit.cpu = cpu;
        if (!tl->cond) {
            event_triggers_call(*tl, hit);
            tl = nullptr;
            if (!own) return;
        }
    }
    size_t len = ep.fixed_size;
    if (ep.has_dyn) len += trace_args_dynamic_size(ep.def.args, ctx);
    // Nested in the attached record's reservation: placed after it, published with it.
    void *ev = own ? ring_buffer_reserve(tr.buffer, len) : nullptr;
    alignas(8) uint8_t scratch[512];
    uint8_t *rec;
    if (ev)
        rec = static_cast<uint8_t *>(ev);
    else if (tl && len <= sizeof scratch)
        rec = scratch;
    else
        return;
    size_t used = probe_record_store(rec, len, ep.def, ctx, ep.id, trace_current_tid(), ip, 0);
    uint64_t post = 0;
    if (unlikely(tl != nullptr)) {
        hit.rec = rec;
        hit.len = used;
        post = event_triggers_call_rec(*tl, hit);
    }
    if (ev) event_filter_commit(tr, e, ev, rec, used, cpu);
    if (unlikely(post != 0)) event_triggers_post_call(*tl, post, hit);
}

} // namespace

DPROBE_NOPROBE void eprobe_write(const trace_eprobe &ep, const uint8_t *src, size_t src_len,
                                 uint16_t cpu, const struct pt_regs *regs) noexcept
{
    const trace_event &e = *ep.event;
    const uint64_t rmask = e.record_mask.load(std::memory_order_acquire);
    uint64_t tmask = e.trigger_mask.load(std::memory_order_acquire);
    if (unlikely(tmask != 0) && ring_buffer_thread_muted()) tmask = 0; // dprobe's own work
    uint64_t mask = rmask | tmask;
    if (!mask) return;
    event_filter::context fc;
    fc.cpu = cpu;
    if (ep.attach_filter && !ep.attach_filter->match(src, src_len, fc)) return;
    fetch_context ctx;
    ctx.event_rec = src;
    ctx.regs = regs; // t events: $stack, $stackN
    ctx.symbolize = trace_symbolize;
    uintptr_t ip = 0;
    if (ep.src_ip_off && ep.src_ip_off + sizeof(unsigned long) <= src_len) {
        unsigned long v;
        __builtin_memcpy(&v, src + ep.src_ip_off, sizeof v);
        ip = v;
    }
    while (mask) {
        const unsigned id = static_cast<unsigned>(__builtin_ctzll(mask));
        mask &= mask - 1;
        trace_array *tr = trace_array_by_id(id);
        if (unlikely(!tr)) continue;
        const event_trigger_list *tl =
            (tmask >> id) & 1 ? e.triggers[id].load(std::memory_order_acquire) : nullptr;
        bool own = (rmask >> id) & 1;
        if (own && unlikely(tr->event_slow()) && tr->event_ignore_this_task()) own = false;
        if (own || tl) eprobe_write_one(ep, ctx, *tr, cpu, own, tl, regs, ip);
    }
}

namespace
{

// Publishes ATTACHED's enabled event probes with EP added (or removed).
void publish(trace_event &attached, const trace_eprobe *ep, bool add)
{
    auto l = std::make_unique<eprobe_list>();
    if (const eprobe_list *old = attached.eprobes.load(std::memory_order_relaxed))
        l->probes = old->probes;
    if (add)
        l->probes.push_back(ep);
    else
        std::erase(l->probes, ep);
    attached.eprobes.store(l->probes.empty() ? nullptr : l.get(), std::memory_order_release);
    attached.eprobe_lists.push_back(std::move(l));
}

trace_probe *trace_eprobe_alloc()
{
    return new trace_eprobe;
}

// A deleted event probe (disabled) and its event stay with the event it reads until that
// is freed, as its handlers may still be reading them.
void trace_eprobe_free(trace_probe *tp, std::unique_ptr<trace_event> emptied)
{
    auto *ep = static_cast<trace_eprobe *>(tp);
    if (!emptied) { // not from a delete: nothing reads it
        delete ep;
        return;
    }
    trace_event &a = *ep->attached;
    a.dead_eprobes.emplace_back(ep, trace_probe_free);
    a.dead_eprobe_events.push_back(std::move(emptied));
}

int trace_eprobe_create(trace_events &te, trace_probe &tp, bool, probe_error &err)
{
    auto &ep = static_cast<trace_eprobe &>(tp);
    const probe_definition &d = ep.def;
    trace_event *attached = te.find_locked(d.place.object, d.place.symbol);
    if (!attached || attached->reads()) {
        err = probe_error::make(probe_err::BAD_ATTACH_EVENT, 1, 0, ENODEV);
        return -ENODEV;
    }
    if (!d.filter.empty()) {
        // The filter reads the attached event's fields (trace_eprobe_parse_filter()).
        filter_parse_error pe;
        ep.attach_filter = event_filter::compile(d.filter, attached->fields, pe);
        if (!ep.attach_filter) {
            bool positioned = pe.err != filter_err::NONE && pe.err != filter_err::ERRNO;
            te.errors().append_message("event filter parse error",
                                       filter_err_text(positioned ? pe.err : filter_err::ERRNO),
                                       d.filter, positioned ? size_t(pe.pos) : 0);
            return -EINVAL;
        }
    }
    if (probe_error e = trace_probe_resolve_args(ep)) {
        err = e;
        return -e.errnum;
    }
    ep.attached = attached;
    return 0;
}

std::string trace_eprobe_show(const trace_probe &tp)
{
    return tp.def.listing();
}

// An event probe is armed while its event is enabled in some array (or held by a soft-mode
// command): it is then published on the event it reads, which is armed (in soft mode) so
// that its handler runs on every record of that event.
int trace_eprobe_arm(trace_events &te, std::span<trace_probe *const> tps, bool on)
{
    for (size_t i = 0; i < tps.size(); ++i) {
        auto &ep = static_cast<trace_eprobe &>(*tps[i]);
        trace_event &a = *ep.attached;
        if (on) {
            if (!a.armed()) {
                if (int err = te.arm_locked(a, true)) {
                    trace_eprobe_arm(te, tps.first(i), false);
                    return err;
                }
            }
            a.soft++;
            publish(a, &ep, true);
        } else {
            publish(a, &ep, false);
            if (--a.soft == 0 && !a.armed())
                te.arm_locked(a, false); // (waits for the handlers still running)
        }
    }
    return 0;
}

void trace_eprobe_unregister(std::span<trace_probe *const>) {} // disabled: not published

const trace_event *trace_eprobe_reads(const trace_probe &tp)
{
    return static_cast<const trace_eprobe &>(tp).attached;
}

// A t event: an event probe on the USDT static event its tracepoint names (the parser found
// its group, trace_usdt.cpp made it), its $argK fields of that event's records.
int trace_tprobe_create(trace_events &te, trace_probe &tp, bool armed, probe_error &err)
{
    auto &ep = static_cast<trace_eprobe &>(tp);
    const trace_event *a = te.find_locked(ep.def.place.object, ep.def.place.symbol);
    if (!a || a->probes.front()->ops != &trace_usdt_ops) {
        err = probe_error::make(probe_err::NO_TRACEPOINT, 1, 0, EINVAL);
        return -EINVAL;
    }
    if (int r = trace_eprobe_create(te, tp, armed, err)) return r;
    ep.src_ip_off = probe_layout(a->probes.front()->def).ip_off;
    return 0;
}

} // namespace

const dyn_event_operations trace_eprobe_ops = {
    .kind = probe_kind::eprobe,
    .accept = ACCEPT_EPROBE,
    .alloc = trace_eprobe_alloc,
    .free = trace_eprobe_free,
    .create = trace_eprobe_create,
    .show = trace_eprobe_show,
    .is_busy = trace_probe_is_busy,
    .match = trace_probe_match,
    .arm = trace_eprobe_arm,
    .unregister = trace_eprobe_unregister,
    .waits_for_objects = nullptr,
    .rescan = nullptr,
    .list_line = nullptr,
    .reads = trace_eprobe_reads,
};

const dyn_event_operations trace_tprobe_ops = {
    .kind = probe_kind::tprobe,
    .accept = ACCEPT_FPROBE, // dynamic_events only
    .alloc = trace_eprobe_alloc,
    .free = trace_eprobe_free,
    .create = trace_tprobe_create,
    .show = trace_eprobe_show,
    .is_busy = trace_probe_is_busy,
    .match = trace_probe_match,
    .arm = trace_eprobe_arm,
    .unregister = trace_eprobe_unregister,
    .waits_for_objects = nullptr,
    .rescan = nullptr,
    .list_line = nullptr,
    .reads = trace_eprobe_reads,
};

} // namespace dprobe
