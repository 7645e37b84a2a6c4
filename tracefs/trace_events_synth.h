// Synthetic events, the runtime half (the kernel's trace_events_synth.c registration and
// trace_event_raw_event_synth): the event kind of the registry (trace_synth_ops), the
// lookup by name the hist actions use, and the writer they call.
//
// A synthetic event has no probe: it is written by a hist trigger's action (onmatch().trace(),
// onmax().trace()) with the values of its fields, one u64 each (a string field's value is
// the address of its bytes). Like any event it records in the arrays where it is enabled,
// subject to each array's filter, and runs its own triggers (a hist on a synthetic event is
// the latency histogram of the kernel's recipe).
//
// Invariants: a synthetic event referenced by an action (synth_event_get) is busy and cannot
// be deleted (EBUSY, as the kernel's se->ref); synth_event_trace is hot path (noexcept,
// no allocation, no lock) and reads only what stays valid while a reference is held.
#pragma once

#include "tracefs/trace_probe.h"
#include "tracefs/trace_synth_format.h"

#include <atomic>
#include <cstdint>
#include <string_view>

struct pt_regs;

namespace dprobe
{

struct trace_synth : trace_probe {
    // What the writer needs of each field, from the definition.
    struct slot {
        uint16_t offset; // in the record
        uint16_t size;   // stored bytes (1, 2, 4, 8; a static string's N)
        bool is_string, is_dynamic, is_stack;
    };
    slot slots[SYNTH_FIELDS_MAX] = {};
    unsigned n_fields = 0;
    // Hist actions and hist triggers using the event (the kernel's se->ref); guarded by the
    // synthetic events' table lock.
    int ref = 0;
};

// The synthetic event NAME with a reference taken (nullptr when there is none); the
// reference keeps it from deletion until synth_event_put.
trace_synth *synth_event_get(std::string_view name);
void synth_event_put(trace_synth *se);
bool synth_event_exists(std::string_view name);

// One synthetic event: VALS[i] is field i's value (a number, the address of a string's
// bytes, or of a stack variable's words: their count, then the addresses, ended by a zero
// word or SYNTH_STACK_WORDS_MAX words); REGS the registers of the hit that fired it
// (stacktrace triggers), may be null. Hot path.
void synth_event_trace(const trace_synth &se, const uint64_t *vals, const pt_regs *regs) noexcept;

} // namespace dprobe
