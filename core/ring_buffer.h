// The trace ring buffer: per-thread, lock-free, single-producer buffers made of pages, read
// by one consumer at a time (the `trace` iterator, `trace_pipe`, the agent's streamer).
//
// The kernel keeps one buffer per CPU because its writers are CPUs; ours are threads. Each
// thread that writes gets its own buffer on its first event (mmap'd: that can happen inside a
// probe handler run from a signal handler). When a thread exits its buffer stays readable;
// once it has been consumed or reset it is recycled for a new thread, so thread churn does
// not grow memory.
//
// Trace buffers (the kernel's struct trace_buffer): the per-thread buffers are grouped into
// trace buffers, one per trace array (the top-level tracing directory, each `instances/`
// directory) and one more for each array's snapshot. Each has its own tracing_on, overwrite
// mode, size and counts. The top-level one (ring_buffer_global()) always exists; the
// functions without a trace_buffer argument work on it. A thread has one buffer in each
// trace buffer it writes to; it finds it through a per-thread table indexed by the trace
// buffer's id, validated by the trace buffer's generation (which a swap or a free changes).
//
// Write side (probe hot path): noexcept, allocation-free, lock-free, async-signal-safe.
//   void *p = ring_buffer_reserve(tb, len); // nullptr: tracing off, or the event is dropped
//   ...fill p, run the event filter on it...
//   ring_buffer_commit(tb, p)  or  ring_buffer_discard(tb, p)
// Nesting: a signal handler on the same thread may write while an outer write is between
// reserve and commit (a probe hit in a signal handler). Nested records are placed after the
// outer one and become visible when the outermost write commits, like the kernel's nested
// contexts. A nested write that lands in the few instructions where the outer write is
// claiming its space, or deeper than k_rb_max_nesting, is dropped and counted in `dropped`.
//
// Modes (the kernel's `overwrite` option): overwrite (default) drops the oldest page when
// full and counts its unread events as `overrun`; discard drops new events when full and
// counts them in `dropped`.
//
// Read side: ordinary C++ (mutex, allocation). Readers copy a record out, then check that
// the writer did not recycle its page meanwhile (a seqlock per page); a reader that was
// lapped resynchronises on the oldest page and reports the events it lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe {

// Layout of a record in a page; the payload follows (8-byte aligned).
struct rb_event_header {
  uint16_t len;   // whole record, header included, multiple of 8
  uint8_t type;   // rb_type
  uint8_t flags;  // RB_FLAG_*
  uint16_t cpu;   // CPU the writer ran on
  uint16_t nr;    // index of the record within its page
  uint64_t ts;    // trace_clock stamp (ns, or cycles for counter/x86-tsc)
};
static_assert(sizeof(rb_event_header) == 16);

enum rb_type : uint8_t { RB_TYPE_DATA = 0, RB_TYPE_PADDING = 1 };
enum : uint8_t {
  RB_FLAG_NESTED = 0x01, // written by a signal handler interrupting another write
};

constexpr size_t k_rb_page_size = 4096;                                  // data bytes a page
constexpr size_t k_rb_max_payload = k_rb_page_size - sizeof(rb_event_header);
constexpr unsigned k_rb_max_nesting = 4;
constexpr size_t k_rb_default_size_kb = 1408; // the kernel's default buffer_size_kb
constexpr size_t k_rb_min_pages = 4;
// Trace buffers that can exist at once (the top level, instances and snapshots).
constexpr unsigned k_rb_max_trace_buffers = 128;

// ---- trace buffers ------------------------------------------------------------------------

struct trace_buffer;

// The top-level trace buffer.
trace_buffer *ring_buffer_global() noexcept;
// A new, empty trace buffer: tracing on, overwrite mode, the default size. nullptr when
// k_rb_max_trace_buffers are in use.
trace_buffer *ring_buffer_alloc();
// Frees TB (not the global one): its threads' buffers are unmapped and recycled, its id may be
// given to a later ring_buffer_alloc(). No writer may still be able to reserve on TB: the
// caller has unregistered everything that writes there and waited for it to quiesce.
void ring_buffer_free(trace_buffer *tb);
// Exchanges the contents (every thread's buffer and the counts) of A and B; their settings
// stay. The kernel's update_max_tr (the snapshot). A write that reserved on A before the swap
// commits in the buffer it started in (now B's): callers that need the swap to be exact wait
// for the writers in flight (synchronize_dispatch()).
void ring_buffer_swap(trace_buffer *a, trace_buffer *b);
// The same from a probe handler: lock-free apart from a try-lock of each buffer's reader
// lock; false (and nothing done) when a reader holds one.
bool ring_buffer_try_swap(trace_buffer *a, trace_buffer *b) noexcept;
// TB's index, 0 for the global one.
unsigned ring_buffer_id(const trace_buffer *tb) noexcept;

// ---- write side -----------------------------------------------------------------------

// Space for a LEN-byte payload on the calling thread's buffer of TB, 8-byte aligned; nullptr
// when tracing is off in TB, LEN is larger than k_rb_max_payload, the buffer is full in
// discard mode, the write is nested too deep, or no buffer could be mapped. The timestamp
// and CPU are taken here.
void *ring_buffer_reserve(trace_buffer *tb, size_t len) noexcept;
// Publishes a reserved record (when the outermost write on this thread commits).
void ring_buffer_commit(trace_buffer *tb, void *event) noexcept;
// Gives a reserved record back (a filter rejected it). The space is reused when nothing was
// reserved after it; otherwise it becomes padding that readers skip.
void ring_buffer_discard(trace_buffer *tb, void *event) noexcept;
// The same on the global trace buffer.
void *ring_buffer_reserve(size_t len) noexcept;
void ring_buffer_commit(void *event) noexcept;
void ring_buffer_discard(void *event) noexcept;
// Header of a reserved record (to adjust ts or flags before commit).
inline rb_event_header *ring_buffer_event_header(void *event) noexcept {
  return reinterpret_cast<rb_event_header *>(static_cast<char *>(event) -
                                             sizeof(rb_event_header));
}

// ---- control ------------------------------------------------------------------------------

// Each takes the trace buffer, or works on the global one without it.
void ring_buffer_set_tracing_on(trace_buffer *tb, bool on) noexcept; // the `tracing_on` file
bool ring_buffer_tracing_on(const trace_buffer *tb) noexcept;
void ring_buffer_set_overwrite(trace_buffer *tb, bool on) noexcept; // the `overwrite` option
bool ring_buffer_overwrite(const trace_buffer *tb) noexcept;
// Per-thread size (`buffer_size_kb`); rounded up to whole pages, at least k_rb_min_pages.
// Applies to buffers mapped or recycled afterwards; a live thread keeps its buffer.
// Returns 0 or -EINVAL (0 KB).
int ring_buffer_set_size_kb(trace_buffer *tb, size_t kb) noexcept;
size_t ring_buffer_size_kb(const trace_buffer *tb) noexcept;
// Empties every buffer and zeroes the counts (truncating `trace`).
void ring_buffer_reset(trace_buffer *tb);

void ring_buffer_set_tracing_on(bool on) noexcept;
bool ring_buffer_tracing_on() noexcept;
void ring_buffer_set_overwrite(bool on) noexcept;
bool ring_buffer_overwrite() noexcept;
int ring_buffer_set_size_kb(size_t kb) noexcept;
size_t ring_buffer_size_kb() noexcept;
void ring_buffer_reset();
// Selects the trace clock (one for the process) and resets every trace buffer (stamps of
// two clocks do not compare).
int ring_buffer_set_clock(std::string_view name);

// ---- read side ----------------------------------------------------------------------------

struct rb_record {
  uint64_t ts;
  int32_t tid;
  uint16_t cpu;
  uint8_t flags;
  uint64_t lost_before; // events of this thread lost (overwritten) right before this one
  const void *payload;  // valid until the reader's next call
  uint32_t len;         // payload bytes (rounded up to 8 by the writer's alignment)
  const char *comm;     // thread name recorded by the buffer ("" if unknown)
};

// Reads all threads' buffers of a trace buffer merged by timestamp. PEEK leaves the records in
// place (the `trace` file); CONSUME removes them (`trace_pipe`). One reader of a trace buffer
// runs at a time: the object holds its reader lock for its lifetime. It sees the buffers that
// existed when it was created.
class ring_buffer_reader {
public:
  enum mode { PEEK, CONSUME };
  explicit ring_buffer_reader(mode m, trace_buffer *tb = nullptr); // nullptr: the global one
  ~ring_buffer_reader();
  ring_buffer_reader(const ring_buffer_reader &) = delete;
  ring_buffer_reader &operator=(const ring_buffer_reader &) = delete;
  // The next record in timestamp order; false when every buffer is drained for now.
  bool next(rb_record &rec);

  struct impl;

private:
  impl *p_;
};

// Blocks until some buffer of TB holds a committed unread record or TIMEOUT_MS passes (<0: no
// limit). Returns true when data is there. Costs the writers nothing while no one waits.
bool ring_buffer_wait(trace_buffer *tb, int timeout_ms);
bool ring_buffer_wait(int timeout_ms);
// True when some buffer of TB holds a committed record not yet consumed.
bool ring_buffer_has_data(trace_buffer *tb);
bool ring_buffer_has_data();

struct rb_stats {
  int32_t tid = 0;
  uint64_t entries = 0; // committed, still in the buffer (not consumed, not overwritten)
  uint64_t written = 0; // committed since the last reset
  uint64_t read = 0;    // consumed by CONSUME readers
  uint64_t overrun = 0; // overwritten before being read (overwrite mode)
  uint64_t dropped = 0; // never written: full in discard mode, nested too deep, too big
  bool exited = false;  // the owning thread is gone
  char comm[17] = {};   // the thread's name as the buffer recorded it
};
// Per-buffer counts of TB since the last reset: live threads' buffers and exited threads'
// buffers not yet recycled (a CONSUME reader recycles an exited thread's buffer once it
// drained it).
std::vector<rb_stats> ring_buffer_thread_stats(trace_buffer *tb);
std::vector<rb_stats> ring_buffer_thread_stats();
// Totals of TB since the last reset: every buffer, recycled ones included, plus events dropped
// with no buffer to count them (a signal handler writing while its thread maps its buffer,
// or after the thread's buffer was retired at thread exit).
// With everything consumed: written == read + overrun; attempts == written + dropped.
rb_stats ring_buffer_stats(trace_buffer *tb);
rb_stats ring_buffer_stats();

// Number of per-thread buffers ever mapped (live, exited or free for reuse), in every trace
// buffer.
size_t ring_buffer_nr_buffers();

} // namespace dprobe
