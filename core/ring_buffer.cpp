// Ring buffer internals (kernel/trace/ring_buffer.c's role). See ring_buffer.h for the model
// and ring_buffer_layout.h for the bytes.
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
//  - The global trace buffer's writers keep their buffer in tls_rb, valid while its export
//    epoch is the current one (g_word): a swap of the global buffer, like an export, starts
//    a new epoch, and each thread looks its buffer up again at its next event (the one the
//    swap gave it, or a new one). That keeps the probe hot path at one TLS load and one
//    compare.
//  - Other trace buffers' writers find theirs in the thread's table, slot TB->id, valid while
//    the slot's generation equals TB's: a swap exchanges owners and changes both
//    generations, a free changes TB's.
// A write in flight during a swap commits in the buffer it reserved in; a thread whose write
// is nested in one (a signal handler) keeps writing there until the outer write is done.
// Only the global buffer goes into an exported arena; it cannot be swapped while exported.
#include "core/ring_buffer.h"
#include "core/own_fds.h"

#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/raw_syscall.h"
#include "core/compiler.h"
#include "core/membarrier.h"
#include "core/trace_clock.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <new>

namespace dprobe
{

using namespace rb;

namespace
{

// An increment that a signal on this thread cannot tear (one instruction, the kernel's
// local_t), for counters only this thread writes and readers load atomically.
DPROBE_NOPROBE inline void local_inc(uint64_t *p) noexcept
{
    __asm__ __volatile__("incq %0" : "+m"(*p));
}
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

} // namespace

struct trace_buffer {
    unsigned id = 0; // index in g_tbs: the slot of the per-thread tables
    std::atomic<bool> in_use{false};
    // Other trace buffers than the global one: odd while a swap moves buffers between
    // owners; a new value after a swap or a free.
    std::atomic<uint64_t> gen{0};
    std::atomic<bool> tracing_on{true}; // not the global one's: bit 0 of g_word
    std::atomic<bool> overwrite{true};
    std::atomic<uint32_t> npages{k_rb_default_size_kb * 1024 / k_page_size};
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

namespace
{

trace_buffer g_tbs[k_rb_max_trace_buffers];
trace_buffer *const g_global = &g_tbs[0];

// Bit 0: the global buffer's tracing on; bits 1..: the export epoch (a buffer of another
// epoch is left for a new one at the thread's next event).
std::atomic<uint32_t> g_word{1};
std::atomic<rb_node *> g_list{nullptr};
// A forked child's copy of its parent's buffers (their shared pages mapped still): never
// written again, unmapped with the rest by ring_buffer_release_all.
rb_node *g_parent_list = nullptr;
std::atomic<uint32_t> g_waiting{0}; // futex word: 1 while an in-process reader may sleep
std::mutex g_alloc_mutex;           // ring_buffer_alloc / ring_buffer_free
// Set by the first swap: from then on a thread's buffers may be anywhere on the list.
std::atomic<bool> g_swapped{false};

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
std::atomic<rb_thread_table *> g_tables{nullptr};
rb_thread_table *const k_dead_table = reinterpret_cast<rb_thread_table *>(uintptr_t{1});
__attribute__((tls_model("initial-exec"))) thread_local rb_thread_table *tls_rbt = nullptr;

// The export (one arena per process).
arena_header *g_arena = nullptr;
// Every arena header mapped (an export per session), unmapped by ring_buffer_release_all.
constexpr unsigned k_max_arenas = 64;
arena_header *g_arenas[k_max_arenas];
unsigned g_narenas = 0;
int g_arena_fd = -1;
int g_wake_fd = -1;               // the consumer's eventfd; -1: a futex on consumer_waiting
bool g_consumer_blocking = false; // new arenas (a forked child's) start with writers waiting
// The consumer's pass count when a writer last gave up waiting for it, plus 1 << 32 (0:
// none): until it moves on, writers drop at once rather than wait again.
std::atomic<uint64_t> g_gave_up{0};
uint32_t g_arena_epoch = 0; // the epoch whose buffers go into the arena

buffer_ctl *const k_dead_buffer = reinterpret_cast<buffer_ctl *>(uintptr_t{1});
buffer_ctl *const k_muted_buffer = reinterpret_cast<buffer_ctl *>(uintptr_t{2});
__attribute__((tls_model("initial-exec"))) thread_local buffer_ctl *tls_rb = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local rb_node *tls_node = nullptr;
// Set while this thread maps its buffer: a signal handler writing then drops its event.
__attribute__((tls_model("initial-exec"))) thread_local bool tls_acquiring = false;
// ring_buffer_thread_mute(): nesting depth, and the buffer to go back to.
__attribute__((tls_model("initial-exec"))) thread_local unsigned tls_mute_depth = 0;
__attribute__((tls_model("initial-exec"))) thread_local buffer_ctl *tls_saved_rb = nullptr;
// ring_buffer_thread_speak(): nesting depth, and the mute depth it set aside.
__attribute__((tls_model("initial-exec"))) thread_local unsigned tls_speak_depth = 0;
__attribute__((tls_model("initial-exec"))) thread_local unsigned tls_speak_saved_mute = 0;
// ring_buffer_thread_nowait(): nesting depth. A thread that holds what the consumer needs
// never waits for it.
__attribute__((tls_model("initial-exec"))) thread_local unsigned tls_nowait_depth = 0;
// Threads whose name starts with this never write (dprobe's own: their name is inherited by
// the threads they create).
char g_muted_prefix[16] = {};
// Rounds of key destructors this thread has run (glibc runs at most
// PTHREAD_DESTRUCTOR_ITERATIONS, and another only while some key was set again).
__attribute__((tls_model("initial-exec"))) thread_local unsigned tls_exit_rounds = 0;
pthread_key_t g_exit_key;
bool g_exit_key_ok = false;

// CPU number from glibc's rseq area (one load), else getcpu.
bool g_rseq_ok = false;

void thread_exit(void *p) noexcept;
void fork_child() noexcept;

// fork(): the forking thread writes nothing from the last prepare handler (this one,
// registered first, runs last) until its own arena is set up in the child, or the fork is
// over in the parent. In between, the C library runs code of its own in the child (resetting
// its locks) before any child handler runs; traced, that code would write through the
// parent's buffer state into the parent's shared arena, as a second writer of the parent's
// buffer (its pages taken, its events lost).
//
// Once ring_buffer_release_all has run (an attach session's unload), the handlers stay
// registered until dlclose, but the buffers are gone and the other threads' pointers to them
// (tls_node, tls_rbt) dangle: a fork in that window must not follow them (its child
// crashed in fork_child). Nothing is written any more: the handlers do nothing.
std::atomic<bool> g_released{false};
void fork_prepare() noexcept
{
    if (!g_released.load(std::memory_order_acquire)) ring_buffer_thread_mute(true);
}
void fork_parent() noexcept
{
    if (!g_released.load(std::memory_order_acquire)) ring_buffer_thread_mute(false);
}
void fork_child_unmute() noexcept
{
    if (g_released.load(std::memory_order_acquire)) return;
    fork_child();
    ring_buffer_thread_mute(false);
}

// Process setup, before any probe can run: cheap, no calibration here.
__attribute__((constructor)) void rb_setup()
{
    for (unsigned i = 0; i < k_rb_max_trace_buffers; i++)
        g_tbs[i].id = i;
    g_global->in_use.store(true, std::memory_order_relaxed);
    g_exit_key_ok = pthread_key_create(&g_exit_key, thread_exit) == 0;
    g_rseq_ok = __rseq_size >= 8;
    pthread_atfork(fork_prepare, fork_parent, fork_child_unmute);
}

DPROBE_NOPROBE inline uint32_t current_cpu() noexcept
{
    if (likely(g_rseq_ok)) {
        auto *rs = reinterpret_cast<const volatile int32_t *>(
            static_cast<char *>(__builtin_thread_pointer()) + __rseq_offset);
        int32_t c = rs[1]; // struct rseq: cpu_id_start, cpu_id, ...
        if (likely(c >= 0)) return static_cast<uint32_t>(c);
    }
    unsigned c = 0;
    arch::raw_syscall(SYS_getcpu, reinterpret_cast<long>(&c), 0, 0);
    return c;
}

} // namespace

DPROBE_NOPROBE uint32_t raw_smp_processor_id() noexcept
{
    return current_cpu();
}

namespace
{

DPROBE_NOPROBE inline int32_t raw_gettid() noexcept
{
    return static_cast<int32_t>(arch::raw_syscall(SYS_gettid));
}

void store_comm(buffer_ctl *b) noexcept
{
    char name[17] = {};
    arch::raw_syscall(SYS_prctl, PR_GET_NAME, reinterpret_cast<long>(name));
    uint64_t c[2];
    memcpy(c, name, 16);
    b->comm[0].store(c[0], std::memory_order_relaxed);
    b->comm[1].store(c[1], std::memory_order_relaxed);
}

void *raw_mmap(size_t len, int prot, int flags, int fd, off_t off) noexcept
{
    long r = arch::raw_syscall(SYS_mmap, 0, static_cast<long>(len), prot, flags, fd, off);
    return r < 0 && r > -4096 ? MAP_FAILED : reinterpret_cast<void *>(r);
}

// Sets up the writer and reader state of a buffer in state BUF_INIT (no reader touches it).
void init_buffer(rb_node *n) noexcept
{
    buffer_ctl *b = n->ctl;
    const uint32_t np = b->npages;
    for (uint32_t i = 0; i < np; i++) {
        b->meta[i].seq.store(i == 0 ? 0 : k_no_seq, std::memory_order_relaxed);
        b->meta[i].base.store(0, std::memory_order_relaxed);
        b->meta[i].ts.store(0, std::memory_order_relaxed);
        b->meta[i].end.store(0, std::memory_order_relaxed);
        b->meta[i].cpu.store(0, std::memory_order_relaxed);
    }
    b->head_pos.store(0, std::memory_order_relaxed);
    b->head_page = b->data;
    b->placed.store(0, std::memory_order_relaxed);
    b->pending_seq.store(k_no_seq, std::memory_order_relaxed);
    b->nest.store(0, std::memory_order_relaxed);
    b->claiming.store(0, std::memory_order_relaxed);
    __atomic_store_n(&b->written, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&b->dropped, 0, __ATOMIC_RELAXED);
    // The first page starts now, on this CPU (init_buffer runs on the writer's thread, or in a
    // forked child on its only thread).
    b->last_ts = trace_clock_now();
    b->cpu = current_cpu();
    b->meta[0].ts.store(b->last_ts, std::memory_order_relaxed);
    b->meta[0].cpu.store(b->cpu, std::memory_order_relaxed);
    b->lost_pending = 0;
    b->commit_pos.store(0, std::memory_order_relaxed);
    b->read_pos.store(0, std::memory_order_relaxed);
    b->generation.fetch_add(1, std::memory_order_relaxed);
    n->rd = cursor{};
    n->nread = n->overrun_seen = n->written_base = n->dropped_base = 0;
}

// A new mapping of NPAGES pages: private memory, or a slice of the arena.
rb_node *map_buffer(uint32_t npages, bool arena) noexcept
{
    const size_t len = buffer_map_size(npages);
    void *m;
    uint64_t off = 0;
    if (arena) {
        off = g_arena->file_end.fetch_add(len, std::memory_order_relaxed);
        // fallocate grows the file without ever shrinking it (two threads growing it at once
        // with ftruncate could cut each other's slice off).
        if (arch::raw_syscall(SYS_fallocate, g_arena_fd, 0, static_cast<long>(off),
                              static_cast<long>(len)) != 0)
            return nullptr;
        // Pages allocated now, as the kernel allocates a buffer's pages when it is sized: a
        // first write to each page would otherwise fault on the hot path.
        m = raw_mmap(len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, g_arena_fd,
                     static_cast<off_t>(off));
    } else {
        m = raw_mmap(len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_POPULATE, -1, 0);
    }
    if (m == MAP_FAILED) return nullptr;
    void *nm = raw_mmap((sizeof(rb_node) + 4095) & ~size_t{4095}, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (nm == MAP_FAILED) {
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(m), static_cast<long>(len));
        return nullptr;
    }
    auto *n = new (nm) rb_node;
    auto *b = new (m) buffer_ctl;
    b->magic = k_ctl_magic;
    b->npages = npages;
    b->state.store(BUF_INIT, std::memory_order_relaxed);
    b->data = buffer_data(m);
    b->meta = buffer_meta(m, npages);
    n->ctl = b;
    n->map_len = len;
    n->in_arena = arena;
    init_buffer(n);
    if (arena) {
        uint32_t slot = g_arena->nslots.fetch_add(1, std::memory_order_relaxed);
        if (slot < k_arena_slots) g_arena->slot_offset[slot].store(off, std::memory_order_release);
    }
    rb_node *head = g_list.load(std::memory_order_relaxed);
    do {
        n->next = head;
    } while (!g_list.compare_exchange_weak(head, n, std::memory_order_release,
                                           std::memory_order_relaxed));
    return n;
}

// The exit key's value: any non-null value (thread_exit works from the thread's TLS).
void *const k_exit_key_value = reinterpret_cast<void *>(uintptr_t{1});

// Takes a free buffer of TB's size (in the arena or not) or maps a new one, and makes it the
// calling thread's buffer of TB.
rb_node *map_buffer_for(trace_buffer *tb, bool arena) noexcept
{
    const uint32_t npages = tb->npages.load(std::memory_order_relaxed);
    rb_node *n = nullptr;
    for (rb_node *it = g_list.load(std::memory_order_acquire); it; it = it->next) {
        int expect = BUF_FREE;
        if (it->in_arena == arena && it->ctl->npages == npages &&
            it->ctl->state.load(std::memory_order_relaxed) == BUF_FREE &&
            it->ctl->state.compare_exchange_strong(expect, BUF_INIT, std::memory_order_acquire)) {
            n = it;
            init_buffer(n);
            break;
        }
    }
    if (!n) n = map_buffer(npages, arena);
    if (!n) return nullptr;
    buffer_ctl *b = n->ctl;
    b->tid.store(raw_gettid(), std::memory_order_relaxed);
    store_comm(b);
    n->owner.store(tb, std::memory_order_relaxed);
    b->state.store(BUF_OWNED, std::memory_order_release);
    if (g_exit_key_ok) pthread_setspecific(g_exit_key, k_exit_key_value);
    return n;
}

// The calling thread's buffer of TB that a swap brought it (one it wrote before), if any.
rb_node *find_owned(trace_buffer *tb, int32_t tid, bool arena) noexcept
{
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next)
        if (n->owner.load(std::memory_order_relaxed) == tb && n->in_arena == arena &&
            n->ctl->tid.load(std::memory_order_relaxed) == tid &&
            n->ctl->state.load(std::memory_order_acquire) == BUF_OWNED)
            return n;
    return nullptr;
}

// A buffer its thread leaves (a new export epoch; with EXITING, the thread's exit):
// readable until consumed.
void retire(rb_node *n, int state = BUF_EXITED) noexcept
{
    store_comm(n->ctl); // the final name, for printing after the thread is gone
    n->ctl->state.store(state, std::memory_order_release);
}

// The buffer's state, an exiting thread's turned EXITED once its tid is gone.
int settled_state(buffer_ctl *b) noexcept
{
    int s = b->state.load(std::memory_order_acquire);
    if (s != BUF_EXITING) return s;
    const long pid = arch::raw_syscall(SYS_getpid);
    const long tid = b->tid.load(std::memory_order_relaxed);
    if (arch::raw_syscall(SYS_tgkill, pid, tid, 0) != -ESRCH) return s;
    int expect = BUF_EXITING;
    b->state.compare_exchange_strong(expect, BUF_EXITED, std::memory_order_acq_rel);
    return b->state.load(std::memory_order_acquire);
}

void count_orphan(trace_buffer *tb) noexcept
{
    tb->orphan_dropped.fetch_add(1, std::memory_order_relaxed);
    if (tb == g_global)
        if (arena_header *a = g_arena) a->orphan_dropped.fetch_add(1, std::memory_order_relaxed);
}

// Whether the calling thread writes nothing: muted, or one of dprobe's own threads (by
// name, checked on its first event).
bool thread_silenced() noexcept
{
    if (tls_rb == k_muted_buffer || tls_mute_depth) return true;
    if (tls_speak_depth) return false; // writing on another's behalf (trace_marker)
    if (g_muted_prefix[0] && !tls_node && !tls_rbt) {
        char name[17] = {};
        arch::raw_syscall(SYS_prctl, PR_GET_NAME, reinterpret_cast<long>(name));
        if (strncmp(name, g_muted_prefix, strlen(g_muted_prefix)) == 0) {
            tls_mute_depth = 1; // for good
            tls_saved_rb = nullptr;
            tls_rb = k_muted_buffer;
            return true;
        }
    }
    return false;
}

// The calling thread's first event in the global buffer, or its first in a new epoch (an
// export, or a swap of the global buffer).
// Async-signal-safe: mmap, atomics, prctl, gettid, pthread_setspecific on a low key.
__attribute__((noinline)) buffer_ctl *acquire_buffer(uint32_t) noexcept
{
    if (thread_silenced()) return nullptr;
    if (tls_rb == k_dead_buffer || tls_acquiring) {
        count_orphan(g_global);
        return nullptr;
    }
    // Nested in a write on the buffer of the old epoch (a signal handler): this event goes
    // after it, in the same buffer, which the outer write then publishes.
    if (tls_node && tls_node->ctl->nest.load(std::memory_order_relaxed) != 0) return tls_node->ctl;
    tls_acquiring = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // The epoch as it is now: a swap changes owners before it starts a new epoch.
    const uint32_t epoch = g_word.load(std::memory_order_acquire) >> 1;
    const int32_t tid = raw_gettid();
    if (rb_node *old = tls_node) {
        // A signal handler that ran between the caller's look at tls_rb and tls_acquiring
        // above acquired this epoch's buffer itself: this event goes there too. (Retiring it
        // would split the thread's events of one epoch over two buffers, its counts with
        // them: seen under ASan in signal_storm_keeps_records_intact_and_counts_exact.)
        if (old->epoch == epoch && old->owner.load(std::memory_order_relaxed) == g_global &&
            old->ctl->tid.load(std::memory_order_relaxed) == tid &&
            old->ctl->state.load(std::memory_order_acquire) == BUF_OWNED) {
            std::atomic_signal_fence(std::memory_order_seq_cst);
            tls_acquiring = false;
            return old->ctl;
        }
        // Another epoch: the events of the old buffer stay readable, the next go elsewhere.
        // A buffer a swap gave another trace buffer stays this thread's there.
        if (old->owner.load(std::memory_order_relaxed) == g_global &&
            old->ctl->tid.load(std::memory_order_relaxed) == tid &&
            old->ctl->state.load(std::memory_order_acquire) == BUF_OWNED)
            retire(old);
    }
    const bool arena = g_arena && epoch == g_arena_epoch;
    rb_node *n =
        g_swapped.load(std::memory_order_relaxed) ? find_owned(g_global, tid, arena) : nullptr;
    if (!n) n = map_buffer_for(g_global, arena);
    if (n) {
        n->epoch = epoch;
        tls_rb = n->ctl;
        tls_node = n;
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    tls_acquiring = false;
    if (!n) {
        tls_rb = nullptr;
        tls_node = nullptr;
        count_orphan(g_global);
        return nullptr;
    }
    return n->ctl;
}

// The calling thread's table, mapped or recycled on its first write to a trace buffer other
// than the global one.
rb_thread_table *alloc_table() noexcept
{
    rb_thread_table *t = nullptr;
    for (rb_thread_table *it = g_tables.load(std::memory_order_acquire); it; it = it->next) {
        int expect = 0;
        if (it->in_use.load(std::memory_order_relaxed) == 0 &&
            it->in_use.compare_exchange_strong(expect, 1, std::memory_order_acquire)) {
            t = it;
            break;
        }
    }
    if (!t) {
        const size_t len = (sizeof(rb_thread_table) + 4095) & ~size_t{4095};
        void *m = raw_mmap(len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return nullptr;
        t = static_cast<rb_thread_table *>(m); // zero-filled: every slot invalid
        t->in_use.store(1, std::memory_order_relaxed);
        rb_thread_table *head = g_tables.load(std::memory_order_relaxed);
        do {
            t->next = head;
        } while (!g_tables.compare_exchange_weak(head, t, std::memory_order_release,
                                                 std::memory_order_relaxed));
    } else {
        memset(t->slot, 0, sizeof t->slot);
    }
    t->tid = raw_gettid();
    tls_rbt = t;
    if (g_exit_key_ok) pthread_setspecific(g_exit_key, k_exit_key_value);
    return t;
}

// The calling thread's first event in TB (or its first after a swap or a free of TB).
// Async-signal-safe, like acquire_buffer.
__attribute__((noinline)) rb_node *attach_buffer(trace_buffer *tb) noexcept
{
    if (thread_silenced()) return nullptr;
    rb_thread_table *t = tls_rbt;
    if (t == k_dead_table || tls_acquiring) {
        count_orphan(tb);
        return nullptr;
    }
    tls_acquiring = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rb_node *n = nullptr;
    if (!t) t = alloc_table();
    // A swap in progress (odd generation) takes a few microseconds: wait it out, boundedly.
    uint64_t gen = tb->gen.load(std::memory_order_acquire);
    for (int spin = 0; (gen & 1) && spin < (1 << 20); spin++) {
        __builtin_ia32_pause();
        gen = tb->gen.load(std::memory_order_acquire);
    }
    if (t && !(gen & 1)) {
        n = find_owned(tb, t->tid, false);
        if (!n) n = map_buffer_for(tb, false);
        // A swap that ran meanwhile may have moved N to the other buffer: it is used for this
        // event only (like a write in flight during a swap) and looked up again next time.
        if (n && tb->gen.load(std::memory_order_acquire) == gen) t->slot[tb->id] = rb_slot{n, gen};
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    tls_acquiring = false;
    if (!n) count_orphan(tb);
    return n;
}

DPROBE_NOPROBE inline rb_node *thread_node(trace_buffer *tb) noexcept
{
    rb_thread_table *t = tls_rbt;
    if (likely(t > k_dead_table)) {
        const rb_slot &s = t->slot[tb->id];
        if (likely(s.gen == tb->gen.load(std::memory_order_acquire) && s.node)) return s.node;
    }
    // Rare, and it reaches the C library (pthread_setspecific may allocate): with the
    // extended state saved when a light handler writes (dprobe_ext_guarded).
    return reinterpret_cast<rb_node *>(
        dprobe_ext_guarded(reinterpret_cast<long>(tb), 0, 0, [](long tb, long, long) {
            return reinterpret_cast<long>(attach_buffer(reinterpret_cast<trace_buffer *>(tb)));
        }));
}

void thread_exit(void *p) noexcept
{
    // Other destructors of the thread may still write: the calls a pthread_exit left
    // (unwound exits), handlers of probes hit on the way out. Keep the key set until the
    // last round of destructors (this call of the C library is dprobe's: not recorded).
    if (++tls_exit_rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
        ring_buffer_thread_mute(true);
        const bool again = pthread_setspecific(g_exit_key, p) == 0;
        ring_buffer_thread_mute(false);
        if (again) return;
    }
    // The thread keeps its global buffer for what it still writes on its way out; readers
    // see it gone once its tid is. Its buffers of other trace buffers take nothing more.
    rb_thread_table *t = tls_rbt;
    if (t > k_dead_table) {
        tls_rbt = k_dead_table;
        std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    const int32_t tid = raw_gettid();
    rb_node *own = tls_node;
    if (own && own->owner.load(std::memory_order_relaxed) == g_global &&
        own->ctl->tid.load(std::memory_order_relaxed) == tid &&
        own->ctl->state.load(std::memory_order_relaxed) == BUF_OWNED)
        retire(own, BUF_EXITING);
    if (t > k_dead_table || g_swapped.load(std::memory_order_relaxed)) {
        for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next) {
            if (n->ctl->tid.load(std::memory_order_relaxed) != tid ||
                n->ctl->state.load(std::memory_order_acquire) != BUF_OWNED)
                continue;
            store_comm(n->ctl);
            int expect = BUF_OWNED;
            n->ctl->state.compare_exchange_strong(expect, BUF_EXITED, std::memory_order_release);
        }
    }
    if (t > k_dead_table) t->in_use.store(0, std::memory_order_release);
}

// A new arena in a new memfd (export, and a forked child). 0 or -errno.
int make_arena() noexcept
{
    int fd = static_cast<int>(arch::raw_syscall(
        SYS_memfd_create, reinterpret_cast<long>("dprobe-ring-buffer"), MFD_CLOEXEC));
    if (fd < 0) return fd;
    const size_t hsize = arena_header_size();
    if (arch::raw_syscall(SYS_ftruncate, fd, static_cast<long>(hsize)) != 0) {
        arch::raw_syscall(SYS_close, fd);
        return -ENOSPC;
    }
    void *m = raw_mmap(hsize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        arch::raw_syscall(SYS_close, fd);
        return -ENOMEM;
    }
    auto *a = new (m) arena_header;
    memcpy(a->magic, k_arena_magic, sizeof a->magic);
    a->version = k_arena_version;
    a->page_size = k_page_size;
    a->ctl_size = sizeof(buffer_ctl);
    a->meta_size = sizeof(page_meta);
    a->max_slots = k_arena_slots;
    a->pid = static_cast<int32_t>(arch::raw_syscall(SYS_getpid));
    a->clock_id = static_cast<uint64_t>(trace_clock_current());
    a->file_end.store(hsize, std::memory_order_relaxed);
    a->consumer_blocking.store(g_consumer_blocking ? 1 : 0, std::memory_order_relaxed);
    g_arena = a;
    g_arena_fd = fd;
    if (g_narenas < k_max_arenas) g_arenas[g_narenas++] = a;
    own_fd_add(fd); // a program closing every descriptor keeps this one (core/own_fds.h)
    return 0;
}

// Starts a new export epoch: every thread's next event goes to a new buffer. Returns it.
uint32_t next_epoch() noexcept
{
    uint32_t w = g_word.load(std::memory_order_relaxed), nw;
    do {
        nw = (w & 1) | (((w >> 1) + 1) << 1);
    } while (!g_word.compare_exchange_weak(w, nw, std::memory_order_relaxed));
    return nw >> 1;
}

// A forked child starts with empty buffers of its own: the parent's events are the parent's
// to report, and the other threads no longer exist. Only the forking thread runs here.
void fork_child() noexcept
{
    g_waiting.store(0, std::memory_order_relaxed);
    new (&g_alloc_mutex) std::mutex;
    for (trace_buffer &tb : g_tbs) {
        new (&tb.reader_mutex) std::mutex; // a parent thread may have held it
        tb.retired = rb_stats{};
        tb.orphan_base = tb.orphan_dropped.load(std::memory_order_relaxed);
    }
    rb_thread_table *self = tls_rbt > k_dead_table ? tls_rbt : nullptr;
    const int32_t parent_tid = self       ? self->tid
                               : tls_node ? tls_node->ctl->tid.load(std::memory_order_relaxed)
                                          : 0;
    const int32_t tid = raw_gettid();
    for (rb_thread_table *t = g_tables.load(std::memory_order_acquire); t; t = t->next)
        if (t != self) t->in_use.store(0, std::memory_order_release);
    if (self) self->tid = tid;
    if (g_arena) {
        // The parent's arena is shared memory: this process must not write it again. Its
        // buffers, and with them the private ones, are set aside, still mapped (a fork of a
        // program that forks often pays no unmapping); the release at the end of the
        // session unmaps them, so a child detached leaves none of them behind.
        rb_node *parents = g_list.exchange(nullptr, std::memory_order_relaxed);
        if (parents) {
            rb_node *last = parents;
            while (last->next)
                last = last->next;
            last->next = g_parent_list;
            g_parent_list = parents;
        }
        if (tls_mute_depth)
            tls_saved_rb = nullptr;
        else
            tls_rb = nullptr;
        tls_node = nullptr;
        if (self) memset(self->slot, 0, sizeof self->slot);
        if (g_arena_fd >= 0) {
            own_fd_remove(g_arena_fd);
            arch::raw_syscall(SYS_close, g_arena_fd);
        }
        g_arena = nullptr;
        g_arena_fd = -1;
        g_gave_up.store(0, std::memory_order_relaxed);
        if (make_arena() == 0) g_arena_epoch = next_epoch();
        return;
    }
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next) {
        buffer_ctl *b = n->ctl;
        // The forking thread's buffers (of every trace buffer) stay its own, emptied.
        if (parent_tid && b->tid.load(std::memory_order_relaxed) == parent_tid &&
            b->state.load(std::memory_order_relaxed) == BUF_OWNED) {
            b->state.store(BUF_INIT, std::memory_order_relaxed);
            init_buffer(n);
            b->tid.store(tid, std::memory_order_relaxed);
            b->state.store(BUF_OWNED, std::memory_order_release);
            continue;
        }
        // Other threads' buffers, and one caught mid-acquisition (init_buffer redoes it all).
        n->owner.store(nullptr, std::memory_order_relaxed);
        b->state.store(BUF_FREE, std::memory_order_release);
    }
    if (self)
        for (rb_slot &sl : self->slot)
            if (sl.node && sl.node->ctl->state.load(std::memory_order_relaxed) != BUF_OWNED)
                sl = rb_slot{};
}

// Wakes a consumer that sleeps (consumer_waiting was 1): through its eventfd when it gave
// one (`dprobe record`, which polls many processes), else through the futex word itself (a
// consumer in this process, the agent's streamer: no descriptor to own, none a fork shares).
DPROBE_NOPROBE inline void kick_consumer(arena_header *a) noexcept
{
    if (!a->consumer_waiting.exchange(0, std::memory_order_relaxed)) return;
    if (g_wake_fd >= 0) {
        const uint64_t one = 1;
        arch::raw_syscall(SYS_write, g_wake_fd, reinterpret_cast<long>(&one), sizeof one);
    } else {
        // Shared (not private): the arena is a memfd mapping a consumer may share.
        arch::raw_syscall(SYS_futex, reinterpret_cast<long>(&a->consumer_waiting), FUTEX_WAKE,
                          INT_MAX, 0, 0, 0);
    }
}

DPROBE_NOPROBE inline void wake_consumer(buffer_ctl *b, uint64_t seq) noexcept
{
    arena_header *a = g_arena;
    if (!a || !a->consumer_waiting.load(std::memory_order_relaxed)) return;
    // Half full: time for the consumer (the kernel's buffer_percent, at 50).
    const uint64_t rp = pos_seq(b->read_pos.load(std::memory_order_relaxed));
    if (seq >= rp && (seq - rp) * 2 < b->npages) return;
    kick_consumer(a);
}

constexpr int k_block_step_ms = 10;
constexpr int k_block_max_ms = 1000;

// Discard mode with a consumer that asked for it (`dprobe record`, `dprobe attach`'s
// streamer): the buffer is full, so wake the consumer and wait until it has taken the page
// the writer needs, a bounded time (as LTTng's blocking-timeout). True when there is room
// now. A thread that holds what the consumer may need (ring_buffer_thread_nowait) drops.
__attribute__((noinline)) DPROBE_NOPROBE bool wait_for_room(buffer_ctl *b, uint64_t old,
                                                            const page_meta &slot) noexcept
{
    arena_header *a = g_arena;
    if (!a || tls_nowait_depth || !a->consumer_blocking.load(std::memory_order_relaxed))
        return false;
    const uint64_t gave = g_gave_up.load(std::memory_order_relaxed);
    if (gave && static_cast<uint32_t>(gave) == a->progress.load(std::memory_order_relaxed))
        return false;
    auto room = [&] {
        const uint64_t rp = b->read_pos.load(std::memory_order_seq_cst);
        return !(pos_seq(rp) < old ||
                 (pos_seq(rp) == old && pos_off(rp) < slot.end.load(std::memory_order_relaxed)));
    };
    int waited_ms = 0;
    for (int round = 0; round < 100000 && waited_ms < k_block_max_ms; round++) {
        a->writers_waiting.store(1, std::memory_order_seq_cst);
        const uint32_t p = a->progress.load(std::memory_order_seq_cst);
        if (room()) return true;
        if (!a->consumer_blocking.load(std::memory_order_relaxed)) return false;
        kick_consumer(a);
        struct timespec t = {0, k_block_step_ms * 1000000L};
        // A shared futex: the consumer is another process mapping the arena.
        long r = arch::raw_syscall(SYS_futex, reinterpret_cast<long>(&a->progress), FUTEX_WAIT, p,
                                   reinterpret_cast<long>(&t), 0, 0);
        if (r == -ETIMEDOUT && a->progress.load(std::memory_order_relaxed) == p)
            waited_ms += k_block_step_ms;
    }
    if (room()) return true;
    g_gave_up.store((uint64_t{1} << 32) | a->progress.load(std::memory_order_relaxed),
                    std::memory_order_relaxed);
    return false;
}

// Moves the writer to the next page of its buffer B of TB, which starts at TS on CPU. False
// when that page cannot be taken (discard mode and it is unread, or it holds the pending
// outer event of a nested write). Only the global buffer's go to a consumer.
DPROBE_NOPROBE bool switch_page(const trace_buffer *tb, buffer_ctl *b, uint64_t seq, uint32_t off,
                                uint64_t ts, uint32_t cpu) noexcept
{
    const bool exported = tb == g_global;
    const uint64_t np = b->npages;
    const uint64_t n = seq + 1;
    page_meta &slot = b->meta[n % np];
    b->meta[seq % np].end.store(off, std::memory_order_release);
    if (n >= np) {
        const uint64_t old = n - np; // the page this slot holds now
        uint64_t pend = b->pending_seq.load(std::memory_order_relaxed);
        if (pend != k_no_seq && pend <= old) return false;
        if (!tb->overwrite.load(std::memory_order_relaxed)) {
            uint64_t rp = b->read_pos.load(std::memory_order_acquire);
            if ((pos_seq(rp) < old ||
                 (pos_seq(rp) == old && pos_off(rp) < slot.end.load(std::memory_order_relaxed))) &&
                !(exported && wait_for_room(b, old, slot))) {
                if (exported) wake_consumer(b, n);
                return false;
            }
        }
    }
    // Seqlock write side: new seq first, then the page's content.
    slot.seq.store(n, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    slot.base.store(b->placed.load(std::memory_order_relaxed), std::memory_order_relaxed);
    slot.ts.store(ts, std::memory_order_relaxed);
    slot.cpu.store(cpu, std::memory_order_relaxed);
    slot.end.store(0, std::memory_order_relaxed);
    b->head_pos.store(make_pos(n, 0), std::memory_order_relaxed);
    b->head_page = b->data + (n % np) * k_page_size;
    b->last_ts = ts;
    b->cpu = cpu;
    if (exported) wake_consumer(b, n);
    return true;
}

__attribute__((noinline)) void wake_readers() noexcept
{
    if (g_waiting.exchange(0, std::memory_order_relaxed) == 1)
        arch::raw_syscall(SYS_futex, reinterpret_cast<long>(&g_waiting), FUTEX_WAKE_PRIVATE,
                          INT_MAX, 0, 0, 0);
}

// End of a write (commit or discard): the outermost one publishes everything reserved.
DPROBE_NOPROBE inline void finish_write(buffer_ctl *b) noexcept
{
    uint32_t d = b->nest.load(std::memory_order_relaxed) - 1;
    b->nest.store(d, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (d != 0) return; // an outer write on this thread will publish
    b->pending_seq.store(k_no_seq, std::memory_order_relaxed);
    // A signal handler writing between the load and the store publishes a later head first;
    // storing ours may step commit_pos back for a moment, and the loop sets it forward again.
    for (;;) {
        uint64_t h = b->head_pos.load(std::memory_order_relaxed);
        b->commit_pos.store(h, std::memory_order_release);
        std::atomic_signal_fence(std::memory_order_seq_cst);
        if (b->head_pos.load(std::memory_order_relaxed) == h) break;
    }
    // Pairs with the reader's heavy barrier in ring_buffer_wait: no fence needed here.
    if (unlikely(g_waiting.load(std::memory_order_relaxed))) wake_readers();
}

DPROBE_NOPROBE inline void put_word(char *p, uint32_t v) noexcept
{
    memcpy(p, &v, 4);
}

// An event of LEN bytes in B, the calling thread's buffer of TB.
DPROBE_NOPROBE __attribute__((always_inline)) inline void *
reserve_in(const trace_buffer *tb, buffer_ctl *b, size_t len, bool small, rb_stamp *stamp) noexcept
{
    // tracing_cpumask: the kernel disables the per-CPU buffers of the CPUs left out, so
    // their writers record nothing (not counted as dropped). A thread that migrates between
    // this check and its stamp is recorded as on its new CPU, the price of no preemption
    // control.
    if (unlikely(tb->cpu_masked.load(std::memory_order_relaxed))) {
        const uint32_t c = current_cpu();
        if (c < k_rb_max_cpus &&
            (tb->cpu_off[c / 64].load(std::memory_order_relaxed) >> (c % 64) & 1))
            return nullptr;
    }
    if (unlikely(len > k_rb_max_payload)) {
        local_inc(&b->dropped);
        return nullptr;
    }
    const uint32_t size = small ? static_cast<uint32_t>((4 + len + 7) & ~size_t{7})
                                : static_cast<uint32_t>((8 + len + 7) & ~size_t{7});
    const uint32_t depth = b->nest.load(std::memory_order_relaxed);
    b->nest.store(depth + 1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (unlikely(depth >= k_rb_max_nesting || b->claiming.load(std::memory_order_relaxed))) {
        b->nest.store(depth, std::memory_order_relaxed);
        local_inc(&b->dropped);
        return nullptr;
    }

    b->claiming.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // Stamped inside the claim: events are placed in the order of their stamps.
    uint64_t ts = trace_clock_now();
    const uint32_t cpu = current_cpu();
    if (unlikely(ts < b->last_ts)) ts = b->last_ts;
    uint64_t pos = b->head_pos.load(std::memory_order_relaxed);
    uint64_t seq = pos_seq(pos);
    uint32_t off = pos_off(pos);
    const uint32_t lost = b->lost_pending;
    uint64_t delta = ts - b->last_ts;
    bool cpu_moved = cpu != b->cpu;
    bool extend = delta > k_delta_max;
    uint32_t extra = (lost ? 8 : 0) + (cpu_moved ? 8 : 0) + (extend ? 8 : 0);
    if (unlikely(off + extra + size > k_page_size)) {
        if (!switch_page(tb, b, seq, off, ts, cpu)) {
            std::atomic_signal_fence(std::memory_order_seq_cst);
            b->claiming.store(0, std::memory_order_relaxed);
            b->nest.store(depth, std::memory_order_relaxed);
            local_inc(&b->dropped);
            if (!tb->overwrite.load(std::memory_order_relaxed) && lost < k_info_value_max)
                b->lost_pending = lost + 1;
            return nullptr;
        }
        // The new page starts at this event's time and CPU.
        seq++;
        off = 0;
        delta = 0;
        cpu_moved = extend = false;
        extra = lost ? 8 : 0;
    }
    char *page = b->head_page; // seq's (switch_page moved it along)
    uint32_t o = off;
    uint32_t d = static_cast<uint32_t>(delta & k_delta_max);
    if (extend) {
        put_word(page + o, event_header(k_type_time_extend, d));
        put_word(page + o + 4, static_cast<uint32_t>(delta >> k_delta_bits));
        o += 8;
        d = 0;
    }
    if (cpu_moved) {
        put_word(page + o, event_header(k_type_info, d));
        put_word(page + o + 4, (INFO_CPU << 24) | (cpu & k_info_value_max));
        o += 8;
        d = 0;
    }
    if (lost) {
        put_word(page + o, event_header(k_type_info, d));
        put_word(page + o + 4, (INFO_LOST << 24) | lost);
        o += 8;
        d = 0;
    }
    if (small) {
        put_word(page + o, event_header(static_cast<uint32_t>(len / 4), d));
    } else {
        put_word(page + o, event_header(k_type_data_len, d));
        put_word(page + o + 4, static_cast<uint32_t>(len));
    }
    b->placed.store(b->placed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    b->head_pos.store(make_pos(seq, o + size), std::memory_order_relaxed);
    if (depth == 0) b->pending_seq.store(seq, std::memory_order_relaxed);
    b->last_ts = ts;
    b->cpu = cpu;
    b->lost_pending = 0;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    b->claiming.store(0, std::memory_order_relaxed);
    if (stamp) *stamp = {ts, cpu};
    return page + o + (small ? 4 : 8);
}

// The global buffer's write path: the thread's buffer in one TLS load, checked against the
// epoch.
DPROBE_NOPROBE void *reserve_event(size_t len, bool small, rb_stamp *stamp) noexcept
{
    const uint32_t word = g_word.load(std::memory_order_relaxed);
    if (unlikely(!(word & 1))) return nullptr;
    buffer_ctl *b = tls_rb;
    if (unlikely(reinterpret_cast<uintptr_t>(b) <= 2 || tls_node->epoch != (word >> 1))) {
        // Rare (a thread's first event, a new epoch), and it reaches the C library: with the
        // extended state saved when a light handler writes (dprobe_ext_guarded).
        b = reinterpret_cast<buffer_ctl *>(dprobe_ext_guarded(word, 0, 0, [](long w, long, long) {
            return reinterpret_cast<long>(acquire_buffer(static_cast<uint32_t>(w)));
        }));
        if (!b) return nullptr;
    }
    return reserve_in(g_global, b, len, small, stamp);
}

DPROBE_NOPROBE __attribute__((always_inline)) inline void commit_in(buffer_ctl *b) noexcept
{
    local_inc(&b->written);
    finish_write(b);
}

DPROBE_NOPROBE __attribute__((always_inline)) inline void discard_in(buffer_ctl *b,
                                                                     void *event) noexcept
{
    // The small form's payload is 4 bytes into its event, the other's 8: tell them apart by
    // the payload's alignment.
    const bool small = (reinterpret_cast<uintptr_t>(event) & 7) == 4;
    char *h = static_cast<char *>(event) - (small ? 4 : 8);
    uint32_t hdr, size;
    memcpy(&hdr, h, 4);
    if (small) {
        size = (4 + event_type_len(hdr) * 4 + 7) & ~7u;
    } else {
        uint32_t len;
        memcpy(&len, h + 4, 4);
        size = static_cast<uint32_t>((8 + size_t{len} + 7) & ~size_t{7});
    }
    const uint64_t byte = static_cast<uint64_t>(h - b->data);
    const uint64_t slot = byte / k_page_size;
    const uint32_t off = static_cast<uint32_t>(byte % k_page_size);
    const uint64_t seq = b->meta[slot].seq.load(std::memory_order_relaxed);

    b->claiming.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (b->head_pos.load(std::memory_order_relaxed) == make_pos(seq, off + size)) {
        // Nothing was reserved after it: take the space, the index and the time back.
        b->head_pos.store(make_pos(seq, off), std::memory_order_relaxed);
        b->placed.store(b->placed.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        b->last_ts -= event_delta(hdr);
    } else {
        put_word(h, event_header(k_type_padding, event_delta(hdr)));
        put_word(h + 4, size);
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    b->claiming.store(0, std::memory_order_relaxed);
    finish_write(b);
}

// The buffer a reserved EVENT of TB (not the global one) lives in: this thread's (a swap in
// between leaves the slot stale but the buffer the same, see attach_buffer).
DPROBE_NOPROBE inline buffer_ctl *event_buffer(const trace_buffer *tb, void *event) noexcept
{
    rb_thread_table *t = tls_rbt;
    if (unlikely(t <= k_dead_table || !event)) return nullptr;
    auto *p = static_cast<char *>(event);
    auto in = [p](const rb_node *n) {
        const buffer_ctl *b = n->ctl;
        return p >= b->data && p < b->data + size_t{b->npages} * k_page_size;
    };
    rb_node *n = t->slot[tb->id].node;
    if (likely(n && in(n))) return n->ctl;
    // Reserved through a lookup that was not cached (a swap raced with it): find it by address.
    for (rb_node *it = g_list.load(std::memory_order_acquire); it; it = it->next)
        if (in(it)) return it->ctl;
    return nullptr;
}

} // namespace

// ---- trace buffers ------------------------------------------------------------------------

trace_buffer *ring_buffer_global() noexcept
{
    return g_global;
}

unsigned ring_buffer_id(const trace_buffer *tb) noexcept
{
    return tb->id;
}

trace_buffer *ring_buffer_alloc()
{
    std::lock_guard<std::mutex> g(g_alloc_mutex);
    for (unsigned i = 1; i < k_rb_max_trace_buffers; i++) {
        trace_buffer &tb = g_tbs[i];
        if (tb.in_use.load(std::memory_order_relaxed)) continue;
        std::lock_guard<std::mutex> lk(tb.reader_mutex);
        tb.gen.store(tb.gen.load(std::memory_order_relaxed) + 2, std::memory_order_release);
        tb.tracing_on.store(true, std::memory_order_relaxed);
        tb.overwrite.store(true, std::memory_order_relaxed);
        tb.npages.store(k_rb_default_size_kb * 1024 / k_page_size, std::memory_order_relaxed);
        for (auto &w : tb.cpu_off)
            w.store(0, std::memory_order_relaxed);
        tb.cpu_masked.store(false, std::memory_order_relaxed);
        tb.retired = rb_stats{};
        tb.orphan_base = tb.orphan_dropped.load(std::memory_order_relaxed);
        tb.in_use.store(true, std::memory_order_release);
        return &tb;
    }
    return nullptr;
}

void ring_buffer_free(trace_buffer *tb)
{
    if (!tb || tb == g_global) return;
    std::lock_guard<std::mutex> g(g_alloc_mutex);
    std::lock_guard<std::mutex> lk(tb->reader_mutex);
    tb->tracing_on.store(false, std::memory_order_relaxed);
    // Every thread's slot for TB becomes stale; no writer can be using it (see the header).
    tb->gen.store(tb->gen.load(std::memory_order_relaxed) + 2, std::memory_order_release);
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next) {
        if (n->owner.load(std::memory_order_relaxed) != tb || n->in_arena) continue;
        const int st = n->ctl->state.load(std::memory_order_acquire);
        if (st != BUF_OWNED && st != BUF_EXITED && st != BUF_EXITING) continue;
        // Its memory stays mapped, for a new thread of any trace buffer.
        n->owner.store(nullptr, std::memory_order_relaxed);
        n->ctl->state.store(BUF_FREE, std::memory_order_release);
    }
    tb->in_use.store(false, std::memory_order_release);
}

namespace
{

// Both reader locks held.
int swap_locked(trace_buffer *a, trace_buffer *b) noexcept
{
    const bool global = a == g_global || b == g_global;
    if (global && g_arena) return -EBUSY;
    g_swapped.store(true, std::memory_order_relaxed);
    // Odd while owners change: a thread attaching meanwhile does not cache what it finds.
    a->gen.fetch_add(1, std::memory_order_acq_rel);
    b->gen.fetch_add(1, std::memory_order_acq_rel);
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next) {
        trace_buffer *o = n->owner.load(std::memory_order_relaxed);
        if (o == a)
            n->owner.store(b, std::memory_order_relaxed);
        else if (o == b)
            n->owner.store(a, std::memory_order_relaxed);
    }
    std::swap(a->retired, b->retired);
    const uint64_t a_orphans = a->orphan_dropped.load(std::memory_order_relaxed) - a->orphan_base;
    const uint64_t b_orphans = b->orphan_dropped.load(std::memory_order_relaxed) - b->orphan_base;
    a->orphan_base = a->orphan_dropped.load(std::memory_order_relaxed) - b_orphans;
    b->orphan_base = b->orphan_dropped.load(std::memory_order_relaxed) - a_orphans;
    a->gen.fetch_add(1, std::memory_order_acq_rel);
    b->gen.fetch_add(1, std::memory_order_acq_rel);
    // The global buffer's writers look theirs up again at their next event.
    if (global) next_epoch();
    return 0;
}

} // namespace

int ring_buffer_swap(trace_buffer *a, trace_buffer *b)
{
    if (!a || !b || a == b) return 0;
    trace_buffer *first = a->id < b->id ? a : b;
    trace_buffer *second = first == a ? b : a;
    std::lock_guard<std::mutex> l1(first->reader_mutex);
    std::lock_guard<std::mutex> l2(second->reader_mutex);
    return swap_locked(a, b);
}

bool ring_buffer_try_swap(trace_buffer *a, trace_buffer *b) noexcept
{
    if (!a || !b || a == b) return false;
    std::unique_lock<std::mutex> l1(a->reader_mutex, std::try_to_lock);
    if (!l1.owns_lock()) return false;
    std::unique_lock<std::mutex> l2(b->reader_mutex, std::try_to_lock);
    if (!l2.owns_lock()) return false;
    return swap_locked(a, b) == 0;
}

// ---- write side ---------------------------------------------------------------------------

DPROBE_NOPROBE unsigned ring_buffer_current_cpu() noexcept
{
    return current_cpu();
}

DPROBE_NOPROBE void *ring_buffer_reserve(size_t len, rb_stamp *stamp) noexcept
{
    return reserve_event(len, false, stamp);
}

DPROBE_NOPROBE void *ring_buffer_reserve_small(size_t len, rb_stamp *stamp) noexcept
{
    if (unlikely(!small_event(len))) return reserve_event(len, false, stamp);
    return reserve_event(len, true, stamp);
}

DPROBE_NOPROBE void ring_buffer_commit(void *event) noexcept
{
    buffer_ctl *b = tls_rb;
    if (unlikely(!event || reinterpret_cast<uintptr_t>(b) <= 2)) return;
    commit_in(b);
}

DPROBE_NOPROBE void ring_buffer_discard(void *event) noexcept
{
    buffer_ctl *b = tls_rb;
    if (unlikely(!event || reinterpret_cast<uintptr_t>(b) <= 2)) return;
    discard_in(b, event);
}

DPROBE_NOPROBE void *ring_buffer_reserve(trace_buffer *tb, size_t len, rb_stamp *stamp) noexcept
{
    if (tb == g_global) return reserve_event(len, false, stamp);
    if (unlikely(!tb->tracing_on.load(std::memory_order_relaxed) || tls_mute_depth)) return nullptr;
    rb_node *n = thread_node(tb);
    if (unlikely(!n)) return nullptr;
    return reserve_in(tb, n->ctl, len, false, stamp);
}

DPROBE_NOPROBE void ring_buffer_commit(trace_buffer *tb, void *event) noexcept
{
    if (tb == g_global) return ring_buffer_commit(event);
    if (buffer_ctl *b = event_buffer(tb, event)) commit_in(b);
}

DPROBE_NOPROBE void ring_buffer_discard(trace_buffer *tb, void *event) noexcept
{
    if (tb == g_global) return ring_buffer_discard(event);
    if (buffer_ctl *b = event_buffer(tb, event)) discard_in(b, event);
}

void ring_buffer_thread_mute(bool mute) noexcept
{
    if (mute) {
        if (tls_mute_depth++ == 0) {
            tls_saved_rb = tls_rb;
            tls_rb = k_muted_buffer;
        }
    } else if (tls_mute_depth && --tls_mute_depth == 0) {
        tls_rb = tls_saved_rb;
    }
}

void ring_buffer_thread_speak(bool on) noexcept
{
    if (on) {
        if (tls_speak_depth == 0) {
            // One of dprobe's threads by name is muted for good first, so that it stays
            // muted after this write too. The mute is set aside with its buffer back in
            // place (nullptr for a thread muted for good: it maps one on its first write).
            thread_silenced();
            tls_speak_saved_mute = tls_mute_depth;
            if (tls_mute_depth) {
                tls_mute_depth = 0;
                tls_rb = tls_saved_rb;
            }
        }
        tls_speak_depth++;
    } else if (tls_speak_depth && --tls_speak_depth == 0 && tls_speak_saved_mute) {
        tls_saved_rb = tls_rb == k_muted_buffer ? tls_saved_rb : tls_rb;
        tls_rb = k_muted_buffer;
        tls_mute_depth = tls_speak_saved_mute;
        tls_speak_saved_mute = 0;
    }
}

bool ring_buffer_thread_muted() noexcept
{
    return tls_mute_depth != 0;
}

void ring_buffer_thread_nowait(bool on) noexcept
{
    if (on)
        tls_nowait_depth++;
    else if (tls_nowait_depth)
        tls_nowait_depth--;
}

void ring_buffer_mute_threads_named(const char *prefix) noexcept
{
    char p[sizeof g_muted_prefix] = {};
    if (prefix) strncpy(p, prefix, sizeof p - 1);
    memcpy(g_muted_prefix, p, sizeof p);
}

// ---- control ------------------------------------------------------------------------------

void ring_buffer_set_tracing_on(trace_buffer *tb, bool on) noexcept
{
    if (on) trace_clock_init();
    if (tb != g_global)
        tb->tracing_on.store(on, std::memory_order_relaxed);
    else if (on)
        g_word.fetch_or(1, std::memory_order_relaxed);
    else
        g_word.fetch_and(~1u, std::memory_order_relaxed);
}
bool ring_buffer_tracing_on(const trace_buffer *tb) noexcept
{
    if (tb == g_global) return g_word.load(std::memory_order_relaxed) & 1;
    return tb->tracing_on.load(std::memory_order_relaxed);
}
void ring_buffer_set_overwrite(trace_buffer *tb, bool on) noexcept
{
    tb->overwrite.store(on, std::memory_order_relaxed);
}
bool ring_buffer_overwrite(const trace_buffer *tb) noexcept
{
    return tb->overwrite.load(std::memory_order_relaxed);
}

int ring_buffer_set_size_kb(trace_buffer *tb, size_t kb) noexcept
{
    if (kb == 0 || kb > (size_t{1} << 30)) return -EINVAL;
    size_t pages = (kb * 1024 + k_page_size - 1) / k_page_size;
    pages = std::max(pages, k_rb_min_pages);
    tb->npages.store(static_cast<uint32_t>(pages), std::memory_order_relaxed);
    return 0;
}

size_t ring_buffer_size_kb(const trace_buffer *tb) noexcept
{
    return tb->npages.load(std::memory_order_relaxed) * k_page_size / 1024;
}

void ring_buffer_set_cpumask(trace_buffer *tb, const std::vector<uint64_t> &mask) noexcept
{
    bool any_off = false;
    for (unsigned i = 0; i < k_rb_max_cpus / 64; i++) {
        const uint64_t off = ~(i < mask.size() ? mask[i] : 0);
        tb->cpu_off[i].store(off, std::memory_order_relaxed);
        any_off |= off != 0;
    }
    tb->cpu_masked.store(any_off, std::memory_order_release);
}

std::vector<uint64_t> ring_buffer_cpumask(const trace_buffer *tb)
{
    std::vector<uint64_t> mask(k_rb_max_cpus / 64);
    for (unsigned i = 0; i < k_rb_max_cpus / 64; i++)
        mask[i] = ~tb->cpu_off[i].load(std::memory_order_relaxed);
    return mask;
}

void ring_buffer_set_tracing_on(bool on) noexcept
{
    ring_buffer_set_tracing_on(g_global, on);
}
bool ring_buffer_tracing_on() noexcept
{
    return ring_buffer_tracing_on(g_global);
}
void ring_buffer_set_overwrite(bool on) noexcept
{
    ring_buffer_set_overwrite(g_global, on);
}
bool ring_buffer_overwrite() noexcept
{
    return ring_buffer_overwrite(g_global);
}
int ring_buffer_set_size_kb(size_t kb) noexcept
{
    return ring_buffer_set_size_kb(g_global, kb);
}
size_t ring_buffer_size_kb() noexcept
{
    return ring_buffer_size_kb(g_global);
}

// ---- export -------------------------------------------------------------------------------

int ring_buffer_export(int wake_fd, bool consumer_blocking)
{
    std::lock_guard<std::mutex> lk(g_global->reader_mutex);
    if (g_arena) return -EBUSY;
    g_consumer_blocking = consumer_blocking;
    g_gave_up.store(0, std::memory_order_relaxed);
    int r = make_arena();
    if (r < 0) return r;
    g_wake_fd = wake_fd;
    g_arena_epoch = next_epoch();
    return g_arena_fd;
}

int ring_buffer_export_fd() noexcept
{
    return g_arena ? g_arena_fd : -1;
}

void ring_buffer_export_state(arena_state state, int status) noexcept
{
    if (arena_header *a = g_arena) {
        a->status.store(status, std::memory_order_relaxed);
        a->state.store(state, std::memory_order_release);
    }
}

void ring_buffer_unexport()
{
    std::lock_guard<std::mutex> lk(g_global->reader_mutex);
    if (!g_arena) return;
    next_epoch();
    if (g_arena_fd >= 0) {
        own_fd_remove(g_arena_fd);
        ::close(g_arena_fd);
    }
    g_arena_fd = -1;
    g_arena = nullptr; // left mapped: a writer may be in one of its buffers
    g_wake_fd = -1;
}

void ring_buffer_release_all() noexcept
{
    g_released.store(true, std::memory_order_release);
    ring_buffer_unexport();
    if (g_exit_key_ok) pthread_key_delete(g_exit_key);
    g_exit_key_ok = false;
    // This thread's pointers; the others' go with this object's TLS.
    tls_rb = nullptr;
    tls_node = nullptr;
    tls_rbt = nullptr;
    const long node_len = (sizeof(rb_node) + 4095) & ~size_t{4095};
    for (rb_node *list : {g_list.exchange(nullptr, std::memory_order_acq_rel), g_parent_list}) {
        for (rb_node *n = list; n;) {
            rb_node *next = n->next;
            arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(n->ctl),
                              static_cast<long>(n->map_len));
            arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(n), node_len);
            n = next;
        }
    }
    g_parent_list = nullptr;
    const long table_len = (sizeof(rb_thread_table) + 4095) & ~size_t{4095};
    for (rb_thread_table *t = g_tables.exchange(nullptr, std::memory_order_acq_rel); t;) {
        rb_thread_table *next = t->next;
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(t), table_len);
        t = next;
    }
    for (unsigned i = 0; i < g_narenas; i++)
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(g_arenas[i]),
                          static_cast<long>(arena_header_size()));
    g_narenas = 0;
}

// ---- read side ----------------------------------------------------------------------------

namespace
{

struct peeked {
    bool valid = false;
    uint64_t ts = 0;
    uint32_t cpu = 0;
    std::vector<char> payload;
    uint64_t lost = 0;   // overwritten before the reader got there (index gap)
    uint64_t marked = 0; // dropped where a LOST mark was left (discard mode)
    cursor next;         // position after the event
};

// Oldest page a lapped reader can resume on (the writer may be up to a page past commit).
void resync(buffer_ctl *b, cursor &c, uint64_t cseq)
{
    const uint64_t np = b->npages;
    uint64_t oldest = cseq >= np - 1 ? cseq - (np - 1) : 0; // retried if already gone
    c.seq = std::max(oldest, c.seq + 1);
    c.off = 0;
}

// Copies the next data event at or after C into OUT; advances C over padding, marks and
// time records. False when nothing committed is left.
bool read_next(buffer_ctl *b, cursor &c, peeked &out)
{
    const uint64_t np = b->npages;
    for (;;) {
        uint64_t cp = b->commit_pos.load(std::memory_order_acquire);
        uint64_t cseq = pos_seq(cp);
        if (c.seq > cseq) return false;
        page_meta &m = b->meta[c.seq % np];
        uint64_t s1 = m.seq.load(std::memory_order_acquire);
        if (s1 != c.seq) {
            if (s1 == k_no_seq || s1 < c.seq)
                return false; // cannot happen for seq <= commit; be safe
            resync(b, c, cseq);
            continue;
        }
        uint32_t limit = c.seq < cseq ? m.end.load(std::memory_order_acquire) : pos_off(cp);
        cursor at = c;
        uint64_t gap = 0;
        if (at.off == 0) {
            at.ts = m.ts.load(std::memory_order_relaxed);
            at.cpu = m.cpu.load(std::memory_order_relaxed);
            uint64_t base = m.base.load(std::memory_order_relaxed);
            if (base > at.index) gap = base - at.index;
            at.index = base;
        }
        const char *page = b->data + (c.seq % np) * k_page_size;
        page_walker w{page, std::min<uint32_t>(limit, k_page_size), at.off, at.ts, at.cpu};
        event e{};
        bool got = at.off < w.len && w.next(e);
        if (got && e.kind == event::DATA) {
            out.payload.resize(e.len);
            if (e.len) memcpy(out.payload.data(), e.payload, e.len);
        }
        std::atomic_thread_fence(std::memory_order_acquire);
        if (m.seq.load(std::memory_order_relaxed) != c.seq) {
            resync(b, c, cseq);
            continue;
        }
        out.lost += gap;
        if (w.bad) { // only reachable through memory corruption: skip the page
            c.seq++;
            c.off = 0;
            c.index = at.index;
            continue;
        }
        c = at;
        c.off = w.off;
        c.ts = w.ts;
        c.cpu = w.cpu;
        if (!got) {
            if (c.seq < cseq) {
                c.seq++;
                c.off = 0;
                continue;
            }
            return false;
        }
        if (e.kind == event::LOST) {
            out.marked += e.lost;
            continue;
        }
        c.index++;
        if (e.kind == event::PADDING) continue;
        out.valid = true;
        out.ts = e.ts;
        out.cpu = e.cpu;
        out.next = c;
        return true;
    }
}

bool readable(const rb_node *n, const trace_buffer *tb)
{
    int s = n->ctl->state.load(std::memory_order_acquire);
    return (s == BUF_OWNED || s == BUF_EXITED || s == BUF_EXITING) &&
           n->owner.load(std::memory_order_relaxed) == tb;
}

bool exported_node(const rb_node *n)
{
    return n->in_arena;
}

bool buffer_has_data(rb_node *n)
{
    cursor c = n->rd;
    peeked p;
    return read_next(n->ctl, c, p);
}

rb_stats buffer_stats(rb_node *n);

// Exited, drained buffers of TB become free for new threads (the arena's are the consumer's
// to give back).
void reap_locked(trace_buffer *tb)
{
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next) {
        if (exported_node(n) || n->owner.load(std::memory_order_relaxed) != tb) continue;
        if (settled_state(n->ctl) == BUF_EXITED && !buffer_has_data(n)) {
            rb_stats st = buffer_stats(n);
            tb->retired.written += st.written;
            tb->retired.read += st.read;
            tb->retired.overrun += st.overrun;
            tb->retired.dropped += st.dropped;
            n->owner.store(nullptr, std::memory_order_relaxed);
            n->ctl->state.store(BUF_FREE, std::memory_order_release);
        }
    }
}

} // namespace

struct ring_buffer_reader::impl {
    struct source {
        rb_node *n;
        cursor c;
        peeked p;
        char comm[17];
    };
    std::unique_lock<std::mutex> lock;
    trace_buffer *tb;
    mode m;
    std::vector<source> src;
    std::vector<char> out; // payload handed out by the last next()
};

ring_buffer_reader::ring_buffer_reader(mode m, trace_buffer *tb) : p_(new impl)
{
    if (!tb) tb = g_global;
    p_->lock = std::unique_lock<std::mutex>(tb->reader_mutex);
    p_->tb = tb;
    p_->m = m;
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next) {
        if (!readable(n, tb)) continue;
        impl::source s{};
        s.n = n;
        s.c = n->rd;
        uint64_t c[2] = {n->ctl->comm[0].load(std::memory_order_relaxed),
                         n->ctl->comm[1].load(std::memory_order_relaxed)};
        memcpy(s.comm, c, 16);
        s.comm[16] = 0;
        p_->src.push_back(std::move(s));
    }
}

ring_buffer_reader::~ring_buffer_reader()
{
    if (p_->m == CONSUME) reap_locked(p_->tb);
    delete p_;
}

bool ring_buffer_reader::next(rb_record &rec)
{
    impl::source *best = nullptr;
    for (auto &s : p_->src) {
        if (!s.p.valid) read_next(s.n->ctl, s.c, s.p);
        if (s.p.valid && (!best || s.p.ts < best->p.ts)) best = &s;
    }
    if (!best) return false;
    peeked &p = best->p;
    rb_node *n = best->n;
    rec.ts = p.ts;
    rec.tid = n->ctl->tid.load(std::memory_order_relaxed);
    rec.cpu = static_cast<uint16_t>(p.cpu);
    rec.flags = 0;
    rec.lost_before = p.lost + p.marked;
    rec.len = static_cast<uint32_t>(p.payload.size());
    rec.comm = best->comm;
    best->c = p.next;
    if (p_->m == CONSUME) {
        n->rd = p.next;
        n->nread++;
        n->overrun_seen += p.lost;
        // The arena's consumer owns the shared position: ours is private.
        if (!exported_node(n))
            n->ctl->read_pos.store(make_pos(p.next.seq, p.next.off), std::memory_order_release);
    }
    // The payload stays valid until the next call: move it aside before clearing.
    std::swap(p.payload, p_->out);
    rec.payload = p_->out.data();
    p.valid = false;
    p.lost = p.marked = 0;
    return true;
}

void ring_buffer_reset(trace_buffer *tb)
{
    std::lock_guard<std::mutex> lk(tb->reader_mutex);
    tb->retired = rb_stats{};
    tb->orphan_base = tb->orphan_dropped.load(std::memory_order_relaxed);
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next) {
        if (!readable(n, tb)) continue;
        buffer_ctl *b = n->ctl;
        if (settled_state(b) == BUF_EXITED && !exported_node(n)) {
            n->owner.store(nullptr, std::memory_order_relaxed);
            b->state.store(BUF_FREE, std::memory_order_release);
            continue;
        }
        // Everything committed counts as consumed; events reserved before and committed after
        // the reset still show up, with no lost count. The reader needs the time and CPU at
        // that point: walk the page to it.
        uint64_t cp = b->commit_pos.load(std::memory_order_acquire);
        cursor c;
        c.seq = pos_seq(cp);
        c.index = b->placed.load(std::memory_order_relaxed);
        page_meta &m = b->meta[c.seq % b->npages];
        page_walker w{b->data + (c.seq % b->npages) * k_page_size, pos_off(cp), 0,
                      m.ts.load(std::memory_order_relaxed), m.cpu.load(std::memory_order_relaxed)};
        event e;
        while (w.next(e)) {
        }
        c.off = w.off;
        c.ts = w.ts;
        c.cpu = w.cpu;
        if (c.off == 0) c.index = m.base.load(std::memory_order_relaxed);
        n->rd = c;
        n->written_base = local_read(&b->written);
        n->dropped_base = local_read(&b->dropped);
        n->nread = 0;
        n->overrun_seen = 0;
        if (!exported_node(n)) b->read_pos.store(cp, std::memory_order_release);
    }
}

void ring_buffer_reset()
{
    ring_buffer_reset(g_global);
}

int ring_buffer_set_clock(std::string_view name)
{
    int err = trace_clock_set(name);
    if (err) return err;
    trace_clock_init();
    for (trace_buffer &tb : g_tbs)
        if (tb.in_use.load(std::memory_order_acquire)) ring_buffer_reset(&tb);
    if (arena_header *a = g_arena) a->clock_id = static_cast<uint64_t>(trace_clock_current());
    return 0;
}

bool ring_buffer_has_data(trace_buffer *tb)
{
    std::lock_guard<std::mutex> lk(tb->reader_mutex);
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next)
        if (readable(n, tb) && buffer_has_data(n)) return true;
    return false;
}

bool ring_buffer_has_data()
{
    return ring_buffer_has_data(g_global);
}

bool ring_buffer_wait(int timeout_ms)
{
    return ring_buffer_wait(g_global, timeout_ms);
}

bool ring_buffer_wait(trace_buffer *tb, int timeout_ms)
{
    using clk = std::chrono::steady_clock;
    const auto deadline = clk::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    // Without membarrier a wakeup can be missed (the writer has no fence); poll then.
    const long slice_ms = membarrier_expedited_available() ? 1000 : 10;
    for (;;) {
        g_waiting.store(1, std::memory_order_seq_cst);
        membarrier_everywhere(false); // writers now see g_waiting, or we see their commit
        if (ring_buffer_has_data(tb)) return true;
        long long left_ns = slice_ms * 1000000LL;
        if (timeout_ms >= 0) {
            auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - clk::now());
            if (left.count() <= 0) return false;
            left_ns = std::min<long long>(left_ns, left.count());
        }
        struct timespec ts = {static_cast<time_t>(left_ns / 1000000000LL),
                              static_cast<long>(left_ns % 1000000000LL)};
        syscall(SYS_futex, &g_waiting, FUTEX_WAIT_PRIVATE, 1, &ts, nullptr, 0);
    }
}

namespace
{
rb_stats buffer_stats(rb_node *n)
{
    buffer_ctl *b = n->ctl;
    rb_stats st;
    st.tid = b->tid.load(std::memory_order_relaxed);
    st.exited = settled_state(b) != BUF_OWNED;
    const uint64_t name[2] = {b->comm[0].load(std::memory_order_relaxed),
                              b->comm[1].load(std::memory_order_relaxed)};
    memcpy(st.comm, name, 16);
    st.written = local_read(&b->written) - n->written_base;
    st.dropped = local_read(&b->dropped) - n->dropped_base;
    st.read = n->nread;
    // Events overwritten since the consumer last read: the index gap to the oldest event.
    cursor c = n->rd;
    peeked p;
    read_next(b, c, p);
    st.overrun = n->overrun_seen + p.lost;
    uint64_t gone = st.read + st.overrun;
    st.entries = st.written > gone ? st.written - gone : 0;
    return st;
}
} // namespace

std::vector<rb_stats> ring_buffer_thread_stats(trace_buffer *tb)
{
    std::lock_guard<std::mutex> lk(tb->reader_mutex);
    std::vector<rb_stats> out;
    for (rb_node *n = g_list.load(std::memory_order_acquire); n; n = n->next)
        if (readable(n, tb)) out.push_back(buffer_stats(n));
    return out;
}

std::vector<rb_stats> ring_buffer_thread_stats()
{
    return ring_buffer_thread_stats(g_global);
}

rb_stats ring_buffer_stats(trace_buffer *tb)
{
    rb_stats sum;
    {
        std::lock_guard<std::mutex> lk(tb->reader_mutex);
        sum = tb->retired;
        sum.dropped += tb->orphan_dropped.load(std::memory_order_relaxed) - tb->orphan_base;
    }
    for (const rb_stats &s : ring_buffer_thread_stats(tb)) {
        sum.entries += s.entries;
        sum.written += s.written;
        sum.read += s.read;
        sum.overrun += s.overrun;
        sum.dropped += s.dropped;
    }
    return sum;
}

rb_stats ring_buffer_stats()
{
    return ring_buffer_stats(g_global);
}

size_t ring_buffer_nr_buffers()
{
    size_t n = 0;
    for (rb_node *it = g_list.load(std::memory_order_acquire); it; it = it->next)
        n++;
    return n;
}

} // namespace dprobe
