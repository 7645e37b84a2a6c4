// A thread's buffers (see ring_buffer_internal.h): mapping one on a thread's first event,
// recycling free ones, the per-thread tables of the other trace buffers, a thread's exit and
// a fork. Slow paths of the writer, reached through dprobe_ext_guarded (the C library may
// run here: pthread_setspecific, mmap), and async-signal-safe: a probe handler run from a
// signal handler may map a thread's first buffer.
#include "core/ring_buffer_internal.h"

#include "arch/x86_64/cpu.h"
#include "core/own_fds.h"
#include "core/trace_clock.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <new>

namespace dprobe
{
namespace rb
{

process_state process;
export_state exported;
__thread thread_state cur __attribute__((tls_model("initial-exec")));

namespace
{

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
// (cur.node, cur.table) dangle: a fork in that window must not follow them (its child
// crashed in fork_child). Nothing is written any more: the handlers do nothing.
void fork_prepare() noexcept
{
    if (!process.released.load(std::memory_order_acquire)) ring_buffer_thread_mute(true);
}
void fork_parent() noexcept
{
    if (!process.released.load(std::memory_order_acquire)) ring_buffer_thread_mute(false);
}
void fork_child_unmute() noexcept
{
    if (process.released.load(std::memory_order_acquire)) return;
    fork_child();
    ring_buffer_thread_mute(false);
}

// Process setup, before any probe can run: cheap, no calibration here.
__attribute__((constructor)) void rb_setup()
{
    for (unsigned i = 0; i < k_rb_max_trace_buffers; i++)
        process.tbs[i].id = i;
    global_tb()->in_use.store(true, std::memory_order_relaxed);
    process.exit_key_ok = pthread_key_create(&process.exit_key, thread_exit) == 0;
    process.rseq_ok = __rseq_size >= 8;
    pthread_atfork(fork_prepare, fork_parent, fork_child_unmute);
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
        off = exported.arena->file_end.fetch_add(len, std::memory_order_relaxed);
        // fallocate grows the file without ever shrinking it (two threads growing it at once
        // with ftruncate could cut each other's slice off).
        if (arch::raw_syscall(SYS_fallocate, exported.fd, 0, static_cast<long>(off),
                              static_cast<long>(len)) != 0)
            return nullptr;
        // Pages allocated now, as the kernel allocates a buffer's pages when it is sized: a
        // first write to each page would otherwise fault on the hot path.
        m = raw_mmap(len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, exported.fd,
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
        uint32_t slot = exported.arena->nslots.fetch_add(1, std::memory_order_relaxed);
        if (slot < k_arena_slots)
            exported.arena->slot_offset[slot].store(off, std::memory_order_release);
    }
    rb_node *head = process.list.load(std::memory_order_relaxed);
    do {
        n->next = head;
    } while (!process.list.compare_exchange_weak(head, n, std::memory_order_release,
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
    for (rb_node *it = process.list.load(std::memory_order_acquire); it; it = it->next) {
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
    if (process.exit_key_ok) pthread_setspecific(process.exit_key, k_exit_key_value);
    return n;
}

// The calling thread's buffer of TB that a swap brought it (one it wrote before), if any.
rb_node *find_owned(trace_buffer *tb, int32_t tid, bool arena) noexcept
{
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next)
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

void count_orphan(trace_buffer *tb) noexcept
{
    tb->orphan_dropped.fetch_add(1, std::memory_order_relaxed);
    if (tb == global_tb())
        if (arena_header *a = exported.arena)
            a->orphan_dropped.fetch_add(1, std::memory_order_relaxed);
}

// Whether the calling thread writes nothing: muted, or one of dprobe's own threads (by
// name, checked on its first event).
bool thread_silenced() noexcept
{
    if (cur.rb == k_muted_buffer || cur.mute_depth) return true;
    if (cur.speak_depth) return false; // writing on another's behalf (trace_marker)
    if (process.muted_prefix[0] && !cur.node && !cur.table) {
        char name[17] = {};
        arch::raw_syscall(SYS_prctl, PR_GET_NAME, reinterpret_cast<long>(name));
        if (strncmp(name, process.muted_prefix, strlen(process.muted_prefix)) == 0) {
            cur.mute_depth = 1; // for good
            cur.saved_rb = nullptr;
            cur.rb = k_muted_buffer;
            return true;
        }
    }
    return false;
}

} // namespace

// The calling thread's first event in the global buffer, or its first in a new epoch (an
// export, or a swap of the global buffer).
// Async-signal-safe: mmap, atomics, prctl, gettid, pthread_setspecific on a low key.
__attribute__((noinline)) buffer_ctl *acquire_buffer(uint32_t) noexcept
{
    if (thread_silenced()) return nullptr;
    if (cur.rb == k_dead_buffer || cur.acquiring) {
        count_orphan(global_tb());
        return nullptr;
    }
    // Nested in a write on the buffer of the old epoch (a signal handler): this event goes
    // after it, in the same buffer, which the outer write then publishes.
    if (cur.node && cur.node->ctl->nest.load(std::memory_order_relaxed) != 0) return cur.node->ctl;
    cur.acquiring = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // The epoch as it is now: a swap changes owners before it starts a new epoch.
    const uint32_t epoch = process.word.load(std::memory_order_acquire) >> 1;
    const int32_t tid = raw_gettid();
    if (rb_node *old = cur.node) {
        // A signal handler that ran between the caller's look at cur.rb and cur.acquiring
        // above acquired this epoch's buffer itself: this event goes there too. (Retiring it
        // would split the thread's events of one epoch over two buffers, its counts with
        // them: seen under ASan in signal_storm_keeps_records_intact_and_counts_exact.)
        if (old->epoch == epoch && old->owner.load(std::memory_order_relaxed) == global_tb() &&
            old->ctl->tid.load(std::memory_order_relaxed) == tid &&
            old->ctl->state.load(std::memory_order_acquire) == BUF_OWNED) {
            std::atomic_signal_fence(std::memory_order_seq_cst);
            cur.acquiring = false;
            return old->ctl;
        }
        // Another epoch: the events of the old buffer stay readable, the next go elsewhere.
        // A buffer a swap gave another trace buffer stays this thread's there.
        if (old->owner.load(std::memory_order_relaxed) == global_tb() &&
            old->ctl->tid.load(std::memory_order_relaxed) == tid &&
            old->ctl->state.load(std::memory_order_acquire) == BUF_OWNED)
            retire(old);
    }
    const bool arena = exported.arena && epoch == exported.epoch;
    rb_node *n = process.swapped.load(std::memory_order_relaxed)
                     ? find_owned(global_tb(), tid, arena)
                     : nullptr;
    if (!n) n = map_buffer_for(global_tb(), arena);
    if (n) {
        n->epoch = epoch;
        cur.rb = n->ctl;
        cur.node = n;
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);
    cur.acquiring = false;
    if (!n) {
        cur.rb = nullptr;
        cur.node = nullptr;
        count_orphan(global_tb());
        return nullptr;
    }
    return n->ctl;
}

namespace
{

// The calling thread's table, mapped or recycled on its first write to a trace buffer other
// than the global one.
rb_thread_table *alloc_table() noexcept
{
    rb_thread_table *t = nullptr;
    for (rb_thread_table *it = process.tables.load(std::memory_order_acquire); it; it = it->next) {
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
        rb_thread_table *head = process.tables.load(std::memory_order_relaxed);
        do {
            t->next = head;
        } while (!process.tables.compare_exchange_weak(head, t, std::memory_order_release,
                                                       std::memory_order_relaxed));
    } else {
        memset(t->slot, 0, sizeof t->slot);
    }
    t->tid = raw_gettid();
    cur.table = t;
    if (process.exit_key_ok) pthread_setspecific(process.exit_key, k_exit_key_value);
    return t;
}

} // namespace

// The calling thread's first event in TB (or its first after a swap or a free of TB).
// Async-signal-safe, like acquire_buffer.
__attribute__((noinline)) rb_node *attach_buffer(trace_buffer *tb) noexcept
{
    if (thread_silenced()) return nullptr;
    rb_thread_table *t = cur.table;
    if (t == k_dead_table || cur.acquiring) {
        count_orphan(tb);
        return nullptr;
    }
    cur.acquiring = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    rb_node *n = nullptr;
    if (!t) t = alloc_table();
    // A swap in progress (odd generation) takes a few microseconds: wait it out, boundedly.
    uint64_t gen = tb->gen.load(std::memory_order_acquire);
    for (int spin = 0; (gen & 1) && spin < (1 << 20); spin++) {
        arch::cpu_relax();
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
    cur.acquiring = false;
    if (!n) count_orphan(tb);
    return n;
}

namespace
{

void thread_exit(void *p) noexcept
{
    // Other destructors of the thread may still write: the calls a pthread_exit left
    // (unwound exits), handlers of probes hit on the way out. Keep the key set until the
    // last round of destructors (this call of the C library is dprobe's: not recorded).
    if (++cur.exit_rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
        ring_buffer_thread_mute(true);
        const bool again = pthread_setspecific(process.exit_key, p) == 0;
        ring_buffer_thread_mute(false);
        if (again) return;
    }
    // The thread keeps its global buffer for what it still writes on its way out; readers
    // see it gone once its tid is. Its buffers of other trace buffers take nothing more.
    rb_thread_table *t = cur.table;
    if (t > k_dead_table) {
        cur.table = k_dead_table;
        std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    const int32_t tid = raw_gettid();
    rb_node *own = cur.node;
    if (own && own->owner.load(std::memory_order_relaxed) == global_tb() &&
        own->ctl->tid.load(std::memory_order_relaxed) == tid &&
        own->ctl->state.load(std::memory_order_relaxed) == BUF_OWNED)
        retire(own, BUF_EXITING);
    if (t > k_dead_table || process.swapped.load(std::memory_order_relaxed)) {
        for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next) {
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

} // namespace

// A new arena in a new memfd (export, and a forked child). 0 or -errno.
int make_arena() noexcept
{
    int fd = static_cast<int>(arch::raw_syscall(
        SYS_memfd_create, reinterpret_cast<long>(k_arena_memfd_name), MFD_CLOEXEC));
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
    a->consumer_blocking.store(exported.consumer_blocking ? 1 : 0, std::memory_order_relaxed);
    exported.arena = a;
    exported.fd = fd;
    if (exported.narenas < k_max_arenas) exported.arenas[exported.narenas++] = a;
    own_fd_add(fd); // a program closing every descriptor keeps this one (core/own_fds.h)
    return 0;
}

// Starts a new export epoch: every thread's next event goes to a new buffer. Returns it.
uint32_t next_epoch() noexcept
{
    uint32_t w = process.word.load(std::memory_order_relaxed), nw;
    do {
        nw = (w & 1) | (((w >> 1) + 1) << 1);
    } while (!process.word.compare_exchange_weak(w, nw, std::memory_order_relaxed));
    return nw >> 1;
}

namespace
{

// A forked child starts with empty buffers of its own: the parent's events are the parent's
// to report, and the other threads no longer exist. Only the forking thread runs here.
void fork_child() noexcept
{
    process.waiting.store(0, std::memory_order_relaxed);
    new (&process.alloc_mutex) std::mutex;
    for (trace_buffer &tb : process.tbs) {
        new (&tb.reader_mutex) std::mutex; // a parent thread may have held it
        tb.retired = rb_stats{};
        tb.orphan_base = tb.orphan_dropped.load(std::memory_order_relaxed);
    }
    rb_thread_table *self = cur.table > k_dead_table ? cur.table : nullptr;
    const int32_t parent_tid = self       ? self->tid
                               : cur.node ? cur.node->ctl->tid.load(std::memory_order_relaxed)
                                          : 0;
    const int32_t tid = raw_gettid();
    for (rb_thread_table *t = process.tables.load(std::memory_order_acquire); t; t = t->next)
        if (t != self) t->in_use.store(0, std::memory_order_release);
    if (self) self->tid = tid;
    if (exported.arena) {
        // The parent's arena is shared memory: this process must not write it again. Its
        // buffers, and with them the private ones, are set aside, still mapped (a fork of a
        // program that forks often pays no unmapping); the release at the end of the
        // session unmaps them, so a child detached leaves none of them behind.
        rb_node *parents = process.list.exchange(nullptr, std::memory_order_relaxed);
        if (parents) {
            rb_node *last = parents;
            while (last->next)
                last = last->next;
            last->next = process.parent_list;
            process.parent_list = parents;
        }
        if (cur.mute_depth)
            cur.saved_rb = nullptr;
        else
            cur.rb = nullptr;
        cur.node = nullptr;
        if (self) memset(self->slot, 0, sizeof self->slot);
        if (exported.fd >= 0) {
            own_fd_remove(exported.fd);
            arch::raw_syscall(SYS_close, exported.fd);
        }
        exported.arena = nullptr;
        exported.fd = -1;
        exported.gave_up.store(0, std::memory_order_relaxed);
        if (make_arena() == 0) exported.epoch = next_epoch();
        return;
    }
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next) {
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

} // namespace
} // namespace rb

using namespace rb;

DPROBE_NOPROBE uint32_t raw_smp_processor_id() noexcept
{
    return current_cpu();
}

trace_buffer *ring_buffer_alloc()
{
    std::lock_guard<std::mutex> g(process.alloc_mutex);
    for (unsigned i = 1; i < k_rb_max_trace_buffers; i++) {
        trace_buffer &tb = process.tbs[i];
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
    if (!tb || tb == global_tb()) return;
    std::lock_guard<std::mutex> g(process.alloc_mutex);
    std::lock_guard<std::mutex> lk(tb->reader_mutex);
    tb->tracing_on.store(false, std::memory_order_relaxed);
    // Every thread's slot for TB becomes stale; no writer can be using it (see the header).
    tb->gen.store(tb->gen.load(std::memory_order_relaxed) + 2, std::memory_order_release);
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next) {
        if (n->owner.load(std::memory_order_relaxed) != tb || n->in_arena) continue;
        const int st = n->ctl->state.load(std::memory_order_acquire);
        if (st != BUF_OWNED && st != BUF_EXITED && st != BUF_EXITING) continue;
        // Its memory stays mapped, for a new thread of any trace buffer.
        n->owner.store(nullptr, std::memory_order_relaxed);
        n->ctl->state.store(BUF_FREE, std::memory_order_release);
    }
    tb->in_use.store(false, std::memory_order_release);
}

void ring_buffer_thread_mute(bool mute) noexcept
{
    if (mute) {
        if (cur.mute_depth++ == 0) {
            cur.saved_rb = cur.rb;
            cur.rb = k_muted_buffer;
        }
    } else if (cur.mute_depth && --cur.mute_depth == 0) {
        cur.rb = cur.saved_rb;
    }
}

void ring_buffer_thread_speak(bool on) noexcept
{
    if (on) {
        if (cur.speak_depth == 0) {
            // One of dprobe's threads by name is muted for good first, so that it stays
            // muted after this write too. The mute is set aside with its buffer back in
            // place (nullptr for a thread muted for good: it maps one on its first write).
            thread_silenced();
            cur.speak_saved_mute = cur.mute_depth;
            if (cur.mute_depth) {
                cur.mute_depth = 0;
                cur.rb = cur.saved_rb;
            }
        }
        cur.speak_depth++;
    } else if (cur.speak_depth && --cur.speak_depth == 0 && cur.speak_saved_mute) {
        cur.saved_rb = cur.rb == k_muted_buffer ? cur.saved_rb : cur.rb;
        cur.rb = k_muted_buffer;
        cur.mute_depth = cur.speak_saved_mute;
        cur.speak_saved_mute = 0;
    }
}

bool ring_buffer_thread_muted() noexcept
{
    return cur.mute_depth != 0;
}

void ring_buffer_thread_nowait(bool on) noexcept
{
    if (on)
        cur.nowait_depth++;
    else if (cur.nowait_depth)
        cur.nowait_depth--;
}

void ring_buffer_mute_threads_named(const char *prefix) noexcept
{
    char p[sizeof process.muted_prefix] = {};
    if (prefix) strncpy(p, prefix, sizeof p - 1);
    memcpy(process.muted_prefix, p, sizeof p);
}

} // namespace dprobe
