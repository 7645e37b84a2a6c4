// The record writer every dynamic event's handler ends in (the common part of the kernel's
// kprobe_trace_func / kretprobe_trace_func / fentry_trace_func / fexit_trace_func): reserve,
// common header, probe ip(s), the fetch args (their compiled form when they have one,
// fetch_fast.h, else the interpreter), then the event's filter decides between commit and
// discard. The kinds' handlers, which find their probe and build the fetch context, are in
// their files (trace_kprobe.cpp, trace_fprobe.cpp), the event probes' writer in
// trace_eprobe.cpp. Hot path: noexcept, allocation-free, lock-free, async-signal-safe,
// DPROBE_NOPROBE.
//
// Trace arrays: a record goes to the buffer of every array where its event records (its
// record_mask), each subject to that array's filter, set_event_pid and stacktrace option.
// Event triggers (event_trigger.h): an event with some (its trigger_mask) takes a second
// path, trace_probe_write_triggered, so an event without them pays one load.
#include "tracefs/trace_probe.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/event_commit.h"
#include "tracefs/event_format.h"
#include "tracefs/event_trigger.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/fetch_fast.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_array.h"

namespace dprobe
{

namespace
{

// Records up to this size are built on the stack when only triggers need them (tracing off,
// or the event not recording in that array: the kernel's temp_buffer); larger ones in the
// array's buffer, given back afterwards.
constexpr size_t k_trigger_scratch = 512;

// One record of TP in array TR's buffer: build it in place, run the event probes on it
// (EPROBES, once per hit), then TR's filter decides; OWN false: only the event probes
// wanted it, and it is given back.
DPROBE_NOPROBE void trace_probe_write_one(const trace_probe &tp, const fetch_context &ctx,
                                          uintptr_t ip, uintptr_t ret_ip, trace_array &tr, bool own,
                                          const eprobe_list *eprobes, bool slow) noexcept
{
    const probe_definition &def = tp.def;
    size_t len = tp.fixed_size;
    if (tp.has_dyn) len += trace_args_dynamic_size(def.args, ctx);
    rb_stamp stamp;
    void *ev = ring_buffer_reserve(tr.buffer, len, &stamp);
    if (!ev) return;
    auto *rec = static_cast<uint8_t *>(ev);
    size_t used;
    if (tp.fast) {
        probe_record_init(rec, def, tp.id, trace_current_tid(), ip, ret_ip);
        fetch_fast_run(tp.fast_args, ctx, rec);
        used = len;
    } else {
        used = probe_record_store(rec, len, def, ctx, tp.id, trace_current_tid(), ip, ret_ip);
    }
    const auto cpu = static_cast<uint16_t>(stamp.cpu);
    if (eprobes)
        for (const trace_eprobe *ep : eprobes->probes)
            eprobe_write(*ep, rec, used, cpu, ctx.regs);
    if (!own) {
        ring_buffer_discard(tr.buffer, ev);
        return;
    }
    if (!event_filter_commit(tr, *tp.event, ev, rec, used, cpu)) return;
    if (unlikely(slow) && tr.opt(OPT_STACKTRACE)) trace_stack_record_regs(tr, ctx.regs);
}

// trace_probe_write_one for an event with triggers: TL, TR's triggers of the event
// (nullptr: none), run around the record as event_trigger.h describes; a record only they
// need is built on the stack when it fits. Apart, so that the path without triggers keeps
// its stack frame.
__attribute__((noinline)) DPROBE_NOPROBE void
trace_probe_write_one_triggered(const trace_probe &tp, const fetch_context &ctx, uintptr_t ip,
                                uintptr_t ret_ip, trace_array &tr, bool own,
                                const eprobe_list *eprobes, bool slow,
                                const event_trigger_list *tl) noexcept
{
    event_trigger_hit hit;
    if (unlikely(tl != nullptr)) {
        hit.tr = &tr;
        hit.event = tp.event;
        hit.regs = ctx.regs;
        if (!tl->cond) {
            hit.cpu = ring_buffer_current_cpu();
            event_triggers_call(*tl, hit);
            tl = nullptr;
            if (!own && !eprobes) return;
        }
    }
    const probe_definition &def = tp.def;
    size_t len = tp.fixed_size;
    if (tp.has_dyn) len += trace_args_dynamic_size(def.args, ctx);
    rb_stamp stamp;
    void *ev = nullptr;
    alignas(8) uint8_t scratch[k_trigger_scratch];
    if (own || eprobes || len > sizeof scratch) ev = ring_buffer_reserve(tr.buffer, len, &stamp);
    uint8_t *rec;
    uint16_t cpu;
    if (likely(ev != nullptr)) {
        rec = static_cast<uint8_t *>(ev);
        cpu = static_cast<uint16_t>(stamp.cpu);
    } else {
        if (!tl || len > sizeof scratch) return;
        rec = scratch;
        cpu = static_cast<uint16_t>(ring_buffer_current_cpu());
    }
    size_t used;
    if (tp.fast) {
        probe_record_init(rec, def, tp.id, trace_current_tid(), ip, ret_ip);
        fetch_fast_run(tp.fast_args, ctx, rec);
        used = len;
    } else {
        used = probe_record_store(rec, len, def, ctx, tp.id, trace_current_tid(), ip, ret_ip);
    }
    if (eprobes)
        for (const trace_eprobe *ep : eprobes->probes)
            eprobe_write(*ep, rec, used, cpu, ctx.regs);
    uint64_t post = 0;
    if (unlikely(tl != nullptr)) {
        hit.rec = rec;
        hit.len = used;
        hit.cpu = cpu;
        post = event_triggers_call_rec(*tl, hit);
    }
    bool committed = false;
    if (ev) {
        if (own)
            committed = event_filter_commit(tr, *tp.event, ev, rec, used, cpu);
        else
            ring_buffer_discard(tr.buffer, ev);
    }
    if (committed && unlikely(slow) && tr.opt(OPT_STACKTRACE))
        trace_stack_record_regs(tr, ctx.regs);
    if (unlikely(post != 0)) event_triggers_post_call(*tl, post, hit);
}

// The path of an event with triggers in some array: every array where it records or has
// triggers. Triggers run whatever set_event_pid says, as in the kernel.
DPROBE_NOPROBE void trace_probe_write_triggered(const trace_probe &tp, const fetch_context &ctx,
                                                uintptr_t ip, uintptr_t ret_ip,
                                                uint64_t tmask) noexcept
{
    const trace_event &event = *tp.event;
    const eprobe_list *eprobes = event.eprobes.load(std::memory_order_acquire);
    const uint64_t rmask = event.record_mask.load(std::memory_order_acquire);
    uint64_t mask = rmask | tmask;
    while (mask) {
        const unsigned id = static_cast<unsigned>(__builtin_ctzll(mask));
        mask &= mask - 1;
        trace_array *tr = trace_array_by_id(id);
        if (unlikely(!tr)) continue;
        const event_trigger_list *tl =
            (tmask >> id) & 1 ? event.triggers[id].load(std::memory_order_acquire) : nullptr;
        const bool slow = tr->event_slow();
        bool own = (rmask >> id) & 1;
        if (own && unlikely(slow) && tr->event_ignore_this_task()) own = false;
        if (!own && !tl && !eprobes) continue;
        trace_probe_write_one_triggered(tp, ctx, ip, ret_ip, *tr, own, eprobes, slow, tl);
        eprobes = nullptr;
    }
    if (unlikely(eprobes != nullptr))
        if (trace_array *top = trace_array_by_id(0))
            trace_probe_write_one(tp, ctx, ip, ret_ip, *top, false, eprobes, false);
}

} // namespace

// One record in each array the event records to; the event probes on it run once, on the
// first of them (or on a record built in the top array's buffer and given back, when only
// they want it).
DPROBE_NOPROBE void trace_probe_write(const trace_probe &tp, const fetch_context &ctx, uintptr_t ip,
                                      uintptr_t ret_ip) noexcept
{
    const trace_event &event = *tp.event;
    // One load when the event has no triggers.
    if (const uint64_t tmask = event.trigger_mask.load(std::memory_order_acquire);
        unlikely(tmask != 0)) {
        // A muted thread is doing dprobe's own work (a session's start, its end): it
        // records nothing, and fires no trigger either (a hist would count dprobe's calls).
        if (!ring_buffer_thread_muted()) trace_probe_write_triggered(tp, ctx, ip, ret_ip, tmask);
        return;
    }
    const eprobe_list *eprobes = event.eprobes.load(std::memory_order_acquire);
    uint64_t mask = event.record_mask.load(std::memory_order_acquire);
    while (mask) {
        const unsigned id = static_cast<unsigned>(__builtin_ctzll(mask));
        mask &= mask - 1;
        trace_array *tr = trace_array_by_id(id);
        if (unlikely(!tr)) continue;
        // One load when the array has no pid list and no stacktrace option.
        const bool slow = tr->event_slow();
        if (unlikely(slow) && tr->event_ignore_this_task()) continue;
        trace_probe_write_one(tp, ctx, ip, ret_ip, *tr, true, eprobes, slow);
        eprobes = nullptr;
    }
    if (unlikely(eprobes != nullptr))
        if (trace_array *top = trace_array_by_id(0))
            trace_probe_write_one(tp, ctx, ip, ret_ip, *top, false, eprobes, false);
}

DPROBE_NOPROBE size_t trace_symbolize(char *buf, size_t len, uintptr_t addr)
{
    return sprint_symbol(buf, len, addr, false);
}

} // namespace dprobe
