// The probe handlers of dynamic events: each builds its event's record in place in the ring
// buffer (the kernel's kprobe_trace_func / kretprobe_trace_func / fentry_trace_func /
// fexit_trace_func): reserve, common header, probe ip(s), the fetch args, then the event's
// filter decides between commit and discard. Hot path: noexcept, allocation-free,
// lock-free, async-signal-safe, DPROBE_NOPROBE.
//
// Trace arrays: a record goes to the buffer of every array where its event records (its
// record_mask), each subject to that array's filter, set_event_pid and stacktrace option.
#include "tracefs/trace_events_internal.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_array.h"

#include "arch/x86_64/uaccess.h"

#include <unistd.h>

#include <cstring>

namespace dprobe
{

namespace
{

trace_probe *owner_of(struct fprobe *fp) noexcept
{
    return reinterpret_cast<trace_probe_hooks *>(reinterpret_cast<char *>(fp) -
                                                 offsetof(trace_probe_hooks, fp))
        ->owner;
}

trace_probe *owner_of(struct kretprobe *rp) noexcept
{
    return reinterpret_cast<trace_probe_hooks *>(reinterpret_cast<char *>(rp) -
                                                 offsetof(trace_probe_hooks, rp))
        ->owner;
}

trace_probe *owner_of(struct kprobe *kp) noexcept
{
    static_assert(offsetof(struct kretprobe, kp) == 0);
    return owner_of(reinterpret_cast<struct kretprobe *>(kp));
}

DPROBE_NOPROBE inline int32_t current_tid() noexcept { return trace_current_tid(); }

} // namespace

bool compile_fast_args(const probe_definition &def, std::vector<fast_arg> &out)
{
    static constexpr uint32_t arg_regs[] = {offsetof(pt_regs, di), offsetof(pt_regs, si),
                                            offsetof(pt_regs, dx), offsetof(pt_regs, cx),
                                            offsetof(pt_regs, r8), offsetof(pt_regs, r9)};
    size_t args_off = probe_layout(def).args_off;
    out.clear();
    for (const probe_arg &a : def.args) {
        if (a.count || a.dynamic) return false;
        const fetch_insn *c = a.prog.code.data();
        if (c->op == fetch_op::NOP_SYMBOL) c++;
        fast_arg f{};
        switch (c->op) {
        case fetch_op::REG:
            if (c->param > offsetof(pt_regs, ss) || c->param % sizeof(long)) return false;
            f.src = fast_arg::REGS;
            f.param = c->param;
            break;
        case fetch_op::ARG:
            if (c->param >= std::size(arg_regs)) return false;
            f.src = fast_arg::REGS;
            f.param = arg_regs[c->param];
            break;
        case fetch_op::RETVAL:
            f.src = fast_arg::REGS;
            f.param = offsetof(pt_regs, ax);
            break;
        case fetch_op::STACKP:
            f.src = fast_arg::REGS;
            f.param = offsetof(pt_regs, sp);
            break;
        case fetch_op::IMM:
            f.src = fast_arg::IMM;
            f.imm = c->immediate;
            break;
        case fetch_op::EDATA:
            f.src = fast_arg::EDATA;
            f.param = static_cast<uint32_t>(c->offset);
            break;
        default:
            return false;
        }
        const fetch_insn *st = c + 1;
        if (st->op == fetch_op::ST_RAW) {
            f.mem = false;
        } else if (st->op == fetch_op::ST_MEM || st->op == fetch_op::ST_UMEM) {
            f.mem = true;
            f.mem_off = st->offset;
        } else {
            return false;
        }
        if ((st + 1)->op != fetch_op::END || !st->size || st->size > 8 ||
            a.prog.field_size != st->size)
            return false;
        f.size = st->size;
        f.dest = static_cast<uint16_t>(args_off + a.offset);
        out.push_back(f);
    }
    return true;
}

namespace
{

DPROBE_NOPROBE void store_fast_args(const trace_probe &tp, const fetch_context &ctx,
                                    uint8_t *rec) noexcept
{
    const auto *regs = reinterpret_cast<const char *>(ctx.regs);
    for (const fast_arg &f : tp.fast_args) {
        unsigned long v = 0;
        switch (f.src) {
        case fast_arg::REGS:
            std::memcpy(&v, regs + f.param, sizeof(v));
            break;
        case fast_arg::IMM:
            v = f.imm;
            break;
        case fast_arg::EDATA:
            if (!ctx.edata) {
                std::memset(rec + f.dest, 0, f.size);
                continue;
            }
            std::memcpy(&v, static_cast<const char *>(ctx.edata) + f.param, sizeof(v));
            break;
        }
        uint8_t *dst = rec + f.dest;
        if (f.mem) {
            if (copy_from_user_nofault(dst, reinterpret_cast<const void *>(v + f.mem_off), f.size))
                std::memset(dst, 0, f.size);
        } else {
            switch (f.size) { // little-endian: the low bytes
            case 8:
                std::memcpy(dst, &v, 8);
                break;
            case 4: {
                uint32_t x = uint32_t(v);
                std::memcpy(dst, &x, 4);
                break;
            }
            case 2: {
                uint16_t x = uint16_t(v);
                std::memcpy(dst, &x, 2);
                break;
            }
            default:
                std::memcpy(dst, &v, f.size);
                break;
            }
        }
    }
}

// An event probe's record in array TR from the attached event's record SRC (the kernel's
// __eprobe_trace_func()): its arguments from SRC's fields, its filter in TR on the result.
DPROBE_NOPROBE void eprobe_write_one(const trace_probe &ep, fetch_context &ctx, trace_array &tr,
                                     uint16_t cpu) noexcept
{
    const trace_event &e = *ep.event;
    size_t len = ep.fixed_size;
    if (ep.has_dyn)
        len += trace_args_dynamic_size(ep.def.args, ctx);
    // Nested in the attached record's reservation: placed after it, published with it.
    void *ev = ring_buffer_reserve(tr.buffer, len);
    if (!ev)
        return;
    auto *rec = static_cast<uint8_t *>(ev);
    size_t used = probe_record_store(rec, len, ep.def, ctx, ep.id, current_tid(), 0, 0);
    const event_filter *f = e.filter[tr.id].load(std::memory_order_acquire);
    event_filter::context fc;
    fc.cpu = cpu;
    if (f && !f->match(rec, used, fc)) {
        ring_buffer_discard(tr.buffer, ev);
        return;
    }
    ring_buffer_commit(tr.buffer, ev);
}

// An event probe's records from the attached event's record SRC: its "if" filter on SRC,
// then one record in each array where the event probe records.
DPROBE_NOPROBE void eprobe_write(const trace_probe &ep, const uint8_t *src, size_t src_len,
                                 uint16_t cpu) noexcept
{
    const trace_event &e = *ep.event;
    uint64_t mask = e.record_mask.load(std::memory_order_acquire);
    if (!mask)
        return;
    event_filter::context fc;
    fc.cpu = cpu;
    if (e.attach_filter && !e.attach_filter->match(src, src_len, fc))
        return;
    fetch_context ctx;
    ctx.event_rec = src;
    ctx.symbolize = trace_symbolize;
    while (mask) {
        const unsigned id = static_cast<unsigned>(__builtin_ctzll(mask));
        mask &= mask - 1;
        trace_array *tr = trace_array_by_id(id);
        if (unlikely(!tr) || (unlikely(tr->event_slow()) && tr->event_ignore_this_task()))
            continue;
        eprobe_write_one(ep, ctx, *tr, cpu);
    }
}

// One record of TP in array TR's buffer: build it in place, run the event probes on it
// (EPROBES, once per hit), then TR's filter decides; OWN false: only the event probes
// wanted it, and it is given back.
DPROBE_NOPROBE void trace_probe_write_one(const trace_probe &tp, const fetch_context &ctx,
                                          uintptr_t ip, uintptr_t ret_ip, trace_array &tr,
                                          bool own, const eprobe_list *eprobes,
                                          bool slow) noexcept
{
    const probe_definition &def = tp.def;
    size_t len = tp.fixed_size;
    if (tp.has_dyn)
        len += trace_args_dynamic_size(def.args, ctx);
    rb_stamp stamp;
    void *ev = ring_buffer_reserve(tr.buffer, len, &stamp);
    if (!ev)
        return;
    auto *rec = static_cast<uint8_t *>(ev);
    size_t used;
    if (tp.fast) {
        probe_record_init(rec, def, tp.id, current_tid(), ip, ret_ip);
        store_fast_args(tp, ctx, rec);
        used = len;
    } else {
        used = probe_record_store(rec, len, def, ctx, tp.id, current_tid(), ip, ret_ip);
    }
    const auto cpu = static_cast<uint16_t>(stamp.cpu);
    if (eprobes)
        for (const trace_probe *ep : eprobes->probes)
            eprobe_write(*ep, rec, used, cpu);
    if (!own) {
        ring_buffer_discard(tr.buffer, ev);
        return;
    }
    const event_filter *f = tp.event->filter[tr.id].load(std::memory_order_acquire);
    if (f) {
        event_filter::context fc;
        fc.cpu = cpu;
        if (!f->match(rec, used, fc)) {
            ring_buffer_discard(tr.buffer, ev);
            return;
        }
    }
    ring_buffer_commit(tr.buffer, ev);
    if (unlikely(slow) && tr.opt(OPT_STACKTRACE))
        trace_stack_record_regs(tr, ctx.regs);
}

// The common part of every handler: one record in each array the event records to; the
// event probes on it run once, on the first of them (or on a record built in the top
// array's buffer and given back, when only they want it).
DPROBE_NOPROBE void trace_probe_write(const trace_probe &tp, const fetch_context &ctx, uintptr_t ip,
                                      uintptr_t ret_ip) noexcept
{
    const trace_event &event = *tp.event;
    const eprobe_list *eprobes = event.eprobes.load(std::memory_order_acquire);
    uint64_t mask = event.record_mask.load(std::memory_order_acquire);
    while (mask) {
        const unsigned id = static_cast<unsigned>(__builtin_ctzll(mask));
        mask &= mask - 1;
        trace_array *tr = trace_array_by_id(id);
        if (unlikely(!tr))
            continue;
        // One load when the array has no pid list and no stacktrace option.
        const bool slow = tr->event_slow();
        if (unlikely(slow) && tr->event_ignore_this_task())
            continue;
        trace_probe_write_one(tp, ctx, ip, ret_ip, *tr, true, eprobes, slow);
        eprobes = nullptr;
    }
    if (unlikely(eprobes != nullptr))
        if (trace_array *top = trace_array_by_id(0))
            trace_probe_write_one(tp, ctx, ip, ret_ip, *top, false, eprobes, false);
}

} // namespace

DPROBE_NOPROBE size_t trace_symbolize(char *buf, size_t len, uintptr_t addr)
{
    return sprint_symbol(buf, len, addr, false);
}

DPROBE_NOPROBE int fentry_handler(struct fprobe *fp, unsigned long ip, unsigned long,
                                  struct ftrace_regs *fregs, void *)
{
    const trace_probe &tp = *owner_of(fp);
    fetch_context ctx;
    ctx.regs = &fregs->regs;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tp, ctx, ip, 0);
    return 0;
}

DPROBE_NOPROBE int fexit_entry_handler(struct fprobe *fp, unsigned long, unsigned long,
                                       struct ftrace_regs *fregs, void *data)
{
    store_entry_args(owner_of(fp)->def.entry_args, &fregs->regs, data);
    return 0;
}

DPROBE_NOPROBE void fexit_handler(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                                  struct ftrace_regs *fregs, void *data)
{
    const trace_probe &tp = *owner_of(fp);
    fetch_context ctx;
    ctx.regs = &fregs->regs;
    ctx.edata = data;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tp, ctx, ip, ret_ip);
}

DPROBE_NOPROBE int kprobe_pre_handler(struct kprobe *kp, struct pt_regs *regs)
{
    trace_probe &tp = *owner_of(kp);
    tp.nhit.fetch_add(1, std::memory_order_relaxed);
    fetch_context ctx;
    ctx.regs = regs;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tp, ctx, reinterpret_cast<uintptr_t>(kp->addr), 0);
    return 0;
}

DPROBE_NOPROBE int kretprobe_entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    store_entry_args(owner_of(get_kretprobe(ri))->def.entry_args, regs, ri->data);
    return 0;
}

DPROBE_NOPROBE int kretprobe_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    struct kretprobe *rp = get_kretprobe(ri);
    trace_probe &tp = *owner_of(rp);
    tp.nhit.fetch_add(1, std::memory_order_relaxed);
    fetch_context ctx;
    ctx.regs = regs;
    ctx.edata = ri->data;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tp, ctx, reinterpret_cast<uintptr_t>(rp->kp.addr),
                      reinterpret_cast<uintptr_t>(ri->ret_addr));
    return 0;
}

} // namespace dprobe
