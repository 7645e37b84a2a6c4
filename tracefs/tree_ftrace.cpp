// The files of a trace array in the tracefs tree (the top level and each instances/<name>):
// the tracer, its buffers and options, the function filters, pid filters, markers, the
// snapshot, per_cpu/ and events/. Which file does what is documented in tracefs_tree.h and
// Documentation/tracefs.md; the semantics are in the modules each file calls.
#include "tracefs/tree_node.h"

#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tracefs/event_trigger.h"
#include "tracefs/ftrace_commands.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/raw_buffer.h"
#include "tracefs/snapshot.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"
#include "tracefs/trace_iter.h"
#include "tracefs/trace_marker.h"
#include "tracefs/tracer.h"
#include "tracefs/tracing_cpumask.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace dprobe::tree
{

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
        std::function<int()> trunc)
{
    node n;
    n.mode = MODE_RW;
    n.show = std::move(show);
    n.store = std::move(store);
    n.trunc = std::move(trunc);
    return n;
}

node wo(std::function<int(std::string_view)> store)
{
    node n;
    n.mode = MODE_WO;
    n.store = std::move(store);
    return n;
}

std::string_view strip(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

int parse_ulong(std::string_view s, unsigned long long &v)
{
    return kstrtoull(s, 10, v);
}

int parse_bool(std::string_view s, bool &v)
{
    if (s.empty()) return -EINVAL;
    switch (s[0]) {
    case 'y':
    case 'Y':
    case 't':
    case 'T':
    case '1':
        v = true;
        return 0;
    case 'n':
    case 'N':
    case 'f':
    case 'F':
    case '0':
        v = false;
        return 0;
    case 'o':
    case 'O':
        if (s.size() > 1 && (s[1] == 'n' || s[1] == 'N')) {
            v = true;
            return 0;
        }
        if (s.size() > 1 && (s[1] == 'f' || s[1] == 'F')) {
            v = false;
            return 0;
        }
        return -EINVAL;
    }
    return -EINVAL;
}

int store_enable(std::string_view s, const std::function<int(bool)> &set)
{
    unsigned long long v;
    if (parse_ulong(s, v) || v > 1) return -EINVAL;
    return set(v == 1);
}

namespace
{

// ---- special files ----------------------------------------------------------------------

class token_file_impl final : public tracefs_file
{
  public:
    token_file_impl(std::function<std::string()> show,
                    std::function<int(const std::string &)> apply, std::function<void()> after,
                    bool changed)
        : show_(std::move(show)), apply_(std::move(apply)), after_(std::move(after)),
          pending_(changed)
    {
    }
    ~token_file_impl() override
    {
        // The kernel parses the last token at release.
        if (!carry_.empty()) {
            std::string c;
            auto toks = ftrace_split_tokens(carry_, "", true);
            for (const auto &t : toks)
                apply_(t);
            pending_ |= !toks.empty();
        }
        if (pending_ && after_) after_();
    }
    ssize_t read(char *buf, size_t len, uint64_t off, const tracefs_read_opts &) override
    {
        if (!show_) return -EINVAL;
        if (off == 0 || !have_) {
            text_ = show_();
            have_ = true;
        }
        if (off >= text_.size()) return 0;
        size_t n = std::min<size_t>(len, text_.size() - off);
        std::memcpy(buf, text_.data() + off, n);
        return static_cast<ssize_t>(n);
    }
    ssize_t write(const char *buf, size_t len, uint64_t) override
    {
        auto toks = ftrace_split_tokens(carry_, std::string_view(buf, len), false);
        int err = 0;
        bool any = false;
        for (const auto &t : toks) {
            if ((err = apply_(t))) break;
            any = true;
        }
        if (any && after_) {
            after_();
            pending_ = false;
        }
        return err ? err : static_cast<ssize_t>(len);
    }
    unsigned poll() override { return POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM; }

  private:
    std::function<std::string()> show_;
    std::function<int(const std::string &)> apply_;
    std::function<void()> after_;
    bool pending_; // a change not yet followed by after_ (the open's O_TRUNC)
    std::string carry_, text_;
    bool have_ = false;
};

// trace_pipe: consuming text; blocks until data (O_NONBLOCK: EAGAIN).
class pipe_file final : public tracefs_file
{
  public:
    explicit pipe_file(std::shared_ptr<trace_array> tr)
        : tr_(std::move(tr)), it_(*tr_, tr_->buffer, true)
    {
    }
    ssize_t read(char *buf, size_t len, uint64_t, const tracefs_read_opts &opts) override
    {
        if (!len) return 0;
        while (pending_.size() == pos_) {
            pending_.clear();
            pos_ = 0;
            if (it_.read(pending_, 256)) break;
            pending_.clear();
            if (opts.nonblock) return -EAGAIN;
            if (tracefs_tree::instance().shutting_down()) return 0;
            if (opts.interrupted && opts.interrupted()) return -EINTR;
            ring_buffer_wait(tr_->buffer, 100);
        }
        size_t n = std::min(len, pending_.size() - pos_);
        std::memcpy(buf, pending_.data() + pos_, n);
        pos_ += n;
        return static_cast<ssize_t>(n);
    }
    ssize_t write(const char *, size_t, uint64_t) override { return -EINVAL; }
    unsigned poll() override
    {
        if (pending_.size() > pos_ || it_.has_data()) return POLLIN | POLLRDNORM;
        return 0;
    }
    bool is_stream() const override { return true; }

  private:
    std::shared_ptr<trace_array> tr_;
    trace_iter it_;
    std::string pending_;
    size_t pos_ = 0;
};

std::string lines(const std::vector<std::string> &v)
{
    std::string s;
    for (const auto &x : v)
        s += x + "\n";
    return s;
}

unsigned nr_cpus()
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    return n > 0 ? unsigned(n) : 1;
}

int with_lock(const std::function<int()> &fn)
{
    std::lock_guard<std::mutex> g(trace_types_lock());
    return fn();
}

// ---- events/ ----------------------------------------------------------------------------

// events/GROUP/EVENT/trigger, hist and hist_debug of array TR (F one of those names).
std::optional<node> trigger_files(const std::shared_ptr<trace_array> &tr, const std::string &group,
                                  const std::string &event, const std::string &f)
{
    if (f == "trigger")
        return rw([tr, group, event] { return event_trigger_show(*tr, group, event); },
                  [tr, group, event](std::string_view s) {
                      return event_trigger_write(*tr, group, event, s);
                  },
                  [tr, group, event] { return event_trigger_truncate(*tr, group, event); });
    if (f == "hist" || f == "hist_debug")
        return ro([tr, group, event, debug = f == "hist_debug"] {
            std::string s;
            with_trace_event_file(*tr, group, event, [&](const trace_event_file &file) {
                s = event_hist_show(file, debug);
                return 0;
            });
            return s;
        });
    return std::nullopt;
}

std::optional<node> resolve_events(const std::shared_ptr<trace_array> &tr,
                                   const std::vector<std::string> &p, size_t at)
{
    auto &ev = trace_events::instance();
    const unsigned id = tr->id;
    if (p.size() == at)
        return dir([&ev] {
            std::vector<std::string> v{"enable", "ftrace", "header_event", "header_page"};
            for (auto &g : ev.groups())
                if (g != "ftrace") v.push_back(g);
            return v;
        });
    const std::string &g0 = p[at];
    if (p.size() == at + 1) {
        if (g0 == "enable")
            return rw([&ev, id] { return std::string(1, ev.group_enabled("", id)) + "\n"; },
                      [&ev, id](std::string_view s) {
                          return store_enable(
                              s, [&ev, id](bool on) { return ev.set_group_enabled("", on, id); });
                      });
        if (g0 == "header_page") return ro([] { return ring_buffer_header_page(); });
        if (g0 == "header_event") return ro([] { return ring_buffer_header_event(); });
    }
    if (g0 == "ftrace") {
        // ftrace's own records: their formats and ids, nothing to enable. The kernel has no
        // enable file here; this read-only one makes libtracefs's tracefs_local_events()
        // (which loads the systems that have one) load these formats too.
        if (p.size() == at + 1)
            return dir([] {
                std::vector<std::string> v{"enable"};
                for (const auto &n : ftrace_event_names())
                    v.push_back(n);
                return v;
            });
        const std::string &name = p[at + 1];
        if (name == "enable" && p.size() == at + 2) return ro([] { return std::string("0\n"); });
        if (ftrace_event_id(name) < 0) return std::nullopt;
        // print, trace_marker's event, is the one with triggers (the kernel's
        // trace_marker_file).
        const bool print = name == "print";
        if (p.size() == at + 2)
            return dir([print] {
                if (print)
                    return std::vector<std::string>{"filter",     "format", "hist",
                                                    "hist_debug", "id",     "trigger"};
                return std::vector<std::string>{"filter", "format", "id"};
            });
        if (p.size() != at + 3) return std::nullopt;
        if (print)
            if (auto n = trigger_files(tr, g0, name, p[at + 2])) return n;
        if (p[at + 2] == "filter")
            return rw(
                [tr, name] {
                    std::lock_guard<std::mutex> g(trace_types_lock());
                    auto it = tr->ftrace_event_filter.find(name);
                    return it == tr->ftrace_event_filter.end() ? std::string("none\n") : it->second;
                },
                [tr, name](std::string_view s) {
                    s = strip(s);
                    std::lock_guard<std::mutex> g(trace_types_lock());
                    if (s == "0") {
                        tr->ftrace_event_filter.erase(name);
                        return 0;
                    }
                    std::string err;
                    int r = ftrace_event_check_filter(name, s, err);
                    tr->ftrace_event_filter[name] = r ? err : std::string(s) + "\n";
                    return r;
                });
        if (p[at + 2] == "format") return ro([name] { return ftrace_event_format(name); });
        if (p[at + 2] == "id")
            return ro([name] { return std::to_string(ftrace_event_id(name)) + "\n"; });
        return std::nullopt;
    }
    const std::string &group = g0;
    if (!ev.has_group(group)) return std::nullopt;
    if (p.size() == at + 1)
        return dir([&ev, group] {
            std::vector<std::string> v{"enable", "filter"};
            for (auto &e : ev.events(group))
                v.push_back(e);
            return v;
        });
    if (p.size() == at + 2 && p[at + 1] == "enable")
        return rw([&ev, group, id] { return std::string(1, ev.group_enabled(group, id)) + "\n"; },
                  [&ev, group, id](std::string_view s) {
                      return store_enable(s, [&ev, &group, id](bool on) {
                          return ev.set_group_enabled(group, on, id);
                      });
                  });
    if (p.size() == at + 2 && p[at + 1] == "filter")
        return rw(
            [&ev, group, id] { return ev.group_filter_text(group, id); },
            [&ev, group, id](std::string_view s) { return ev.set_group_filter(group, s, id); });
    const std::string &event = p[at + 1];
    if (!ev.has_event(group, event)) return std::nullopt;
    if (p.size() == at + 2)
        return dir([] {
            return std::vector<std::string>{"enable",     "filter", "format", "hist",
                                            "hist_debug", "id",     "trigger"};
        });
    if (p.size() != at + 3) return std::nullopt;
    const std::string &f = p[at + 2];
    if (auto n = trigger_files(tr, group, event, f)) return n;
    if (f == "enable")
        return rw([&ev, group, event, id] { return ev.enable_text(group, event, id); },
                  [&ev, group, event, id](std::string_view s) {
                      return store_enable(
                          s, [&](bool on) { return ev.set_enabled(group, event, on, id); });
                  });
    if (f == "filter")
        return rw([&ev, group, event, id] { return ev.filter_text(group, event, id).value_or(""); },
                  [&ev, group, event, id](std::string_view s) {
                      return ev.set_filter(group, event, s, id);
                  });
    if (f == "format")
        return ro([&ev, group, event] { return ev.format(group, event).value_or(""); });
    if (f == "id")
        return ro([&ev, group, event] {
            int i = ev.event_id(group, event);
            return i < 0 ? std::string() : std::to_string(i) + "\n";
        });
    return std::nullopt;
}

// buffer_size_kb: the size of each thread's buffer of the array (and of its snapshot buffer).
node buffer_size_node(trace_array *t)
{
    return rw([t] { return std::to_string(ring_buffer_size_kb(t->buffer)) + "\n"; },
              [t](std::string_view s) {
                  unsigned long long v;
                  if (parse_ulong(s, v) || v == 0) return -EINVAL;
                  return with_lock([&] {
                      int r = ring_buffer_set_size_kb(t->buffer, size_t(v));
                      if (!r && t->max_buffer)
                          r = ring_buffer_set_size_kb(t->max_buffer, size_t(v));
                      return r;
                  });
              });
}

// tracing_cpumask: the CPUs whose threads record in the array (and in its snapshot buffer,
// as the kernel disables both buffers' per-CPU parts).
node cpumask_node(trace_array *t)
{
    return rw([t] { return cpumask_format(ring_buffer_cpumask(t->buffer), cpumask_nr_bits()); },
              [t](std::string_view s) {
                  std::vector<uint64_t> mask;
                  if (int err = cpumask_parse(s, cpumask_nr_bits(), mask)) return err;
                  return with_lock([&] {
                      ring_buffer_set_cpumask(t->buffer, mask);
                      if (t->max_buffer) ring_buffer_set_cpumask(t->max_buffer, mask);
                      return 0;
                  });
              });
}

// ---- per_cpu/ ---------------------------------------------------------------------------

std::optional<node> resolve_per_cpu(const std::shared_ptr<trace_array> &tr,
                                    const std::vector<std::string> &p, size_t at)
{
    const unsigned n = nr_cpus();
    if (p.size() == at)
        return dir([n] {
            std::vector<std::string> v;
            for (unsigned i = 0; i < n; i++)
                v.push_back("cpu" + std::to_string(i));
            return v;
        });
    const std::string &c = p[at];
    unsigned long long cpu;
    if (!c.starts_with("cpu") || kstrtoull(std::string_view(c).substr(3), 10, cpu) || cpu >= n ||
        c.size() < 4 || (c.size() > 4 && c[3] == '0'))
        return std::nullopt;
    if (p.size() == at + 1)
        return dir([] {
            return std::vector<std::string>{"buffer_size_kb", "stats", "trace", "trace_pipe_raw"};
        });
    if (p.size() != at + 2) return std::nullopt;
    const std::string &f = p[at + 1];
    const unsigned ucpu = unsigned(cpu);
    if (f == "trace")
        return rw([tr, ucpu] { return trace_iter_read_all(*tr, tr->buffer, int(ucpu)); },
                  [](std::string_view) { return 0; },
                  [tr] {
                      ring_buffer_reset(tr->buffer);
                      return 0;
                  });
    if (f == "stats") return ro([tr, ucpu] { return per_cpu_stats(*tr, ucpu); });
    // Buffers are per thread, not per CPU: every CPU's file is the array's buffer_size_kb
    // (the size of each thread's buffer), so tools that size the buffers CPU by CPU
    // (libtracefs's tracefs_instance_set_buffer_size(), the kernel's selftests) size them.
    if (f == "buffer_size_kb") return buffer_size_node(tr.get());
    if (f == "trace_pipe_raw") {
        node nd;
        nd.mode = MODE_RO;
        nd.open = [tr, ucpu](int) { return raw_pipe_open(tr, ucpu); };
        return nd;
    }
    return std::nullopt;
}

// ---- options/ ---------------------------------------------------------------------------

std::optional<node> resolve_options(const std::shared_ptr<trace_array> &tr,
                                    const std::vector<std::string> &p, size_t at)
{
    if (p.size() == at)
        return dir([] {
            std::vector<std::string> v;
            for (unsigned i = 0; i < OPT__COUNT; i++)
                v.push_back(trace_opt_info_of(trace_opt(i)).name);
            std::sort(v.begin(), v.end());
            return v;
        });
    if (p.size() != at + 1) return std::nullopt;
    auto o = trace_opt_by_name(p[at]);
    if (!o) return std::nullopt;
    trace_opt opt = *o;
    return rw([tr, opt] { return std::string(tr->opt(opt) ? "1\n" : "0\n"); },
              [tr, opt](std::string_view s) {
                  unsigned long long v;
                  if (parse_ulong(s, v) || v > 1) return -EINVAL;
                  return with_lock([&] { return tr->set_opt(opt, v == 1); });
              });
}

// The filter files of an array: set_ftrace_filter (which takes commands) and
// set_ftrace_notrace.
node filter_node(const std::shared_ptr<trace_array> &tr, bool notrace)
{
    node n;
    n.mode = MODE_RW;
    ftrace_hash *h = notrace ? &tr->notrace_hash : &tr->filter_hash;
    auto show = [tr, h, notrace] {
        std::lock_guard<std::mutex> g(trace_types_lock());
        if (notrace) return h->show("#### no functions disabled ####\n");
        std::string s = h->empty() ? "#### all functions enabled ####\n" : h->show("");
        return s + ftrace_probes_show(*tr);
    };
    n.show = show;
    n.trunc = [tr, h] {
        std::lock_guard<std::mutex> g(trace_types_lock());
        h->clear();
        tracing_update_tracer(*tr);
        return 0;
    };
    // echo f > set_ftrace_filter: emptied at open, the tracer updated once f is in (an
    // empty set is every function).
    n.open_trunc = [h] {
        std::lock_guard<std::mutex> g(trace_types_lock());
        h->clear();
        return 0;
    };
    n.open = [tr, h, notrace, show](int flags) {
        return token_file(
            show,
            [tr, h, notrace](const std::string &tok) {
                std::lock_guard<std::mutex> g(trace_types_lock());
                ftrace_command_fn cmds;
                if (!notrace)
                    cmds = [tr](const ftrace_command_request &r) {
                        return ftrace_run_command(*tr, r);
                    };
                return ftrace_filter_token(*h, tok, cmds);
            },
            [tr] {
                std::lock_guard<std::mutex> g(trace_types_lock());
                tracing_update_tracer(*tr);
            },
            (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY);
    };
    n.store = [](std::string_view) { return 0; }; // writable: the open above does the work
    return n;
}

node pid_node(const std::shared_ptr<trace_array> &tr, pid_filter *pf, const char *empty)
{
    trace_array *t = tr.get();
    node n = rw([pf, empty] { return pf->show(empty); },
                [pf, t](std::string_view s) {
                    int r = pf->write(s);
                    t->update_ftrace_slow();
                    return r;
                },
                [pf, t] {
                    pf->clear();
                    t->update_ftrace_slow();
                    return 0;
                });
    n.arr = tr;
    return n;
}

} // namespace

std::unique_ptr<tracefs_file> token_file(std::function<std::string()> show,
                                         std::function<int(const std::string &)> apply,
                                         std::function<void()> after_write, bool changed_at_open)
{
    return std::make_unique<token_file_impl>(std::move(show), std::move(apply),
                                             std::move(after_write), changed_at_open);
}

std::vector<std::string> array_entries()
{
    return {"available_tracers",
            "buffer_size_kb",
            "buffer_total_size_kb",
            "current_tracer",
            "events",
            "options",
            "per_cpu",
            "set_event",
            "set_event_notrace_pid",
            "set_event_pid",
            "set_ftrace_filter",
            "set_ftrace_notrace",
            "set_ftrace_notrace_pid",
            "set_ftrace_pid",
            "snapshot",
            "trace",
            "trace_clock",
            "trace_marker",
            "trace_marker_raw",
            "trace_options",
            "trace_pipe",
            "tracing_cpumask",
            "tracing_on"};
}

std::optional<node> resolve_array(const std::shared_ptr<trace_array> &tr,
                                  const std::vector<std::string> &p, size_t at)
{
    if (p.size() <= at) return std::nullopt;
    const std::string &top = p[at];
    std::optional<node> n;
    if (top == "events")
        n = resolve_events(tr, p, at + 1);
    else if (top == "per_cpu")
        n = resolve_per_cpu(tr, p, at + 1);
    else if (top == "options")
        n = resolve_options(tr, p, at + 1);
    if (n) {
        n->arr = tr;
        return n;
    }
    if (p.size() != at + 1) return std::nullopt;
    trace_array *t = tr.get();
    auto &ev = trace_events::instance();

    if (top == "available_tracers")
        n = ro([] {
            std::string s;
            for (const tracer *x : tracers())
                s += std::string(s.empty() ? "" : " ") + x->name;
            return s + "\n";
        });
    else if (top == "current_tracer")
        n = rw(
            [t] {
                std::lock_guard<std::mutex> g(trace_types_lock());
                return std::string(t->current_trace ? t->current_trace->name : "nop") + "\n";
            },
            [t](std::string_view s) {
                return with_lock([&] { return tracing_set_tracer(*t, strip(s)); });
            });
    else if (top == "trace")
        n = rw([t] { return trace_iter_read_all(*t, t->buffer); },
               [](std::string_view) { return 0; },
               [t] {
                   ring_buffer_reset(t->buffer);
                   return 0;
               });
    else if (top == "trace_pipe") {
        node x;
        x.mode = MODE_RO;
        x.open = [tr](int) { return std::unique_ptr<tracefs_file>(new pipe_file(tr)); };
        n = x;
    } else if (top == "tracing_on")
        n = rw([t] { return std::string(ring_buffer_tracing_on(t->buffer) ? "1\n" : "0\n"); },
               [t](std::string_view s) {
                   unsigned long long v;
                   if (parse_ulong(s, v)) return -EINVAL;
                   ring_buffer_set_tracing_on(t->buffer, v != 0);
                   return 0;
               });
    else if (top == "buffer_size_kb")
        n = buffer_size_node(t);
    else if (top == "tracing_cpumask")
        n = cpumask_node(t);
    else if (top == "buffer_total_size_kb")
        // The kernel sums its per-CPU buffers; here: every thread's buffer in the array.
        n = ro([t] {
            size_t threads = ring_buffer_thread_stats(t->buffer).size();
            return std::to_string(ring_buffer_size_kb(t->buffer) * std::max<size_t>(threads, 1)) +
                   "\n";
        });
    else if (top == "trace_clock")
        n = rw([] { return trace_clock_list(); },
               [](std::string_view s) { return ring_buffer_set_clock(strip(s)); });
    else if (top == "trace_options")
        n = rw(
            [t] {
                std::lock_guard<std::mutex> g(trace_types_lock());
                return t->options_text();
            },
            [t](std::string_view s) {
                std::string_view name = strip(s);
                bool on = true;
                if (name.starts_with("no")) {
                    if (!trace_opt_by_name(name)) on = false, name.remove_prefix(2);
                }
                auto o = trace_opt_by_name(name);
                if (!o) return -EINVAL;
                return with_lock([&] { return t->set_opt(*o, on); });
            });
    else if (top == "set_event") {
        node x = rw([&ev, t] { return lines(ev.enabled_events(t->id)); },
                    [](std::string_view) { return 0; },
                    [&ev, t] {
                        ev.set_group_enabled("", false, t->id);
                        return 0;
                    });
        x.open = [&ev, t](int) {
            return token_file([&ev, t] { return lines(ev.enabled_events(t->id)); },
                              [&ev, t](const std::string &tok) {
                                  std::string_view s = tok;
                                  bool on = true;
                                  if (!s.empty() && s[0] == '!') {
                                      on = false;
                                      s.remove_prefix(1);
                                  }
                                  return ev.set_event_matching(s, on, t->id);
                              },
                              nullptr);
        };
        n = x;
    } else if (top == "set_event_pid")
        n = pid_node(tr, &t->event_pids, "");
    else if (top == "set_event_notrace_pid")
        n = pid_node(tr, &t->event_no_pids, "");
    else if (top == "set_ftrace_pid")
        n = pid_node(tr, &t->function_pids, "no pid\n");
    else if (top == "set_ftrace_notrace_pid")
        n = pid_node(tr, &t->function_no_pids, "no pid\n");
    else if (top == "set_ftrace_filter")
        n = filter_node(tr, false);
    else if (top == "set_ftrace_notrace")
        n = filter_node(tr, true);
    else if (top == "snapshot")
        n = rw([t] { return snapshot_read(*t); },
               [t](std::string_view s) {
                   unsigned long long v;
                   if (parse_ulong(s, v)) return -EINVAL;
                   return with_lock([&] { return snapshot_write(*t, (unsigned long)v); });
               });
    else if (top == "trace_marker") {
        n = wo(nullptr);
        n->store_part = [t](std::string_view s) {
            return trace_marker_write(*t, s, tracefs_caller_pid);
        };
    } else if (top == "trace_marker_raw")
        n = wo([t](std::string_view s) {
            long r = trace_marker_raw_write(*t, s, tracefs_caller_pid);
            return r < 0 ? int(r) : 0;
        });
    if (n) n->arr = tr;
    return n;
}

} // namespace dprobe::tree
