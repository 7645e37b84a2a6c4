// The snapshot buffer (see snapshot.h).
#include "tracefs/snapshot.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/ftrace_worker.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_iter.h"
#include "tracefs/trace_marker.h"
#include "tracefs/tracer.h"

#include <cerrno>

namespace dprobe
{

int snapshot_alloc(trace_array &tr)
{
    if (tr.max_buffer) return 0;
    trace_buffer *tb = ring_buffer_alloc();
    if (!tb) return -ENOSPC;
    ring_buffer_set_size_kb(tb, ring_buffer_size_kb(tr.buffer));
    ring_buffer_set_overwrite(tb, tr.opt(OPT_OVERWRITE));
    ring_buffer_set_cpumask(tb, ring_buffer_cpumask(tr.buffer));
    // The snapshot buffer is read, never written: the swap brings the live one's records.
    ring_buffer_set_tracing_on(tb, true);
    tr.max_buffer = tb;
    return 0;
}

int snapshot_take(trace_array &tr)
{
    if (int err = snapshot_alloc(tr)) return err;
    // The global buffer cannot be swapped while a consumer drains it (dprobe record):
    // -EBUSY, as the kernel answers a snapshot it cannot take.
    if (int err = ring_buffer_swap(tr.buffer, tr.max_buffer)) return err;
    trace_synchronize(); // writes that reserved before the swap are in the snapshot now
    return 0;
}

int snapshot_write(trace_array &tr, unsigned long value)
{
    switch (value) {
    case 0:
        if (tr.max_buffer) {
            trace_buffer *tb = tr.max_buffer;
            tr.max_buffer = nullptr;
            trace_synchronize(); // a probe's snapshot command may be swapping
            ring_buffer_free(tb);
        }
        return 0;
    case 1:
        return snapshot_take(tr);
    default:
        if (tr.max_buffer) ring_buffer_reset(tr.max_buffer);
        return 0;
    }
}

std::string snapshot_read(trace_array &tr)
{
    std::lock_guard<std::mutex> g(trace_types_lock());
    if (tr.max_buffer) {
        trace_iter it(tr, tr.max_buffer, false);
        // The header reads the buffer's counts: before the iterator takes the reader lock.
        std::string out = it.header();
        if (it.has_data()) {
            while (it.read(out, 4096)) {
            }
            return out;
        }
    }
    std::string s = "# tracer: ";
    s += tr.current_trace ? tr.current_trace->name : "nop";
    s += "\n#\n";
    s += tr.max_buffer ? "#\n# * Snapshot is allocated *\n#\n" : "#\n# * Snapshot is freed *\n#\n";
    s += "# Snapshot commands:\n"
         "# echo 0 > snapshot : Clears and frees snapshot buffer\n"
         "# echo 1 > snapshot : Allocates snapshot buffer, if not already allocated.\n"
         "#                      Takes a snapshot of the main buffer.\n"
         "# echo 2 > snapshot : Clears snapshot buffer (but does not allocate or free)\n"
         "#                      (Doesn't have to be '2' works with any number that\n"
         "#                       is not a '0' or '1')\n";
    return s;
}

DPROBE_NOPROBE void snapshot_from_probe(trace_array &tr) noexcept
{
    trace_buffer *max = tr.max_buffer;
    if (!max) {
        trace_marker_write_kernel(tr, "*** SNAPSHOT NOT ALLOCATED ***\n");
        trace_marker_write_kernel(tr, "*** stopping trace here!   ***\n");
        ring_buffer_set_tracing_on(tr.buffer, false);
        return;
    }
    if (!ring_buffer_try_swap(tr.buffer, max)) ftrace_worker_request(tr, FTRACE_WORK_SNAPSHOT);
}

} // namespace dprobe
