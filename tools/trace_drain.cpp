// The arena drain (see trace_drain.h).
#include "tools/trace_drain.h"

#include "tools/trace_file.h"

#include <cinttypes>
#include <cstdio>
#include <ctime>

namespace dprobe::tracefile
{

namespace
{
uint64_t now_ms()
{
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1000 + static_cast<uint64_t>(t.tv_nsec) / 1000000;
}
} // namespace

uint64_t arena_drain::drain(bool final, bool *failed)
{
    const size_t n = c_.refresh();
    owners_.resize(n);
    uint64_t before = bytes_;
    for (size_t i = 0; i < n; i++) {
        bool bad = false;
        c_.drain(
            i, final,
            [&](const rb_consumer::buffer_info &bi, const rb_consumer::page *pages, size_t np) {
                pages_chunk pc(session_, bi.tid, bi.comm);
                for (size_t k = 0; k < np; k++) {
                    const rb_consumer::page &p = pages[k];
                    page_header h{p.seq, p.index, p.ts, p.lost, p.cpu, p.off, p.len, 0};
                    owners_[i].lost += p.lost;
                    pc.add(h, p.data);
                }
                if (!pc.write(out_fd_)) {
                    bad = true;
                    return false;
                }
                bytes_ += pc.bytes();
                return true;
            });
        if (bad && failed) *failed = true;
        const rb_consumer::buffer_info bi = c_.info(i);
        settle(i, bi);
        if (!final && bi.state == rb::BUF_EXITED && c_.recycle(i)) {
            // Its thread is gone and everything was taken: the next thread may have it.
            owner &o = owners_[i];
            done_.push_back(
                {o.tid, o.gen_written, o.gen_dropped, o.lost, o.first_loss_ms, o.last_loss_ms});
            o = owner{};
        }
    }
    c_.pass_done();
    return bytes_ - before;
}

void arena_drain::settle(size_t i, const rb_consumer::buffer_info &bi)
{
    if (bi.state != rb::BUF_OWNED && bi.state != rb::BUF_EXITED && bi.state != rb::BUF_EXITING)
        return;
    owner &o = owners_[i];
    o.tid = bi.tid;
    o.gen_written = bi.written;
    o.gen_dropped = bi.dropped;
    if (o.gen_dropped + o.lost > o.seen_lost) {
        o.seen_lost = o.gen_dropped + o.lost;
        o.last_loss_ms = now_ms();
        if (!o.first_loss_ms) o.first_loss_ms = o.last_loss_ms;
    }
}

uint64_t arena_drain::backlog()
{
    uint64_t b = 0;
    for (size_t i = 0; i < c_.size(); i++)
        b += c_.backlog(i);
    return b;
}

std::vector<arena_drain::thread_count> arena_drain::threads() const
{
    std::vector<thread_count> out = done_;
    for (const owner &o : owners_)
        if (o.tid >= 0)
            out.push_back(
                {o.tid, o.gen_written, o.gen_dropped, o.lost, o.first_loss_ms, o.last_loss_ms});
    return out;
}

uint64_t arena_drain::events() const
{
    uint64_t n = 0;
    for (const thread_count &t : threads())
        n += t.written;
    return n;
}

uint64_t arena_drain::lost() const
{
    uint64_t n = c_.header().orphan_dropped.load(std::memory_order_relaxed);
    for (const thread_count &t : threads())
        n += t.dropped + t.lost;
    return n;
}

bool arena_drain::finish(const std::string &end_kv)
{
    std::string stats;
    char line[192];
    uint64_t w = 0, d = 0, l = 0;
    for (const thread_count &t : threads()) {
        std::snprintf(line, sizeof line,
                      "tid=%d written=%" PRIu64 " dropped=%" PRIu64 " lost=%" PRIu64 "\n", t.tid,
                      t.written, t.dropped, t.lost);
        stats += line;
        w += t.written;
        d += t.dropped;
        l += t.lost;
    }
    std::snprintf(line, sizeof line,
                  "total written=%" PRIu64 " dropped=%" PRIu64 " lost=%" PRIu64 " orphans=%" PRIu64
                  "\n",
                  w, d, l, c_.header().orphan_dropped.load(std::memory_order_relaxed));
    stats += line;
    std::string a = make_chunk(CHUNK_STATS, session_, stats);
    std::string b = make_chunk(CHUNK_END, session_, end_kv);
    bool ok = write_all(out_fd_, a.data(), a.size()) && write_all(out_fd_, b.data(), b.size());
    bytes_ += a.size() + b.size();
    return ok;
}

} // namespace dprobe::tracefile
