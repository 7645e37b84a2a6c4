// The ring buffer's readers (see ring_buffer_internal.h): the in-process iterator of the
// `trace` and `trace_pipe` files (seqlock per page: an event copied out counts only if its
// page was not recycled meanwhile), reset, waiting for data, and the counts. Ordinary C++:
// mutexes and allocation.
#include "core/ring_buffer_internal.h"

#include "core/membarrier.h"
#include "core/trace_clock.h"

#include <linux/futex.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <vector>

namespace dprobe
{
namespace rb
{

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

} // namespace rb

using namespace rb;

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
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next) {
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
    if (!tb) tb = global_tb();
    p_->lock = std::unique_lock<std::mutex>(tb->reader_mutex);
    p_->tb = tb;
    p_->m = m;
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next) {
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
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next) {
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
    ring_buffer_reset(global_tb());
}

int ring_buffer_set_clock(std::string_view name)
{
    int err = trace_clock_set(name);
    if (err) return err;
    trace_clock_init();
    for (trace_buffer &tb : process.tbs)
        if (tb.in_use.load(std::memory_order_acquire)) ring_buffer_reset(&tb);
    if (arena_header *a = exported.arena)
        a->clock_id = static_cast<uint64_t>(trace_clock_current());
    return 0;
}

bool ring_buffer_has_data(trace_buffer *tb)
{
    std::lock_guard<std::mutex> lk(tb->reader_mutex);
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next)
        if (readable(n, tb) && buffer_has_data(n)) return true;
    return false;
}

bool ring_buffer_has_data()
{
    return ring_buffer_has_data(global_tb());
}

bool ring_buffer_wait(int timeout_ms)
{
    return ring_buffer_wait(global_tb(), timeout_ms);
}

bool ring_buffer_wait(trace_buffer *tb, int timeout_ms)
{
    using clk = std::chrono::steady_clock;
    const auto deadline = clk::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
    // Without membarrier a wakeup can be missed (the writer has no fence); poll then.
    const long slice_ms = membarrier_expedited_available() ? 1000 : 10;
    for (;;) {
        process.waiting.store(1, std::memory_order_seq_cst);
        membarrier_everywhere(false); // writers now see process.waiting, or we see their commit
        if (ring_buffer_has_data(tb)) return true;
        long long left_ns = slice_ms * 1000000LL;
        if (timeout_ms >= 0) {
            auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - clk::now());
            if (left.count() <= 0) return false;
            left_ns = std::min<long long>(left_ns, left.count());
        }
        struct timespec ts = {static_cast<time_t>(left_ns / 1000000000LL),
                              static_cast<long>(left_ns % 1000000000LL)};
        syscall(SYS_futex, &process.waiting, FUTEX_WAIT_PRIVATE, 1, &ts, nullptr, 0);
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
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next)
        if (readable(n, tb)) out.push_back(buffer_stats(n));
    return out;
}

std::vector<rb_stats> ring_buffer_thread_stats()
{
    return ring_buffer_thread_stats(global_tb());
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
    return ring_buffer_stats(global_tb());
}

size_t ring_buffer_nr_buffers()
{
    size_t n = 0;
    for (rb_node *it = process.list.load(std::memory_order_acquire); it; it = it->next)
        n++;
    return n;
}

} // namespace dprobe
