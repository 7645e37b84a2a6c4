// The ring buffer's state and the internals its files share (ring_buffer.h says what the
// ring buffer does, ring_buffer_layout.h what its bytes are). The files, by role (the
// kernel's kernel/trace/ring_buffer.c in one):
//   ring_buffer_alloc.cpp    a thread's buffers: mapping, recycling, thread exit, fork
//   ring_buffer_write.cpp    the writer (probe hot path, built -mgeneral-regs-only)
//   ring_buffer_swap.cpp     trace buffers exchanging their threads' buffers (snapshots)
//   ring_buffer_control.cpp  tracing_on, overwrite, size, cpumask; the export to a consumer
//   ring_buffer_read.cpp     the in-process readers, reset and counts
//
// Positions: a page's sequence number counts pages the writer has entered since the buffer
// was (re)initialised; page SEQ lives in slot SEQ % npages.
//
// Writer (one thread plus its own signal handlers), fields of rb::buffer_ctl:
//   head_pos    where the next event goes (signal handlers nested in a write advance it)
//   commit_pos  everything before it is committed; stored only by the outermost write when
//               it commits (nest back to 0), so readers never see a reserved, unfilled event
//   claiming    set while a write moves head_pos; a signal handler that interrupts exactly
//               there cannot tell where the head is and drops its event
//   last_ts, cpu, lost_pending   what the next event's header is relative to
//   per page    seq (which page the slot holds: the seqlock readers validate against),
//               base (index of its first event), ts and cpu (of its first event), end
// Every data event gets an index (base + its rank in the page); a reader that finds a gap in
// the indices knows how many events were overwritten before it got to them.
//
// In-process readers of a trace buffer run under its mutex. The consuming position is
// published in read_pos, which the writer reads only in discard mode, when it needs a page
// back; once the buffers are exported, that position is the arena consumer's
// (ring_buffer_consumer.h).
//
// Trace buffers: every per-thread buffer ever mapped is on one process-wide list
// (append-only) and names the trace buffer it belongs to (`owner`; nullptr while free).
//  - The global trace buffer's writers keep their buffer in cur.rb, valid while its export
//    epoch is the current one (process.word): a swap of the global buffer, like an export,
//    starts a new epoch, and each thread looks its buffer up again at its next event (the one
//    the swap gave it, or a new one). That keeps the probe hot path at one TLS load and one
//    compare.
//  - Other trace buffers' writers find theirs in the thread's table, slot TB->id, valid while
//    the slot's generation equals TB's: a swap exchanges owners and changes both
//    generations, a free changes TB's.
// A write in flight during a swap commits in the buffer it reserved in; a thread whose write
// is nested in one (a signal handler) keeps writing there until the outer write is done.
// Only the global buffer goes into an exported arena; it cannot be swapped while exported.
//
// State: three objects, the process's (rb::process), the export's (rb::exported) and the
// calling thread's (rb::cur, thread-local, initial-exec: one load on the hot path).
#pragma once

#include "core/ring_buffer.h"

#include "arch/x86_64/cpu.h"
#include "arch/x86_64/raw_syscall.h"
#include "core/compiler.h"

#include <pthread.h>
#include <sys/rseq.h>
#include <sys/syscall.h>

#include <atomic>
#include <mutex>

// The state and functions the ring buffer's files share are the library's own: hidden, so
// that the writer reaches them RIP-relative (not through the GOT) as within one file.
#define DPROBE_RB_HIDDEN __attribute__((visibility("hidden")))

namespace dprobe
{
namespace rb
{

using arch::local_inc;
inline uint64_t local_read(const uint64_t *p) noexcept
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

// Reader cursor: a position, the index of the event expected there, and the running time
// stamp and CPU at that position.
struct cursor {
    uint64_t seq = 0;
    uint32_t off = 0;
    uint64_t index = 0;
    uint64_t ts = 0;
    uint32_t cpu = 0;
};

// A buffer as this process knows it: the shared control block and the private reader state.
struct rb_node {
    rb_node *next = nullptr; // global list, append-only
    buffer_ctl *ctl = nullptr;
    std::atomic<trace_buffer *> owner{nullptr}; // nullptr while free
    size_t map_len = 0;
    bool in_arena = false;
    uint32_t epoch = 0; // the export epoch the buffer belongs to
    // Readers (under the owner's reader_mutex).
    cursor rd;
    uint64_t nread = 0;
    uint64_t overrun_seen = 0;
    uint64_t written_base = 0;
    uint64_t dropped_base = 0;
};
inline constexpr size_t k_node_map_size = (sizeof(rb_node) + 4095) & ~size_t{4095};

} // namespace rb

struct trace_buffer {
    unsigned id = 0; // index in rb::process.tbs: the slot of the per-thread tables
    std::atomic<bool> in_use{false};
    // Other trace buffers than the global one: odd while a swap moves buffers between
    // owners; a new value after a swap or a free.
    std::atomic<uint64_t> gen{0};
    std::atomic<bool> tracing_on{true}; // not the global one's: bit 0 of rb::process.word
    std::atomic<bool> overwrite{true};
    std::atomic<uint32_t> npages{k_rb_default_size_kb * 1024 / rb::k_page_size};
    // `tracing_cpumask`: a set bit is a CPU whose writers do not record (zero: every CPU
    // records, the default). cpu_masked says whether any bit is set, so that writers read
    // their CPU only when a mask is in force.
    std::atomic<bool> cpu_masked{false};
    std::atomic<uint64_t> cpu_off[k_rb_max_cpus / 64] = {};
    // Events dropped with no buffer to count them in (during the acquisition of one, after
    // the thread's buffers were retired at exit, or when mmap failed).
    std::atomic<uint64_t> orphan_dropped{0};
    std::mutex reader_mutex;
    // Under reader_mutex: counts of recycled buffers, kept for the totals until the next reset.
    rb_stats retired;
    uint64_t orphan_base = 0;
};

namespace rb
{

// A thread's buffers of the trace buffers other than the global one: slot i is its buffer of
// trace buffer i, valid while slot.gen equals that trace buffer's generation. Tables are
// mapped on a thread's first such write and recycled when the thread exits.
struct rb_slot {
    rb_node *node;
    uint64_t gen;
};
struct rb_thread_table {
    rb_thread_table *next; // global list, append-only
    std::atomic<int> in_use;
    int32_t tid;
    rb_slot slot[k_rb_max_trace_buffers];
};
inline constexpr size_t k_table_map_size = (sizeof(rb_thread_table) + 4095) & ~size_t{4095};

// Markers in the thread's pointers: its exit has run (no table, no buffer any more), or it
// is muted (cur.rb while ring_buffer_thread_mute holds).
rb_thread_table *const k_dead_table = reinterpret_cast<rb_thread_table *>(uintptr_t{1});
buffer_ctl *const k_dead_buffer = reinterpret_cast<buffer_ctl *>(uintptr_t{1});
buffer_ctl *const k_muted_buffer = reinterpret_cast<buffer_ctl *>(uintptr_t{2});

// The arena's memfd: its name, and how /proc/PID/maps shows its mappings.
inline constexpr const char k_arena_memfd_name[] = "dprobe-ring-buffer";
inline constexpr const char k_arena_memfd_path[] = "/memfd:dprobe-ring-buffer";

// The process's buffers.
struct process_state {
    trace_buffer tbs[k_rb_max_trace_buffers]; // tbs[0]: the global one
    // Bit 0: the global buffer's tracing on; bits 1..: the export epoch (a buffer of another
    // epoch is left for a new one at the thread's next event).
    std::atomic<uint32_t> word{1};
    std::atomic<rb_node *> list{nullptr};
    // A forked child's copy of its parent's buffers (their shared pages mapped still): never
    // written again, unmapped with the rest by ring_buffer_release_all.
    rb_node *parent_list = nullptr;
    std::atomic<uint32_t> waiting{0}; // futex word: 1 while an in-process reader may sleep
    std::mutex alloc_mutex;           // ring_buffer_alloc / ring_buffer_free
    // Set by the first swap: from then on a thread's buffers may be anywhere on the list.
    std::atomic<bool> swapped{false};
    std::atomic<rb_thread_table *> tables{nullptr};
    // Threads whose name starts with this never write (dprobe's own: their name is
    // inherited by the threads they create).
    char muted_prefix[16] = {};
    pthread_key_t exit_key{};
    bool exit_key_ok = false;
    // CPU number from glibc's rseq area (one load), else getcpu.
    bool rseq_ok = false;
    // ring_buffer_release_all has run: the buffers are gone (see the fork handlers).
    std::atomic<bool> released{false};
};
extern process_state process DPROBE_RB_HIDDEN;

inline trace_buffer *global_tb() noexcept
{
    return &process.tbs[0];
}

// The export to a consumer (one arena per process; ring_buffer_control.cpp).
inline constexpr unsigned k_max_arenas = 64;
struct export_state {
    arena_header *arena = nullptr;
    // Every arena header mapped (an export per session), unmapped by ring_buffer_release_all.
    arena_header *arenas[k_max_arenas] = {};
    unsigned narenas = 0;
    int fd = -1;
    int wake_fd = -1;               // the consumer's eventfd; -1: a futex on consumer_waiting
    bool consumer_blocking = false; // new arenas (a forked child's) start with writers waiting
    // The consumer's pass count when a writer last gave up waiting for it, plus 1 << 32 (0:
    // none): until it moves on, writers drop at once rather than wait again.
    std::atomic<uint64_t> gave_up{0};
    uint32_t epoch = 0; // the epoch whose buffers go into the arena
};
extern export_state exported DPROBE_RB_HIDDEN;

// The calling thread's (zero at its start).
struct thread_state {
    buffer_ctl *rb;         // its buffer of the global trace buffer, or a marker
    rb_node *node;          // rb's node
    rb_thread_table *table; // its buffers of the other trace buffers
    // Set while this thread maps its buffer: a signal handler writing then drops its event.
    bool acquiring;
    // ring_buffer_thread_mute(): nesting depth, and the buffer to go back to.
    unsigned mute_depth;
    buffer_ctl *saved_rb;
    // ring_buffer_thread_speak(): nesting depth, and the mute depth it set aside.
    unsigned speak_depth;
    unsigned speak_saved_mute;
    // ring_buffer_thread_nowait(): nesting depth. A thread that holds what the consumer
    // needs never waits for it.
    unsigned nowait_depth;
    // Rounds of key destructors this thread has run (glibc runs at most
    // PTHREAD_DESTRUCTOR_ITERATIONS, and another only while some key was set again).
    unsigned exit_rounds;
};
extern __thread thread_state cur DPROBE_RB_HIDDEN __attribute__((tls_model("initial-exec")));

DPROBE_NOPROBE inline uint32_t current_cpu() noexcept
{
    if (likely(process.rseq_ok)) {
        auto *rs = reinterpret_cast<const volatile int32_t *>(
            static_cast<char *>(__builtin_thread_pointer()) + __rseq_offset);
        int32_t c = rs[1]; // struct rseq: cpu_id_start, cpu_id, ...
        if (likely(c >= 0)) return static_cast<uint32_t>(c);
    }
    unsigned c = 0;
    arch::raw_syscall(SYS_getcpu, reinterpret_cast<long>(&c), 0, 0);
    return c;
}

DPROBE_NOPROBE inline int32_t raw_gettid() noexcept
{
    return static_cast<int32_t>(arch::raw_syscall(SYS_gettid));
}

// ring_buffer_alloc.cpp: a thread's first event in the global buffer (or its first of a new
// epoch), its first in another trace buffer TB; both async-signal-safe, reached through
// dprobe_ext_guarded. An arena in a new memfd (0 or -errno); a new export epoch (returned).
DPROBE_RB_HIDDEN buffer_ctl *acquire_buffer(uint32_t word) noexcept;
DPROBE_RB_HIDDEN rb_node *attach_buffer(trace_buffer *tb) noexcept;
DPROBE_RB_HIDDEN int make_arena() noexcept;
DPROBE_RB_HIDDEN uint32_t next_epoch() noexcept;

// ring_buffer_read.cpp: the buffer's state, an exiting thread's turned EXITED once its tid
// is gone.
DPROBE_RB_HIDDEN int settled_state(buffer_ctl *b) noexcept;

} // namespace rb
} // namespace dprobe
