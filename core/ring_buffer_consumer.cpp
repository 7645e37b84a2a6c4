// The arena consumer (see ring_buffer_consumer.h). It runs outside the probe hot path: in
// `dprobe record`, or on the agent's streamer thread.
//
// Pages are copied out before use and the copy is checked against the page's sequence
// number afterwards (the seqlock of ring_buffer_write.cpp), so an overwrite-mode writer that laps
// the consumer costs events (counted), never a torn page.
#include "core/ring_buffer_consumer.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

namespace dprobe
{

using namespace rb;

namespace
{
// A buffer's state, an exiting thread's turned EXITED once its tid is gone.
int settled_state(buffer_ctl *c, int32_t pid)
{
    int s = c->state.load(std::memory_order_acquire);
    if (s != BUF_EXITING) return s;
    if (syscall(SYS_tgkill, pid, c->tid.load(std::memory_order_relaxed), 0) == 0 || errno != ESRCH)
        return s;
    int expect = BUF_EXITING;
    c->state.compare_exchange_strong(expect, BUF_EXITED, std::memory_order_acq_rel);
    return c->state.load(std::memory_order_acquire);
}
} // namespace

rb_consumer::~rb_consumer()
{
    for (buf *b : bufs_) {
        munmap(b->map, b->len);
        delete b;
    }
    if (hdr_) munmap(hdr_, arena_header_size());
    if (fd_ >= 0) ::close(fd_);
}

std::string rb_consumer::open(int fd)
{
    fd_ = fd;
    struct stat st {
    };
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < arena_header_size())
        return "not a ring buffer arena (too small)";
    void *m = mmap(nullptr, arena_header_size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return std::string("cannot map the ring buffer arena: ") + std::strerror(errno);
    auto *h = static_cast<arena_header *>(m);
    if (std::memcmp(h->magic, k_arena_magic, sizeof h->magic) != 0 ||
        h->version != k_arena_version || h->page_size != k_page_size ||
        h->ctl_size != sizeof(buffer_ctl) || h->meta_size != sizeof(page_meta) ||
        h->max_slots != k_arena_slots) {
        munmap(m, arena_header_size());
        return "not a ring buffer arena of this dprobe version";
    }
    hdr_ = h;
    return "";
}

size_t rb_consumer::refresh()
{
    const uint32_t n = std::min(hdr_->nslots.load(std::memory_order_acquire), k_arena_slots);
    for (uint32_t j = static_cast<uint32_t>(bufs_.size()); j < n; j++) {
        const uint64_t off = hdr_->slot_offset[j].load(std::memory_order_acquire);
        if (off == 0) break; // handed out, not published yet
        void *first =
            mmap(nullptr, k_page_size, PROT_READ, MAP_SHARED, fd_, static_cast<off_t>(off));
        if (first == MAP_FAILED) break;
        const uint32_t npages = static_cast<const buffer_ctl *>(first)->npages;
        const uint32_t magic = static_cast<const buffer_ctl *>(first)->magic;
        munmap(first, k_page_size);
        if (magic != k_ctl_magic || npages == 0) break;
        const size_t len = buffer_map_size(npages);
        void *m =
            mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(off));
        if (m == MAP_FAILED) break;
        auto *b = new buf;
        b->map = m;
        b->len = len;
        b->ctl = static_cast<buffer_ctl *>(m);
        b->data = buffer_data(m);
        b->meta = buffer_meta(m, npages);
        b->npages = npages;
        b->generation = ~0ull; // position set at the first look
        bufs_.push_back(b);
    }
    return bufs_.size();
}

rb_consumer::buffer_info rb_consumer::info(size_t i) const
{
    buffer_ctl *c = bufs_[i]->ctl;
    buffer_info bi{};
    bi.tid = c->tid.load(std::memory_order_relaxed);
    uint64_t w[2] = {c->comm[0].load(std::memory_order_relaxed),
                     c->comm[1].load(std::memory_order_relaxed)};
    std::memcpy(bi.comm, w, 16);
    bi.comm[16] = 0;
    bi.state = settled_state(c, hdr_->pid);
    bi.written = __atomic_load_n(&c->written, __ATOMIC_RELAXED);
    bi.dropped = __atomic_load_n(&c->dropped, __ATOMIC_RELAXED);
    return bi;
}

size_t rb_consumer::collect(size_t i, bool partial, size_t max_pages, std::vector<page> &out)
{
    buf &b = *bufs_[i];
    buffer_ctl *c = b.ctl;
    const int state = settled_state(c, hdr_->pid);
    if (state != BUF_OWNED && state != BUF_EXITED && state != BUF_EXITING) return 0;
    const uint64_t gen = c->generation.load(std::memory_order_acquire);
    if (gen != b.generation) {
        // A new owner (or the first look): from its beginning.
        b.generation = gen;
        b.seq = b.index = 0;
        b.off = 0;
    }
    if (state == BUF_EXITED) partial = true; // nothing more will come: take the last page as it is
    const uint64_t np = b.npages;
    const uint64_t cp = c->commit_pos.load(std::memory_order_acquire);
    const uint64_t cseq = pos_seq(cp);
    copy_.resize(max_pages * k_page_size);
    uint64_t seq = b.seq, index = b.index, ts = b.ts;
    uint32_t off = b.off, cpu = b.cpu;
    while (out.size() < max_pages && seq <= cseq) {
        const page_meta &m = b.meta[seq % np];
        const uint64_t s1 = m.seq.load(std::memory_order_acquire);
        if (s1 != seq) {
            if (s1 == k_no_seq || s1 < seq) break;
            // Lapped (overwrite mode): on to the oldest page still there.
            seq = std::max(cseq >= np - 1 ? cseq - (np - 1) : 0, seq + 1);
            off = 0;
            continue;
        }
        const bool complete = seq < cseq;
        if (!complete && !partial) break;
        const uint32_t limit = std::min<uint32_t>(
            complete ? m.end.load(std::memory_order_acquire) : pos_off(cp), k_page_size);
        page p{};
        p.seq = seq;
        p.off = off;
        p.len = limit;
        if (off == 0) {
            p.ts = m.ts.load(std::memory_order_relaxed);
            p.cpu = m.cpu.load(std::memory_order_relaxed);
            const uint64_t base = m.base.load(std::memory_order_relaxed);
            p.lost = base > index ? base - index : 0;
            p.index = base;
        } else {
            p.ts = ts;
            p.cpu = cpu;
            p.index = index;
        }
        // The index after this page: the next page's base once the writer is there.
        uint64_t next_base = 0;
        bool have_next = false;
        if (complete) {
            const page_meta &nm = b.meta[(seq + 1) % np];
            if (nm.seq.load(std::memory_order_acquire) == seq + 1) {
                next_base = nm.base.load(std::memory_order_relaxed);
                have_next = true;
            }
        }
        char *dst = copy_.data() + out.size() * k_page_size;
        if (limit > off) std::memcpy(dst, b.data + (seq % np) * k_page_size, limit);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (m.seq.load(std::memory_order_relaxed) != seq)
            continue; // overwritten while copied: the check above moves on
        p.data = dst;
        if (limit > off || p.lost) out.push_back(p);
        if (complete) {
            seq++;
            off = 0;
            if (have_next)
                index = next_base;
            else {
                // Count the page's events (the next page is being set up right now).
                page_walker w{dst, limit, p.off, p.ts, p.cpu};
                event e;
                uint64_t n = 0;
                while (w.next(e))
                    n += e.kind != event::LOST;
                index = p.index + n;
            }
            continue;
        }
        // The page being written: the position moves to what was committed in it.
        page_walker w{dst, limit, p.off, p.ts, p.cpu};
        event e;
        uint64_t n = 0;
        while (w.next(e))
            n += e.kind != event::LOST;
        off = w.off;
        ts = w.ts;
        cpu = w.cpu;
        index = p.index + n;
        break;
    }
    b.n_seq = seq;
    b.n_off = off;
    b.n_index = index;
    b.n_ts = ts;
    b.n_cpu = cpu;
    return out.size();
}

void rb_consumer::advance(size_t i)
{
    buf &b = *bufs_[i];
    b.seq = b.n_seq;
    b.off = b.n_off;
    b.index = b.n_index;
    b.ts = b.n_ts;
    b.cpu = b.n_cpu;
    b.ctl->read_pos.store(make_pos(b.seq, b.off), std::memory_order_seq_cst);
    pass_done();
}

void rb_consumer::pass_done()
{
    // After the read positions (the writer sets writers_waiting, then reads read_pos: one
    // of the two sides sees the other's store).
    hdr_->progress.fetch_add(1, std::memory_order_seq_cst);
    if (hdr_->writers_waiting.load(std::memory_order_seq_cst) &&
        hdr_->writers_waiting.exchange(0, std::memory_order_seq_cst))
        syscall(SYS_futex, &hdr_->progress, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool rb_consumer::wait(int timeout_ms)
{
    // Set, then sleep while it stays set: a writer clears it before it wakes the word, so a
    // wake between the two is not lost (FUTEX_WAIT returns at once).
    hdr_->consumer_waiting.store(1, std::memory_order_seq_cst);
    struct timespec t {
        timeout_ms / 1000, (timeout_ms % 1000) * 1000000L
    };
    syscall(SYS_futex, &hdr_->consumer_waiting, FUTEX_WAIT, 1, &t, nullptr, 0);
    return hdr_->consumer_waiting.exchange(0, std::memory_order_seq_cst) == 0;
}

void rb_consumer::set_blocking(bool on)
{
    hdr_->consumer_blocking.store(on ? 1 : 0, std::memory_order_seq_cst);
    if (!on) {
        hdr_->writers_waiting.store(1, std::memory_order_seq_cst);
        pass_done();
    }
}

uint64_t rb_consumer::backlog(size_t i) const
{
    const buf &b = *bufs_[i];
    const int state = b.ctl->state.load(std::memory_order_acquire);
    if (state != BUF_OWNED && state != BUF_EXITED && state != BUF_EXITING) return 0;
    const uint64_t cp = b.ctl->commit_pos.load(std::memory_order_acquire);
    if (b.generation != b.ctl->generation.load(std::memory_order_relaxed))
        return pos_seq(cp) * k_page_size + pos_off(cp);
    if (pos_seq(cp) < b.seq) return 0;
    return (pos_seq(cp) - b.seq) * k_page_size + pos_off(cp) - (pos_seq(cp) == b.seq ? b.off : 0);
}

bool rb_consumer::recycle(size_t i)
{
    buf &b = *bufs_[i];
    buffer_ctl *c = b.ctl;
    if (settled_state(c, hdr_->pid) != BUF_EXITED ||
        b.generation != c->generation.load(std::memory_order_relaxed))
        return false;
    const uint64_t cp = c->commit_pos.load(std::memory_order_acquire);
    if (make_pos(b.seq, b.off) != cp) return false;
    int expect = BUF_EXITED;
    return c->state.compare_exchange_strong(expect, BUF_FREE, std::memory_order_acq_rel);
}

} // namespace dprobe
