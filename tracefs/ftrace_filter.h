// Function filters: the sets behind set_ftrace_filter, set_ftrace_notrace,
// set_graph_function, set_graph_notrace and stack_trace_filter (the kernel's struct
// ftrace_hash and ftrace_regex_write()).
//
// A write is a list of tokens separated by white space, each one of:
//   GLOB                functions whose name matches (lib/glob.c rules); a token that matches
//                       nothing fails the write with -EINVAL
//   N                   the function on line N (from 1) of available_filter_functions
//   LIB:GLOB            (dprobe, as in fprobe filters) the functions of one loaded object
//   GLOB:mod:LIB        the kernel's spelling of the same; LIB may also name an object that
//                       is not loaded yet: the token is kept and applied when it is
//                       (dlopen), and reads back as "GLOB:mod:LIB" until then
//   !TOKEN              removes what TOKEN matches
//   GLOB:CMD[:PARAM]    a function command (set_ftrace_filter only, see ftrace_commands.h)
// Matching is on function names with a patch site or that can get one (a jump site), in
// every loaded object unless a LIB is given. Opening with O_TRUNC empties the set (commands
// stay); `>>` appends.
//
// The set is read back as the kernel prints it: one function a line ("name" or
// "name [lib]"), pending :mod: tokens, then the commands; "#### all functions enabled ####"
// (or "#### no functions disabled ####" for the notrace files) when it is empty.
#pragma once

#include "core/symbols.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

struct ftrace_site;

class ftrace_hash
{
  public:
    ftrace_hash() = default;
    ftrace_hash(const ftrace_hash &) = delete;
    ftrace_hash &operator=(const ftrace_hash &) = delete;

    // Nothing selected and nothing pending.
    bool empty() const;
    // The functions selected, sorted by address (gone ones left out).
    std::vector<ftrace_site *> sites() const;
    void clear();

    // Adds (or with NEG removes) the functions GLOB matches, in LIB when not empty. Returns
    // the number matched, or -EINVAL when none and LIB is loaded (or not a :mod: token).
    // MOD_PENDING: LIB names no loaded object; keep the token for later loads.
    int match(std::string_view glob, std::string_view lib, bool neg, bool mod_pending_ok);
    // Objects just loaded: pending :mod: tokens are applied. True when sites were added.
    bool objects_loaded(std::span<const object_ptr> added);

    // Hot path: whether IP (a site's address) is in the set. A lock-free read of an
    // immutable sorted copy, republished on each change.
    bool contains_ip(uintptr_t ip) const noexcept;
    // Whether the set has anything in it (hot path).
    bool has_ips() const noexcept { return published_.load(std::memory_order_acquire); }

    // The file text without the commands (see above); EMPTY_TEXT when empty.
    std::string show(const char *empty_text) const;

  private:
    void publish_locked();
    struct ip_list {
        std::vector<uintptr_t> ips;
    };
    struct pending_mod {
        std::string glob, lib;
    };
    mutable std::mutex m_;
    std::vector<ftrace_site *> sites_; // sorted by pointer for set operations
    std::vector<pending_mod> pending_;
    std::atomic<const ip_list *> published_{nullptr};
    std::vector<std::unique_ptr<ip_list>> lists_; // kept: the hot path may read an old one
};

// A function command parsed from a token "GLOB:CMD[:PARAM]" ("!" removes it).
struct ftrace_command_request {
    std::string glob, command, param;
    bool neg = false;
};
// Whether NAME is a function command (traceon, traceoff, ..., see ftrace_commands.h).
bool ftrace_command_exists(std::string_view name);
// Runs one command; 0 or -errno.
using ftrace_command_fn = std::function<int(const ftrace_command_request &)>;

// Applies one token to HASH (ftrace_process_regex). COMMANDS handles GLOB:CMD tokens other
// than mod (an empty function: such tokens fail with -EINVAL). Returns 0 or -errno.
int ftrace_filter_token(ftrace_hash &hash, std::string_view token,
                        const ftrace_command_fn &commands);

// Tokens of TEXT for a write() that may end mid-token: complete tokens are returned and the
// unfinished tail is kept in CARRY for the next write; FINAL (the file's release) flushes it.
std::vector<std::string> ftrace_split_tokens(std::string &carry, std::string_view text, bool final);

// The site of line N (from 1) of available_filter_functions (made if the function has none
// yet), or nullptr when there is no such line or the function cannot take a site.
ftrace_site *available_filter_site(size_t n);

} // namespace dprobe
