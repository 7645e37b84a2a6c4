// Kernel ring-buffer pages for trace_pipe_raw (see raw_buffer.h; the kernel's
// kernel/trace/ring_buffer.c event encoding and ring_buffer_read_page()).
#include "tracefs/raw_buffer.h"

#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/trace_array.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

namespace dprobe
{
// ---- the per-CPU demultiplexer of an array ----------------------------------------------

namespace
{

struct cpu_queue {
    kpage_writer w;
    std::deque<std::string> ready;
    std::string reading; // a page handed out in part
    size_t read_off = 0;
    uint64_t overrun = 0; // events dropped from this queue
    uint64_t read_events = 0;
    uint64_t queued_events = 0;
    std::deque<uint64_t> page_events; // events in each page of `ready`
    uint64_t open_events = 0;         // events in the page being filled
};

struct raw_state {
    std::mutex m;
    std::map<unsigned, cpu_queue> cpus;
    // The agent's compact graph and function records go out as the kernel's full ones (the
    // format files describe those); a graph record with values as its graph record (the
    // tree has no format for the values: `dprobe report` reads them).
    ftrace_compact_expander compact{true};
};

std::mutex g_states_m;
std::map<const trace_array *, std::shared_ptr<raw_state>> &g_states =
    *new std::map<const trace_array *, std::shared_ptr<raw_state>>;

std::shared_ptr<raw_state> state_of(const trace_array &tr)
{
    std::lock_guard<std::mutex> g(g_states_m);
    auto &s = g_states[&tr];
    if (!s) s = std::make_shared<raw_state>();
    return s;
}

uint32_t queue_pages_max(trace_array &tr)
{
    size_t kb = ring_buffer_size_kb(tr.buffer);
    return uint32_t(std::max<size_t>(4, kb * 1024 / RB_PAGE_SIZE));
}

// Moves finished pages of Q's writer to its ready list, dropping the oldest beyond MAX.
void settle(cpu_queue &q, uint32_t max)
{
    while (!q.w.pages.empty()) {
        q.ready.push_back(std::move(q.w.pages.front()));
        q.w.pages.erase(q.w.pages.begin());
        q.page_events.push_back(q.open_events);
        q.open_events = 0;
    }
    while (q.ready.size() > max) {
        uint64_t n = q.page_events.front();
        q.ready.pop_front();
        q.page_events.pop_front();
        q.overrun += n;
        q.queued_events -= n;
        // The next page starts after a gap: say so in its commit word.
        if (!q.ready.empty()) {
            std::string &pg = q.ready.front();
            uint64_t commit;
            std::memcpy(&commit, &pg[8], 8);
            commit |= RB_MISSED_EVENTS;
            std::memcpy(&pg[8], &commit, 8);
        }
    }
}

// Takes every record now in TR's buffer into the per-CPU queues.
void pull(trace_array &tr, raw_state &st)
{
    const uint32_t max = queue_pages_max(tr);
    ring_buffer_reader rd(ring_buffer_reader::CONSUME, tr.buffer);
    rb_record rec;
    while (rd.next(rec)) {
        cpu_queue &q = st.cpus[rec.cpu];
        size_t before = q.w.pages.size();
        ftrace_full_record full;
        if (size_t n = st.compact.expand(rec.payload, rec.len, rec.tid, rec.ts, full))
            q.w.add(rec.ts, &full, n, rec.lost_before);
        else
            q.w.add(rec.ts, rec.payload, ftrace_raw_data_len(rec.payload, rec.len),
                    rec.lost_before);
        if (q.w.pages.size() != before) {
            // The record opened a new page: the count so far belongs to the finished one.
            uint64_t finished = q.open_events;
            q.open_events = 0;
            q.page_events.push_back(finished);
            q.ready.push_back(std::move(q.w.pages.back()));
            q.w.pages.pop_back();
        }
        q.open_events++;
        q.queued_events++;
        settle(q, max);
    }
}

class raw_pipe final : public tracefs_file
{
  public:
    raw_pipe(std::shared_ptr<trace_array> tr, unsigned cpu)
        : tr_(std::move(tr)), cpu_(cpu), st_(state_of(*tr_))
    {
    }

    ssize_t read(char *buf, size_t len, uint64_t, const tracefs_read_opts &opts) override
    {
        if (!len) return 0;
        for (;;) {
            {
                std::lock_guard<std::mutex> g(st_->m);
                pull(*tr_, *st_);
                cpu_queue &q = st_->cpus[cpu_];
                if (q.reading.empty() && q.ready.empty()) {
                    // A partly filled page is handed out as it is, as the kernel's read does.
                    q.w.flush();
                    settle(q, queue_pages_max(*tr_));
                }
                size_t out = 0;
                while (out < len) {
                    if (q.reading.empty()) {
                        if (q.ready.empty()) break;
                        q.reading = std::move(q.ready.front());
                        q.ready.pop_front();
                        uint64_t n = q.page_events.front();
                        q.page_events.pop_front();
                        q.read_events += n;
                        q.queued_events -= n;
                        q.read_off = 0;
                        // Whole pages only, when the caller asked for at least one.
                        if (out && len - out < RB_PAGE_SIZE) {
                            break;
                        }
                    }
                    size_t n = std::min(len - out, q.reading.size() - q.read_off);
                    std::memcpy(buf + out, q.reading.data() + q.read_off, n);
                    out += n;
                    q.read_off += n;
                    if (q.read_off == q.reading.size()) {
                        q.reading.clear();
                        q.read_off = 0;
                    }
                }
                if (out) return static_cast<ssize_t>(out);
            }
            if (opts.nonblock) return -EAGAIN;
            if (tracefs_tree::instance().shutting_down()) return 0;
            if (opts.interrupted && opts.interrupted()) return -EINTR;
            ring_buffer_wait(tr_->buffer, 100);
        }
    }

    ssize_t write(const char *, size_t, uint64_t) override { return -EINVAL; }

    unsigned poll() override
    {
        {
            std::lock_guard<std::mutex> g(st_->m);
            cpu_queue &q = st_->cpus[cpu_];
            if (!q.reading.empty() || !q.ready.empty()) return POLLIN | POLLRDNORM;
        }
        return ring_buffer_has_data(tr_->buffer) ? POLLIN | POLLRDNORM : 0;
    }

    bool is_stream() const override { return true; }

  private:
    std::shared_ptr<trace_array> tr_;
    unsigned cpu_;
    std::shared_ptr<raw_state> st_;
};

} // namespace

std::unique_ptr<tracefs_file> raw_pipe_open(std::shared_ptr<trace_array> tr, unsigned cpu)
{
    return std::make_unique<raw_pipe>(std::move(tr), cpu);
}

std::string per_cpu_stats(trace_array &tr, unsigned cpu)
{
    uint64_t entries = 0, bytes = 0, oldest = 0;
    bool have_oldest = false;
    {
        ring_buffer_reader rd(ring_buffer_reader::PEEK, tr.buffer);
        rb_record rec;
        while (rd.next(rec)) {
            if (rec.cpu != cpu) continue;
            if (!have_oldest) {
                oldest = rec.ts;
                have_oldest = true;
            }
            entries++;
            bytes += rec.len;
        }
    }
    uint64_t overrun = 0, read_events = 0;
    {
        auto st = state_of(tr);
        std::lock_guard<std::mutex> g(st->m);
        cpu_queue &q = st->cpus[cpu];
        entries += q.queued_events;
        overrun = q.overrun;
        read_events = q.read_events;
    }
    const uint64_t now = trace_clock_now();
    char buf[512];
    std::string s;
    std::snprintf(buf, sizeof buf,
                  "entries: %" PRIu64 "\noverrun: %" PRIu64 "\ncommit overrun: 0\nbytes: %" PRIu64
                  "\n",
                  entries, overrun, bytes);
    s += buf;
    if (trace_clock_in_ns(trace_clock_current())) {
        uint64_t o = (oldest + 500) / 1000, n = (now + 500) / 1000;
        std::snprintf(buf, sizeof buf,
                      "oldest event ts: %5" PRIu64 ".%06" PRIu64 "\nnow ts: %5" PRIu64 ".%06" PRIu64
                      "\n",
                      o / 1000000, o % 1000000, n / 1000000, n % 1000000);
    } else {
        std::snprintf(buf, sizeof buf, "oldest event ts: %" PRIu64 "\nnow ts: %" PRIu64 "\n",
                      oldest, now);
    }
    s += buf;
    std::snprintf(buf, sizeof buf, "dropped events: 0\nread events: %" PRIu64 "\n", read_events);
    s += buf;
    return s;
}

} // namespace dprobe
