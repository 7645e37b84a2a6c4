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

// The files and directories of a trace array, from P[AT] on (P[AT - 1] is the array's
// directory). TOP: the top level (files only it has are resolved by tracefs_tree.cpp).
std::optional<node> resolve_array(const std::shared_ptr<trace_array> &tr,
                                  const std::vector<std::string> &p, size_t at);
std::vector<std::string> array_entries();

} // namespace tree
} // namespace dprobe
