// The tracefs tree: path resolution, the files' contents and write semantics.
#include "tracefs/tracefs_tree.h"

#include "core/ftrace.h"
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_filter.h"
#include "tracefs/function_profile.h"
#include "tracefs/probe_parse.h"
#include "tracefs/saved_cmdlines.h"
#include "tracefs/stack_tracer.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"
#include "tracefs/trace_output.h"
#include "tracefs/tracer_graph.h"
#include "tracefs/tree_node.h"

#include <dprobe/kprobes.h>

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>

// The optprobes switch (the kernel's debug.kprobes-optimization sysctl), provided by the
// kprobe layer once jump optimization lands: 0 unoptimizes every probe, 1 optimizes again.
// Weak: until the kprobe layer defines them, kprobes/optimization is not in the tree.
extern "C" int kprobes_set_optimization(int enabled) __attribute__((weak));
extern "C" int kprobes_optimization(void) __attribute__((weak));

namespace dprobe
{

constinit thread_local int32_t tracefs_caller_pid = 0;

namespace
{

using namespace tree;

std::vector<std::string> split_path(std::string_view p)
{
    std::vector<std::string> parts;
    size_t i = 0;
    while (i < p.size()) {
        while (i < p.size() && p[i] == '/')
            i++;
        size_t s = i;
        while (i < p.size() && p[i] != '/')
            i++;
        if (i > s) parts.emplace_back(p.substr(s, i - s));
    }
    return parts;
}

node dynevent_file(unsigned accept)
{
    auto &ev = trace_events::instance();
    return rw([&ev, accept] { return ev.listing(accept); },
              [&ev, accept](std::string_view s) { return ev.write_commands(s, accept); },
              [&ev, accept] { return ev.release_all(accept); });
}

std::string available_functions(bool with_addrs)
{
    ftrace_update_objects();
    std::string s;
    char addr[32];
    // What set_ftrace_filter accepts, as in the kernel: functions with a compiled-in site and
    // those a jump site can serve (uninstrumented libraries), not only the sites made so far.
    for (const ftrace_func_entry &f : ftrace_selectable_funcs()) {
        if (with_addrs) {
            std::snprintf(addr, sizeof addr, "%" PRIxPTR " ", f.ip);
            s += addr;
        }
        s += f.sym->name;
        if (f.obj && !f.obj->is_main) s += " [" + f.obj->name + "]";
        s += '\n';
    }
    return s;
}

std::string enabled_functions()
{
    ftrace_update_objects();
    std::string s;
    char buf[64];
    for (const ftrace_site *site : ftrace_all_sites()) {
        uint32_t n = ftrace_site_ops_count(site);
        if (!n || site->gone) continue;
        s += site->sym ? site->sym->name : std::string("0x") + std::to_string(site->ip);
        if (site->obj && !site->obj->is_main) s += " [" + site->obj->name + "]";
        // "(ops)" and the R I D O M flag columns of the kernel, all clear for our sites.
        std::snprintf(buf, sizeof buf, " (%u)%s%s%s%s%s\n", n, "  ", "  ", "  ", "  ", "   ");
        s += buf;
    }
    return s;
}

bool have_optimization_knob()
{
    return kprobes_set_optimization != nullptr && kprobes_optimization != nullptr;
}

std::optional<node> resolve_kprobes(const std::vector<std::string> &p)
{
    if (p.size() == 1)
        return dir([] {
            std::vector<std::string> v{"blacklist", "enabled", "list"};
            if (have_optimization_knob()) v.push_back("optimization");
            return v;
        });
    if (p.size() != 2) return std::nullopt;
    if (p[1] == "list")
        return ro(
            [] { return kprobes_list_text() + trace_events::instance().pending_kprobes_list(); });
    if (p[1] == "blacklist") return ro([] { return kprobes_blacklist_text(); });
    if (p[1] == "enabled")
        return rw([] { return std::string(kprobes_enabled() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      bool on;
                      if (parse_bool(s, on)) return -EINVAL;
                      return kprobes_set_enabled(on ? 1 : 0);
                  });
    if (p[1] == "optimization" && have_optimization_knob())
        return rw([] { return std::string(kprobes_optimization() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      // proc_dointvec_minmax over 0..1, as the sysctl.
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > 1) return -EINVAL;
                      return kprobes_set_optimization(int(v));
                  });
    return std::nullopt;
}

// Files only the top level has (the kernel's are process-wide too: dynamic events, the
// graph filters, the profiler, the stack tracer, instances/).
const std::vector<std::string> &top_entries()
{
    static const std::vector<std::string> v{
        "README",
        "available_events",
        "available_filter_functions",
        "available_filter_functions_addrs",
        "dynamic_events",
        "enabled_functions",
        "error_log",
        "function_profile_enabled",
        "instances",
        "kprobe_events",
        "kprobe_profile",
        "kprobes",
        "max_graph_depth",
        "saved_cmdlines",
        "saved_cmdlines_size",
        "saved_tgids",
        "set_graph_function",
        "set_graph_notrace",
        "stack_max_size",
        "stack_trace",
        "stack_trace_filter",
        "stack_tracer_enabled",
        "synthetic_events",
        "trace_stat",
        "tracing_thresh",
        "uprobe_events",
        "uprobe_profile",
    };
    return v;
}

std::vector<std::string> root_entries()
{
    std::vector<std::string> v = top_entries();
    for (auto &e : array_entries())
        v.push_back(e);
    std::sort(v.begin(), v.end());
    return v;
}

// set_graph_function / set_graph_notrace / stack_trace_filter: a filter file over a
// process-wide set (no commands).
node hash_node(ftrace_hash *h, const char *empty, std::function<void()> changed)
{
    node n;
    n.mode = MODE_RW;
    auto show = [h, empty] { return h->show(empty); };
    n.show = show;
    n.store = [](std::string_view) { return 0; };
    n.trunc = [h, changed] {
        std::lock_guard<std::mutex> g(trace_types_lock());
        h->clear();
        if (changed) changed();
        return 0;
    };
    n.open = [h, show, changed](int) {
        return token_file(
            show,
            [h](const std::string &tok) {
                std::lock_guard<std::mutex> g(trace_types_lock());
                return ftrace_filter_token(*h, tok, nullptr);
            },
            [changed] {
                if (changed) {
                    std::lock_guard<std::mutex> g(trace_types_lock());
                    changed();
                }
            });
    };
    return n;
}

std::optional<node> resolve_trace_stat(const std::vector<std::string> &p)
{
    if (p.size() == 1) return dir([] { return trace_stat_files(); });
    if (p.size() != 2) return std::nullopt;
    std::string name = p[1];
    auto files = trace_stat_files();
    if (std::find(files.begin(), files.end(), name) == files.end()) return std::nullopt;
    return ro([name] { return trace_stat_text(name); });
}

std::optional<node> resolve_top(const std::vector<std::string> &p)
{
    auto &ev = trace_events::instance();
    const std::string &top = p[0];
    if (top == "kprobes") return resolve_kprobes(p);
    if (top == "instances") {
        if (p.size() == 1) return dir([] { return trace_array_names(); });
        auto tr = trace_array_get(p[1]);
        if (!tr) return std::nullopt;
        if (p.size() == 2) {
            node d = dir([] { return array_entries(); });
            d.arr = tr;
            return d;
        }
        return resolve_array(tr, p, 2);
    }
    if (top == "trace_stat") return resolve_trace_stat(p);
    if (p.size() != 1) return std::nullopt;
    if (top == "README") return ro([] { return std::string(tracefs_tree::readme()); });
    if (top == "dynamic_events") return dynevent_file(ACCEPT_DYNAMIC);
    if (top == "kprobe_events") return dynevent_file(ACCEPT_KPROBE);
    if (top == "uprobe_events") return dynevent_file(ACCEPT_UPROBE);
    if (top == "synthetic_events")
        return rw([&ev] { return ev.synth_listing(); },
                  [&ev](std::string_view s) {
                      return trace_parse_run_command(s, [&ev](std::span<const std::string> argv) {
                          // The kernel's parser takes each raw line; fields split on ';'.
                          std::string raw;
                          for (const std::string &a : argv)
                              raw += (raw.empty() ? "" : " ") + a;
                          return ev.run_synth_command(raw, false);
                      });
                  },
                  [&ev] { return ev.release_all(ACCEPT_SYNTH); });
    if (top == "error_log")
        // Writes other than O_TRUNC are ignored, as in the kernel.
        return rw([&ev] { return ev.errors().read(); }, [](std::string_view) { return 0; },
                  [&ev] {
                      ev.errors().clear();
                      return 0;
                  });
    if (top == "available_filter_functions") return ro([] { return available_functions(false); });
    if (top == "available_filter_functions_addrs")
        return ro([] { return available_functions(true); });
    if (top == "enabled_functions") return ro(enabled_functions);
    if (top == "kprobe_profile") return ro([&ev] { return ev.kprobe_profile(); });
    if (top == "uprobe_profile") return ro([&ev] { return ev.uprobe_profile(); });
    if (top == "available_events")
        return ro([&ev] {
            std::string s;
            for (auto &e : ev.all_events())
                s += e + "\n";
            return s;
        });
    if (top == "saved_cmdlines") return ro(saved_cmdlines_text);
    if (top == "saved_tgids") return ro(saved_tgids_text);
    if (top == "saved_cmdlines_size")
        return rw([] { return std::to_string(saved_cmdlines_size()) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v)) return -EINVAL;
                      return set_saved_cmdlines_size(v);
                  });
    if (top == "set_graph_function")
        return hash_node(&ftrace_graph_hash(), "#### all functions enabled ####\n", nullptr);
    if (top == "set_graph_notrace")
        return hash_node(&ftrace_graph_notrace_hash(), "#### no functions disabled ####\n",
                         nullptr);
    if (top == "max_graph_depth")
        return rw([] { return std::to_string(fgraph_max_depth()) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > UINT32_MAX) return -EINVAL;
                      fgraph_set_max_depth(unsigned(v));
                      return 0;
                  });
    if (top == "tracing_thresh")
        // Microseconds in the file, nanoseconds inside, as in the kernel.
        return rw([] { return std::to_string(tracing_thresh() / 1000) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > UINT64_MAX / 1000) return -EINVAL;
                      std::lock_guard<std::mutex> g(trace_types_lock());
                      tracing_set_thresh(v * 1000);
                      return 0;
                  });
    if (top == "function_profile_enabled")
        return rw([] { return std::string(function_profile_enabled() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > 1) return -EINVAL;
                      std::lock_guard<std::mutex> g(trace_types_lock());
                      return function_profile_set(v == 1);
                  });
    if (top == "stack_trace") return ro(stack_trace_text);
    if (top == "stack_max_size")
        return rw([] { return std::to_string(stack_max_size()) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v)) return -EINVAL;
                      stack_set_max_size(v);
                      return 0;
                  });
    if (top == "stack_tracer_enabled")
        return rw([] { return std::string(stack_tracer_enabled() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > 1) return -EINVAL;
                      std::lock_guard<std::mutex> g(trace_types_lock());
                      return stack_tracer_set(v == 1);
                  });
    if (top == "stack_trace_filter")
        return hash_node(&stack_trace_filter_hash(), "#### all functions enabled ####\n",
                         [] { stack_tracer_update(); });
    return std::nullopt;
}

std::optional<node> resolve(std::string_view path)
{
    std::vector<std::string> p = split_path(path);
    if (p.empty()) return dir([] { return root_entries(); });
    const auto &tops = top_entries();
    if (std::find(tops.begin(), tops.end(), p[0]) != tops.end()) return resolve_top(p);
    return resolve_array(trace_array_top_ptr(), p, 0);
}

// A regular file: a snapshot of its text for reads, writes straight to its store.
class seq_file final : public tracefs_file
{
  public:
    explicit seq_file(node n) : n_(std::move(n)) {}

    ssize_t read(char *buf, size_t len, uint64_t off, const tracefs_read_opts &) override
    {
        if (!n_.show) return -EINVAL;
        if (off == 0 || !have_) {
            text_ = n_.show();
            have_ = true;
        }
        if (off >= text_.size()) return 0;
        size_t n = std::min<size_t>(len, text_.size() - off);
        std::memcpy(buf, text_.data() + off, n);
        return static_cast<ssize_t>(n);
    }

    ssize_t write(const char *buf, size_t len, uint64_t) override
    {
        if (n_.store_part) {
            long r = n_.store_part(std::string_view(buf, len));
            return r < 0 ? r : static_cast<ssize_t>(std::min<size_t>(size_t(r), len));
        }
        if (!n_.store) return -EINVAL;
        int r = n_.store(std::string_view(buf, len));
        return r < 0 ? r : static_cast<ssize_t>(len);
    }

    unsigned poll() override { return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM; }

  private:
    node n_;
    std::string text_;
    bool have_ = false;
};

// Wraps an open file of a trace array: the array counts it (rmdir answers EBUSY meanwhile).
class array_file final : public tracefs_file
{
  public:
    array_file(std::unique_ptr<tracefs_file> f, std::shared_ptr<trace_array> tr)
        : f_(std::move(f)), tr_(std::move(tr))
    {
        tr_->ref.fetch_add(1);
    }
    ~array_file() override
    {
        f_.reset();
        tr_->ref.fetch_sub(1);
    }
    ssize_t read(char *buf, size_t len, uint64_t off, const tracefs_read_opts &o) override
    {
        return f_->read(buf, len, off, o);
    }
    ssize_t write(const char *buf, size_t len, uint64_t off) override
    {
        return f_->write(buf, len, off);
    }
    unsigned poll() override { return f_->poll(); }
    bool is_stream() const override { return f_->is_stream(); }

  private:
    std::unique_ptr<tracefs_file> f_;
    std::shared_ptr<trace_array> tr_;
};

} // namespace

std::string tracefs_normalize_path(std::string_view path)
{
    std::string s;
    for (const auto &part : split_path(path)) {
        if (!s.empty()) s += '/';
        s += part;
    }
    return s;
}

tracefs_tree &tracefs_tree::instance()
{
    static tracefs_tree *t = new tracefs_tree; // never destroyed
    return *t;
}

int tracefs_tree::stat(std::string_view path, tracefs_stat &st) const
{
    auto n = resolve(path);
    if (!n) return -ENOENT;
    st.is_dir = n->dir;
    st.mode = n->mode;
    return 0;
}

int tracefs_tree::list(std::string_view path, std::vector<std::string> &names) const
{
    auto n = resolve(path);
    if (!n) return -ENOENT;
    if (!n->dir) return -ENOTDIR;
    names = n->children();
    return 0;
}

int tracefs_tree::open(std::string_view path, int flags, std::unique_ptr<tracefs_file> &out)
{
    auto n = resolve(path);
    if (!n) return -ENOENT;
    if (n->dir) return -EISDIR;
    int acc = flags & O_ACCMODE;
    bool want_read = acc == O_RDONLY || acc == O_RDWR;
    bool want_write = acc == O_WRONLY || acc == O_RDWR;
    if ((want_read && !n->show && !n->open) || (want_write && !n->store && !n->store_part))
        return -EACCES;
    if (want_write && (flags & O_TRUNC)) {
        if (n->open_trunc) {
            if (int r = n->open_trunc()) return r;
        } else if (n->trunc) {
            if (int r = n->trunc()) return r;
        }
    }
    std::unique_ptr<tracefs_file> f;
    if (n->open)
        f = n->open(flags);
    else
        f = std::make_unique<seq_file>(*n);
    if (!f) return -ENOMEM;
    if (n->arr) f = std::make_unique<array_file>(std::move(f), n->arr);
    out = std::move(f);
    return 0;
}

int tracefs_tree::mkdir(std::string_view path)
{
    std::vector<std::string> p = split_path(path);
    if (p.size() != 2 || p[0] != "instances") return resolve(path) ? -EEXIST : -EPERM;
    return trace_array_create(p[1]);
}

int tracefs_tree::rmdir(std::string_view path)
{
    std::vector<std::string> p = split_path(path);
    if (p.size() != 2 || p[0] != "instances") return resolve(path) ? -EPERM : -ENOENT;
    int r = trace_array_destroy(p[1]);
    return r == -ENODEV ? -ENOENT : r;
}

int tracefs_tree::truncate(std::string_view path)
{
    auto n = resolve(path);
    if (!n) return -ENOENT;
    if (n->dir) return -EISDIR;
    if (!n->store && !n->store_part) return -EACCES;
    return n->trunc ? n->trunc() : 0;
}

int tracefs_tree::read_file(std::string_view path, std::string &out)
{
    std::unique_ptr<tracefs_file> f;
    if (int r = open(path, O_RDONLY | O_NONBLOCK, f)) return r;
    out.clear();
    tracefs_read_opts opts;
    opts.nonblock = true;
    char buf[65536];
    for (;;) {
        ssize_t n = f->read(buf, sizeof buf, out.size(), opts);
        if (n == -EAGAIN) return 0;
        if (n < 0) return static_cast<int>(n);
        if (n == 0) return 0;
        out.append(buf, static_cast<size_t>(n));
    }
}

int tracefs_tree::write_file(std::string_view path, std::string_view data, bool trunc)
{
    std::unique_ptr<tracefs_file> f;
    if (int r = open(path, O_WRONLY | (trunc ? O_TRUNC : 0), f)) return r;
    if (data.empty()) return 0;
    // A file may take part of a write (trace_marker): write the rest, as write(1) would.
    while (!data.empty()) {
        ssize_t n = f->write(data.data(), data.size(), 0);
        if (n < 0) return static_cast<int>(n);
        if (n == 0) return -EIO;
        data.remove_prefix(size_t(n));
    }
    return 0;
}

const char *tracefs_tree::readme()
{
    return R"(tracing mini-HOWTO (dprobe: tracefs of one user-space process):

# echo 'f:myevent do_work a=$arg1:u32' >> dynamic_events
# echo 1 > events/fprobes/myevent/enable
# cat trace_pipe

 Files:
  README		- this text
  trace			- The static contents of the buffer
			  To clear the buffer write into this file: echo > trace
  trace_pipe		- A consuming read to see the contents of the buffer
  tracing_on		- Enable or disable writing to the ring buffer
  buffer_size_kb	- View and modify the size of each thread's buffer
  tracing_cpumask	- Limit which CPUs to trace (threads running elsewhere record nothing)
  current_tracer	- function and latency tracers
  available_tracers	- list of configured tracers for current_tracer
  trace_clock		- Change the clock used to order events
       local:   TSC scaled to ns, calibrated to CLOCK_MONOTONIC (default)
      global:   same as local (the TSC is synchronised across CPUs)
     counter:   raw cycle count
        perf:   same as local
        mono:   CLOCK_MONOTONIC
    mono_raw:   CLOCK_MONOTONIC_RAW
        boot:   CLOCK_BOOTTIME
         tai:   CLOCK_TAI
     x86-tsc:   TSC cycle counter
  trace_options		- Set format or modify how tracing happens:
			  Disable an option by prefixing 'no' to the option name
  options/		- one file per option (0/1), the tracers' own ones too
      overwrite		- 1: overwrite the oldest events when full, 0: drop new ones
  trace_marker		- Writes into this file writes into the kernel buffer
  trace_marker_raw	- Writes into this file writes binary data into the buffer
  saved_cmdlines	- names of the threads (and writers) seen in the trace
  saved_tgids		- their thread-group ids
  snapshot		- Like 'trace' but shows the content of the static
			  snapshot buffer. Read the contents for more information
  per_cpu/cpuN/		- the records written on CPU N: trace, stats, and
			  trace_pipe_raw (ring-buffer pages, as the kernel's);
			  buffer_size_kb is the array's (buffers are per thread)
  instances/		- mkdir a directory here for a new trace buffer with its
			  own tracer, events, filters and options; rmdir removes it
  set_ftrace_filter	- echo function name in here to only trace these functions
	     accepts: func_full_name or glob-matching-pattern
	     modules: Can select a group via module
	      Format: :mod:<module-name>
	    triggers: a command to perform when function is hit
	      Format: <function>:<trigger>[:count]
	     trigger: traceon, traceoff
		      enable_event:<system>:<event>
		      disable_event:<system>:<event>
		      stacktrace
		      snapshot
		      dump
		      cpudump
	     To remove trigger without count:
	       echo '!<function>:<trigger> > set_ftrace_filter
	     To remove trigger with a count:
	       echo '!<function>:<trigger>:0 > set_ftrace_filter
  set_ftrace_notrace	- echo function name in here to never trace.
  set_ftrace_pid	- Write thread ids to only trace those threads' functions
  set_ftrace_notrace_pid - Write thread ids whose functions are not traced
  set_graph_function	- Trace the nested calls of a function (function_graph)
  set_graph_notrace	- Do not trace the nested calls of a function (function_graph)
  max_graph_depth	- Trace a limited depth of nested calls (0 is unlimited)
  tracing_thresh	- function_graph: record only calls that took this long (usecs)
  function_profile_enabled - 1: count and time every traced function (trace_stat/)
  trace_stat/		- function<cpu>: the calls that entered on that CPU
  stack_tracer_enabled	- 1: record the deepest stack of the traced functions
  stack_trace		- Shows the max stack trace when active
  stack_max_size	- Shows current max stack size that was traced
			  Write into this file to reset the max size (trigger a
			  new trace)
  stack_trace_filter	- Like set_ftrace_filter but limits what stack_trace
			  traces
  set_event		- Enables events by name written into it ("group:event",
			  "group:*", "event"; "!" disables, "echo > set_event" all)
  set_event_pid		- Write thread ids: only they record events
  available_events	- list of all events that can be set in set_event
  available_filter_functions - the functions set_ftrace_filter can select: those with
			  a patch site, and library functions a jump site serves
  available_filter_functions_addrs - the same with the site addresses
  enabled_functions	- functions with probes attached, and how many
  error_log		- error log for failed commands (O_TRUNC clears it)
  kprobe_profile	- hits and misses of each kprobe event
  uprobe_profile	- hits of each path:offset event
  kprobes/list		- registered kprobes
  kprobes/enabled	- 0 disarms every kprobe, 1 rearms them
  kprobes/blacklist	- address ranges that cannot be probed
  kprobes/optimization	- 0 unoptimizes every kprobe, 1 allows jump optimization
			  (the sysctl debug.kprobes-optimization; when the kprobe layer has it)
  events/		- Directory containing all trace event subsystems:
      enable		- Write 0/1 to enable/disable tracing of all events
      header_page	- the ring-buffer page layout (trace_pipe_raw)
      header_event	- the ring-buffer event header layout
      ftrace/		- the formats of ftrace's own records
  events/name/		- Directory containing all trace events of a group
      enable		- Write 0/1 to enable/disable tracing of all events of the group
      filter		- A filter for every event of the group
  events/name/event/	- Directory containing control files for an event:
      enable		- Write 0/1 to enable/disable tracing of the event
      filter		- If set, only events passing the filter are recorded
      format		- The record layout (libtraceevent reads it)
      id		- The event's type id
  filter expressions:	field op value [&& || ! ( ) ...]
	  numbers: == != < <= > >= &	strings ("..." or '...'): == != ~(glob)
  dynamic_events		- Create/append/remove/show the generic dynamic events
			  Write into this file to define/undefine new trace events.
  kprobe_events		- Create/append/remove/show the kernel dynamic events
			  Write into this file to define/undefine new trace events.
  uprobe_events		- Create/append/remove/show the userspace dynamic events
			  Write into this file to define/undefine new trace events.
	  accepts: event-definitions (one definition per line)
	   Format: p[:[<group>/][<event>]] <place> [<args>]
	           r[maxactive][:[<group>/][<event>]] <place> [<args>]
	           f[:[<group>/][<event>]] <func-name>[%return] [<args>]
	           t[:[<group>/][<event>]] <tracepoint> [<args>]
	           e[:[<group>/][<event>]] <attached-group>.<attached-event> [<args>] [if <filter>]
	           s:[synthetic/]<event> <field> [<field>]
	           -:[<group>/][<event>]
	    place: [<module>:]<symbol>[+<offset>]|<memaddr>
place (kretprobe): [<module>:]<symbol>[+<offset>]%return|<memaddr>
   place (uprobe): <path>:<offset>[%return][(ref_ctr_offset)]
	     args: <name>=fetcharg[:type]
	 fetcharg: (%<register>|$<efield>), @<address>, @<symbol>[+|-<offset>],
	           $stack<index>, $stack, $retval, $comm, $arg<N>,
	           <argname>[->field[->field|.field...]],
	           +|-[u]<offset>(<fetcharg>), \imm-value, \"imm-string"
	     kernel return probes support: $retval, $arg<N>, $comm
	     type: s8/16/32/64, u8/16/32/64, x8/16/32/64, char, string, symbol,
	           b<bit-width>@<bit-offset>/<container-size>, ustring,
	           symstr, <type>\[<array-size>\]
	    efield: For event probes ('e' types), the field is on of the fields
	            of the <attached-group>/<attached-event>.
	  <module> is a loaded object ("libc.so.6:malloc"); <place> of an f event may be a glob.
	  A place in a library not loaded yet (or a file not mapped) waits for it
	  (kprobes/list shows it [GONE]).
	  <argname>, $arg* and the type of $retval come from the function's DWARF (its
	  object's -g debug info, or a separate debug file by build id or .gnu_debuglink).
	    field: <stype> <name>;
	    stype: u8/u16/u32/u64, s8/s16/s32/s64, pid_t,
	           [unsigned] char/int/long
  synthetic_events	- Create/append/remove/show synthetic events
			  Write into this file to define/undefine new synthetic events.
			     example: echo 'myevent u64 lat; char name[]' >> synthetic_events
			              echo 'myevent u64 lat; char name[]; long[] stack' >> synthetic_events
  events/name/event/trigger	- hist:keys=<field1[,field2,...]>[:<var1>=<field|var_ref|numeric_literal>[,...]]
			[:vals=<field1[,field2,...]>][:sort=<field1[,field2,...]>][:size=#entries]
			[:clock=<clock>][:pause][:continue][:clear][:name=histname1]
			[:<handler>.<action>] [if <filter>]
	    Keys and values are the event's fields; keys
	    can be any field, or the special string 'common_stacktrace'.
	    A variable (var=...) can be a field, common_timestamp, common_stacktrace,
	    a reference to another variable ($var, sys.event.$var) or an expression.
	    handler.action: onmatch(matching.event).trace(<synthetic_event>,param list)
	                    onmatch(matching.event).<synthetic_event>(param list)
	                    onmax(var).save(field,...) | onmax(var).snapshot() | onmax(var).trace(...)
	                    onchange(var).save(field,...) | onchange(var).snapshot()
)";
}

} // namespace dprobe
