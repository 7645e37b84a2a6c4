// Text framing of the `trace` and `trace_pipe` files over the ring buffer: the kernel's
// header block and the per-line context (kernel/trace/trace.c print_func_help_header_irq,
// trace_output.c trace_print_context; their text is trace_text.h's, offline, which `dprobe
// report` shares). The event's own text (`<event>: (<place>) arg=value ...`) comes from
// a callback owned by the event layer.
//
// A line:
//   "%16s-%-7d [%03d] %5s %5lu.%06lu: <payload>\n"
//    comm  tid   cpu  flags  seconds.microseconds (" %12llu" raw for counter/x86-tsc clocks)
//
// The five latency-flag columns (the kernel's irq-info option) are always ".....": user
// space has no irqs-off, need-resched, hardirq/softirq, preempt-depth or migrate-disable
// state to report.
//
// Lost events: when a thread's buffer overwrote records its reader had not seen, the line
// "TID:<tid> [LOST <n> EVENTS]" comes first, the kernel's "CPU:<n> [LOST <n> EVENTS]" with
// our per-thread buffers in place of per-CPU ones.
#pragma once

#include "core/ring_buffer.h"
#include "tracefs/trace_text.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace dprobe
{

// Formats an event's payload into BUF (at most LEN bytes, NUL-terminated when LEN > 0);
// returns the length of the full text, like snprintf (a larger result means: call again
// with a bigger buffer). The trailing newline is added by the caller if missing.
using trace_payload_fn = size_t (*)(char *buf, size_t len, const void *payload, size_t payload_len,
                                    void *ctx);

// The header for the current ring-buffer totals and online CPUs.
std::string trace_print_header();

// Thread names by tid: /proc/self/task/<tid>/comm when the thread lives (read once per
// cache lifetime), else the last name seen, else the name the ring buffer recorded, else
// "<...>" like the kernel's unknown pid.
class comm_cache
{
  public:
    const char *lookup(int32_t tid, const char *recorded);
    void clear() { names_.clear(); }

  private:
    struct entry {
        std::string name;
        bool live;
    };
    std::unordered_map<int32_t, entry> names_;
};

// Appends one record's text (lost-events line, context, payload, newline) to OUT.
void trace_print_record(std::string &out, const rb_record &rec, comm_cache &comms,
                        trace_payload_fn fn, void *ctx, bool ts_in_ns);

// The whole `trace` file: header and every record, merged by time, nothing consumed.
std::string trace_read(trace_payload_fn fn, void *ctx);

// `trace_pipe`: consumes up to MAX_RECORDS records, appending their lines to OUT. Returns
// the number consumed (0 when empty; block with ring_buffer_wait first). COMMS persists
// across calls of one open file.
size_t trace_pipe_read(std::string &out, size_t max_records, comm_cache &comms, trace_payload_fn fn,
                       void *ctx);

} // namespace dprobe
