// The trace ring buffer: per-thread, lock-free, single-producer buffers made of pages, read
// by in-process readers (the `trace` iterator, `trace_pipe`) and by a consumer that drains
// whole pages (`dprobe record`, from another process; the agent's streamer for `dprobe
// attach`). The layout is in ring_buffer_layout.h.
//
// The kernel keeps one buffer per CPU because its writers are CPUs; ours are threads. Each
// thread that writes gets its own buffer on its first event (mmap'd: that can happen inside a
// probe handler run from a signal handler), linked into a process-wide list the readers walk.
// When a thread exits its buffer stays readable; once it has been consumed or reset it is
// recycled for a new thread, so thread churn does not grow memory.
//
// Trace buffers (the kernel's struct trace_buffer): the per-thread buffers are grouped into
// trace buffers, one per trace array (the top-level tracing directory, each `instances/`
// directory) and one more for each array's snapshot. Each has its own tracing_on, overwrite
// mode, size and counts. The global one (ring_buffer_global()) always exists: the functions
// without a trace_buffer argument work on it, it is the one exported to a consumer, and its
// writers find their buffer with one thread-local load. A thread finds its buffer of another
// trace buffer through a per-thread table indexed by the trace buffer's id, valid while the
// slot's generation is the trace buffer's (a swap or a free changes it).
//
// Events are compact, like the kernel's: a 4-byte header with a 27-bit time delta, the
// payload, 8-byte alignment. A function-graph entry or exit takes 16 bytes.
//
// Write side (probe hot path): noexcept, allocation-free, lock-free, async-signal-safe.
//   void *p = ring_buffer_reserve(len, &stamp);   // nullptr: tracing off, or dropped
//   ...fill p, run the event filter on it...
//   ring_buffer_commit(p)  or  ring_buffer_discard(p)
// Nesting: a signal handler on the same thread may write while an outer write is between
// reserve and commit (a probe hit in a signal handler). Nested events are placed after the
// outer one and become visible when the outermost write commits, like the kernel's nested
// contexts. A nested write that lands in the few instructions where the outer write is
// claiming its space, or deeper than k_rb_max_nesting, is dropped and counted in `dropped`.
//
// Modes (the kernel's `overwrite` option): overwrite (default) drops the oldest page when
// full and counts its unread events as `overrun`; discard drops new events when full, counts
// them in `dropped` and leaves a LOST mark where they were dropped.
//
// Export (`dprobe record`, `dprobe attach`): the buffers live in a memfd that the consumer
// maps (the arena). Then what a thread wrote survives the process however it ends (_exit, a
// fatal signal, SIGKILL) until the consumer has copied it, as the kernel's buffer survives
// its tasks. A forked child gets a new arena of its own.
//
// Read side: ordinary C++ (mutex, allocation). Readers copy an event out, then check that
// the writer did not recycle its page meanwhile (a seqlock per page); a reader that was
// lapped resynchronises on the oldest page and reports the events it lost.
#pragma once

#include "core/ring_buffer_layout.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

constexpr size_t k_rb_page_size = rb::k_page_size;
// Largest payload: a page minus the event header and its length word.
constexpr size_t k_rb_max_payload = k_rb_page_size - 8;
constexpr unsigned k_rb_max_nesting = 4;
constexpr size_t k_rb_default_size_kb = 1408; // the kernel's default buffer_size_kb
constexpr size_t k_rb_min_pages = 4;
// Trace buffers that can exist at once (the global one, instances and snapshots).
constexpr unsigned k_rb_max_trace_buffers = 128;
// CPUs a `tracing_cpumask` can leave out (writers on higher-numbered CPUs always record).
constexpr unsigned k_rb_max_cpus = 1024;

// ---- trace buffers ------------------------------------------------------------------------

struct trace_buffer;

// The global trace buffer (the top-level tracing directory's).
trace_buffer *ring_buffer_global() noexcept;
// A new, empty trace buffer: tracing on, overwrite mode, the default size. nullptr when
// k_rb_max_trace_buffers are in use.
trace_buffer *ring_buffer_alloc();
// Frees TB (not the global one): its threads' buffers are recycled, its id may be given to a
// later ring_buffer_alloc(). No writer may still be able to reserve on TB: the caller has
// unregistered everything that writes there and waited for it to quiesce.
void ring_buffer_free(trace_buffer *tb);
// Exchanges the contents (every thread's buffer and the counts) of A and B; their settings
// stay. The kernel's update_max_tr (the snapshot). A write that reserved on A before the swap
// commits in the buffer it started in (now B's): callers that need the swap to be exact wait
// for the writers in flight (synchronize_dispatch()). Returns 0, or -EBUSY when one of them is
// the global buffer while it is exported (its buffers are the consumer's).
int ring_buffer_swap(trace_buffer *a, trace_buffer *b);
// The same from a probe handler: lock-free apart from a try-lock of each buffer's reader
// lock; false (and nothing done) when a reader holds one or the swap is refused.
bool ring_buffer_try_swap(trace_buffer *a, trace_buffer *b) noexcept;
// TB's index, 0 for the global one.
unsigned ring_buffer_id(const trace_buffer *tb) noexcept;

// ---- write side -----------------------------------------------------------------------

// The time stamp and CPU an event was given.
struct rb_stamp {
    uint64_t ts;
    unsigned cpu;
};

// Space for a LEN-byte payload on the calling thread's buffer, 8-byte aligned; nullptr when
// tracing is off, LEN is larger than k_rb_max_payload, the buffer is full in discard mode,
// the write is nested too deep, or no buffer could be mapped. The time stamp and CPU are
// taken here (and stored in *STAMP when given).
void *ring_buffer_reserve(size_t len, rb_stamp *stamp = nullptr) noexcept;
// The same for a small event: LEN a multiple of 4 up to rb::k_small_max (112); the payload
// is 4 bytes past an 8-aligned address, so its bytes 4.. are 8-aligned. 4 bytes of header.
void *ring_buffer_reserve_small(size_t len, rb_stamp *stamp = nullptr) noexcept;
// The CPU the calling thread runs on (rseq's cpu_id, else getcpu): what a record reserved
// now would carry. Hot path.
unsigned ring_buffer_current_cpu() noexcept;
// Publishes a reserved event (when the outermost write on this thread commits).
void ring_buffer_commit(void *event) noexcept;
// Gives a reserved event back (a filter rejected it). The space is reused when nothing was
// reserved after it; otherwise it becomes padding that readers skip.
void ring_buffer_discard(void *event) noexcept;
// The same on trace buffer TB (the global one takes the direct path above).
void *ring_buffer_reserve(trace_buffer *tb, size_t len, rb_stamp *stamp = nullptr) noexcept;
void ring_buffer_commit(trace_buffer *tb, void *event) noexcept;
void ring_buffer_discard(trace_buffer *tb, void *event) noexcept;

// The calling thread writes nothing until the matching unmute (calls nest): its reserves
// return nullptr, counted nowhere. For dprobe's own work on a program's thread.
// Async-signal-safe.
void ring_buffer_thread_mute(bool mute) noexcept;
bool ring_buffer_thread_muted() noexcept;
// While on (calls nest), the calling thread never waits for an exported buffer's consumer
// (CONSUMER_BLOCKING below): a full buffer drops its events. For a thread that holds a lock
// the consumer may take (the agent's across fork). Async-signal-safe.
void ring_buffer_thread_nowait(bool on) noexcept;
// Threads whose name (comm) starts with PREFIX when they first write never write: dprobe's
// own threads, which pass their name on to the threads they create. nullptr: none.
void ring_buffer_mute_threads_named(const char *prefix) noexcept;
// A write the calling thread makes on another's behalf: from ring_buffer_thread_speak(true)
// to the matching (false) it writes even when muted (a muted thread, or one of the threads
// named above). For the records a tracefs server thread writes for the process that wrote a
// file (trace_marker: the kernel records them in the writer's context, whoever serves the
// write). Calls nest; the mute state is as before once the outermost ends. Not
// async-signal-safe with respect to mute calls of the same thread.
void ring_buffer_thread_speak(bool on) noexcept;

// The CPU the calling thread runs on now (rseq's cpu_id, one load; else getcpu): the one a
// record it writes now is stamped with. The thread may move right after.
uint32_t raw_smp_processor_id() noexcept;

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
// The `tracing_cpumask` file: a writer records in TB only while it runs on a CPU whose bit
// is set (CPU n is bit n % 64 of word n / 64; words past MASK's end are zero). Every bit
// set, the default, costs writers nothing. Applies to writes that start afterwards.
void ring_buffer_set_cpumask(trace_buffer *tb, const std::vector<uint64_t> &mask) noexcept;
// k_rb_max_cpus / 64 words.
std::vector<uint64_t> ring_buffer_cpumask(const trace_buffer *tb);
// Empties every buffer of TB and zeroes its counts (truncating `trace`).
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

// ---- export -------------------------------------------------------------------------------

// Moves this process's buffers into an arena (a memfd) for a consumer to drain. Threads
// that already have a buffer move to a new one at their next event. WAKE_FD (an eventfd, or
// -1): written when a buffer gets half full while the consumer waits. Returns the memfd
// (close-on-exec, owned by the ring buffer) or -errno. Once exported, only the consumer
// recycles buffers and moves read positions; in-process CONSUME readers read like PEEK
// readers with a position of their own. A forked child gets a new arena at once
// (ring_buffer_export_fd() in the child). Without a WAKE_FD the consumer is woken through
// the arena's consumer_waiting word (rb_consumer::wait). CONSUMER_BLOCKING: in discard
// mode a writer whose buffer is full wakes the consumer and waits for room, up to a second
// without progress, rather than drop - from the first event on, before the consumer has
// mapped the arena (it turns this off when it stops draining: rb_consumer::set_blocking);
// a consumer may also turn it on later itself.
int ring_buffer_export(int wake_fd, bool consumer_blocking = false);
// The arena's memfd, or -1.
int ring_buffer_export_fd() noexcept;
// The process's state for the consumer (exit paths, fatal signals, exec). Async-signal-safe.
void ring_buffer_export_state(rb::arena_state state, int status) noexcept;
// Back to private buffers (threads move at their next event). The arena stays mapped (a
// writer may still be in it); its memfd is closed.
void ring_buffer_unexport();
// Unmaps every buffer, table and arena and deletes the thread-exit key: the end of dprobe
// in the process (core/unload.h), when no thread can write any more.
void ring_buffer_release_all() noexcept;

// ---- read side ----------------------------------------------------------------------------

struct rb_record {
    uint64_t ts;
    int32_t tid;
    uint16_t cpu;
    uint8_t flags;        // 0 (kept for the trace file's record layout)
    uint64_t lost_before; // events of this thread lost (overwritten or dropped) right before
    const void *payload;  // valid until the reader's next call
    uint32_t len;         // payload bytes (a multiple of 4)
    const char *comm;     // thread name recorded by the buffer ("" if unknown)
};

// Reads all threads' buffers of a trace buffer merged by timestamp. PEEK leaves the events in
// place (the `trace` file); CONSUME removes them (`trace_pipe`). One reader of a trace buffer
// runs at a time: the object holds its reader lock for its lifetime. It sees the buffers
// that existed when it was created.
class ring_buffer_reader
{
  public:
    enum mode { PEEK, CONSUME };
    explicit ring_buffer_reader(mode m, trace_buffer *tb = nullptr); // nullptr: the global one
    ~ring_buffer_reader();
    ring_buffer_reader(const ring_buffer_reader &) = delete;
    ring_buffer_reader &operator=(const ring_buffer_reader &) = delete;
    // The next event in timestamp order; false when every buffer is drained for now.
    bool next(rb_record &rec);

    struct impl;

  private:
    impl *p_;
};

// Blocks until some buffer of TB holds a committed unread event or TIMEOUT_MS passes (<0: no
// limit). Returns true when data is there. Costs the writers nothing while no one waits.
bool ring_buffer_wait(trace_buffer *tb, int timeout_ms);
bool ring_buffer_wait(int timeout_ms);
// True when some buffer of TB holds a committed event not yet consumed.
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
// Totals of TB since the last reset: every buffer, recycled ones included, plus events
// dropped with no buffer to count them (a signal handler writing while its thread maps its
// buffer, or after the thread's buffer was retired at thread exit).
// With everything consumed: written == read + overrun; attempts == written + dropped.
rb_stats ring_buffer_stats(trace_buffer *tb);
rb_stats ring_buffer_stats();

// Number of per-thread buffers ever mapped (live, exited or free for reuse), in every trace
// buffer.
size_t ring_buffer_nr_buffers();

} // namespace dprobe
