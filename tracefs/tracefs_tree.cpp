// The tracefs tree: path resolution, the files' contents and write semantics.
#include "tracefs/tracefs_tree.h"

#include "core/ftrace.h"
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_events.h"
#include "tracefs/trace_output.h"

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

namespace dprobe {

struct tracefs_tree::node {
    bool dir = false;
    unsigned mode = 0;
    std::function<std::vector<std::string>()> children;
    std::function<std::string()> show;             // readable files
    std::function<int(std::string_view)> store;    // writable files: 0 or -errno
    std::function<int()> trunc;                    // what O_TRUNC does (nullptr: nothing)
    bool pipe = false;                             // trace_pipe
};

namespace {

using node = tracefs_tree::node;

constexpr unsigned MODE_DIR = 0700, MODE_RW = 0600, MODE_RO = 0400;

std::string_view strip(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

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
        if (i > s)
            parts.emplace_back(p.substr(s, i - s));
    }
    return parts;
}

// kstrtoul(buf, 10) as the kernel's *_from_user helpers use it (one trailing newline).
int parse_ulong(std::string_view s, unsigned long long &v)
{
    return kstrtoull(s, 10, v);
}

// kstrtobool(): y/Y/t/T/1 and on; n/N/f/F/0 and off.
int parse_bool(std::string_view s, bool &v)
{
    if (s.empty())
        return -EINVAL;
    switch (s[0]) {
    case 'y': case 'Y': case 't': case 'T': case '1': v = true; return 0;
    case 'n': case 'N': case 'f': case 'F': case '0': v = false; return 0;
    case 'o': case 'O':
        if (s.size() > 1 && (s[1] == 'n' || s[1] == 'N')) { v = true; return 0; }
        if (s.size() > 1 && (s[1] == 'f' || s[1] == 'F')) { v = false; return 0; }
        return -EINVAL;
    }
    return -EINVAL;
}

node dir(std::function<std::vector<std::string>()> children)
{
    node n;
    n.dir = true;
    n.mode = MODE_DIR;
    n.children = std::move(children);
    return n;
}

node ro(std::function<std::string()> show)
{
    node n;
    n.mode = MODE_RO;
    n.show = std::move(show);
    return n;
}

node rw(std::function<std::string()> show, std::function<int(std::string_view)> store,
        std::function<int()> trunc = nullptr)
{
    node n;
    n.mode = MODE_RW;
    n.show = std::move(show);
    n.store = std::move(store);
    n.trunc = std::move(trunc);
    return n;
}

// enable files: "0"/"1" only.
int store_enable(std::string_view s, const std::function<int(bool)> &set)
{
    unsigned long long v;
    if (parse_ulong(s, v) || v > 1)
        return -EINVAL;
    return set(v == 1);
}

node dynevent_file(unsigned accept)
{
    auto &ev = trace_events::instance();
    return rw([&ev, accept] { return ev.listing(accept, true); },
              [&ev, accept](std::string_view s) { return ev.write_commands(s, accept); },
              [&ev, accept] { return ev.release_all(accept); });
}

std::string available_functions(bool with_addrs)
{
    ftrace_update_objects();
    std::string s;
    char addr[32];
    for (const ftrace_site *site : ftrace_all_sites()) {
        if (site->gone || !site->sym)
            continue;
        if (with_addrs) {
            std::snprintf(addr, sizeof addr, "%" PRIxPTR " ", site->ip);
            s += addr;
        }
        s += site->sym->name;
        if (site->obj && !site->obj->is_main)
            s += " [" + site->obj->name + "]";
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
        if (!n || site->gone)
            continue;
        s += site->sym ? site->sym->name : std::string("0x") + std::to_string(site->ip);
        if (site->obj && !site->obj->is_main)
            s += " [" + site->obj->name + "]";
        // "(ops)" and the R I D O M flag columns of the kernel, all clear for our sites.
        std::snprintf(buf, sizeof buf, " (%u)%s%s%s%s%s\n", n, "  ", "  ", "  ", "  ", "   ");
        s += buf;
    }
    return s;
}

std::string trace_text()
{
    return trace_read(trace_events::payload_fn, nullptr);
}

std::optional<node> resolve_events(const std::vector<std::string> &p)
{
    auto &ev = trace_events::instance();
    // p[0] == "events"
    if (p.size() == 1)
        return dir([&ev] {
            std::vector<std::string> v{"enable"};
            for (auto &g : ev.groups())
                v.push_back(g);
            return v;
        });
    if (p.size() == 2 && p[1] == "enable")
        return rw([&ev] { return std::string(1, ev.group_enabled("")) + "\n"; },
                  [&ev](std::string_view s) {
                      return store_enable(s, [&ev](bool on) { return ev.set_group_enabled("", on); });
                  });
    const std::string &group = p[1];
    if (!ev.has_group(group))
        return std::nullopt;
    if (p.size() == 2)
        return dir([&ev, group] {
            std::vector<std::string> v{"enable", "filter"};
            for (auto &e : ev.events(group))
                v.push_back(e);
            return v;
        });
    if (p.size() == 3 && p[2] == "enable")
        return rw([&ev, group] { return std::string(1, ev.group_enabled(group)) + "\n"; },
                  [&ev, group](std::string_view s) {
                      return store_enable(
                          s, [&ev, &group](bool on) { return ev.set_group_enabled(group, on); });
                  });
    if (p.size() == 3 && p[2] == "filter")
        return rw([&ev, group] { return ev.group_filter_text(group); },
                  [&ev, group](std::string_view s) { return ev.set_group_filter(group, s); });
    const std::string &event = p[2];
    if (!ev.has_event(group, event))
        return std::nullopt;
    if (p.size() == 3)
        return dir([] { return std::vector<std::string>{"enable", "filter", "format", "id"}; });
    if (p.size() != 4)
        return std::nullopt;
    const std::string &f = p[3];
    if (f == "enable")
        return rw(
            [&ev, group, event] {
                int r = ev.enabled(group, event);
                return r < 0 ? std::string() : std::to_string(r) + "\n";
            },
            [&ev, group, event](std::string_view s) {
                return store_enable(
                    s, [&](bool on) { return ev.set_enabled(group, event, on); });
            });
    if (f == "filter")
        return rw([&ev, group, event] { return ev.filter_text(group, event).value_or(""); },
                  [&ev, group, event](std::string_view s) {
                      return ev.set_filter(group, event, s);
                  });
    if (f == "format")
        return ro([&ev, group, event] { return ev.format(group, event).value_or(""); });
    if (f == "id")
        return ro([&ev, group, event] {
            int id = ev.event_id(group, event);
            return id < 0 ? std::string() : std::to_string(id) + "\n";
        });
    return std::nullopt;
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
            if (have_optimization_knob())
                v.push_back("optimization");
            return v;
        });
    if (p.size() != 2)
        return std::nullopt;
    if (p[1] == "list")
        return ro([] { return kprobes_list_text() + trace_events::instance().pending_kprobes_list(); });
    if (p[1] == "blacklist")
        return ro([] { return kprobes_blacklist_text(); });
    if (p[1] == "enabled")
        return rw([] { return std::string(kprobes_enabled() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      bool on;
                      if (parse_bool(s, on))
                          return -EINVAL;
                      return kprobes_set_enabled(on ? 1 : 0);
                  });
    if (p[1] == "optimization" && have_optimization_knob())
        return rw([] { return std::string(kprobes_optimization() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      // proc_dointvec_minmax over 0..1, as the sysctl.
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > 1)
                          return -EINVAL;
                      return kprobes_set_optimization(int(v));
                  });
    return std::nullopt;
}

const std::vector<std::string> &root_entries()
{
    static const std::vector<std::string> v{
        "README",
        "available_filter_functions",
        "available_filter_functions_addrs",
        "buffer_size_kb",
        "dynamic_events",
        "enabled_functions",
        "error_log",
        "events",
        "kprobe_events",
        "kprobe_profile",
        "kprobes",
        "options",
        "trace",
        "trace_clock",
        "trace_pipe",
        "tracing_on",
        "uprobe_events",
        "uprobe_profile",
    };
    return v;
}

std::optional<node> resolve(std::string_view path)
{
    std::vector<std::string> p = split_path(path);
    auto &ev = trace_events::instance();
    if (p.empty())
        return dir([] { return root_entries(); });
    const std::string &top = p[0];
    if (top == "events")
        return resolve_events(p);
    if (top == "kprobes")
        return resolve_kprobes(p);
    if (top == "options") {
        if (p.size() == 1)
            return dir([] { return std::vector<std::string>{"overwrite"}; });
        if (p.size() == 2 && p[1] == "overwrite")
            return rw([] { return std::string(ring_buffer_overwrite() ? "1\n" : "0\n"); },
                      [](std::string_view s) {
                          unsigned long long v;
                          if (parse_ulong(s, v) || v > 1)
                              return -EINVAL;
                          ring_buffer_set_overwrite(v == 1);
                          return 0;
                      });
        return std::nullopt;
    }
    if (p.size() != 1)
        return std::nullopt;
    if (top == "README")
        return ro([] { return std::string(tracefs_tree::readme()); });
    if (top == "dynamic_events")
        return dynevent_file(ACCEPT_DYNAMIC);
    if (top == "kprobe_events")
        return dynevent_file(ACCEPT_KPROBE);
    if (top == "uprobe_events")
        return dynevent_file(ACCEPT_UPROBE);
    if (top == "error_log")
        // Writes other than O_TRUNC are ignored, as in the kernel.
        return rw([&ev] { return ev.errors().read(); }, [](std::string_view) { return 0; },
                  [&ev] {
                      ev.errors().clear();
                      return 0;
                  });
    if (top == "trace")
        return rw(trace_text, [](std::string_view) { return 0; },
                  [] {
                      ring_buffer_reset();
                      return 0;
                  });
    if (top == "trace_pipe") {
        node n;
        n.mode = MODE_RO;
        n.pipe = true;
        return n;
    }
    if (top == "tracing_on")
        return rw([] { return std::string(ring_buffer_tracing_on() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v))
                          return -EINVAL;
                      ring_buffer_set_tracing_on(v != 0);
                      return 0;
                  });
    if (top == "buffer_size_kb")
        return rw([] { return std::to_string(ring_buffer_size_kb()) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v == 0)
                          return -EINVAL;
                      return ring_buffer_set_size_kb(static_cast<size_t>(v));
                  });
    if (top == "trace_clock")
        return rw([] { return trace_clock_list(); },
                  [](std::string_view s) { return ring_buffer_set_clock(strip(s)); });
    if (top == "available_filter_functions")
        return ro([] { return available_functions(false); });
    if (top == "available_filter_functions_addrs")
        return ro([] { return available_functions(true); });
    if (top == "enabled_functions")
        return ro(enabled_functions);
    if (top == "kprobe_profile")
        return ro([&ev] { return ev.kprobe_profile(); });
    if (top == "uprobe_profile")
        return ro([&ev] { return ev.uprobe_profile(); });
    return std::nullopt;
}

// A regular file: a snapshot of its text for reads, writes straight to its store.
class seq_file final : public tracefs_file {
public:
    explicit seq_file(node n) : n_(std::move(n)) {}

    ssize_t read(char *buf, size_t len, uint64_t off, const tracefs_read_opts &) override
    {
        if (!n_.show)
            return -EINVAL;
        if (off == 0 || !have_) {
            text_ = n_.show();
            have_ = true;
        }
        if (off >= text_.size())
            return 0;
        size_t n = std::min<size_t>(len, text_.size() - off);
        std::memcpy(buf, text_.data() + off, n);
        return static_cast<ssize_t>(n);
    }

    ssize_t write(const char *buf, size_t len, uint64_t) override
    {
        if (!n_.store)
            return -EINVAL;
        int r = n_.store(std::string_view(buf, len));
        return r < 0 ? r : static_cast<ssize_t>(len);
    }

    unsigned poll() override { return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM; }

private:
    node n_;
    std::string text_;
    bool have_ = false;
};

// trace_pipe: consumes records; text not yet handed out stays with the open file.
class pipe_file final : public tracefs_file {
public:
    explicit pipe_file(tracefs_tree &tree) : tree_(tree) {}

    ssize_t read(char *buf, size_t len, uint64_t, const tracefs_read_opts &opts) override
    {
        if (!len)
            return 0;
        while (pending_.size() == pos_) {
            pending_.clear();
            pos_ = 0;
            if (trace_pipe_read(pending_, 256, comms_, trace_events::payload_fn, nullptr))
                break;
            if (opts.nonblock)
                return -EAGAIN;
            if (tree_.shutting_down())
                return 0;
            if (opts.interrupted && opts.interrupted())
                return -EINTR;
            ring_buffer_wait(100);
        }
        size_t n = std::min(len, pending_.size() - pos_);
        std::memcpy(buf, pending_.data() + pos_, n);
        pos_ += n;
        return static_cast<ssize_t>(n);
    }

    ssize_t write(const char *, size_t, uint64_t) override { return -EINVAL; }

    unsigned poll() override
    {
        if (pending_.size() > pos_ || ring_buffer_has_data())
            return POLLIN | POLLRDNORM;
        return 0;
    }

    bool is_stream() const override { return true; }

private:
    tracefs_tree &tree_;
    std::string pending_;
    size_t pos_ = 0;
    comm_cache comms_;
};

} // namespace

std::string tracefs_normalize_path(std::string_view path)
{
    std::string s;
    for (const auto &part : split_path(path)) {
        if (!s.empty())
            s += '/';
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
    if (!n)
        return -ENOENT;
    st.is_dir = n->dir;
    st.mode = n->mode;
    return 0;
}

int tracefs_tree::list(std::string_view path, std::vector<std::string> &names) const
{
    auto n = resolve(path);
    if (!n)
        return -ENOENT;
    if (!n->dir)
        return -ENOTDIR;
    names = n->children();
    return 0;
}

int tracefs_tree::open(std::string_view path, int flags, std::unique_ptr<tracefs_file> &out)
{
    auto n = resolve(path);
    if (!n)
        return -ENOENT;
    if (n->dir)
        return -EISDIR;
    int acc = flags & O_ACCMODE;
    bool want_read = acc == O_RDONLY || acc == O_RDWR;
    bool want_write = acc == O_WRONLY || acc == O_RDWR;
    if ((want_read && !n->show && !n->pipe) || (want_write && !n->store))
        return -EACCES;
    if (want_write && (flags & O_TRUNC) && n->trunc)
        if (int r = n->trunc())
            return r;
    if (n->pipe)
        out = std::make_unique<pipe_file>(*this);
    else
        out = std::make_unique<seq_file>(std::move(*n));
    return 0;
}

int tracefs_tree::truncate(std::string_view path)
{
    auto n = resolve(path);
    if (!n)
        return -ENOENT;
    if (n->dir)
        return -EISDIR;
    if (!n->store)
        return -EACCES;
    return n->trunc ? n->trunc() : 0;
}

int tracefs_tree::read_file(std::string_view path, std::string &out)
{
    std::unique_ptr<tracefs_file> f;
    if (int r = open(path, O_RDONLY | O_NONBLOCK, f))
        return r;
    out.clear();
    tracefs_read_opts opts;
    opts.nonblock = true;
    char buf[65536];
    for (;;) {
        ssize_t n = f->read(buf, sizeof buf, out.size(), opts);
        if (n == -EAGAIN)
            return 0;
        if (n < 0)
            return static_cast<int>(n);
        if (n == 0)
            return 0;
        out.append(buf, static_cast<size_t>(n));
    }
}

int tracefs_tree::write_file(std::string_view path, std::string_view data, bool trunc)
{
    std::unique_ptr<tracefs_file> f;
    if (int r = open(path, O_WRONLY | (trunc ? O_TRUNC : 0), f))
        return r;
    if (data.empty())
        return 0;
    ssize_t n = f->write(data.data(), data.size(), 0);
    return n < 0 ? static_cast<int>(n) : 0;
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
  options/overwrite	- 1: overwrite the oldest events when full, 0: drop new ones
  available_filter_functions - list of functions with a patch site
  available_filter_functions_addrs - the same with the patch-site addresses
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
	           e[:[<group>/][<event>]] <attached-group>.<attached-event> [<args>] [if <filter>]
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
	  A place in a library not loaded yet (or a file not mapped) waits for it: " # [GONE]".
	  <argname>, $arg* and the type of $retval come from the function's DWARF (its
	  object's -g debug info, or a separate debug file by build id or .gnu_debuglink).
)";
}

} // namespace dprobe
