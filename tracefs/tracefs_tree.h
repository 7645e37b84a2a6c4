// The tracefs file tree of one process, as an in-process model: paths, open files, read,
// write, truncate and poll. The FUSE mount (tracefs_fuse.h) and the Unix socket
// (tracefs_socket.h) are thin bindings of this model.
//
// Tree (names, contents and write semantics of the kernel's tracefs). The files of a trace
// array are served at the top level and in each instances/<name>/ (tree_ftrace.cpp); the
// rest are the process's (tracefs_tree.cpp). Documentation/tracefs.md has them file by file.
//   README                           what this tree supports (read)
//   dynamic_events                   p/r/f/-:/! lines; O_TRUNC deletes every event (EBUSY if
//                                    one is enabled); read lists them
//   kprobe_events, uprobe_events     the same for kprobe (p/r on symbols and addresses) and
//                                    uprobe-style (p/r on path:offset) events only
//   error_log                        the last 8 rejected commands; O_TRUNC clears it
//   available_filter_functions       functions with a patch site ("name[ [object]]")
//   available_filter_functions_addrs "<site address> name[ [object]]"
//   enabled_functions                sites with ops attached: "name (ops)" + flag columns
//   kprobe_profile, uprobe_profile   per-probe hits and misses
//   kprobes/list, kprobes/enabled, kprobes/blacklist   (debugfs kprobes/ of the kernel)
//   kprobes/optimization             the sysctl debug.kprobes-optimization (0 unoptimizes
//                                    every kprobe); present once the kprobe layer defines
//                                    int kprobes_set_optimization(int), kprobes_optimization()
//   available_events, saved_cmdlines, saved_cmdlines_size, saved_tgids
//   set_graph_function, set_graph_notrace, max_graph_depth, tracing_thresh (tracer_graph.h)
//   function_profile_enabled, trace_stat/ (function_profile.h)
//   stack_trace, stack_max_size, stack_trace_filter, stack_tracer_enabled (stack_tracer.h)
//   instances/                       mkdir/rmdir: trace arrays (trace_array.h)
// A trace array's files (top level and instances/<name>/):
//   available_tracers, current_tracer (tracer.h)
//   trace                            the buffer, nothing consumed; O_TRUNC clears it
//   trace_pipe                       consuming read; blocks until data (O_NONBLOCK: EAGAIN);
//                                    poll reports POLLIN when data is there
//   tracing_on                       1/0
//   buffer_size_kb                   per-thread buffer size; buffer_total_size_kb
//   trace_clock                      clock list, the current one in brackets; write a name
//   trace_options, options/          trace options (trace_array.h)
//   set_ftrace_filter, set_ftrace_notrace (ftrace_filter.h, ftrace_commands.h)
//   set_ftrace_pid, set_ftrace_notrace_pid, set_event_pid, set_event_notrace_pid
//   set_event                        enabled events by name
//   snapshot (snapshot.h), trace_marker, trace_marker_raw (trace_marker.h)
//   per_cpu/cpuN/{trace,stats,trace_pipe_raw} (raw_buffer.h)
//   events/enable                    0/1 for every event; reads 0, 1, X (mixed) or ? (none)
//   events/header_page, events/header_event, events/ftrace/<name>/{format,id}
//   events/<group>/{enable,filter}
//   events/<group>/<event>/{enable,filter,format,id}
//
// Every write() is one command batch, processed as the kernel processes it; offsets of
// writes are ignored. Reads of regular files see a snapshot generated at the first read of
// an open file.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

struct tracefs_read_opts {
    bool nonblock = false;
    // Polled while a read blocks: true stops the wait with -EINTR (a FUSE interrupt, a
    // socket client that went away).
    std::function<bool()> interrupted;
};

// An open file.
class tracefs_file
{
  public:
    virtual ~tracefs_file() = default;
    // Returns bytes read (0 at end of file) or -errno.
    virtual ssize_t read(char *buf, size_t len, uint64_t off, const tracefs_read_opts &opts) = 0;
    // Returns LEN or -errno.
    virtual ssize_t write(const char *buf, size_t len, uint64_t off) = 0;
    // POLLIN / POLLOUT readiness now.
    virtual unsigned poll() = 0;
    // trace_pipe: a stream (no offsets, no size).
    virtual bool is_stream() const { return false; }
};

struct tracefs_stat {
    bool is_dir = false;
    unsigned mode = 0; // permission bits: 0700 directories, 0600 / 0400 / 0200 files
};

class tracefs_tree
{
  public:
    // The process's tree (never destroyed).
    static tracefs_tree &instance();

    // PATH is relative to the tree's root; a leading '/' and repeated or trailing '/' are
    // ignored. Return 0 or -errno (ENOENT, ENOTDIR, EISDIR, EACCES, EBUSY, EINVAL, ...).
    int stat(std::string_view path, tracefs_stat &st) const;
    int list(std::string_view path, std::vector<std::string> &names) const;
    // FLAGS as for open(2): O_RDONLY/O_WRONLY/O_RDWR, O_TRUNC, O_NONBLOCK.
    int open(std::string_view path, int flags, std::unique_ptr<tracefs_file> &out);
    // truncate(2) to size 0: what O_TRUNC does on open.
    int truncate(std::string_view path);
    // mkdir(2) / rmdir(2): only instances/NAME (a new trace array, or its removal).
    // -EEXIST, -EPERM elsewhere, -EBUSY (a file of the instance is open), -ENOSPC.
    int mkdir(std::string_view path);
    int rmdir(std::string_view path);

    // Conveniences: the whole file; a non-blocking read of trace_pipe.
    int read_file(std::string_view path, std::string &out);
    // One write() after opening for writing (with O_TRUNC when TRUNC).
    int write_file(std::string_view path, std::string_view data, bool trunc = false);

    // Makes blocked reads return (0) and new blocking reads return at once; used when the
    // bindings stop at exit.
    void shutdown() noexcept { shutdown_.store(true, std::memory_order_release); }
    // Undoes shutdown() when the bindings start again.
    void resume() noexcept { shutdown_.store(false, std::memory_order_release); }
    bool shutting_down() const noexcept { return shutdown_.load(std::memory_order_acquire); }

    // The README text.
    static const char *readme();

    tracefs_tree(const tracefs_tree &) = delete;
    tracefs_tree &operator=(const tracefs_tree &) = delete;

    struct node; // a resolved path (tracefs_tree.cpp)

  private:
    tracefs_tree() = default;
    std::atomic<bool> shutdown_{false};
};

// "a//b/" -> "a/b", "/" -> "".
std::string tracefs_normalize_path(std::string_view path);

// The process a request runs for (the FUSE request's pid, the socket peer's), set by the
// bindings around each call; 0 when unknown (in-process calls). trace_marker records it.
// constinit: no dynamic initialization, so no TLS wrapper function, whose weak reference
// would be an undefined dynamic symbol of the preload.
extern constinit thread_local int32_t tracefs_caller_pid;

} // namespace dprobe
