// The end of an event's record in one trace array, shared by the handlers of every event kind
// (trace_probe_handlers.cpp, trace_eprobe.cpp, trace_events_synth.cpp): the array's filter of
// the event decides between commit and discard, as the kernel's trace_event_buffer_commit
// after filter_check_discard. Hot path: inline, noexcept, allocation-free.
#pragma once

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_probe.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dprobe
{

// EV (reserved in TR's buffer) holds REC, LEN bytes, of EVENT, written on CPU. True when
// committed, false when the filter discarded it.
DPROBE_NOPROBE inline bool event_filter_commit(trace_array &tr, const trace_event &event, void *ev,
                                               const uint8_t *rec, size_t len,
                                               uint16_t cpu) noexcept
{
    const event_filter *f = event.filter[tr.id].load(std::memory_order_acquire);
    if (f) {
        event_filter::context fc;
        fc.cpu = cpu;
        if (!f->match(rec, len, fc)) {
            ring_buffer_discard(tr.buffer, ev);
            return false;
        }
    }
    ring_buffer_commit(tr.buffer, ev);
    return true;
}

} // namespace dprobe
