// The function graph tracer's output (the kernel's print_graph_function_flags and
// print_graph_headers_flags), for trace_iter:
//
//   # tracer: function_graph
//   #
//   # CPU  DURATION                  FUNCTION CALLS
//   # |     |   |                     |   |   |   |
//    0)               |  parse() {
//    0)   0.120 us    |    parse_token();
//    0) + 12.350 us   |  }
//
// The CPU column is the CPU the record was written on; a line of dashes with "A => B" marks
// where a CPU's records switch from one thread to another, as in the kernel. Nesting is per
// thread (the depth each entry recorded). Other records between a thread's entries and
// returns print as comments ("/* myprobe: (...) a=1 */"); function records and stack traces
// keep their default line. Options (options/funcgraph-*): cpu, overhead (the duration
// markers + ! # * @ $), proc (comm-tid column), duration, abstime, tail ("} /* func */"),
// retval and retval-hex, overrun; context-info off drops every column but the calls.
#pragma once

#include "tracefs/trace_iter.h"
#include "tracefs/trace_text.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace dprobe
{

class trace_array;

struct graph_printer {
    explicit graph_printer(trace_array &tr);

    // The column headers (after "# tracer: function_graph\n#\n").
    std::string header() const;
    // Prints E (taken from IT's queue); false when E keeps its default line.
    bool print(std::string &out, trace_iter &it, const trace_iter::entry &e);

  private:
    struct thread_state {
        int depth = 0; // where comments indent
        std::vector<uint64_t> enter_funcs;
    };
    void prologue(std::string &out, const trace_iter::entry &e, int32_t pid);
    void duration(std::string &out, uint64_t ns, int fill) const;
    void proc(std::string &out, int32_t pid, const char *recorded);

    trace_array &tr_;
    trace_iter *it_ = nullptr;
    int cpu_width_;
    std::unordered_map<unsigned, int32_t> last_pid_; // per CPU
    std::unordered_map<int32_t, thread_state> threads_;
};

} // namespace dprobe
