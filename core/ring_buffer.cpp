// Ring buffer internals. See ring_buffer.h for the model.
//
// Positions: a page's sequence number counts pages the writer has entered since the buffer
// was (re)initialised; page SEQ lives in slot SEQ % npages. A position packs (seq, offset) in
// one word, so the writer publishes its commit point with a single store.
//
// Writer (one thread plus its own signal handlers):
//   head_pos    where the next record goes (signal handlers nested in a write advance it)
//   commit_pos  everything before it is committed; stored only by the outermost write when
//               it commits (nest back to 0), so readers never see a reserved, unfilled record
//   claiming    set while a write moves head_pos; a signal handler that interrupts exactly
//               there cannot tell where the head is and drops its event
//   per page    seq (which page the slot holds: the seqlock readers validate against),
//               base (index of its first record), end (bytes used, final once left)
// Every record gets an index (base + nr); a reader that finds a gap in the indices it
// reads knows how many records were overwritten before it got to them.
//
// Readers of a trace buffer run under its mutex. The consuming position is published in
// read_pos, which the writer reads only in discard mode, when it needs a page back.
//
// Trace buffers: every per-thread buffer ever mapped is on one global list (append-only)
// and names the trace buffer it belongs to (`owner`; nullptr while free). A thread finds its
// buffer of trace buffer TB in its table's slot TB->id, valid while the slot's generation
// equals TB's: a swap (the snapshot) exchanges owners and changes both generations, a free
// changes TB's, and the thread then looks its buffer up again (or takes a free one).
#include "core/ring_buffer.h"

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
#include <mutex>
#include <new>

namespace dprobe {
namespace {

constexpr uint64_t k_no_seq = ~0ull;
constexpr unsigned k_off_bits = 13; // offsets 0..4096 inclusive
constexpr uint64_t k_off_mask = (1u << k_off_bits) - 1;
static_assert(k_rb_page_size < (1u << k_off_bits));

constexpr uint64_t make_pos(uint64_t seq, uint64_t off) { return (seq << k_off_bits) | off; }
constexpr uint64_t pos_seq(uint64_t pos) { return pos >> k_off_bits; }
constexpr uint32_t pos_off(uint64_t pos) { return static_cast<uint32_t>(pos & k_off_mask); }

enum buf_state : int { BUF_FREE, BUF_INIT, BUF_OWNED, BUF_EXITED };

struct rb_page_meta {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> base;
  std::atomic<uint32_t> end;
  uint32_t unused;
};

// An increment that a signal on this thread cannot tear (one instruction, the kernel's
// local_t), for counters only this thread writes and readers load atomically.
DPROBE_NOPROBE inline void local_inc(uint64_t *p) noexcept {
  __asm__ __volatile__("incq %0" : "+m"(*p));
}
inline uint64_t local_read(const uint64_t *p) noexcept {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}

// Reader cursor: a position and the index of the record expected there.
struct cursor {
  uint64_t seq = 0;
  uint32_t off = 0;
  uint64_t index = 0;
};

} // namespace

struct trace_buffer {
  unsigned id = 0; // index in g_tbs (set at setup): the slot of the per-thread table
  std::atomic<bool> in_use{false};
  // Odd while a swap moves buffers between owners; a new value after a swap or a free.
  std::atomic<uint64_t> gen{0};
  std::atomic<bool> tracing_on{true};
  std::atomic<bool> overwrite{true};
  std::atomic<uint32_t> npages{k_rb_default_size_kb * 1024 / k_rb_page_size};
  // Events dropped with no buffer to count them in (during the acquisition of one, after the
  // thread's buffers were retired at exit, or when mmap failed).
  std::atomic<uint64_t> orphan_dropped{0};
  std::mutex reader_mutex;
  // Under reader_mutex: counts of recycled buffers, kept for the totals until the next reset.
  rb_stats retired;
  uint64_t orphan_base = 0;
};

struct rb_buffer {
  rb_buffer *next = nullptr; // global list, append-only
  std::atomic<int> state{BUF_INIT};
  std::atomic<trace_buffer *> owner{nullptr};
  std::atomic<int32_t> tid{0};
  std::atomic<uint64_t> comm[2] = {}; // thread name, 16 bytes

  // The page mapping: npages data pages, then npages rb_page_meta.
  char *data = nullptr;
  rb_page_meta *meta = nullptr;
  size_t map_len = 0;
  uint32_t npages = 0;

  // Writer (owning thread and its signal handlers).
  alignas(64) std::atomic<uint64_t> head_pos{0};
  std::atomic<uint64_t> placed{0};   // records given an index
  std::atomic<uint64_t> pending_seq{k_no_seq}; // page of the outermost uncommitted record
  std::atomic<uint32_t> nest{0};
  std::atomic<uint32_t> claiming{0};
  uint64_t written = 0; // local_inc
  uint64_t dropped = 0; // local_inc

  alignas(64) std::atomic<uint64_t> commit_pos{0};

  // Readers (under the owner's reader_mutex), except read_pos which the writer loads.
  alignas(64) std::atomic<uint64_t> read_pos{0};
  cursor rd;
  uint64_t nread = 0;
  uint64_t overrun_seen = 0;
  uint64_t written_base = 0;
  uint64_t dropped_base = 0;
};

namespace {

trace_buffer g_tbs[k_rb_max_trace_buffers];
std::atomic<rb_buffer *> g_list{nullptr};
std::atomic<uint32_t> g_waiting{0}; // futex word: 1 while a reader may be sleeping
std::mutex g_alloc_mutex;           // ring_buffer_alloc / ring_buffer_free

// A thread's buffers: slot i is its buffer of trace buffer i, valid while slot.gen equals
// that trace buffer's generation. Tables are mapped on a thread's first write (mmap is
// async-signal-safe) and recycled when the thread exits.
struct rb_slot {
  rb_buffer *buf;
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
// Set while this thread maps a buffer: a signal handler writing then drops its event.
__attribute__((tls_model("initial-exec"))) thread_local bool tls_acquiring = false;

pthread_key_t g_exit_key;
bool g_exit_key_ok = false;

// CPU number from glibc's rseq area (one load), else getcpu.
bool g_rseq_ok = false;

void thread_exit(void *p) noexcept;
void fork_child() noexcept;

// Process setup, before any probe can run: cheap, no calibration here.
__attribute__((constructor)) void rb_setup() {
  for (unsigned i = 0; i < k_rb_max_trace_buffers; i++)
    g_tbs[i].id = i;
  g_tbs[0].in_use.store(true, std::memory_order_relaxed);
  g_exit_key_ok = pthread_key_create(&g_exit_key, thread_exit) == 0;
  g_rseq_ok = __rseq_size >= 8;
  pthread_atfork(nullptr, nullptr, fork_child);
}

inline unsigned tb_id(const trace_buffer *tb) { return tb->id; }

DPROBE_NOPROBE inline uint16_t current_cpu() noexcept {
  if (likely(g_rseq_ok)) {
    auto *rs = reinterpret_cast<const volatile int32_t *>(
        static_cast<char *>(__builtin_thread_pointer()) + __rseq_offset);
    int32_t c = rs[1]; // struct rseq: cpu_id_start, cpu_id, ...
    if (likely(c >= 0))
      return static_cast<uint16_t>(c);
  }
  int c = sched_getcpu();
  return c < 0 ? 0 : static_cast<uint16_t>(c);
}

void get_comm(uint64_t out[2]) noexcept {
  char name[17] = {};
  prctl(PR_GET_NAME, name, 0, 0, 0);
  memcpy(out, name, 16);
}

void store_comm(rb_buffer *b) noexcept {
  uint64_t c[2];
  get_comm(c);
  b->comm[0].store(c[0], std::memory_order_relaxed);
  b->comm[1].store(c[1], std::memory_order_relaxed);
}

// Sets up the writer and reader state of a buffer in state BUF_INIT (no reader touches it).
bool init_buffer(rb_buffer *b, uint32_t npages) noexcept {
  if (b->data && b->npages != npages) {
    munmap(b->data, b->map_len);
    b->data = nullptr;
  }
  if (!b->data) {
    size_t len = npages * (k_rb_page_size + sizeof(rb_page_meta));
    len = (len + 4095) & ~size_t{4095};
    // Pages allocated now, as the kernel allocates a buffer's pages when it is sized: a
    // first write to each page would otherwise fault on the hot path (a fault and a page
    // clear for every ~40 function-graph calls: ~50 ns a call on the project's VM).
    void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED)
      return false;
    b->data = static_cast<char *>(m);
    b->meta = reinterpret_cast<rb_page_meta *>(b->data + npages * k_rb_page_size);
    b->map_len = len;
    b->npages = npages;
  }
  for (uint32_t i = 0; i < npages; i++) {
    b->meta[i].seq.store(i == 0 ? 0 : k_no_seq, std::memory_order_relaxed);
    b->meta[i].base.store(0, std::memory_order_relaxed);
    b->meta[i].end.store(0, std::memory_order_relaxed);
  }
  b->head_pos.store(0, std::memory_order_relaxed);
  b->placed.store(0, std::memory_order_relaxed);
  b->pending_seq.store(k_no_seq, std::memory_order_relaxed);
  b->nest.store(0, std::memory_order_relaxed);
  b->claiming.store(0, std::memory_order_relaxed);
  __atomic_store_n(&b->written, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&b->dropped, 0, __ATOMIC_RELAXED);
  b->commit_pos.store(0, std::memory_order_relaxed);
  b->read_pos.store(0, std::memory_order_relaxed);
  b->rd = cursor{};
  b->nread = b->overrun_seen = b->written_base = b->dropped_base = 0;
  return true;
}

inline int32_t sys_gettid() noexcept { return static_cast<int32_t>(syscall(SYS_gettid)); }

// The calling thread's table, mapped or recycled on its first write.
rb_thread_table *alloc_table() noexcept {
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
    size_t len = (sizeof(rb_thread_table) + 4095) & ~size_t{4095};
    void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      return nullptr;
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
  t->tid = sys_gettid();
  tls_rbt = t;
  if (g_exit_key_ok)
    pthread_setspecific(g_exit_key, t);
  return t;
}

// This thread's buffer of TB if it has one (after a swap it may hold one it wrote before).
rb_buffer *find_owned(trace_buffer *tb, int32_t tid) noexcept {
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next)
    if (b->owner.load(std::memory_order_relaxed) == tb &&
        b->tid.load(std::memory_order_relaxed) == tid &&
        b->state.load(std::memory_order_acquire) == BUF_OWNED)
      return b;
  return nullptr;
}

// Takes a free buffer or maps a new one, and makes it the calling thread's buffer of TB.
rb_buffer *map_thread_buffer(trace_buffer *tb, int32_t tid) noexcept {
  uint32_t npages = tb->npages.load(std::memory_order_relaxed);
  rb_buffer *b = nullptr;
  for (rb_buffer *it = g_list.load(std::memory_order_acquire); it; it = it->next) {
    int expect = BUF_FREE;
    if (it->state.load(std::memory_order_relaxed) == BUF_FREE &&
        it->state.compare_exchange_strong(expect, BUF_INIT, std::memory_order_acquire)) {
      b = it;
      break;
    }
  }
  if (b) {
    if (!init_buffer(b, npages)) {
      b->state.store(BUF_FREE, std::memory_order_release);
      return nullptr;
    }
  } else {
    size_t len = (sizeof(rb_buffer) + 4095) & ~size_t{4095};
    void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      return nullptr;
    b = new (m) rb_buffer;
    if (!init_buffer(b, npages)) {
      munmap(m, len);
      return nullptr;
    }
    rb_buffer *head = g_list.load(std::memory_order_relaxed);
    do {
      b->next = head;
    } while (!g_list.compare_exchange_weak(head, b, std::memory_order_release,
                                           std::memory_order_relaxed));
  }
  b->tid.store(tid, std::memory_order_relaxed);
  store_comm(b);
  b->owner.store(tb, std::memory_order_relaxed);
  b->state.store(BUF_OWNED, std::memory_order_release);
  return b;
}

// The calling thread's first event in TB (or its first after a swap or a free of TB).
// Async-signal-safe: mmap, atomics, prctl, gettid, pthread_setspecific on a low key.
__attribute__((noinline)) rb_buffer *attach_buffer(trace_buffer *tb) noexcept {
  rb_thread_table *t = tls_rbt;
  if (t == k_dead_table || tls_acquiring) {
    tb->orphan_dropped.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  tls_acquiring = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  rb_buffer *b = nullptr;
  if (!t)
    t = alloc_table();
  // A swap in progress (odd generation) takes a few microseconds: wait it out, boundedly.
  uint64_t gen = tb->gen.load(std::memory_order_acquire);
  for (int spin = 0; (gen & 1) && spin < (1 << 20); spin++) {
    __builtin_ia32_pause();
    gen = tb->gen.load(std::memory_order_acquire);
  }
  if (t && !(gen & 1)) {
    b = find_owned(tb, t->tid);
    if (!b)
      b = map_thread_buffer(tb, t->tid);
    // A swap that ran meanwhile may have moved B to the other buffer: it is used for this
    // event only (like a write in flight during a swap) and looked up again next time.
    if (b && tb->gen.load(std::memory_order_acquire) == gen)
      t->slot[tb_id(tb)] = rb_slot{b, gen};
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tls_acquiring = false;
  if (!b)
    tb->orphan_dropped.fetch_add(1, std::memory_order_relaxed);
  return b;
}

DPROBE_NOPROBE inline rb_buffer *thread_buffer(trace_buffer *tb) noexcept {
  rb_thread_table *t = tls_rbt;
  if (likely(t > k_dead_table)) {
    const rb_slot &s = t->slot[tb_id(tb)];
    if (likely(s.gen == tb->gen.load(std::memory_order_acquire) && s.buf))
      return s.buf;
  }
  return attach_buffer(tb);
}

// A forked child starts with empty buffers: the parent's records are the parent's to
// report, and the other threads no longer exist. Only the forking thread runs here.
void fork_child() noexcept {
  g_waiting.store(0, std::memory_order_relaxed);
  new (&g_alloc_mutex) std::mutex;
  for (trace_buffer &tb : g_tbs) {
    new (&tb.reader_mutex) std::mutex; // a parent thread may have held it
    tb.retired = rb_stats{};
    tb.orphan_base = tb.orphan_dropped.load(std::memory_order_relaxed);
  }
  rb_thread_table *self = tls_rbt > k_dead_table ? tls_rbt : nullptr;
  const int32_t tid = sys_gettid();
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next) {
    bool mine = false;
    if (self && b->state.load(std::memory_order_relaxed) == BUF_OWNED) {
      trace_buffer *tb = b->owner.load(std::memory_order_relaxed);
      const rb_slot &s = self->slot[tb_id(tb)];
      mine = s.buf == b && s.gen == tb->gen.load(std::memory_order_relaxed);
    }
    if (mine) {
      b->state.store(BUF_INIT, std::memory_order_relaxed);
      if (init_buffer(b, b->npages)) {
        b->tid.store(tid, std::memory_order_relaxed);
        b->state.store(BUF_OWNED, std::memory_order_release);
        continue;
      }
    }
    // Other threads' buffers, and one caught mid-acquisition (init_buffer redoes it all).
    b->owner.store(nullptr, std::memory_order_relaxed);
    b->state.store(BUF_FREE, std::memory_order_release);
  }
  if (self) {
    self->tid = tid;
    for (rb_slot &s : self->slot)
      if (s.buf && s.buf->state.load(std::memory_order_relaxed) != BUF_OWNED)
        s = rb_slot{};
  }
  for (rb_thread_table *t = g_tables.load(std::memory_order_acquire); t; t = t->next)
    if (t != self)
      t->in_use.store(0, std::memory_order_release);
}

// The thread's buffers stay readable, marked as exited; its table is recycled.
void thread_exit(void *p) noexcept {
  auto *t = static_cast<rb_thread_table *>(p);
  tls_rbt = k_dead_table;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next) {
    if (b->tid.load(std::memory_order_relaxed) != t->tid ||
        b->state.load(std::memory_order_acquire) != BUF_OWNED)
      continue;
    store_comm(b); // the final name, for printing after the thread is gone
    int expect = BUF_OWNED;
    b->state.compare_exchange_strong(expect, BUF_EXITED, std::memory_order_release);
  }
  t->in_use.store(0, std::memory_order_release);
}

// Moves the writer to the next page. False when that page cannot be taken (discard mode and
// it is unread, or it holds the pending outer record of a nested write).
DPROBE_NOPROBE bool switch_page(const trace_buffer *tb, rb_buffer *b, uint64_t seq,
                                uint32_t off) noexcept {
  const uint64_t np = b->npages;
  const uint64_t n = seq + 1;
  rb_page_meta &slot = b->meta[n % np];
  b->meta[seq % np].end.store(off, std::memory_order_release);
  if (n >= np) {
    const uint64_t old = n - np; // the page this slot holds now
    uint64_t pend = b->pending_seq.load(std::memory_order_relaxed);
    if (pend != k_no_seq && pend <= old)
      return false;
    if (!tb->overwrite.load(std::memory_order_relaxed)) {
      uint64_t rp = b->read_pos.load(std::memory_order_acquire);
      if (pos_seq(rp) < old ||
          (pos_seq(rp) == old && pos_off(rp) < slot.end.load(std::memory_order_relaxed)))
        return false;
    }
  }
  // Seqlock write side: new seq first, then the page's content.
  slot.seq.store(n, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.base.store(b->placed.load(std::memory_order_relaxed), std::memory_order_relaxed);
  slot.end.store(0, std::memory_order_relaxed);
  b->head_pos.store(make_pos(n, 0), std::memory_order_relaxed);
  return true;
}

__attribute__((noinline)) void wake_readers() noexcept {
  if (g_waiting.exchange(0, std::memory_order_relaxed) == 1)
    syscall(SYS_futex, &g_waiting, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// End of a write (commit or discard): the outermost one publishes everything reserved.
DPROBE_NOPROBE inline void finish_write(rb_buffer *b) noexcept {
  uint32_t d = b->nest.load(std::memory_order_relaxed) - 1;
  b->nest.store(d, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (d != 0)
    return; // an outer write on this thread will publish
  b->pending_seq.store(k_no_seq, std::memory_order_relaxed);
  // A signal handler writing between the load and the store publishes a later head first;
  // storing ours may step commit_pos back for a moment, and the loop sets it forward again.
  for (;;) {
    uint64_t h = b->head_pos.load(std::memory_order_relaxed);
    b->commit_pos.store(h, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (b->head_pos.load(std::memory_order_relaxed) == h)
      break;
  }
  // Pairs with the reader's heavy barrier in ring_buffer_wait: no fence needed here.
  if (unlikely(g_waiting.load(std::memory_order_relaxed)))
    wake_readers();
}

// The buffer a reserved EVENT of TB lives in: this thread's (a swap in between leaves the
// slot stale but the buffer the same, see attach_buffer).
DPROBE_NOPROBE inline rb_buffer *event_buffer(trace_buffer *tb, void *event) noexcept {
  rb_thread_table *t = tls_rbt;
  if (unlikely(t <= k_dead_table || !event))
    return nullptr;
  auto *p = static_cast<char *>(event);
  rb_buffer *b = t->slot[tb_id(tb)].buf;
  if (likely(b && p >= b->data && p < b->data + size_t{b->npages} * k_rb_page_size))
    return b;
  // Reserved through a lookup that was not cached (a swap raced with it): find it by address.
  for (rb_buffer *it = g_list.load(std::memory_order_acquire); it; it = it->next)
    if (it->data && p >= it->data && p < it->data + size_t{it->npages} * k_rb_page_size)
      return it;
  return nullptr;
}

} // namespace


// ---- trace buffers ------------------------------------------------------------------------

trace_buffer *ring_buffer_global() noexcept { return &g_tbs[0]; }

unsigned ring_buffer_id(const trace_buffer *tb) noexcept { return tb_id(tb); }

trace_buffer *ring_buffer_alloc() {
  std::lock_guard<std::mutex> g(g_alloc_mutex);
  for (unsigned i = 1; i < k_rb_max_trace_buffers; i++) {
    trace_buffer &tb = g_tbs[i];
    if (tb.in_use.load(std::memory_order_relaxed))
      continue;
    std::lock_guard<std::mutex> lk(tb.reader_mutex);
    tb.gen.store(tb.gen.load(std::memory_order_relaxed) + 2, std::memory_order_release);
    tb.tracing_on.store(true, std::memory_order_relaxed);
    tb.overwrite.store(true, std::memory_order_relaxed);
    tb.npages.store(k_rb_default_size_kb * 1024 / k_rb_page_size, std::memory_order_relaxed);
    tb.retired = rb_stats{};
    tb.orphan_base = tb.orphan_dropped.load(std::memory_order_relaxed);
    tb.in_use.store(true, std::memory_order_release);
    return &tb;
  }
  return nullptr;
}

void ring_buffer_free(trace_buffer *tb) {
  if (!tb || tb == &g_tbs[0])
    return;
  std::lock_guard<std::mutex> g(g_alloc_mutex);
  std::lock_guard<std::mutex> lk(tb->reader_mutex);
  tb->tracing_on.store(false, std::memory_order_relaxed);
  // Every thread's slot for TB becomes stale; no writer can be using it (see the header).
  tb->gen.store(tb->gen.load(std::memory_order_relaxed) + 2, std::memory_order_release);
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next) {
    if (b->owner.load(std::memory_order_relaxed) != tb)
      continue;
    int s = b->state.load(std::memory_order_acquire);
    if (s != BUF_OWNED && s != BUF_EXITED)
      continue;
    b->owner.store(nullptr, std::memory_order_relaxed);
    if (b->data) {
      munmap(b->data, b->map_len);
      b->data = nullptr;
      b->meta = nullptr;
      b->npages = 0;
    }
    b->state.store(BUF_FREE, std::memory_order_release);
  }
  tb->in_use.store(false, std::memory_order_release);
}

namespace {
// Both reader locks held.
void swap_locked(trace_buffer *a, trace_buffer *b) noexcept {
  // Odd while owners change: a thread attaching meanwhile does not cache what it finds.
  a->gen.fetch_add(1, std::memory_order_acq_rel);
  b->gen.fetch_add(1, std::memory_order_acq_rel);
  for (rb_buffer *r = g_list.load(std::memory_order_acquire); r; r = r->next) {
    trace_buffer *o = r->owner.load(std::memory_order_relaxed);
    if (o == a)
      r->owner.store(b, std::memory_order_relaxed);
    else if (o == b)
      r->owner.store(a, std::memory_order_relaxed);
  }
  std::swap(a->retired, b->retired);
  const uint64_t a_orphans = a->orphan_dropped.load(std::memory_order_relaxed) - a->orphan_base;
  const uint64_t b_orphans = b->orphan_dropped.load(std::memory_order_relaxed) - b->orphan_base;
  a->orphan_base = a->orphan_dropped.load(std::memory_order_relaxed) - b_orphans;
  b->orphan_base = b->orphan_dropped.load(std::memory_order_relaxed) - a_orphans;
  a->gen.fetch_add(1, std::memory_order_acq_rel);
  b->gen.fetch_add(1, std::memory_order_acq_rel);
}
} // namespace

void ring_buffer_swap(trace_buffer *a, trace_buffer *b) {
  if (!a || !b || a == b)
    return;
  trace_buffer *first = tb_id(a) < tb_id(b) ? a : b;
  trace_buffer *second = first == a ? b : a;
  std::lock_guard<std::mutex> l1(first->reader_mutex);
  std::lock_guard<std::mutex> l2(second->reader_mutex);
  swap_locked(a, b);
}

bool ring_buffer_try_swap(trace_buffer *a, trace_buffer *b) noexcept {
  if (!a || !b || a == b)
    return false;
  std::unique_lock<std::mutex> l1(a->reader_mutex, std::try_to_lock);
  if (!l1.owns_lock())
    return false;
  std::unique_lock<std::mutex> l2(b->reader_mutex, std::try_to_lock);
  if (!l2.owns_lock())
    return false;
  swap_locked(a, b);
  return true;
}

// ---- write side ---------------------------------------------------------------------------

DPROBE_NOPROBE void *ring_buffer_reserve(trace_buffer *tb, size_t len) noexcept {
  if (unlikely(!tb->tracing_on.load(std::memory_order_relaxed)))
    return nullptr;
  rb_buffer *b = thread_buffer(tb);
  if (unlikely(!b))
    return nullptr;
  if (unlikely(len > k_rb_max_payload)) {
    local_inc(&b->dropped);
    return nullptr;
  }
  const uint32_t need = static_cast<uint32_t>((sizeof(rb_event_header) + len + 7) & ~size_t{7});
  const uint32_t depth = b->nest.load(std::memory_order_relaxed);
  b->nest.store(depth + 1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (unlikely(depth >= k_rb_max_nesting || b->claiming.load(std::memory_order_relaxed))) {
    b->nest.store(depth, std::memory_order_relaxed);
    local_inc(&b->dropped);
    return nullptr;
  }
  const uint64_t ts = trace_clock_now();
  const uint16_t cpu = current_cpu();

  b->claiming.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  uint64_t pos = b->head_pos.load(std::memory_order_relaxed);
  uint64_t seq = pos_seq(pos);
  uint32_t off = pos_off(pos);
  if (unlikely(off + need > k_rb_page_size)) {
    if (!switch_page(tb, b, seq, off)) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
      b->claiming.store(0, std::memory_order_relaxed);
      b->nest.store(depth, std::memory_order_relaxed);
      local_inc(&b->dropped);
      return nullptr;
    }
    seq++;
    off = 0;
  }
  const uint64_t idx = b->placed.load(std::memory_order_relaxed);
  b->placed.store(idx + 1, std::memory_order_relaxed);
  b->head_pos.store(make_pos(seq, off + need), std::memory_order_relaxed);
  if (depth == 0)
    b->pending_seq.store(seq, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  b->claiming.store(0, std::memory_order_relaxed);

  const uint64_t slot = seq % b->npages;
  auto *h = reinterpret_cast<rb_event_header *>(b->data + slot * k_rb_page_size + off);
  h->len = static_cast<uint16_t>(need);
  h->type = RB_TYPE_DATA;
  h->flags = depth ? RB_FLAG_NESTED : 0;
  h->cpu = cpu;
  h->nr = static_cast<uint16_t>(idx - b->meta[slot].base.load(std::memory_order_relaxed));
  h->ts = ts;
  return h + 1;
}

DPROBE_NOPROBE void ring_buffer_commit(trace_buffer *tb, void *event) noexcept {
  rb_buffer *b = event_buffer(tb, event);
  if (unlikely(!b))
    return;
  local_inc(&b->written);
  finish_write(b);
}

DPROBE_NOPROBE void ring_buffer_discard(trace_buffer *tb, void *event) noexcept {
  rb_buffer *b = event_buffer(tb, event);
  if (unlikely(!b))
    return;
  rb_event_header *h = ring_buffer_event_header(event);
  const uint64_t byte = static_cast<uint64_t>(reinterpret_cast<char *>(h) - b->data);
  const uint64_t slot = byte / k_rb_page_size;
  const uint32_t off = static_cast<uint32_t>(byte % k_rb_page_size);
  const uint64_t seq = b->meta[slot].seq.load(std::memory_order_relaxed);

  b->claiming.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (b->head_pos.load(std::memory_order_relaxed) == make_pos(seq, off + h->len)) {
    // Nothing was reserved after it: take the space and the index back.
    b->head_pos.store(make_pos(seq, off), std::memory_order_relaxed);
    b->placed.store(b->placed.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  } else {
    h->type = RB_TYPE_PADDING;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  b->claiming.store(0, std::memory_order_relaxed);
  finish_write(b);
}

DPROBE_NOPROBE void *ring_buffer_reserve(size_t len) noexcept {
  return ring_buffer_reserve(&g_tbs[0], len);
}
DPROBE_NOPROBE void ring_buffer_commit(void *event) noexcept {
  ring_buffer_commit(&g_tbs[0], event);
}
DPROBE_NOPROBE void ring_buffer_discard(void *event) noexcept {
  ring_buffer_discard(&g_tbs[0], event);
}

// ---- control ------------------------------------------------------------------------------

void ring_buffer_set_tracing_on(trace_buffer *tb, bool on) noexcept {
  if (on)
    trace_clock_init();
  tb->tracing_on.store(on, std::memory_order_relaxed);
}
bool ring_buffer_tracing_on(const trace_buffer *tb) noexcept {
  return tb->tracing_on.load(std::memory_order_relaxed);
}
void ring_buffer_set_overwrite(trace_buffer *tb, bool on) noexcept {
  tb->overwrite.store(on, std::memory_order_relaxed);
}
bool ring_buffer_overwrite(const trace_buffer *tb) noexcept {
  return tb->overwrite.load(std::memory_order_relaxed);
}

int ring_buffer_set_size_kb(trace_buffer *tb, size_t kb) noexcept {
  if (kb == 0 || kb > (size_t{1} << 30))
    return -EINVAL;
  size_t pages = (kb * 1024 + k_rb_page_size - 1) / k_rb_page_size;
  pages = std::max(pages, k_rb_min_pages);
  tb->npages.store(static_cast<uint32_t>(pages), std::memory_order_relaxed);
  return 0;
}

size_t ring_buffer_size_kb(const trace_buffer *tb) noexcept {
  return tb->npages.load(std::memory_order_relaxed) * k_rb_page_size / 1024;
}

void ring_buffer_set_tracing_on(bool on) noexcept { ring_buffer_set_tracing_on(&g_tbs[0], on); }
bool ring_buffer_tracing_on() noexcept { return ring_buffer_tracing_on(&g_tbs[0]); }
void ring_buffer_set_overwrite(bool on) noexcept { ring_buffer_set_overwrite(&g_tbs[0], on); }
bool ring_buffer_overwrite() noexcept { return ring_buffer_overwrite(&g_tbs[0]); }
int ring_buffer_set_size_kb(size_t kb) noexcept { return ring_buffer_set_size_kb(&g_tbs[0], kb); }
size_t ring_buffer_size_kb() noexcept { return ring_buffer_size_kb(&g_tbs[0]); }

// ---- read side ----------------------------------------------------------------------------

namespace {

struct peeked {
  bool valid = false;
  rb_event_header hdr{};
  std::vector<char> payload;
  uint64_t lost = 0;
  cursor next; // position after the record
};

// Oldest page a lapped reader can resume on (the writer may be up to a page past commit).
void resync(rb_buffer *b, cursor &c, uint64_t cseq) {
  const uint64_t np = b->npages;
  uint64_t oldest = cseq >= np - 1 ? cseq - (np - 1) : 0; // retried if already gone
  c.seq = std::max(oldest, c.seq + 1);
  c.off = 0;
}

// Copies the next data record at or after C into OUT; advances C over padding. False when
// nothing committed is left.
bool read_next(rb_buffer *b, cursor &c, peeked &out) {
  const uint64_t np = b->npages;
  for (;;) {
    uint64_t cp = b->commit_pos.load(std::memory_order_acquire);
    uint64_t cseq = pos_seq(cp);
    if (c.seq > cseq)
      return false;
    rb_page_meta &m = b->meta[c.seq % np];
    uint64_t s1 = m.seq.load(std::memory_order_acquire);
    if (s1 != c.seq) {
      if (s1 == k_no_seq || s1 < c.seq)
        return false; // cannot happen for seq <= commit; be safe
      resync(b, c, cseq);
      continue;
    }
    uint32_t limit = c.seq < cseq ? m.end.load(std::memory_order_acquire) : pos_off(cp);
    uint64_t base = m.base.load(std::memory_order_relaxed);
    if (c.off >= limit) {
      if (c.seq < cseq) {
        c.seq++;
        c.off = 0;
        continue;
      }
      return false;
    }
    const char *rec = b->data + (c.seq % np) * k_rb_page_size + c.off;
    rb_event_header h;
    memcpy(&h, rec, sizeof h);
    bool sane = h.len >= sizeof h && (h.len & 7) == 0 && c.off + h.len <= limit;
    if (sane && h.type == RB_TYPE_DATA) {
      out.payload.resize(h.len - sizeof h);
      if (!out.payload.empty())
        memcpy(out.payload.data(), rec + sizeof h, out.payload.size());
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (m.seq.load(std::memory_order_relaxed) != c.seq) {
      resync(b, c, cseq);
      continue;
    }
    if (!sane) { // only reachable through memory corruption: skip the page
      c.seq++;
      c.off = 0;
      continue;
    }
    uint64_t idx = base + h.nr;
    uint64_t lost = idx > c.index ? idx - c.index : 0;
    if (h.type != RB_TYPE_DATA) {
      // Padding keeps its index: a discarded record that could not be given back.
      c.off += h.len;
      c.index = idx + 1;
      out.lost += lost;
      continue;
    }
    out.valid = true;
    out.hdr = h;
    out.lost += lost;
    out.next = c;
    out.next.off += h.len;
    out.next.index = idx + 1;
    return true;
  }
}

bool readable(const rb_buffer *b, const trace_buffer *tb) {
  int s = b->state.load(std::memory_order_acquire);
  return (s == BUF_OWNED || s == BUF_EXITED) && b->owner.load(std::memory_order_relaxed) == tb;
}

bool buffer_has_data(rb_buffer *b) {
  cursor c = b->rd;
  peeked p;
  return read_next(b, c, p);
}

rb_stats buffer_stats(rb_buffer *b);

// Exited, drained buffers of TB become free for new threads.
void reap_locked(trace_buffer *tb) {
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next) {
    if (b->owner.load(std::memory_order_relaxed) == tb &&
        b->state.load(std::memory_order_acquire) == BUF_EXITED && !buffer_has_data(b)) {
      rb_stats st = buffer_stats(b);
      tb->retired.written += st.written;
      tb->retired.read += st.read;
      tb->retired.overrun += st.overrun;
      tb->retired.dropped += st.dropped;
      b->owner.store(nullptr, std::memory_order_relaxed);
      b->state.store(BUF_FREE, std::memory_order_release);
    }
  }
}

} // namespace

struct ring_buffer_reader::impl {
  struct source {
    rb_buffer *b;
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

ring_buffer_reader::ring_buffer_reader(mode m, trace_buffer *tb) : p_(new impl) {
  if (!tb)
    tb = &g_tbs[0];
  p_->lock = std::unique_lock<std::mutex>(tb->reader_mutex);
  p_->tb = tb;
  p_->m = m;
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next) {
    if (!readable(b, tb))
      continue;
    impl::source s{};
    s.b = b;
    s.c = b->rd;
    uint64_t c[2] = {b->comm[0].load(std::memory_order_relaxed),
                     b->comm[1].load(std::memory_order_relaxed)};
    memcpy(s.comm, c, 16);
    s.comm[16] = 0;
    p_->src.push_back(std::move(s));
  }
}

ring_buffer_reader::~ring_buffer_reader() {
  if (p_->m == CONSUME)
    reap_locked(p_->tb);
  delete p_;
}

bool ring_buffer_reader::next(rb_record &rec) {
  impl::source *best = nullptr;
  for (auto &s : p_->src) {
    if (!s.p.valid)
      read_next(s.b, s.c, s.p);
    if (s.p.valid && (!best || s.p.hdr.ts < best->p.hdr.ts))
      best = &s;
  }
  if (!best)
    return false;
  peeked &p = best->p;
  rb_buffer *b = best->b;
  rec.ts = p.hdr.ts;
  rec.tid = b->tid.load(std::memory_order_relaxed);
  rec.cpu = p.hdr.cpu;
  rec.flags = p.hdr.flags;
  rec.lost_before = p.lost;
  rec.payload = p.payload.data();
  rec.len = static_cast<uint32_t>(p.payload.size());
  rec.comm = best->comm;
  best->c = p.next;
  if (p_->m == CONSUME) {
    b->rd = p.next;
    b->nread++;
    b->overrun_seen += p.lost;
    b->read_pos.store(make_pos(p.next.seq, p.next.off), std::memory_order_release);
  }
  // The payload stays valid until the next call: move it aside before clearing.
  std::swap(p.payload, p_->out);
  rec.payload = p_->out.data();
  p.valid = false;
  p.lost = 0;
  return true;
}

void ring_buffer_reset(trace_buffer *tb) {
  std::lock_guard<std::mutex> lk(tb->reader_mutex);
  tb->retired = rb_stats{};
  tb->orphan_base = tb->orphan_dropped.load(std::memory_order_relaxed);
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next) {
    if (!readable(b, tb))
      continue;
    if (b->state.load(std::memory_order_acquire) == BUF_EXITED) {
      b->owner.store(nullptr, std::memory_order_relaxed);
      b->state.store(BUF_FREE, std::memory_order_release);
      continue;
    }
    // Everything committed counts as consumed; records reserved before and committed after
    // the reset still show up, with no lost count.
    uint64_t cp = b->commit_pos.load(std::memory_order_acquire);
    b->rd.seq = pos_seq(cp);
    b->rd.off = pos_off(cp);
    b->rd.index = b->placed.load(std::memory_order_relaxed);
    b->written_base = local_read(&b->written);
    b->dropped_base = local_read(&b->dropped);
    b->nread = 0;
    b->overrun_seen = 0;
    b->read_pos.store(cp, std::memory_order_release);
  }
}

void ring_buffer_reset() { ring_buffer_reset(&g_tbs[0]); }

int ring_buffer_set_clock(std::string_view name) {
  int err = trace_clock_set(name);
  if (err)
    return err;
  trace_clock_init();
  for (trace_buffer &tb : g_tbs)
    if (tb.in_use.load(std::memory_order_acquire))
      ring_buffer_reset(&tb);
  return 0;
}

bool ring_buffer_has_data(trace_buffer *tb) {
  std::lock_guard<std::mutex> lk(tb->reader_mutex);
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next)
    if (readable(b, tb) && buffer_has_data(b))
      return true;
  return false;
}

bool ring_buffer_has_data() { return ring_buffer_has_data(&g_tbs[0]); }

bool ring_buffer_wait(int timeout_ms) { return ring_buffer_wait(&g_tbs[0], timeout_ms); }

bool ring_buffer_wait(trace_buffer *tb, int timeout_ms) {
  using clk = std::chrono::steady_clock;
  const auto deadline = clk::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  // Without membarrier a wakeup can be missed (the writer has no fence); poll then.
  const long slice_ms = membarrier_expedited_available() ? 1000 : 10;
  for (;;) {
    g_waiting.store(1, std::memory_order_seq_cst);
    membarrier_everywhere(false); // writers now see g_waiting, or we see their commit
    if (ring_buffer_has_data(tb))
      return true;
    long long left_ns = slice_ms * 1000000LL;
    if (timeout_ms >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - clk::now());
      if (left.count() <= 0)
        return false;
      left_ns = std::min<long long>(left_ns, left.count());
    }
    struct timespec ts = {static_cast<time_t>(left_ns / 1000000000LL),
                          static_cast<long>(left_ns % 1000000000LL)};
    syscall(SYS_futex, &g_waiting, FUTEX_WAIT_PRIVATE, 1, &ts, nullptr, 0);
  }
}

namespace {
rb_stats buffer_stats(rb_buffer *b) {
  rb_stats st;
  st.tid = b->tid.load(std::memory_order_relaxed);
  st.exited = b->state.load(std::memory_order_acquire) == BUF_EXITED;
  const uint64_t name[2] = {b->comm[0].load(std::memory_order_relaxed),
                            b->comm[1].load(std::memory_order_relaxed)};
  memcpy(st.comm, name, 16);
  st.written = local_read(&b->written) - b->written_base;
  st.dropped = local_read(&b->dropped) - b->dropped_base;
  st.read = b->nread;
  // Events overwritten since the consumer last read: the index gap to the oldest record.
  cursor c = b->rd;
  peeked p;
  read_next(b, c, p);
  st.overrun = b->overrun_seen + p.lost;
  uint64_t gone = st.read + st.overrun;
  st.entries = st.written > gone ? st.written - gone : 0;
  return st;
}
} // namespace

std::vector<rb_stats> ring_buffer_thread_stats(trace_buffer *tb) {
  std::lock_guard<std::mutex> lk(tb->reader_mutex);
  std::vector<rb_stats> out;
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next)
    if (readable(b, tb))
      out.push_back(buffer_stats(b));
  return out;
}

std::vector<rb_stats> ring_buffer_thread_stats() { return ring_buffer_thread_stats(&g_tbs[0]); }

rb_stats ring_buffer_stats(trace_buffer *tb) {
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

rb_stats ring_buffer_stats() { return ring_buffer_stats(&g_tbs[0]); }

size_t ring_buffer_nr_buffers() {

  size_t n = 0;
  for (rb_buffer *b = g_list.load(std::memory_order_acquire); b; b = b->next)
    n++;
  return n;
}

} // namespace dprobe
