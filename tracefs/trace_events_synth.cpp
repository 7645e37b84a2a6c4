// Synthetic events in the registry and their writer (see trace_events_synth.h). The grammar
// and text are trace_synth_format.cpp's (offline); here: the kind's operations table, the
// name table the hist actions look events up in, the synthetic_events file, and the record
// writer (the kernel's trace_event_raw_event_synth).
#include "tracefs/trace_events_synth.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/event_commit.h"
#include "tracefs/event_format.h"
#include "tracefs/event_trigger.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace dprobe
{
namespace
{

// The live synthetic events by name (the kernel's find_synth_event walks dyn_event_list).
std::mutex &synth_lock()
{
    static std::mutex m;
    return m;
}
std::map<std::string, trace_synth *, std::less<>> &synth_table()
{
    static std::map<std::string, trace_synth *, std::less<>> t;
    return t;
}

trace_probe *synth_alloc()
{
    return new trace_synth;
}

void synth_free(trace_probe *tp, std::unique_ptr<trace_event>)
{
    auto *se = static_cast<trace_synth *>(tp);
    {
        std::lock_guard<std::mutex> g(synth_lock());
        auto it = synth_table().find(se->def.event);
        if (it != synth_table().end() && it->second == se) synth_table().erase(it);
    }
    delete se;
}

int synth_create(trace_events &, trace_probe &tp, bool, probe_error &)
{
    auto &se = static_cast<trace_synth &>(tp);
    se.n_fields = 0;
    for (const probe_arg &a : se.def.args) {
        synth_field_info f = synth_field_of(a);
        se.slots[se.n_fields++] = {static_cast<uint16_t>(TRACE_ENTRY_HEADER_SIZE + a.offset),
                                   static_cast<uint16_t>(f.size), f.is_string, f.is_dynamic,
                                   f.is_stack};
    }
    std::lock_guard<std::mutex> g(synth_lock());
    if (synth_table().count(se.def.event)) return -EEXIST;
    synth_table().emplace(se.def.event, &se);
    return 0;
}

std::string synth_show_line(const trace_probe &tp)
{
    return tp.def.listing();
}

// synth_event_is_busy(): referenced by an action or a hist, or enabled / held.
bool synth_is_busy(const trace_probe &tp)
{
    std::lock_guard<std::mutex> g(synth_lock());
    return static_cast<const trace_synth &>(tp).ref != 0 || trace_probe_is_busy(tp);
}

// Nothing to arm: the event is written by the actions that reference it.
int synth_arm(trace_events &, std::span<trace_probe *const>, bool)
{
    return 0;
}
void synth_unregister(std::span<trace_probe *const>) {}

// ---- the writer (hot path) ----

DPROBE_NOPROBE size_t str_len(const char *s, size_t max) noexcept
{
    size_t n = 0;
    if (!s) return 0;
    while (n < max && s[n])
        n++;
    return n;
}

// The bytes of a stack value (trace_stack): its words up to the first zero.
DPROBE_NOPROBE size_t stack_len(const uint64_t *w) noexcept
{
    size_t n = 0;
    if (!w) return 0;
    while (n < SYNTH_STACK_WORDS_MAX && w[n])
        n++;
    return n * sizeof(uint64_t);
}

// Fills REC (LEN bytes: the fixed part then the dynamic strings and stacks) from VALS.
DPROBE_NOPROBE void synth_fill(const trace_synth &se, uint8_t *rec, size_t fixed,
                               const uint64_t *vals) noexcept
{
    trace_entry_header h{se.id, 0, 0, trace_current_tid()};
    std::memcpy(rec, &h, sizeof h);
    std::memset(rec + TRACE_ENTRY_HEADER_SIZE, 0, fixed - TRACE_ENTRY_HEADER_SIZE);
    size_t dyn = fixed;
    for (unsigned i = 0; i < se.n_fields; i++) {
        const trace_synth::slot &s = se.slots[i];
        uint8_t *p = rec + s.offset;
        if (s.is_stack) {
            const auto *w = reinterpret_cast<const uint64_t *>(static_cast<uintptr_t>(vals[i]));
            const size_t n = stack_len(w);
            if (n) std::memcpy(rec + dyn, w, n);
            uint32_t dl = static_cast<uint32_t>(dyn) | static_cast<uint32_t>(n) << 16;
            std::memcpy(p, &dl, 4);
            dyn += n;
            continue;
        }
        if (s.is_string) {
            const char *str = reinterpret_cast<const char *>(static_cast<uintptr_t>(vals[i]));
            if (s.is_dynamic) {
                size_t n = str_len(str, STR_VAR_LEN_MAX - 1);
                std::memcpy(rec + dyn, str ? str : "", n);
                rec[dyn + n] = 0;
                uint32_t dl = static_cast<uint32_t>(dyn) | static_cast<uint32_t>(n + 1) << 16;
                std::memcpy(p, &dl, 4);
                dyn += n + 1;
            } else {
                size_t n = str_len(str, s.size ? s.size - 1u : 0u);
                if (n) std::memcpy(p, str, n);
            }
            continue;
        }
        std::memcpy(p, &vals[i], s.size); // little endian: the value's low bytes
    }
}

// One record of SE in TR (OWN: it records there), for TR's triggers TL and the event probes
// EPROBES (once per hit, on the first array's record or on one built for them alone).
DPROBE_NOPROBE void synth_write_one(const trace_synth &se, const uint64_t *vals, size_t len,
                                    size_t fixed, trace_array &tr, bool own,
                                    const event_trigger_list *tl, const pt_regs *regs,
                                    const eprobe_list *eprobes) noexcept
{
    event_trigger_hit hit;
    if (unlikely(tl != nullptr)) {
        hit.tr = &tr;
        hit.event = se.event;
        hit.regs = regs;
        if (!tl->cond) {
            hit.cpu = ring_buffer_current_cpu();
            event_triggers_call(*tl, hit);
            tl = nullptr;
            if (!own && !eprobes) return;
        }
    }
    rb_stamp stamp;
    void *ev = own ? ring_buffer_reserve(tr.buffer, len, &stamp) : nullptr;
    alignas(8) uint8_t scratch[2048];
    uint8_t *rec;
    unsigned cpu;
    if (ev) {
        rec = static_cast<uint8_t *>(ev);
        cpu = stamp.cpu;
    } else if ((tl || eprobes) && len <= sizeof scratch) {
        rec = scratch;
        cpu = ring_buffer_current_cpu();
    } else {
        return;
    }
    synth_fill(se, rec, fixed, vals);
    if (eprobes)
        for (const trace_eprobe *ep : eprobes->probes)
            eprobe_write(*ep, rec, len, static_cast<uint16_t>(cpu), regs);
    uint64_t post = 0;
    if (unlikely(tl != nullptr)) {
        hit.rec = rec;
        hit.len = len;
        hit.cpu = cpu;
        post = event_triggers_call_rec(*tl, hit);
    }
    if (ev) event_filter_commit(tr, *se.event, ev, rec, len, cpu);
    if (unlikely(post != 0)) event_triggers_post_call(*tl, post, hit);
}

} // namespace

trace_synth *synth_event_get(std::string_view name)
{
    std::lock_guard<std::mutex> g(synth_lock());
    auto it = synth_table().find(name);
    if (it == synth_table().end()) return nullptr;
    it->second->ref++;
    return it->second;
}

void synth_event_put(trace_synth *se)
{
    if (!se) return;
    std::lock_guard<std::mutex> g(synth_lock());
    se->ref--;
}

bool synth_event_exists(std::string_view name)
{
    std::lock_guard<std::mutex> g(synth_lock());
    return synth_table().count(name) != 0;
}

DPROBE_NOPROBE void synth_event_trace(const trace_synth &se, const uint64_t *vals,
                                      const pt_regs *regs) noexcept
{
    const trace_event &e = *se.event;
    const uint64_t rmask = e.record_mask.load(std::memory_order_acquire);
    const uint64_t tmask = e.trigger_mask.load(std::memory_order_acquire);
    // Event probes on it (e:... synthetic/NAME) read its record as they read any event's.
    const eprobe_list *eprobes = e.eprobes.load(std::memory_order_acquire);
    uint64_t mask = rmask | tmask;
    if (!mask && !eprobes) return;
    const size_t fixed = se.fixed_size;
    size_t len = fixed;
    if (se.has_dyn)
        for (unsigned i = 0; i < se.n_fields; i++) {
            if (!se.slots[i].is_dynamic) continue;
            if (se.slots[i].is_stack)
                len +=
                    stack_len(reinterpret_cast<const uint64_t *>(static_cast<uintptr_t>(vals[i])));
            else
                len += str_len(reinterpret_cast<const char *>(static_cast<uintptr_t>(vals[i])),
                               STR_VAR_LEN_MAX - 1) +
                       1;
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
        if (own || tl || eprobes) {
            synth_write_one(se, vals, len, fixed, *tr, own, tl, regs, eprobes);
            eprobes = nullptr;
        }
    }
    if (unlikely(eprobes != nullptr))
        if (trace_array *top = trace_array_by_id(0))
            synth_write_one(se, vals, len, fixed, *top, false, nullptr, regs, eprobes);
}

// ---- the synthetic_events file and s: lines ----

int trace_events::run_synth_command(std::string_view raw, bool dynevent)
{
    synth_command cmd;
    synth_error err;
    int r = dynevent ? parse_synth_dynevent(raw, synth_event_exists, cmd, err)
                     : parse_synth_events_line(raw, synth_event_exists, cmd, err);
    if (r) {
        if (err.logged) {
            std::string_view c = raw;
            while (!c.empty() && (c[0] == ' ' || c[0] == '\t'))
                c.remove_prefix(1);
            errors_.append_message("synthetic_events", synth_err_text(err.err), std::string(c),
                                   err.pos);
        }
        return r;
    }
    if (cmd.kind == synth_command::type::none) return 0;
    if (cmd.kind == synth_command::type::remove) {
        delete_request req;
        req.group = SYNTH_SYSTEM;
        req.event = cmd.name;
        events_lock g(*this);
        if (cmd.name.empty()) return -ENOENT;
        return remove(req, ACCEPT_SYNTH);
    }
    std::vector<std::string> argv{std::string(raw)};
    events_lock g(*this);
    if (find(SYNTH_SYSTEM, cmd.def.event)) {
        errors_.append_message("synthetic_events", synth_err_text(synth_err::EVENT_EXISTS),
                               std::string(raw), 0);
        return -EEXIST;
    }
    return create(cmd.def, argv, "synthetic_events");
}

std::string trace_events::synth_listing() const
{
    events_lock g(*this);
    std::string s;
    for (const trace_probe *p : probes_)
        if (p->def.kind == probe_kind::synth) s += synth_show(p->def) + "\n";
    return s;
}

const dyn_event_operations trace_synth_ops = {
    .kind = probe_kind::synth,
    .accept = ACCEPT_SYNTH,
    .alloc = synth_alloc,
    .free = synth_free,
    .create = synth_create,
    .show = synth_show_line,
    .is_busy = synth_is_busy,
    .match = trace_probe_match,
    .arm = synth_arm,
    .unregister = synth_unregister,
    .waits_for_objects = nullptr,
    .rescan = nullptr,
    .list_line = nullptr,
    .reads = nullptr,
};

} // namespace dprobe
