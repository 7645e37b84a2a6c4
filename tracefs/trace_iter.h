// The text of a trace buffer (the kernel's struct trace_iterator and print_trace_line):
// `trace`, `trace_pipe`, `snapshot`, per_cpu/cpuN/trace and per_cpu/cpuN/trace_pipe.
//
// The header and each record's line follow the array's tracer and options: the default
// line (context "comm-tid [cpu] flags timestamp: " then the record's text, see
// trace_output.h), or, while function_graph is the current tracer, the graph layout
// (graph_output.h). Records are read in time order across the array's per-thread buffers.
//
// For the graph layout an entry is printed as a leaf ("func();" with its duration) when the
// next record of the same thread is its return, the kernel's get_return_for_leaf() with
// "the same thread" where the kernel says "the same CPU buffer". The iterator may look ahead
// for that and keeps the records it took until they are printed.
#pragma once

#include "core/ring_buffer.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/trace_output.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

namespace dprobe
{

class trace_array;
struct graph_printer;

class trace_iter
{
  public:
    // TB: the array's buffer or its snapshot buffer. CONSUME: trace_pipe. CPU >= 0: only the
    // records written on that CPU (per_cpu/cpuN/...).
    trace_iter(trace_array &tr, trace_buffer *tb, bool consume, int cpu = -1);
    ~trace_iter();
    trace_iter(const trace_iter &) = delete;
    trace_iter &operator=(const trace_iter &) = delete;

    // "# tracer: NAME" and the column headers, for `trace` and `snapshot`. Call it before the
    // first read() or has_data(): it reads the buffer's counts, which needs the reader lock
    // the iterator then holds.
    std::string header();
    // Appends the lines of up to MAX records. Returns the number of records printed (0 when
    // nothing is available now).
    size_t read(std::string &out, size_t max);
    // Whether a record is waiting (in the buffer or taken ahead).
    bool has_data();

    // One record taken from the buffer (its payload copied).
    struct entry {
        rb_record rec;
        std::string data;
    };

  private:
    bool fill(size_t n); // takes up to N more records into ahead_
    bool next_of_tid(int32_t tid, size_t from, size_t &idx);
    void print_default(std::string &out, const entry &e);
    void print_text(std::string &out, const entry &e);
    friend struct graph_printer;

    trace_array &tr_;
    trace_buffer *tb_;
    bool consume_;
    int cpu_;
    bool in_ns_;
    bool exhausted_ = false;
    // Not consuming: the clock's reading when the read began, and whether a record after it
    // came (the end of the text).
    uint64_t until_ = 0;
    bool past_end_ = false;
    std::deque<entry> ahead_;
    comm_cache comms_;
    std::unique_ptr<graph_printer> graph_;
    std::unique_ptr<ring_buffer_reader> reader_; // open during read()
    // The open calls of compact graph records. A graph record with values (record -a/-A/-R)
    // reads as its graph record: `dprobe report` shows the values.
    ftrace_compact_expander compact_{true};
};

// The whole text of a `trace`-like file (header and every record).
std::string trace_iter_read_all(trace_array &tr, trace_buffer *tb, int cpu = -1);

} // namespace dprobe
