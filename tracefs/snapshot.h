// The snapshot (the kernel's max_tr): a second buffer per trace array that a snapshot swaps
// with the live one, so the trace up to that moment is kept while tracing goes on.
//
//   echo 1 > snapshot   allocates the snapshot buffer if needed and takes a snapshot
//   echo 0 > snapshot   clears and frees it
//   echo 2 > snapshot   clears it (any number but 0 and 1)
//   cat snapshot        the snapshot buffer's trace; when empty, the kernel's help text
// The snapshot function command takes one from a probe handler (snapshot_from_probe).
#pragma once

#include <string>

namespace dprobe
{

class trace_array;

// The snapshot file's write (trace_types_lock held). 0 or -errno.
int snapshot_write(trace_array &tr, unsigned long value);
// Its text.
std::string snapshot_read(trace_array &tr);
// Allocates the snapshot buffer (the kernel's tracing_alloc_snapshot_instance). 0 or
// -ENOMEM / -ENOSPC. trace_types_lock held.
int snapshot_alloc(trace_array &tr);
// Takes a snapshot now (allocating the buffer first): the swap, then a wait for the writes
// in flight. -EBUSY for the top level while its buffer is exported to a consumer (`dprobe
// record`, `dprobe attach`). trace_types_lock held.
int snapshot_take(trace_array &tr);
// From a probe handler: swaps when no reader holds either buffer, else leaves the swap to
// the ftrace worker. Writes the kernel's "*** SNAPSHOT NOT ALLOCATED ***" lines and stops
// tracing when there is no snapshot buffer.
void snapshot_from_probe(trace_array &tr) noexcept;

} // namespace dprobe
