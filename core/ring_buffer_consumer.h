// Draining an exported set of ring buffers (an arena, see ring_buffer.h) page by page, as
// trace-cmd reads the kernel's per-CPU raw buffers: `dprobe record` maps the arena of every
// process it records; the agent's streamer (`dprobe attach`) maps its own process's.
//
// The consumer copies what the writers left behind, whole pages where it can, and moves each
// buffer's read position past it, so a writer in discard mode gets the pages back. It can do
// so while the process runs and after it is gone (the memfd keeps the memory alive), and it
// gives exited threads' buffers back for new threads. One consumer per arena; not
// thread-safe.
#pragma once

#include "core/ring_buffer_layout.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dprobe
{

class rb_consumer
{
  public:
    rb_consumer() = default;
    ~rb_consumer();
    rb_consumer(const rb_consumer &) = delete;
    rb_consumer &operator=(const rb_consumer &) = delete;

    // Maps the arena whose memfd is FD; takes FD over (closed by the destructor). "" or why
    // the descriptor is not an arena.
    std::string open(int fd);
    const rb::arena_header &header() const { return *hdr_; }
    // Maps the buffers published since the last call; returns how many there are.
    size_t refresh();
    size_t size() const { return bufs_.size(); }

    // A page, or the part of one not taken before.
    struct page {
        uint64_t seq;   // its number in the buffer's stream
        uint64_t index; // index of its first event from OFF on
        uint64_t ts;    // running time stamp at OFF (the page's own when OFF is 0)
        uint32_t cpu;   // running CPU at OFF
        uint32_t off, len;
        uint64_t lost;    // events overwritten before it (overwrite mode, consumer lapped)
        const char *data; // the page's bytes; [off, len) are new
    };
    struct buffer_info {
        int32_t tid;
        char comm[17];
        int state; // rb::buf_state
        uint64_t written, dropped;
    };
    buffer_info info(size_t i) const;

    // Takes what buffer I holds beyond the consumer's position: the pages the writer has
    // left, and with PARTIAL also the committed part of the one it writes now. Each batch (at
    // most MAX_PAGES) goes to FN(const buffer_info &, const page *, size_t); the read
    // position moves past a batch once FN returns true (false stops, nothing consumed).
    // Returns the number of bytes taken.
    template <class F> size_t drain(size_t i, bool partial, F &&fn, size_t max_pages = 64);
    // Committed bytes of buffer I not taken yet (an estimate: whole pages).
    uint64_t backlog(size_t i) const;
    // Gives buffer I back to the process for a new thread if its thread exited and
    // everything was taken. True when it did.
    bool recycle(size_t i);
    // Discard mode: whether a writer whose buffer is full waits (up to a second) for this
    // consumer to take pages rather than drop its events. The consumer must then drain
    // when woken; off again before it stops draining.
    void set_blocking(bool on);
    // The end of a pass over the buffers: writers waiting for room look again.
    void pass_done();
    // For a consumer the process wakes without an eventfd (the arena was exported without
    // one: the agent's streamer): sleeps until a buffer is half full, a writer waits for
    // room, or TIMEOUT_MS passes. True when woken.
    bool wait(int timeout_ms);

    struct buf;

  private:
    size_t collect(size_t i, bool partial, size_t max_pages, std::vector<page> &out);
    void advance(size_t i);

    int fd_ = -1;
    rb::arena_header *hdr_ = nullptr;
    std::vector<buf *> bufs_;
    std::vector<char> copy_; // pages copied out (validated against the writer's seqlock)
};

struct rb_consumer::buf {
    void *map = nullptr;
    size_t len = 0;
    rb::buffer_ctl *ctl = nullptr;
    const char *data = nullptr;
    const rb::page_meta *meta = nullptr;
    uint32_t npages = 0;
    uint64_t generation = 0;
    // The consumer's position, and where the last collect() ended.
    uint64_t seq = 0, index = 0, ts = 0;
    uint32_t off = 0, cpu = 0;
    uint64_t n_seq = 0, n_index = 0, n_ts = 0;
    uint32_t n_off = 0, n_cpu = 0;
};

template <class F> size_t rb_consumer::drain(size_t i, bool partial, F &&fn, size_t max_pages)
{
    std::vector<page> pages;
    size_t bytes = 0;
    for (;;) {
        pages.clear();
        if (!collect(i, partial, max_pages, pages)) return bytes;
        if (!fn(info(i), pages.data(), pages.size())) return bytes;
        for (const page &p : pages)
            bytes += p.len - p.off;
        advance(i);
        if (pages.size() < max_pages) return bytes;
    }
}

} // namespace dprobe
