// The calls of a recorded function graph folded into a tree of call paths: one node per
// distinct stack (main;parse;lex), holding how many calls ended there, their inclusive time
// and their own (self) time. What a flame graph draws, what folded stacks and pprof samples
// list; uftrace's `report --tree` / `dump --flame-graph` data, built from the same events
// `--format graph` reads.
//
// Timing rules (those of --format chrome): a call whose exit was never seen (the program
// called exit() inside it, the recording stopped) is closed at its thread's last event; a
// call unwound by longjmp or an exception ends where dprobe noticed; an exit whose entry
// was not recorded adds nothing. A call's self time is its time less its callees' (never
// below 0). Recursion is kept as it happened: f;f;f is three nodes.
//
// Memory: one node per distinct call path and one name per distinct function, whatever the
// trace's length (the events are read one chunk at a time).
#pragma once

#include "tools/dprobe/report/report.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dprobe::report
{

// A function as the tree names it, and where to find its debug information.
struct tree_function {
    std::string name;   // as --demangle shows it
    uint64_t addr = 0;  // its entry address in the process (the first seen)
    size_t session = 0; // the model's session whose objects hold it
};

struct call_node {
    uint32_t func = 0;     // index into call_tree::functions (the root: none)
    uint32_t parent = 0;   // the root is its own parent
    uint64_t total_ns = 0; // inclusive time of the calls on this path
    uint64_t self_ns = 0;  // their time less their callees'
    uint64_t calls = 0;    // calls that ended on this path
    std::vector<uint32_t> children;
};

class call_tree
{
  public:
    call_tree();
    // Adds the function-graph calls of the threads O wants. PER_THREAD: under the root, one
    // frame per thread ("comm-tid", a function of its own) holding that thread's calls.
    report_counts build(const model &m, const report_opts &o, bool per_thread);

    std::vector<tree_function> functions;
    std::vector<call_node> nodes; // [0] is the root
    // The root's total: the sum of its children's.
    uint64_t total_ns() const;
    uint64_t total_calls() const;
    // The node's calls and those of every node below it.
    uint64_t subtree_calls(uint32_t n) const;
    // Names from the root to N (the root left out), outermost first.
    std::vector<uint32_t> path(uint32_t n) const;

  private:
    uint32_t child(uint32_t parent, uint32_t func);
    uint32_t function(const std::string &name, uint64_t addr, size_t session);
    std::unordered_map<std::string, uint32_t> by_name_;
    // (parent << 32 | func) -> node
    std::unordered_map<uint64_t, uint32_t> edges_;
};

} // namespace dprobe::report
