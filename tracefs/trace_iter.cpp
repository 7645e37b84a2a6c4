// Reading a trace buffer as text (see trace_iter.h).
#include "tracefs/trace_iter.h"

#include "core/trace_clock.h"
#include "tracefs/event_format.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/graph_output.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracer.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

// How far the graph layout looks ahead for a thread's next record.
constexpr size_t k_lookahead = 8192;

int32_t record_pid(const trace_iter::entry &e)
{
    trace_entry_header h{};
    if (e.data.size() >= sizeof h) std::memcpy(&h, e.data.data(), sizeof h);
    return h.pid ? h.pid : e.rec.tid;
}

std::string event_info(trace_buffer *tb)
{
    rb_stats st = ring_buffer_stats(tb);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char line[128];
    std::snprintf(line, sizeof line,
                  "# entries-in-buffer/entries-written: %" PRIu64 "/%" PRIu64 "   #P:%ld\n#\n",
                  st.entries, st.entries + st.overrun, cpus > 0 ? cpus : 1);
    return line;
}

} // namespace

trace_iter::trace_iter(trace_array &tr, trace_buffer *tb, bool consume, int cpu)
    : tr_(tr), tb_(tb), consume_(consume), cpu_(consume ? -1 : cpu),
      in_ns_(trace_clock_in_ns(trace_clock_current()))
{
    if (tr.current_trace == &graph_tracer) graph_ = std::make_unique<graph_printer>(tr);
}

trace_iter::~trace_iter() = default;

std::string trace_iter::header()
{
    std::string s = "# tracer: ";
    s += tr_.current_trace ? tr_.current_trace->name : "nop";
    s += "\n#\n";
    if (graph_) return s + graph_->header();
    if (!tr_.opt(OPT_CONTEXT_INFO)) return s;
    s += event_info(tb_);
    const bool tgid = tr_.opt(OPT_RECORD_TGID);
    if (tr_.opt(OPT_IRQ_INFO)) {
        const char *sp = tgid ? "            " : "  ";
        char line[160];
        const char *rows[] = {"  _-----=> irqs-off/BH-disabled", " / _----=> need-resched",
                              "| / _---=> hardirq/softirq",      "|| / _--=> preempt-depth",
                              "||| / _-=> migrate-disable",      "|||| /     delay"};
        for (const char *r : rows) {
            std::snprintf(line, sizeof line, "#                            %s%s\n", sp, r);
            s += line;
        }
        std::snprintf(line, sizeof line,
                      "#           TASK-PID  %s CPU#  |||||  TIMESTAMP  FUNCTION\n",
                      tgid ? "     TGID   " : "  ");
        s += line;
        std::snprintf(line, sizeof line, "#              | |    %s   |   |||||     |         |\n",
                      tgid ? "       |    " : "  ");
        s += line;
    } else {
        s += std::string("#           TASK-PID    ") + (tgid ? "   TGID   " : "") +
             " CPU#     TIMESTAMP  FUNCTION\n";
        s += std::string("#              | |      ") + (tgid ? "     |    " : "") +
             "   |         |         |\n";
    }
    return s;
}

bool trace_iter::fill(size_t n)
{
    if (!reader_) {
        reader_ = std::make_unique<ring_buffer_reader>(
            consume_ ? ring_buffer_reader::CONSUME : ring_buffer_reader::PEEK, tb_);
        until_ = trace_clock_now();
    }
    if (past_end_) return false;
    size_t got = 0;
    rb_record rec;
    while (got < n && reader_->next(rec)) {
        // `trace` shows what the buffer held when the read began (the kernel pauses the
        // buffer while `trace` is open): records written meanwhile are not followed, or a
        // reader of a program writing faster than it prints would never reach the end.
        if (!consume_ && rec.ts > until_) {
            past_end_ = true;
            break;
        }
        // The agent's compact graph and function records read as the tracers' full ones
        // (every CPU's: an exit finds its entry's time on another).
        ftrace_full_record full;
        const size_t full_len = compact_.expand(rec.payload, rec.len, rec.tid, rec.ts, full);
        if (cpu_ >= 0 && rec.cpu != cpu_) continue;
        entry e;
        e.rec = rec;
        if (full_len)
            e.data.assign(reinterpret_cast<const char *>(&full), full_len);
        else
            e.data.assign(static_cast<const char *>(rec.payload), rec.len);
        e.rec.payload = nullptr;
        ahead_.push_back(std::move(e));
        got++;
    }
    return got > 0;
}

bool trace_iter::next_of_tid(int32_t tid, size_t from, size_t &idx)
{
    for (size_t i = from;; i++) {
        if (i >= ahead_.size() && (i >= k_lookahead || !fill(64))) return false;
        if (i >= ahead_.size()) return false;
        if (ahead_[i].rec.tid == tid) {
            idx = i;
            return true;
        }
    }
}

bool trace_iter::has_data()
{
    if (!ahead_.empty()) return true;
    return consume_ ? ring_buffer_has_data(tb_) : fill(1);
}

void trace_iter::print_text(std::string &out, const entry &e)
{
    const auto *p = reinterpret_cast<const uint8_t *>(e.data.data());
    trace_entry_header h{};
    if (e.data.size() >= sizeof h) std::memcpy(&h, p, sizeof h);
    ftrace_print_flags f;
    f.sym_offset = tr_.opt(OPT_SYM_OFFSET);
    f.sym_addr = tr_.opt(OPT_SYM_ADDR);
    f.print_parent = tr_.opt(OPT_PRINT_PARENT);
    if (is_ftrace_type(h.type) && ftrace_print_entry(out, p, e.data.size(), f)) return;
    out += trace_events::instance().format_record(p, e.data.size());
}

void trace_iter::print_default(std::string &out, const entry &e)
{
    if (tr_.opt(OPT_CONTEXT_INFO)) {
        char buf[160];
        const int32_t pid = record_pid(e);
        const char *comm = comms_.lookup(pid, pid == e.rec.tid ? e.rec.comm : "");
        int n = std::snprintf(buf, sizeof buf, "%16s-%-7d ", comm, pid);
        out.append(buf, size_t(n));
        if (tr_.opt(OPT_RECORD_TGID)) {
            n = std::snprintf(buf, sizeof buf, "(%7d) ", int(getpid()));
            out.append(buf, size_t(n));
        }
        n = std::snprintf(buf, sizeof buf, "[%03u] ", unsigned(e.rec.cpu));
        out.append(buf, size_t(n));
        if (tr_.opt(OPT_IRQ_INFO))
            out += "....."; // no irqs-off, resched, irq context or preemption in user space
        if (in_ns_) {
            uint64_t usecs = (e.rec.ts + 500) / 1000; // ns2usecs rounds
            n = std::snprintf(buf, sizeof buf, " %5" PRIu64 ".%06" PRIu64 ": ", usecs / 1000000,
                              usecs % 1000000);
        } else {
            n = std::snprintf(buf, sizeof buf, " %12" PRIu64 ": ", e.rec.ts);
        }
        out.append(buf, size_t(n));
    }
    print_text(out, e);
    out += '\n';
}

size_t trace_iter::read(std::string &out, size_t max)
{
    size_t n = 0;
    while (n < max) {
        if (ahead_.empty() && !fill(1)) break;
        entry e = std::move(ahead_.front());
        ahead_.pop_front();
        if (e.rec.lost_before) {
            char buf[96];
            int k = std::snprintf(buf, sizeof buf, "TID:%d [LOST %" PRIu64 " EVENTS]\n", e.rec.tid,
                                  e.rec.lost_before);
            out.append(buf, size_t(k));
        }
        if (!graph_ || !graph_->print(out, *this, e)) print_default(out, e);
        n++;
    }
    // A consuming reader gives the buffers back between reads; a peeking one keeps its place.
    if (consume_) reader_.reset();
    return n;
}

std::string trace_iter_read_all(trace_array &tr, trace_buffer *tb, int cpu)
{
    trace_iter it(tr, tb, false, cpu);
    std::string out = it.header();
    while (it.read(out, 4096)) {
    }
    return out;
}

} // namespace dprobe
