// The tracefs tree's resolved paths (tracefs_tree.cpp and tree_ftrace.cpp share them): what
// a path is, and the helpers that build the common kinds of files.
#pragma once

#include "tracefs/tracefs_tree.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

class trace_array;
class ftrace_hash;

struct tracefs_tree::node {
    bool dir = false;
    unsigned mode = 0;
    std::function<std::vector<std::string>()> children;
    std::function<std::string()> show;          // readable files: the text
    std::function<int(std::string_view)> store; // writable files: one write, 0 or -errno
    // Writable files that may take only the start of a write (trace_marker: the kernel cuts
    // a write to its largest record and returns the count, the writer writes the rest):
    // the bytes taken, or -errno. Used instead of store when set.
    std::function<long(std::string_view)> store_part;
    std::function<int()> trunc; // what O_TRUNC does (nullptr: nothing)
    // What O_TRUNC does at open, when it differs from trunc: set_ftrace_filter empties its
    // set there but applies the change when the file is written or closed (the kernel's
    // ftrace_regex_release), so that "echo f > set_ftrace_filter" never has the tracer run
    // on the empty set (every function) in between; trunc (truncate(2)) applies it at once.
    std::function<int()> open_trunc;
    // Files that are not a text snapshot (trace_pipe, trace_pipe_raw, the filter files that
    // parse across writes): their own open.
    std::function<std::unique_ptr<tracefs_file>(int flags)> open;
    // The array the file belongs to: an open file keeps it (rmdir answers EBUSY meanwhile).
    std::shared_ptr<trace_array> arr;
};

namespace tree
{

using node = tracefs_tree::node;

constexpr unsigned MODE_DIR = 0700, MODE_RW = 0600, MODE_RO = 0400, MODE_WO = 0200;

node dir(std::function<std::vector<std::string>()> children);
node ro(std::function<std::string()> show);
node rw(std::function<std::string()> show, std::function<int(std::string_view)> store,
        std::function<int()> trunc = nullptr);
node wo(std::function<int(std::string_view)> store);
std::string_view strip(std::string_view s);
// kstrtoul(buf, 10) as the kernel's *_from_user helpers use it (one trailing newline).
int parse_ulong(std::string_view s, unsigned long long &v);
// kstrtobool(): y/Y/t/T/1 and on; n/N/f/F/0 and off.
int parse_bool(std::string_view s, bool &v);
// "0"/"1" files.
int store_enable(std::string_view s, const std::function<int(bool)> &set);

// A file whose writes are lists of tokens that may be split across write() calls (the
// kernel's trace_parser): each complete token goes to APPLY; the last one is flushed when
// the file is closed. TRUNC (O_TRUNC) runs at open. AFTER_WRITE runs after a write that
// applied tokens, and at close when CHANGED_AT_OPEN (the open emptied the set) and no write
// applied any.
std::unique_ptr<tracefs_file> token_file(std::function<std::string()> show,
                                         std::function<int(const std::string &)> apply,
                                         std::function<void()> after_write,
                                         bool changed_at_open = false);

// set_graph_function / set_graph_notrace / stack_trace_filter: a filter file over a
// process-wide set of functions (no commands). CHANGED runs after the set changed, under
// trace_types_lock.
node hash_node(ftrace_hash *h, const char *empty, std::function<void()> changed);

// A file of dynamic_events commands: the lines of the kinds ACCEPT takes (ACCEPT_*,
// probe_parse.h), listed, written and removed (dynamic_events, kprobe_events, uprobe_events).
node dynevent_file(unsigned accept);

// ---- registering files ---------------------------------------------------------------------
//
// Each file is registered by the subsystem that owns it, as the kernel's subsystems create
// theirs (trace_create_file in init_kprobe_trace, tracer_init_tracefs...): the subsystem's
// registrar (declared below, defined in its own .cpp) calls these, once, before the tree's
// first lookup. Names are listed in directories in sorted order. To add a file: register it
// in its subsystem's registrar; a subsystem with a first file adds its registrar to the list
// below and to k_registrars (tree_files.cpp).

// A top-level file: MAKE builds its node at each lookup.
void top_file(std::string name, std::function<node()> make);
// A top-level directory: RESOLVE builds the node of P (P[0] == NAME: the directory itself,
// or something below it), or nullopt when there is no such file.
void top_dir(std::string name,
             std::function<std::optional<node>(const std::vector<std::string> &p)> resolve);
// A file of every trace array (the top level's and each instance's): MAKE builds its node.
void array_file(std::string name, std::function<node(const std::shared_ptr<trace_array> &tr)> make);
// A directory of every trace array: RESOLVE builds the node of P from P[AT] (NAME) on.
void array_dir(std::string name,
               std::function<std::optional<node>(const std::shared_ptr<trace_array> &tr,
                                                 const std::vector<std::string> &p, size_t at)>
                   resolve);

// The registrars, one per subsystem with files.
void tracefs_tree_files();     // tracefs_tree.cpp: README, instances/, the event registry's
void trace_array_files();      // tree_ftrace.cpp: each trace array's own files
void trace_kprobe_files();     // trace_kprobe.cpp: kprobe_events, kprobe_profile, kprobes/
void trace_uprobe_files();     // trace_uprobe.cpp: uprobe_events, uprobe_profile
void ftrace_filter_files();    // ftrace_filter.cpp: available_filter_functions, enabled_functions
void tracer_graph_files();     // tracer_graph.cpp: the function graph's filters and limits
void function_profile_files(); // function_profile.cpp: the profiler and trace_stat/
void stack_tracer_files();     // stack_tracer.cpp: the stack tracer's files
void saved_cmdlines_files();   // saved_cmdlines.cpp: saved_cmdlines, saved_tgids

// Lookups (tree_files.cpp): the node of top-level path P (P non-empty), nullopt when P[0]
// is not a top-level file (then it may be one of the top-level array's), or no such file;
// the node of P from P[AT] on in trace array TR; the names of each.
std::optional<node> resolve_top(const std::vector<std::string> &p, bool &is_top);
std::optional<node> resolve_array(const std::shared_ptr<trace_array> &tr,
                                  const std::vector<std::string> &p, size_t at);
std::vector<std::string> top_entries();
std::vector<std::string> array_entries();

} // namespace tree
} // namespace dprobe
