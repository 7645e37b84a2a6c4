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
//
// Triggers: a trace_marker write (and the program's dprobe_trace_marker() and
// dprobe_trace_printk()) fires the triggers of events/ftrace/print/trigger in its array, as
// the kernel's tracing_mark_write fires its trace_marker_file's: on the record as written,
// before its newline is added (a filter or hist reads `buf` as it was written: "start" for
// `echo -n start`), and only when the record could be reserved (tracing on). The hit is the
// writer's: common_pid is its pid, and `comm`/`.execname` its name. A `stacktrace` trigger
// records the caller's stack for the C calls; for a file written by another process, whose
// stack dprobe cannot read, a one-frame `<stack trace>` of tracing_mark_write, the frame the
// kernel's stack starts with.
#pragma once

#include "core/ring_buffer.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

struct pt_regs;

namespace dprobe
{

class trace_array;
struct trace_event;

// The ftrace/print event (the kernel's tr->trace_marker_file's event): the one ftrace event
// with a trigger file (events/ftrace/print/{trigger,hist,hist_debug}). It is in no listing
// and cannot be enabled (only the files that own them write print records): the registry
// finds it by name for the trigger framework (trace_events::pin_event, soft_mode,
// find_event, has_event). Its fields: common_*, ip, buf (the text, a NUL-terminated string to
// the end of the record), CPU/cpu, COMM/comm.
trace_event &ftrace_print_event();

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
// The program's own markers (dprobe_trace_marker(), dprobe_trace_printk()): a write of
// trace_marker by the calling thread, ip = CALLER, firing ftrace/print's triggers (REGS: the
// registers at the C call's entry, for stacktrace). Hot-path safe.
bool trace_marker_write_user(trace_array &tr, std::string_view text, uintptr_t caller,
                             const struct pt_regs *regs) noexcept;

} // namespace dprobe
