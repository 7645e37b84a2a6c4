// trace_marker and trace_marker_raw (the kernel's tracing_mark_write and
// tracing_mark_raw_write), and the C calls a program uses to write the same records
// (include/dprobe/tracefs.h: dprobe_trace_marker(), dprobe_trace_printk()).
//
// Text written to trace_marker becomes one `print` record (a newline is added when missing;
// longer writes are cut to what the largest record holds, TRACE_MARKER_MAX_SIZE bytes, as
// the kernel cuts them to its ring buffer's largest event). The
// record's pid is the writer's: the process that wrote the file (its comm read from /proc
// and kept in saved_cmdlines), or the calling thread for the C calls. It prints as
// "tracing_mark_write: TEXT" (file writes) or "CALLER: TEXT" (the C calls name their
// caller). trace_marker_raw takes binary data: a 4-byte id, then the payload (a `raw_data`
// record). A file write is served by one of dprobe's threads (the FUSE or socket server of a
// `dprobe record` or `attach` session), which are muted for their own work: the record is
// written for the writer all the same (ring_buffer_thread_speak).
#pragma once

#include "core/ring_buffer.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dprobe
{

class trace_array;

// The text of the largest print record: a ring-buffer payload less the record's header, the
// newline and the NUL.
inline constexpr size_t TRACE_MARKER_MAX_SIZE = k_rb_max_payload - 16 - 2;

// A write of trace_marker by process PID. Returns the bytes taken or -errno: -EINVAL when the
// array's markers option is off, -EBADF when tracing is off (the ring buffer took nothing).
long trace_marker_write(trace_array &tr, std::string_view text, int32_t pid);
// A write of trace_marker_raw. -EINVAL when shorter than the 4-byte id.
long trace_marker_raw_write(trace_array &tr, std::string_view data, int32_t pid);
// dprobe's own messages into a buffer (the kernel's trace_array_puts): the calling thread,
// ip = CALLER. Hot-path safe: no allocation. Returns whether it was recorded.
bool trace_marker_write_kernel(trace_array &tr, std::string_view text,
                               uintptr_t caller = 0) noexcept;

} // namespace dprobe
