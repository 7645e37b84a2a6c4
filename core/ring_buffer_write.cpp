// The ring buffer's writer (see ring_buffer_internal.h): reserve, commit and discard, page
// switches, waking readers and the consumer. The probe hot path: noexcept, allocation-free,
// lock-free, async-signal-safe, and built -mgeneral-regs-only (a light hit runs it with the
// vector registers unsaved); a thread's first event goes through dprobe_ext_guarded to
// ring_buffer_alloc.cpp.
#include "core/ring_buffer_internal.h"

#include "arch/x86_64/ext_state.h"
#include "core/trace_clock.h"

#include <linux/futex.h>
#include <time.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace dprobe
{
namespace rb
{
namespace
{

DPROBE_NOPROBE inline rb_node *thread_node(trace_buffer *tb) noexcept
{
    rb_thread_table *t = cur.table;
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

// Wakes a consumer that sleeps (consumer_waiting was 1): through its eventfd when it gave
// one (`dprobe record`, which polls many processes), else through the futex word itself (a
// consumer in this process, the agent's streamer: no descriptor to own, none a fork shares).
DPROBE_NOPROBE inline void kick_consumer(arena_header *a) noexcept
{
    if (!a->consumer_waiting.exchange(0, std::memory_order_relaxed)) return;
    if (exported.wake_fd >= 0) {
        const uint64_t one = 1;
        arch::raw_syscall(SYS_write, exported.wake_fd, reinterpret_cast<long>(&one), sizeof one);
    } else {
        // Shared (not private): the arena is a memfd mapping a consumer may share.
        arch::raw_syscall(SYS_futex, reinterpret_cast<long>(&a->consumer_waiting), FUTEX_WAKE,
                          INT_MAX, 0, 0, 0);
    }
}

DPROBE_NOPROBE inline void wake_consumer(buffer_ctl *b, uint64_t seq) noexcept
{
    arena_header *a = exported.arena;
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
    arena_header *a = exported.arena;
    if (!a || cur.nowait_depth || !a->consumer_blocking.load(std::memory_order_relaxed))
        return false;
    const uint64_t gave = exported.gave_up.load(std::memory_order_relaxed);
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
    exported.gave_up.store((uint64_t{1} << 32) | a->progress.load(std::memory_order_relaxed),
                           std::memory_order_relaxed);
    return false;
}

// Moves the writer to the next page of its buffer B of TB, which starts at TS on CPU. False
// when that page cannot be taken (discard mode and it is unread, or it holds the pending
// outer event of a nested write). Only the global buffer's go to a consumer.
DPROBE_NOPROBE bool switch_page(const trace_buffer *tb, buffer_ctl *b, uint64_t seq, uint32_t off,
                                uint64_t ts, uint32_t cpu) noexcept
{
    const bool exported = tb == global_tb();
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
    if (process.waiting.exchange(0, std::memory_order_relaxed) == 1)
        arch::raw_syscall(SYS_futex, reinterpret_cast<long>(&process.waiting), FUTEX_WAKE_PRIVATE,
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
    if (unlikely(process.waiting.load(std::memory_order_relaxed))) wake_readers();
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
    const uint32_t word = process.word.load(std::memory_order_relaxed);
    if (unlikely(!(word & 1))) return nullptr;
    buffer_ctl *b = cur.rb;
    if (unlikely(reinterpret_cast<uintptr_t>(b) <= 2 || cur.node->epoch != (word >> 1))) {
        // Rare (a thread's first event, a new epoch), and it reaches the C library: with the
        // extended state saved when a light handler writes (dprobe_ext_guarded).
        b = reinterpret_cast<buffer_ctl *>(dprobe_ext_guarded(word, 0, 0, [](long w, long, long) {
            return reinterpret_cast<long>(acquire_buffer(static_cast<uint32_t>(w)));
        }));
        if (!b) return nullptr;
    }
    return reserve_in(global_tb(), b, len, small, stamp);
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
    rb_thread_table *t = cur.table;
    if (unlikely(t <= k_dead_table || !event)) return nullptr;
    auto *p = static_cast<char *>(event);
    auto in = [p](const rb_node *n) {
        const buffer_ctl *b = n->ctl;
        return p >= b->data && p < b->data + size_t{b->npages} * k_page_size;
    };
    rb_node *n = t->slot[tb->id].node;
    if (likely(n && in(n))) return n->ctl;
    // Reserved through a lookup that was not cached (a swap raced with it): find it by address.
    for (rb_node *it = process.list.load(std::memory_order_acquire); it; it = it->next)
        if (in(it)) return it->ctl;
    return nullptr;
}

} // namespace
} // namespace rb

using namespace rb;

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
    buffer_ctl *b = cur.rb;
    if (unlikely(!event || reinterpret_cast<uintptr_t>(b) <= 2)) return;
    commit_in(b);
}

DPROBE_NOPROBE void ring_buffer_discard(void *event) noexcept
{
    buffer_ctl *b = cur.rb;
    if (unlikely(!event || reinterpret_cast<uintptr_t>(b) <= 2)) return;
    discard_in(b, event);
}

DPROBE_NOPROBE void *ring_buffer_reserve(trace_buffer *tb, size_t len, rb_stamp *stamp) noexcept
{
    if (tb == global_tb()) return reserve_event(len, false, stamp);
    if (unlikely(!tb->tracing_on.load(std::memory_order_relaxed) || cur.mute_depth)) return nullptr;
    rb_node *n = thread_node(tb);
    if (unlikely(!n)) return nullptr;
    return reserve_in(tb, n->ctl, len, false, stamp);
}

DPROBE_NOPROBE void ring_buffer_commit(trace_buffer *tb, void *event) noexcept
{
    if (tb == global_tb()) return ring_buffer_commit(event);
    if (buffer_ctl *b = event_buffer(tb, event)) commit_in(b);
}

DPROBE_NOPROBE void ring_buffer_discard(trace_buffer *tb, void *event) noexcept
{
    if (tb == global_tb()) return ring_buffer_discard(event);
    if (buffer_ctl *b = event_buffer(tb, event)) discard_in(b, event);
}

} // namespace dprobe
