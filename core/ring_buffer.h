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

namespace dprobe {

constexpr size_t k_rb_page_size = rb::k_page_size;
// Largest payload: a page minus the event header and its length word.
constexpr size_t k_rb_max_payload = k_rb_page_size - 8;
constexpr unsigned k_rb_max_nesting = 4;
constexpr size_t k_rb_default_size_kb = 1408; // the kernel's default buffer_size_kb
constexpr size_t k_rb_min_pages = 4;

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
// Publishes a reserved event (when the outermost write on this thread commits).
void ring_buffer_commit(void *event) noexcept;
// Gives a reserved event back (a filter rejected it). The space is reused when nothing was
// reserved after it; otherwise it becomes padding that readers skip.
void ring_buffer_discard(void *event) noexcept;

// The calling thread writes nothing until the matching unmute (calls nest): its reserves
// return nullptr, counted nowhere. For dprobe's own work on a program's thread.
// Async-signal-safe.
void ring_buffer_thread_mute(bool mute) noexcept;
bool ring_buffer_thread_muted() noexcept;
// Threads whose name (comm) starts with PREFIX when they first write never write: dprobe's
// own threads, which pass their name on to the threads they create. nullptr: none.
void ring_buffer_mute_threads_named(const char *prefix) noexcept;

// ---- control ------------------------------------------------------------------------------

void ring_buffer_set_tracing_on(bool on) noexcept; // the `tracing_on` file
bool ring_buffer_tracing_on() noexcept;
void ring_buffer_set_overwrite(bool on) noexcept;  // the `overwrite` trace option
bool ring_buffer_overwrite() noexcept;
// Per-thread size (`buffer_size_kb`); rounded up to whole pages, at least k_rb_min_pages.
// Applies to buffers mapped or recycled afterwards; a live thread keeps its buffer.
// Returns 0 or -EINVAL (0 KB).
int ring_buffer_set_size_kb(size_t kb) noexcept;
size_t ring_buffer_size_kb() noexcept;
// Empties every buffer and zeroes the counts (truncating `trace`).
void ring_buffer_reset();
// Selects the trace clock and resets the buffers (stamps of two clocks do not compare).
int ring_buffer_set_clock(std::string_view name);

// ---- export -------------------------------------------------------------------------------

// Moves this process's buffers into an arena (a memfd) for a consumer to drain. Threads
// that already have a buffer move to a new one at their next event. WAKE_FD (an eventfd, or
// -1): written when a buffer gets half full while the consumer waits. Returns the memfd
// (close-on-exec, owned by the ring buffer) or -errno. Once exported, only the consumer
// recycles buffers and moves read positions; in-process CONSUME readers read like PEEK
// readers with a position of their own. A forked child gets a new arena at once
// (ring_buffer_export_fd() in the child). CONSUMER_BLOCKING (with a WAKE_FD): in discard
// mode a writer whose buffer is full wakes the consumer and waits for room, up to a second,
// rather than drop - from the first event on, before the consumer has mapped the arena (it
// turns this off when it stops draining: rb_consumer::set_blocking).
int ring_buffer_export(int wake_fd, bool consumer_blocking = false);
// The arena's memfd, or -1.
int ring_buffer_export_fd() noexcept;
// The process's state for the consumer (exit paths, fatal signals, exec). Async-signal-safe.
void ring_buffer_export_state(rb::arena_state state, int status) noexcept;
// Back to private buffers (threads move at their next event). The arena stays mapped (a
// writer may still be in it); its memfd is closed.
void ring_buffer_unexport();

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

// Reads all threads' buffers merged by timestamp. PEEK leaves the events in place (the
// `trace` file); CONSUME removes them (`trace_pipe`). One reader runs at a time: the object
// holds the global reader lock for its lifetime. It sees the buffers that existed when it
// was created.
class ring_buffer_reader {
public:
    enum mode { PEEK, CONSUME };
    explicit ring_buffer_reader(mode m);
    ~ring_buffer_reader();
    ring_buffer_reader(const ring_buffer_reader &) = delete;
    ring_buffer_reader &operator=(const ring_buffer_reader &) = delete;
    // The next event in timestamp order; false when every buffer is drained for now.
    bool next(rb_record &rec);

    struct impl;

private:
    impl *p_;
};

// Blocks until some buffer holds a committed unread event or TIMEOUT_MS passes (<0: no
// limit). Returns true when data is there. Costs the writers nothing while no one waits.
bool ring_buffer_wait(int timeout_ms);
// True when some buffer holds a committed event not yet consumed.
bool ring_buffer_has_data();

struct rb_stats {
    int32_t tid = 0;
    uint64_t entries = 0; // committed, still in the buffer (not consumed, not overwritten)
    uint64_t written = 0; // committed since the last reset
    uint64_t read = 0;    // consumed by CONSUME readers
    uint64_t overrun = 0; // overwritten before being read (overwrite mode)
    uint64_t dropped = 0; // never written: full in discard mode, nested too deep, too big
    bool exited = false;  // the owning thread is gone
};
// Per-buffer counts since the last reset: live threads' buffers and exited threads' buffers
// not yet recycled (a CONSUME reader recycles an exited thread's buffer once it drained it).
std::vector<rb_stats> ring_buffer_thread_stats();
// Totals since the last reset: every buffer, recycled ones included, plus events dropped
// with no buffer to count them (a signal handler writing while its thread maps its buffer,
// or after the thread's buffer was retired at thread exit).
// With everything consumed: written == read + overrun; attempts == written + dropped.
rb_stats ring_buffer_stats();

// Number of buffers ever mapped (live, exited or free for reuse).
size_t ring_buffer_nr_buffers();

} // namespace dprobe
