// Function commands (see ftrace_commands.h): one probe per array, command and parameters,
// each an ftrace_ops on its functions with a per-function count.
#include "tracefs/ftrace_commands.h"

#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/glob.h"
#include "core/ring_buffer.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/ftrace_worker.h"
#include "tracefs/func_ops.h"
#include "tracefs/snapshot.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>

namespace dprobe
{
namespace
{

enum class cmd_kind {
    traceon,
    traceoff,
    stacktrace,
    snapshot,
    dump,
    cpudump,
    enable_event,
    disable_event
};

struct cmd_name {
    const char *name;
    cmd_kind kind;
};
constexpr cmd_name k_cmds[] = {
    {"traceon", cmd_kind::traceon},
    {"traceoff", cmd_kind::traceoff},
    {"stacktrace", cmd_kind::stacktrace},
    {"snapshot", cmd_kind::snapshot},
    {"dump", cmd_kind::dump},
    {"cpudump", cmd_kind::cpudump},
    {"enable_event", cmd_kind::enable_event},
    {"disable_event", cmd_kind::disable_event},
};

const char *name_of(cmd_kind k)
{
    for (const cmd_name &c : k_cmds)
        if (c.kind == k) return c.name;
    return "?";
}

bool has_count(cmd_kind k)
{
    return k != cmd_kind::dump && k != cmd_kind::cpudump;
}

// One function of a probe. Never freed: a handler may still hold it.
struct ip_entry {
    ftrace_site *site;
    uintptr_t ip;
    std::atomic<long> count; // -1: unlimited
};

struct func_probe {
    trace_array *tr = nullptr;
    cmd_kind kind{};
    // Made with a count ("traceoff:3"): the kernel's *_count_probe_ops, a probe apart from
    // the uncounted one of the same command. "!glob:traceoff" removes only uncounted ones,
    // "!glob:traceoff:0" (any parameter) only counted ones.
    bool counted = false;
    std::string sys, event; // enable_event / disable_event
    trace_event *ev = nullptr;
    bool active = false;
    func_ops fops;
    std::vector<ip_entry *> entries; // trace_types_lock
    struct table {
        std::vector<ip_entry *> by_ip; // sorted by ip
    };
    std::atomic<const table *> pub{nullptr};
    std::vector<std::unique_ptr<table>> tables;

    void publish()
    {
        auto t = std::make_unique<table>();
        t->by_ip = entries;
        std::sort(t->by_ip.begin(), t->by_ip.end(),
                  [](const ip_entry *a, const ip_entry *b) { return a->ip < b->ip; });
        pub.store(t.get(), std::memory_order_release);
        tables.push_back(std::move(t));
    }
    ip_entry *lookup(uintptr_t ip) const noexcept
    {
        const table *t = pub.load(std::memory_order_acquire);
        if (!t) return nullptr;
        auto it = std::lower_bound(t->by_ip.begin(), t->by_ip.end(), ip,
                                   [](const ip_entry *e, uintptr_t v) { return e->ip < v; });
        return it != t->by_ip.end() && (*it)->ip == ip ? *it : nullptr;
    }
};

// Every probe ever made (reused when one of the same kind comes back). Never destroyed.
std::vector<func_probe *> &g_probes = *new std::vector<func_probe *>;

// Takes one from E's count: false when it is used up.
DPROBE_NOPROBE bool take(ip_entry *e) noexcept
{
    long c = e->count.load(std::memory_order_relaxed);
    for (;;) {
        if (c == -1) return true;
        if (c <= 0) return false;
        if (e->count.compare_exchange_weak(c, c - 1, std::memory_order_relaxed)) return true;
    }
}

DPROBE_NOPROBE int probe_entry(ftrace_ops *ops, unsigned long ip, unsigned long,
                               struct ftrace_regs *fregs, void *)
{
    auto *p = static_cast<func_probe *>(ops->priv);
    ip_entry *e = p->lookup(ip);
    if (!e) return 1;
    trace_array &tr = *p->tr;
    switch (p->kind) {
    case cmd_kind::traceon:
        // Counted only when it changes the state, as in the kernel.
        if (!ring_buffer_tracing_on(tr.buffer) && take(e))
            ring_buffer_set_tracing_on(tr.buffer, true);
        break;
    case cmd_kind::traceoff:
        if (ring_buffer_tracing_on(tr.buffer) && take(e))
            ring_buffer_set_tracing_on(tr.buffer, false);
        break;
    case cmd_kind::stacktrace:
        if (take(e)) trace_stack_record(tr, fregs);
        break;
    case cmd_kind::snapshot:
        if (take(e)) snapshot_from_probe(tr);
        break;
    case cmd_kind::dump:
    case cmd_kind::cpudump:
        // The kernel's ftrace_dump() stops tracing first, then prints.
        ring_buffer_set_tracing_on(tr.buffer, false);
        ftrace_worker_request(tr,
                              p->kind == cmd_kind::dump ? FTRACE_WORK_DUMP : FTRACE_WORK_CPUDUMP);
        break;
    case cmd_kind::enable_event:
    case cmd_kind::disable_event: {
        const bool on = p->kind == cmd_kind::enable_event;
        // Skipped (and not counted) when the event already is in that state.
        if (trace_events::soft_enabled(p->ev, tr.id) != on && take(e))
            trace_events::soft_enable(p->ev, tr.id, on);
        break;
    }
    }
    return 1;
}

func_probe *find_probe(trace_array &tr, cmd_kind k, bool counted, const std::string &sys,
                       const std::string &event, bool create)
{
    for (func_probe *p : g_probes)
        if (p->tr == &tr && p->kind == k && p->counted == counted && p->sys == sys &&
            p->event == event && p->active)
            return p;
    if (!create) return nullptr;
    func_probe *p = nullptr;
    for (func_probe *q : g_probes)
        if (!q->active && !q->fops.running()) {
            p = q;
            break;
        }
    if (!p) {
        p = new func_probe;
        g_probes.push_back(p);
    }
    p->tr = &tr;
    p->kind = k;
    p->counted = counted;
    p->sys = sys;
    p->event = event;
    p->ev = nullptr;
    p->entries.clear();
    p->pub.store(nullptr, std::memory_order_release);
    return p;
}

void stop_probe(func_probe *p)
{
    p->fops.stop();
    if (p->ev) trace_events::instance().soft_mode(p->sys, p->event, p->tr->id, false);
    p->ev = nullptr;
    p->entries.clear();
    p->pub.store(nullptr, std::memory_order_release);
    p->active = false;
}

// Whether GLOB selects the function of E for a removal: the kernel's
// unregister_ftrace_function_probe_func() matches the glob against the one name of each ip
// the probe holds ("" and "*" take them all), not against the functions a glob would select
// now (which may have gone, or not be made yet). A plain name also names the function it is
// an alias of (see kallsyms::match_funcs).
bool removal_matches(const ip_entry *e, std::string_view glob)
{
    if (glob.empty() || glob == "*") return true;
    const ftrace_site *s = e->site;
    if (glob_is_pattern(glob)) return s->sym && glob_match(glob, s->sym->name);
    if (s->sym && s->sym->name == glob) return true;
    for (const sym_hit &h : kallsyms::instance().lookup_func(glob))
        if (h.sym->addr == s->func) return true;
    return false;
}

// "!GLOB:COMMAND[...]": every function of TR's probes of kind K (counted or not, as the
// kernel's probe_ops tell them apart) whose name GLOB matches loses the command. The event
// commands name an event, but the kernel's probe_ops are the same for every event: such a
// removal takes the command off the matching functions whichever event it switches.
// -ENODEV when TR has no such probe, -EINVAL when none of its functions matches (the
// kernel's answers); otherwise 0.
int unregister_probes(trace_array &tr, cmd_kind k, bool counted, std::string_view glob)
{
    std::vector<func_probe *> probes;
    for (func_probe *p : g_probes)
        if (p->active && p->tr == &tr && p->kind == k && p->counted == counted) probes.push_back(p);
    if (probes.empty()) return -ENODEV;
    size_t removed = 0;
    int err = 0;
    for (func_probe *p : probes) {
        removed += std::erase_if(p->entries, [&](ip_entry *e) { return removal_matches(e, glob); });
        if (p->entries.empty()) {
            stop_probe(p);
            continue;
        }
        p->publish();
        if (int e = p->fops.update(); e && !err) err = e;
    }
    if (!removed) return -EINVAL;
    return err;
}

int parse_count(std::string_view s, long &count)
{
    unsigned long long v;
    if (kstrtoull(s, 0, v) || v > uint64_t(LONG_MAX)) return -EINVAL;
    count = long(v);
    return 0;
}

} // namespace

bool ftrace_command_exists(std::string_view name)
{
    return std::any_of(std::begin(k_cmds), std::end(k_cmds),
                       [&](const cmd_name &c) { return name == c.name; });
}

int ftrace_run_command(trace_array &tr, const ftrace_command_request &req)
{
    const cmd_name *c = nullptr;
    for (const cmd_name &x : k_cmds)
        if (req.command == x.name) c = &x;
    if (!c || req.glob.empty()) return -EINVAL;
    std::string sys, event;
    long count = -1;
    std::string_view param = req.param;
    bool param_given = false;
    if (c->kind == cmd_kind::enable_event || c->kind == cmd_kind::disable_event) {
        // SYSTEM:EVENT[:COUNT]
        size_t a = param.find(':');
        if (a == std::string_view::npos) return -EINVAL;
        sys = std::string(param.substr(0, a));
        std::string_view rest = param.substr(a + 1);
        size_t b = rest.find(':');
        event = std::string(rest.substr(0, b));
        param_given = b != std::string_view::npos;
        if (param_given && !req.neg && parse_count(rest.substr(b + 1), count)) return -EINVAL;
        if (sys.empty() || event.empty()) return -EINVAL;
        // event_enable_func() looks the event up before it adds or removes anything.
        if (req.neg && !trace_events::instance().find_event(sys, event)) return -EINVAL;
    } else if (!param.empty()) {
        param_given = true;
        // "!glob:traceoff:count=3" (a line read back) is fine: a removal reads no count.
        if (!req.neg && (!has_count(c->kind) || parse_count(param, count))) return -EINVAL;
    }

    // The kernel picks the counted probe_ops when a parameter follows the command (after
    // SYSTEM:EVENT for the event commands), whatever it says.
    const bool counted = has_count(c->kind) && param_given;
    if (req.neg) return unregister_probes(tr, c->kind, counted, req.glob);

    std::vector<ftrace_site *> sites = func_ops_usable(ftrace_match_sites(req.glob, ""));
    if (sites.empty()) return -EINVAL;

    func_probe *p = find_probe(tr, c->kind, counted, sys, event, true);
    const bool fresh = !p->active;
    if (fresh) {
        if (c->kind == cmd_kind::enable_event || c->kind == cmd_kind::disable_event) {
            if (int err = trace_events::instance().soft_mode(sys, event, tr.id, true))
                return err == -ENOENT ? -EINVAL : err;
            p->ev = trace_events::instance().find_event(sys, event);
        }
        if (c->kind == cmd_kind::snapshot) {
            if (int err = snapshot_alloc(tr)) {
                stop_probe(p);
                return err;
            }
            ftrace_worker_start();
        }
        if (c->kind == cmd_kind::dump || c->kind == cmd_kind::cpudump) ftrace_worker_start();
        if (c->kind == cmd_kind::stacktrace) trace_stack_init();
    }
    for (ftrace_site *s : sites) {
        bool have = std::any_of(p->entries.begin(), p->entries.end(),
                                [s](ip_entry *e) { return e->site == s; });
        if (have) continue;
        auto *e = new ip_entry{s, s->ip, {}};
        e->count.store(count, std::memory_order_relaxed);
        p->entries.push_back(e);
    }
    p->publish();
    if (fresh) {
        p->fops.ops.entry = probe_entry;
        p->fops.ops.exit = nullptr;
        p->fops.ops.data_words = 0;
        p->fops.ops.priv = p;
        p->fops.want_all = [p] {
            std::vector<ftrace_site *> v;
            for (ip_entry *e : p->entries)
                v.push_back(e->site);
            return v;
        };
        p->fops.want_loaded = nullptr;
        if (int err = p->fops.start()) {
            stop_probe(p);
            return err;
        }
        p->active = true;
        return 0;
    }
    return p->fops.update();
}

std::string ftrace_probes_show(trace_array &tr)
{
    std::string s;
    char buf[64];
    for (func_probe *p : g_probes) {
        if (!p->active || p->tr != &tr) continue;
        std::vector<ip_entry *> v = p->entries;
        std::sort(v.begin(), v.end(),
                  [](const ip_entry *a, const ip_entry *b) { return a->ip < b->ip; });
        for (ip_entry *e : v) {
            std::string line;
            print_ip_sym(line, e->ip, ftrace_print_flags{});
            line += ':';
            line += name_of(p->kind);
            if (p->kind == cmd_kind::enable_event || p->kind == cmd_kind::disable_event)
                line += ":" + p->sys + ":" + p->event;
            if (has_count(p->kind)) {
                long c = e->count.load(std::memory_order_relaxed);
                if (c == -1) {
                    line += ":unlimited";
                } else {
                    std::snprintf(buf, sizeof buf, ":count=%ld", c);
                    line += buf;
                }
            }
            s += line + "\n";
        }
    }
    return s;
}

void ftrace_probes_remove_array(trace_array &tr)
{
    for (func_probe *p : g_probes)
        if (p->active && p->tr == &tr) stop_probe(p);
}

} // namespace dprobe
