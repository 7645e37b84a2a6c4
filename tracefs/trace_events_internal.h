// Internals of the dynamic-event registry shared by its files: the event and probe records,
// and the probe handlers that write event records (trace_probe_handlers.cpp), which
// trace_events.cpp (the registry), trace_kprobe_place.cpp (where p/r events' kprobes go,
// pending probes) and trace_eprobe.cpp (event probes) register.
// Invariant: everything here is guarded by trace_events' mutex, except what the handlers
// read (marked), which stays valid until the probe is unregistered.
#pragma once

#include "core/symbols.h"
#include "tracefs/event_filter.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_array.h" // TRACE_ARRAY_MAX

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dprobe
{

struct trace_probe;

// What the probe handlers find from the fprobe / kprobe / kretprobe they are called with.
// Standard layout, so the owner is found with offsetof.
struct trace_probe_hooks {
    struct fprobe fp;
    struct kretprobe rp; // rp.kp is the kprobe of a 'p' event
    trace_probe *owner;
};

// The event probes (e events) enabled on an event, as its handlers see them.
struct eprobe_list {
    std::vector<const trace_probe *> probes;
};

// An event, with an enable and a filter per trace array (the kernel's trace_event_file):
// bit N of a mask is array N (trace_array.h; 0 is the top level).
struct trace_event {
    std::string group, name;
    uint16_t id = 0;
    std::vector<trace_probe *> probes;
    uint64_t enabled_mask = 0; // arrays where it is enabled
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
    // Event probes on it (trace_eprobe.cpp): the enabled ones (read by the handlers; old
    // lists kept like filters), how many are enabled, and the deleted ones with their events,
    // freed with this event when no handler can run.
    std::atomic<const eprobe_list *> eprobes{nullptr};
    std::vector<std::unique_ptr<eprobe_list>> eprobe_lists;
    int soft = 0;
    std::vector<std::unique_ptr<trace_probe>> dead_eprobes;
    std::vector<std::unique_ptr<trace_event>> dead_eprobe_events;
    // Its probes are armed while it is enabled in some array, held in soft mode by a
    // command, or an event probe on it is enabled (the kernel's soft mode: triggers run, its
    // own records are not written).
    bool armed() const { return enabled_mask || soft_mask || soft > 0; }
    // Enabled or held somewhere: not deleted (EBUSY).
    bool in_use() const { return enabled_mask || soft_mask; }

    // An event probe's event: the event it reads, and its "if FILTER" on that event's
    // records.
    trace_event *attached = nullptr;
    std::unique_ptr<event_filter> attach_filter;
};

// An argument the record writer stores without the fetch-arg interpreter: a register, an
// immediate or a saved entry argument, stored as is or dereferenced once (the shapes
// `$argN`, `%reg`, `$retval`, `\imm`, `+off(%reg)` of 1-8 bytes). Same results as the
// interpreter's (fetch_run), checked by the tests; ~2 ns instead of ~6 ns per argument.
struct fast_arg {
    enum : uint8_t { REGS, IMM, EDATA } src;
    bool mem; // read SIZE bytes at value + mem_off (a fault leaves zeroes)
    uint8_t size;
    uint16_t dest;  // offset in the record
    uint32_t param; // pt_regs byte offset (REGS), entry-data offset (EDATA)
    int64_t mem_off;
    uint64_t imm;
};

struct trace_probe {
    trace_probe_hooks hooks{};
    probe_definition def;
    trace_event *event = nullptr;
    uint16_t id = 0;
    bool has_dyn = false;
    uint32_t fixed_size = 0;
    bool kprobe_registered = false;
    bool fprobe_registered = false;
    // A p/r event on an object the process has not mapped (lib:sym, path:offset): no kprobe
    // yet. It is registered when the object is loaded, and again after a dlclose/dlopen
    // (trace_kprobe_place.cpp).
    bool pending = false;
    object_ptr obj; // the object a registered kprobe is in (to see it unloaded)
    // A p/r probe pending or in a loaded library: the loader notifier must be installed
    // while one lives (trace_events::update_dl_notifier). Fixed once registered: pending
    // and library probes go back and forth between the two.
    bool needs_dl_notifier() const
    {
        return def.kind != probe_kind::fprobe && def.kind != probe_kind::eprobe &&
               (pending || (obj && !obj->is_main));
    }
    uintptr_t sem = 0; // the SDT semaphore this enabled probe incremented (the uprobe REF)
    std::atomic<unsigned long> nhit{0};
    std::string symbol; // kprobe symbol_name / fprobe filter
    bool fast = false;  // every argument is a fast_arg
    std::vector<fast_arg> fast_args;
};

// ---- the record writers (hot path, trace_probe_handlers.cpp) ----

// Compiles DEF's arguments into fast_args when every one has a fast shape.
bool compile_fast_args(const probe_definition &def, std::vector<fast_arg> &out);

int fentry_handler(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                   struct ftrace_regs *fregs, void *data);
int fexit_entry_handler(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                        struct ftrace_regs *fregs, void *data);
void fexit_handler(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                   struct ftrace_regs *fregs, void *data);
int kprobe_pre_handler(struct kprobe *kp, struct pt_regs *regs);
int kretprobe_entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs);
int kretprobe_handler(struct kretprobe_instance *ri, struct pt_regs *regs);

// sprint_symbol() as the records' symbolizer.
size_t trace_symbolize(char *buf, size_t len, uintptr_t addr);

} // namespace dprobe
