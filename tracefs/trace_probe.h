// Shared probe code of the dynamic events (the kernel's trace_probe.h and dyn_event's
// operations): the event and probe records every kind shares, the operations table each
// kind registers (dyn_event_operations), and the record writer their handlers call
// (trace_probe_handlers.cpp). One file per kind implements a table:
//   trace_kprobe.cpp   p/r on SYM[+OFF], lib:SYM[+OFF] and addresses (trace_kprobe_ops)
//   trace_uprobe.cpp   p/r on PATH:OFFSET[(REF)], served by a kprobe (trace_uprobe_ops)
//   trace_fprobe.cpp   f on function entries and exits (trace_fprobe_ops)
//   trace_eprobe.cpp   e on another event's records (trace_eprobe_ops), t on a USDT
//                      static event's (trace_tprobe_ops)
//   trace_usdt.cpp     the USDT static events themselves (trace_usdt_ops)
//   trace_events_synth.cpp  s: synthetic events, fired by hist actions (trace_synth_ops)
// The registry (trace_events.cpp) parses a command (probe_parse.h), picks the table of the
// definition's kind (dyn_event_ops_of) and goes through it for everything kind-specific.
// Invariant: everything here is guarded by trace_events' mutex, except what the handlers
// read (marked), which stays valid until the probe is unregistered.
#pragma once

#include "core/symbols.h"
#include "tracefs/event_filter.h"
#include "tracefs/fetch_fast.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_array.h" // TRACE_ARRAY_MAX

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dprobe
{

class trace_events;
struct trace_probe;
struct trace_eprobe;
struct event_trigger_list;

// The event probes (e events) enabled on an event, as its handlers see them.
struct eprobe_list {
    std::vector<const trace_eprobe *> probes;
};

// An event, with an enable and a filter per trace array (the kernel's trace_event_file):
// bit N of a mask is array N (trace_array.h; 0 is the top level).
struct trace_event {
    std::string group, name;
    uint16_t id = 0;
    std::vector<trace_probe *> probes; // never empty while the event is in the registry
    uint64_t enabled_mask = 0;         // arrays where it is enabled
    // Arrays holding it in soft mode (the enable_event/disable_event function commands),
    // with their users.
    uint64_t soft_mask = 0;
    std::map<unsigned, int> soft_refs;
    // Per array, read by the handlers. Old filters are kept (in `filters`) until the event
    // is freed, when no handler can run any more.
    std::atomic<const event_filter *> filter[TRACE_ARRAY_MAX] = {};
    std::vector<std::unique_ptr<event_filter>> filters;
    std::map<unsigned, std::string> filter_file; // absent: "none"
    std::vector<filter_field> fields;

    std::string filter_text(unsigned array) const
    {
        auto it = filter_file.find(array);
        return it == filter_file.end() ? "none\n" : it->second;
    }

    // The arrays its own records are written to (read by the handlers): those where it is
    // enabled, and those where a soft-mode command switched it on.
    std::atomic<uint64_t> record_mask{0};
    // Event probes reading it (trace_eprobe.cpp): the enabled ones (read by the handlers;
    // old lists kept like filters), how many are enabled, and the deleted ones with their
    // events, freed with this event when no handler can run.
    std::atomic<const eprobe_list *> eprobes{nullptr};
    std::vector<std::unique_ptr<eprobe_list>> eprobe_lists;
    int soft = 0;
    std::vector<std::unique_ptr<trace_probe, void (*)(trace_probe *)>> dead_eprobes;
    std::vector<std::unique_ptr<trace_event>> dead_eprobe_events;
    // Its probes are armed while it is enabled in some array, held in soft mode by a
    // command, or an event probe on it is enabled (the kernel's soft mode: triggers run, its
    // own records are not written).
    bool armed() const { return enabled_mask || soft_mask || soft > 0; }
    // Event triggers (event_trigger.h), read by the handlers: the arrays where the event has
    // some, and each array's published list (owned by event_trigger.cpp).
    std::atomic<uint64_t> trigger_mask{0};
    std::atomic<const event_trigger_list *> triggers[TRACE_ARRAY_MAX] = {};
    // Trigger-file operations in progress (trace_events::pin_event): not deleted meanwhile.
    int pins = 0;
    // Enabled or held somewhere: not deleted (EBUSY).
    bool in_use() const { return enabled_mask || soft_mask || pins > 0; }
    // The event an event probe's event reads; nullptr for every other kind.
    const trace_event *reads() const;
};

// What one kind of dynamic event does (the kernel's dyn_event_operations, with the
// enable path that its trace_event_class->reg callback holds). Called with the registry's
// lock held. Optional entries are nullptr.
struct dyn_event_operations {
    probe_kind kind;
    unsigned accept; // the ACCEPT_* bit of the files that take this kind
    // An empty probe of this kind (def, event and layout are set by the registry), and its
    // disposal once it is unregistered. EMPTIED is its event when it was the last probe of
    // it, already out of the registry: free deletes it, or keeps it while handlers may still
    // read it (event probes).
    trace_probe *(*alloc)();
    void (*free)(trace_probe *tp, std::unique_ptr<trace_event> emptied);
    // Readies TP (its def, event, id and layout set; its event armed when ARMED) and
    // registers what the kind registers on creation. Returns 0, or -errno with *ERR set when
    // the kernel logs the failure (its caller logs it; other messages the kind logs itself
    // in TE's error_log).
    int (*create)(trace_events &te, trace_probe &tp, bool armed, probe_error &err);
    // The dynamic_events line of TP (no newline): its definition only, as the kernel's
    // (a pending probe's state is in kprobes/list).
    std::string (*show)(const trace_probe &tp);
    // Enabled (or held): not deleted.
    bool (*is_busy)(const trace_probe &tp);
    // Whether a "-:..." request selects TP.
    bool (*match)(const delete_request &req, const trace_probe &tp);
    // Arms (registers, enables) or disarms the probes TPS, all of this kind or of kinds
    // with the same arm function: they go as one batch (one text patch for thousands of
    // kprobes). Arming is all or nothing; disarming always succeeds.
    int (*arm)(trace_events &te, std::span<trace_probe *const> tps, bool on);
    // Unregisters TPS (disarmed) before they are freed, one batch per function.
    void (*unregister)(std::span<trace_probe *const> tps);
    // Optional: probes on objects the process loads and unloads. waits_for_objects: TP is
    // pending or in a loaded library (the loader notifier must be installed while one is);
    // rescan: the objects changed, TP gets its kprobe if its object is (again) mapped.
    bool (*waits_for_objects)(const trace_probe &tp);
    void (*rescan)(trace_events &te, trace_probe &tp);
    // Optional: what the kprobes/list file lists for TP (a pending probe's [GONE] line).
    std::string (*list_line)(const trace_probe &tp);
    // Optional: the event TP reads (event probes).
    const trace_event *(*reads)(const trace_probe &tp);
};

// The kinds, in the order the registry goes through them: event probes are freed before the
// events they read, fprobes armed before kprobes (each kind's file defines its table).
extern const dyn_event_operations trace_eprobe_ops;
extern const dyn_event_operations trace_tprobe_ops; // t events (trace_eprobe.cpp)
// USDT static events (trace_usdt.cpp): made by the registry, in no dynamic_events file.
extern const dyn_event_operations trace_usdt_ops;
extern const dyn_event_operations trace_fprobe_ops;
extern const dyn_event_operations trace_kprobe_ops;
extern const dyn_event_operations trace_uprobe_ops;
extern const dyn_event_operations trace_synth_ops; // trace_events_synth.cpp
std::span<const dyn_event_operations *const> dyn_event_ops_list();
// The table of KIND.
const dyn_event_operations &dyn_event_ops_of(probe_kind kind);
// Its position in dyn_event_ops_list().
size_t dyn_event_ops_rank(const dyn_event_operations *ops);

// What every kind's probe holds (the kernel's struct trace_probe); each kind's struct
// (trace_kprobe.h, trace_fprobe.cpp, trace_eprobe.cpp) derives from it and adds its own.
struct trace_probe {
    const dyn_event_operations *ops = nullptr;
    probe_definition def;
    trace_event *event = nullptr; // read by the handlers
    uint16_t id = 0;              // read by the handlers
    bool has_dyn = false;         // read by the handlers
    uint32_t fixed_size = 0;      // read by the handlers
    // The arguments' fetch programs in their compiled form (fetch_fast.h), when every one
    // has one; read by the handlers.
    bool fast = false;
    std::vector<fetch_fast_store> fast_args;
};

// Frees TP through its kind's table (unique_ptr deleter of trace_event::dead_eprobes).
void trace_probe_free(trace_probe *tp);

// ---- shared steps of the kinds' create (trace_probe.cpp) ----

// @SYM and @+OFFSET arguments of TP resolved in the process (BAD_PROBE_ADDR otherwise).
probe_error trace_probe_resolve_args(trace_probe &tp);
// TP's arguments in their compiled form when every one has one (fetch_fast.h); before any
// handler can run.
void trace_probe_compile(trace_probe &tp);
// Tests: probes created while OFF run every argument through the interpreter.
void trace_probe_use_fast_stores(bool on);

// The parser's is_func_entry (parse_options) for p/r places: the kernel's
// kprobe_on_func_entry() (trace_kprobe.cpp).
bool trace_kprobe_on_func_entry(const probe_place &pl);

// Table entries every kind shares: is_busy (its event is enabled or held) and match
// (delete_matches on its definition).
// The functions a probe place's symbol SPEC ("name" or "lib:name") names, as a reference to
// the name binds (bindable_funcs: a compatibility version loses to another definition).
// When they are several functions, *ERR is the kernel's NON_UNIQ_SYMBOL with a detail that
// names each and how to pick one.
std::vector<sym_hit> trace_probe_func_places(const std::string &spec, probe_error *err);

bool trace_probe_is_busy(const trace_probe &tp);
bool trace_probe_match(const delete_request &req, const trace_probe &tp);

// ---- the record writer (hot path, trace_probe_handlers.cpp) ----

// One hit of TP: a record in every array its event records to (its record_mask), each
// subject to that array's filter, set_event_pid and stacktrace option, and the event probes
// enabled on its event run on it. IP and RET_IP are the record's __probe_ip /
// __probe_func and __probe_ret_ip.
void trace_probe_write(const trace_probe &tp, const fetch_context &ctx, uintptr_t ip,
                       uintptr_t ret_ip) noexcept;

// The event probes EP enabled on an event, on that event's record SRC (trace_eprobe.cpp): its
// "if" filter on SRC, then one record in each array where EP records, and its triggers
// (REGS: the registers of the source event's hit, for stacktrace triggers).
void eprobe_write(const trace_eprobe &ep, const uint8_t *src, size_t src_len, uint16_t cpu,
                  const struct pt_regs *regs) noexcept;

// sprint_symbol() as the records' symbolizer.
size_t trace_symbolize(char *buf, size_t len, uintptr_t addr);

} // namespace dprobe
