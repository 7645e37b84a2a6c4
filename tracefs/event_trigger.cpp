// Event triggers (see event_trigger.h; the kernel's kernel/trace/trace_events_trigger.c):
// the command registry, the per-file trigger lists and their publication to the handlers,
// the generic parse / register / filter helpers, and the simple commands traceon,
// traceoff, snapshot, stacktrace, enable_event and disable_event.
//
// Invariants: a file's list (files_) changes only with event_trigger_lock() held; what the
// handlers read (trace_event::triggers[array], the data and its filter) is immutable once
// published, and is freed only after synchronize_dispatch() (no handler still holds it).
// Every trigger holds its event in soft mode in its array; every enable_event trigger also
// holds its target.
#include "tracefs/event_trigger.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "core/task_ctx.h"
#include "tracefs/ftrace_worker.h"
#include "tracefs/snapshot.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"
#include "tracefs/trace_probe.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <map>

namespace dprobe
{

namespace
{

constexpr const char filter_err_loc[] = "event filter parse error";
constexpr size_t k_page_size = 4096;

std::vector<const event_command *> &commands()
{
    static auto *v = new std::vector<const event_command *>;
    return *v;
}

// One event file's triggers (writer side, owning them), newest first. What the handlers
// see is the list publish() makes from it (current_lists()).
struct file_state {
    std::vector<std::unique_ptr<event_trigger_data>> list;
};

std::map<std::pair<trace_event *, unsigned>, file_state> &files()
{
    static auto *m = new std::map<std::pair<trace_event *, unsigned>, file_state>;
    return *m;
}

// Published lists no longer current, and deleted triggers: freed at the next
// synchronize_dispatch() (reap()).
std::vector<std::unique_ptr<event_trigger_list>> &retired_lists()
{
    static auto *v = new std::vector<std::unique_ptr<event_trigger_list>>;
    return *v;
}
std::vector<std::unique_ptr<event_trigger_data>> &retired_data()
{
    static auto *v = new std::vector<std::unique_ptr<event_trigger_data>>;
    return *v;
}
// The current list of each file (owned here; the handlers see a raw pointer).
std::map<std::pair<trace_event *, unsigned>, std::unique_ptr<event_trigger_list>> &current_lists()
{
    static auto *m =
        new std::map<std::pair<trace_event *, unsigned>, std::unique_ptr<event_trigger_list>>;
    return *m;
}

bool needs_cond(const event_trigger_data &d)
{
    return d.filter.load(std::memory_order_relaxed) != nullptr ||
           (d.cmd->flags & (EVENT_CMD_FL_POST_TRIGGER | EVENT_CMD_FL_NEEDS_REC)) != 0;
}

// The kernel's update_cond_flag and list_add_rcu/list_del_rcu in one: FILE's list as the
// handlers will see it.
void publish(trace_event *ev, unsigned array)
{
    const auto key = std::make_pair(ev, array);
    auto &fs = files()[key];
    std::unique_ptr<event_trigger_list> l;
    if (!fs.list.empty()) {
        l = std::make_unique<event_trigger_list>();
        for (auto &d : fs.list) {
            l->triggers.push_back(d.get());
            l->cond = l->cond || needs_cond(*d);
        }
    }
    ev->triggers[array].store(l.get(), std::memory_order_release);
    const uint64_t bit = uint64_t{1} << array;
    if (l)
        ev->trigger_mask.fetch_or(bit, std::memory_order_release);
    else
        ev->trigger_mask.fetch_and(~bit, std::memory_order_release);
    auto &cur = current_lists()[key];
    if (cur) retired_lists().push_back(std::move(cur));
    cur = std::move(l);
    if (!cur) current_lists().erase(key);
    if (fs.list.empty()) files().erase(key);
}

// Frees what no handler can hold any more: the kernel's tracepoint_synchronize_unregister
// before kfree.
void reap()
{
    if (retired_data().empty() && retired_lists().empty()) return;
    synchronize_dispatch();
    for (auto &d : retired_data())
        if (d->cmd->free) d->cmd->free(*d);
    retired_data().clear();
    retired_lists().clear();
}

void register_builtin();

void ensure_builtin()
{
    static std::once_flag once;
    std::call_once(once, register_builtin);
}

std::string_view skip_spaces(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    return s;
}

std::string_view strim(std::string_view s)
{
    s = skip_spaces(s);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

// strsep(&s, delims): the text before the first delimiter; S becomes what follows it, or
// nullopt when there is none.
std::string_view strsep(std::optional<std::string_view> &s, std::string_view delims)
{
    std::string_view all = *s;
    size_t at = all.find_first_of(delims);
    if (at == std::string_view::npos) {
        s.reset();
        return all;
    }
    s = all.substr(at + 1);
    return all.substr(0, at);
}

// The kernel's kstrtoul (base 0): the whole text a number.
bool kstrtoul(std::string_view s, unsigned long &out)
{
    if (s.empty()) return false;
    int base = 10;
    if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    } else if (s.size() > 1 && s[0] == '0') {
        base = 8;
        s.remove_prefix(1);
    }
    if (s.empty()) return false;
    unsigned long v = 0;
    for (char c : s) {
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return false;
        if (d >= base) return false;
        if (v > (ULONG_MAX - unsigned(d)) / unsigned(base)) return false;
        v = v * unsigned(base) + unsigned(d);
    }
    out = v;
    return true;
}

} // namespace

// ---- trace_event_file ----

const std::string &trace_event_file::system() const
{
    return event->group;
}
const std::string &trace_event_file::name() const
{
    return event->name;
}
const std::vector<filter_field> &trace_event_file::fields() const
{
    return event->fields;
}

// ---- the command registry ----

namespace
{

// register_event_command with event_trigger_lock() held; AT: where in the list.
int add_command(const event_command &cmd, size_t at)
{
    for (const event_command *p : commands())
        if (std::string_view(p->name) == cmd.name) return -EBUSY;
    commands().insert(commands().begin() + std::ptrdiff_t(std::min(at, commands().size())), &cmd);
    return 0;
}

} // namespace

int register_event_command(const event_command &cmd)
{
    std::lock_guard<std::mutex> g(event_trigger_lock());
    return add_command(cmd, commands().size());
}

std::vector<const event_command *> event_commands()
{
    ensure_builtin();
    std::lock_guard<std::mutex> g(event_trigger_lock());
    return commands();
}

std::mutex &event_trigger_lock()
{
    static auto *m = new std::mutex;
    return *m;
}

// ---- the files ----

int with_trace_event_file(trace_array &tr, std::string_view group, std::string_view event,
                          const std::function<int(const trace_event_file &)> &fn)
{
    ensure_builtin();
    trace_events &te = trace_events::instance();
    std::lock_guard<std::mutex> g1(trace_types_lock());
    std::lock_guard<std::mutex> g2(event_trigger_lock());
    // A file of a removed instance (still open): the kernel's -ENODEV, nothing changed.
    if (trace_array_by_id(tr.id) != &tr) return -ENODEV;
    trace_event *ev = te.pin_event(group, event);
    if (!ev) return -ENODEV;
    trace_event_file file{ev, &tr, tr.id};
    int r = fn(file);
    te.unpin_event(ev);
    reap();
    return r;
}

// The kernel's trigger_process_regex.
int event_trigger_write(trace_array &tr, std::string_view group, std::string_view event,
                        std::string_view text)
{
    if (text.empty()) return 0;
    if (text.size() >= k_page_size) return -EINVAL;
    std::string_view buff = strim(text);
    return with_trace_event_file(tr, group, event, [&](const trace_event_file &file) {
        std::optional<std::string_view> next = buff;
        std::string_view command = strsep(next, ": \t");
        if (next) {
            next = skip_spaces(*next);
            if (next->empty()) next.reset();
        }
        const std::string_view glob = command;
        if (!command.empty() && command[0] == '!') command.remove_prefix(1);
        for (const event_command *p : commands())
            if (command == p->name) return p->parse(*p, file, glob, command, next);
        return -EINVAL;
    });
}

int event_trigger_truncate(trace_array &tr, std::string_view group, std::string_view event)
{
    return with_trace_event_file(tr, group, event, [](const trace_event_file &file) {
        for (const event_command *p : commands())
            if (p->unreg_all) p->unreg_all(file);
        return 0;
    });
}

std::string event_trigger_show(trace_array &tr, std::string_view group, std::string_view event)
{
    std::string out;
    with_trace_event_file(tr, group, event, [&](const trace_event_file &file) {
        std::vector<event_trigger_data *> v = event_triggers_of(file);
        if (v.empty()) {
            out = "# Available triggers:\n#";
            for (const event_command *p : commands()) {
                out += ' ';
                out += p->name;
            }
            out += '\n';
            return 0;
        }
        for (event_trigger_data *d : v)
            d->cmd->print(out, *d);
        return 0;
    });
    return out;
}

void clear_event_triggers(unsigned array)
{
    std::lock_guard<std::mutex> g(event_trigger_lock());
    std::vector<event_trigger_data *> all;
    for (auto &[key, fs] : files())
        if (key.second == array)
            for (auto &d : fs.list)
                all.push_back(d.get());
    for (event_trigger_data *d : all)
        event_trigger_del(d);
    reap();
}

size_t event_triggers_count()
{
    std::lock_guard<std::mutex> g(event_trigger_lock());
    size_t n = 0;
    for (auto &[key, fs] : files())
        n += fs.list.size();
    return n;
}

// ---- helpers for the commands ----

std::vector<event_trigger_data *> event_triggers_of(const trace_event_file &file)
{
    std::vector<event_trigger_data *> v;
    auto it = files().find({file.event, file.array});
    if (it != files().end())
        for (auto &d : it->second.list)
            v.push_back(d.get());
    return v;
}

std::unique_ptr<event_trigger_data>
event_trigger_alloc(const event_command &cmd, const trace_event_file &file, void *private_data)
{
    auto d = std::make_unique<event_trigger_data>();
    d->cmd = &cmd;
    d->file = file;
    d->private_data = private_data;
    return d;
}

int event_trigger_separate_filter(std::optional<std::string_view> param_and_filter,
                                  std::optional<std::string_view> *param,
                                  std::optional<std::string_view> *filter, bool param_required)
{
    param->reset();
    filter->reset();
    if (!param_and_filter) return param_required ? -EINVAL : 0;
    // The only optional param is ":N"; anything else is a filter.
    if (!param_required && (param_and_filter->empty() ||
                            !std::isdigit(static_cast<unsigned char>((*param_and_filter)[0])))) {
        *filter = *param_and_filter;
        return 0;
    }
    std::optional<std::string_view> rest = param_and_filter;
    *param = strsep(rest, " \t");
    if (rest) {
        std::string_view f = skip_spaces(*rest);
        if (!f.empty()) *filter = f;
    }
    return 0;
}

int event_trigger_parse_num(std::optional<std::string_view> param, event_trigger_data &data)
{
    if (!param) return 0;
    std::optional<std::string_view> p = param;
    std::string_view number = strsep(p, ":");
    unsigned long v;
    if (number.empty() || !kstrtoul(number, v)) return -EINVAL;
    data.count.store(static_cast<long>(v), std::memory_order_relaxed);
    data.counted = true;
    return 0;
}

int event_trigger_set_filter(event_trigger_data &data, std::optional<std::string_view> filter)
{
    if (!filter) return 0;
    std::optional<std::string_view> rest = filter;
    std::string_view s = strsep(rest, " \t");
    if (s != "if" || !rest) return -EINVAL;
    std::string_view expr = *rest;
    filter_parse_error pe;
    auto f = event_filter::compile(expr, data.file.fields(), pe);
    if (!f) {
        // The kernel's create_event_filter with set_str: append_filter_err logs it.
        const bool positioned = pe.err != filter_err::NONE && pe.err != filter_err::ERRNO;
        trace_events::instance().errors().append_message(
            filter_err_loc, filter_err_text(positioned ? pe.err : filter_err::ERRNO),
            std::string(expr), positioned ? size_t(pe.pos) : 0);
        return -EINVAL;
    }
    data.filter_owned = std::move(f);
    data.filter.store(data.filter_owned.get(), std::memory_order_relaxed);
    data.filter_str = std::string(expr);
    return 0;
}

int event_trigger_add(std::unique_ptr<event_trigger_data> data)
{
    const trace_event_file &file = data->file;
    // The kernel's trace_event_trigger_enable_disable(file, 1).
    if (int err = trace_events::instance().soft_mode(file.system(), file.name(), file.array, true))
        return err;
    auto &fs = files()[{file.event, file.array}];
    fs.list.insert(fs.list.begin(), std::move(data));
    publish(file.event, file.array);
    return 0;
}

void event_trigger_del(event_trigger_data *data)
{
    const trace_event_file file = data->file;
    auto it = files().find({file.event, file.array});
    if (it == files().end()) return;
    auto &list = it->second.list;
    auto at = std::find_if(list.begin(), list.end(), [&](auto &p) { return p.get() == data; });
    if (at == list.end()) return;
    retired_data().push_back(std::move(*at));
    list.erase(at);
    publish(file.event, file.array);
    trace_events::instance().soft_mode(file.system(), file.name(), file.array, false);
}

int register_trigger(std::unique_ptr<event_trigger_data> data)
{
    for (event_trigger_data *t : event_triggers_of(data->file))
        if (t->cmd->trigger_type == data->cmd->trigger_type) return -EEXIST;
    return event_trigger_add(std::move(data));
}

bool unregister_trigger(const trace_event_file &file, unsigned trigger_type)
{
    for (event_trigger_data *t : event_triggers_of(file))
        if (t->cmd->trigger_type == trigger_type) {
            event_trigger_del(t);
            return true;
        }
    return false;
}

int event_trigger_parse(const event_command &cmd, const trace_event_file &file,
                        std::string_view glob, std::string_view,
                        std::optional<std::string_view> param_and_filter)
{
    const bool remove = !glob.empty() && glob[0] == '!';
    std::optional<std::string_view> param, filter;
    if (int r = event_trigger_separate_filter(param_and_filter, &param, &filter, false)) return r;
    if (remove) {
        unregister_trigger(file, cmd.trigger_type);
        return 0;
    }
    auto data = event_trigger_alloc(cmd, file, nullptr);
    if (int r = event_trigger_parse_num(param, *data)) return r;
    if (int r = event_trigger_set_filter(*data, filter)) return r;
    return register_trigger(std::move(data));
}

DPROBE_NOPROBE bool event_trigger_count(event_trigger_data &data,
                                        const event_trigger_hit &) noexcept
{
    long c = data.count.load(std::memory_order_relaxed);
    for (;;) {
        if (c == -1) return true;
        if (c <= 0) return false;
        if (data.count.compare_exchange_weak(c, c - 1, std::memory_order_relaxed)) return true;
    }
}

void event_trigger_print(std::string &out, const char *name, const event_trigger_data &data)
{
    out += name;
    const long c = data.count.load(std::memory_order_relaxed);
    if (c == -1) {
        out += ":unlimited";
    } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, ":count=%ld", c);
        out += buf;
    }
    if (!data.filter_str.empty()) {
        out += " if ";
        out += data.filter_str;
    }
    out += '\n';
}

// ---- the hot path ----

namespace
{

DPROBE_NOPROBE inline void fire(event_trigger_data &d, const event_trigger_hit &hit) noexcept
{
    if (d.counted && d.cmd->count_func && !d.cmd->count_func(d, hit)) return;
    d.cmd->trigger(d, hit);
}

} // namespace

DPROBE_NOPROBE void event_triggers_call(const event_trigger_list &list,
                                        const event_trigger_hit &hit) noexcept
{
    for (event_trigger_data *d : list.triggers)
        if (!d->paused.load(std::memory_order_relaxed)) fire(*d, hit);
}

DPROBE_NOPROBE uint64_t event_triggers_call_rec(const event_trigger_list &list,
                                                const event_trigger_hit &hit) noexcept
{
    uint64_t post = 0;
    event_filter::context fc;
    fc.cpu = hit.cpu;
    size_t i = 0;
    for (event_trigger_data *d : list.triggers) {
        const size_t at = i++;
        if (d->paused.load(std::memory_order_relaxed)) continue;
        const event_filter *f = d->filter.load(std::memory_order_acquire);
        if (f && !f->match(hit.rec, hit.len, fc)) continue;
        if (d->cmd->flags & EVENT_CMD_FL_POST_TRIGGER) {
            if (at < 64) post |= uint64_t{1} << at;
            continue;
        }
        fire(*d, hit);
    }
    return post;
}

DPROBE_NOPROBE void event_triggers_post_call(const event_trigger_list &list, uint64_t post,
                                             const event_trigger_hit &hit) noexcept
{
    event_trigger_hit h = hit;
    h.rec = nullptr;
    h.len = 0;
    while (post) {
        const unsigned at = static_cast<unsigned>(__builtin_ctzll(post));
        post &= post - 1;
        if (at >= list.triggers.size()) break;
        event_trigger_data *d = list.triggers[at];
        if (!d->paused.load(std::memory_order_relaxed)) fire(*d, h);
    }
}

// ---- the simple commands ----

namespace
{

DPROBE_NOPROBE void traceon_trigger(event_trigger_data &, const event_trigger_hit &hit) noexcept
{
    if (ring_buffer_tracing_on(hit.tr->buffer)) return;
    ring_buffer_set_tracing_on(hit.tr->buffer, true);
}

DPROBE_NOPROBE bool traceon_count_func(event_trigger_data &data,
                                       const event_trigger_hit &hit) noexcept
{
    // Counted only when it changes the state, as in the kernel.
    if (ring_buffer_tracing_on(hit.tr->buffer)) return false;
    return event_trigger_count(data, hit);
}

DPROBE_NOPROBE void traceoff_trigger(event_trigger_data &, const event_trigger_hit &hit) noexcept
{
    if (!ring_buffer_tracing_on(hit.tr->buffer)) return;
    ring_buffer_set_tracing_on(hit.tr->buffer, false);
}

DPROBE_NOPROBE bool traceoff_count_func(event_trigger_data &data,
                                        const event_trigger_hit &hit) noexcept
{
    if (!ring_buffer_tracing_on(hit.tr->buffer)) return false;
    return event_trigger_count(data, hit);
}

void traceon_print(std::string &out, const event_trigger_data &d)
{
    event_trigger_print(out, "traceon", d);
}
void traceoff_print(std::string &out, const event_trigger_data &d)
{
    event_trigger_print(out, "traceoff", d);
}

const event_command trigger_traceon_cmd = {
    .name = "traceon",
    .trigger_type = ETT_TRACE_ONOFF,
    .flags = 0,
    .parse = event_trigger_parse,
    .trigger = traceon_trigger,
    .count_func = traceon_count_func,
    .print = traceon_print,
    .free = nullptr,
    .unreg_all = nullptr,
};

const event_command trigger_traceoff_cmd = {
    .name = "traceoff",
    .trigger_type = ETT_TRACE_ONOFF,
    .flags = EVENT_CMD_FL_POST_TRIGGER,
    .parse = event_trigger_parse,
    .trigger = traceoff_trigger,
    .count_func = traceoff_count_func,
    .print = traceoff_print,
    .free = nullptr,
    .unreg_all = nullptr,
};

DPROBE_NOPROBE void snapshot_trigger(event_trigger_data &, const event_trigger_hit &hit) noexcept
{
    snapshot_from_probe(*hit.tr);
}

void snapshot_print(std::string &out, const event_trigger_data &d)
{
    event_trigger_print(out, "snapshot", d);
}

// The kernel's register_snapshot_trigger: the snapshot buffer is allocated first
// (trace_types_lock is held by with_trace_event_file).
int snapshot_parse(const event_command &cmd, const trace_event_file &file, std::string_view glob,
                   std::string_view cmd_name, std::optional<std::string_view> param_and_filter)
{
    const bool remove = !glob.empty() && glob[0] == '!';
    if (!remove) {
        if (int err = snapshot_alloc(*file.tr)) return err;
        // A swap a reader blocks is finished by the worker.
        ftrace_worker_start();
    }
    return event_trigger_parse(cmd, file, glob, cmd_name, param_and_filter);
}

const event_command trigger_snapshot_cmd = {
    .name = "snapshot",
    .trigger_type = ETT_SNAPSHOT,
    .flags = 0,
    .parse = snapshot_parse,
    .trigger = snapshot_trigger,
    .count_func = event_trigger_count,
    .print = snapshot_print,
    .free = nullptr,
    .unreg_all = nullptr,
};

DPROBE_NOPROBE void stacktrace_trigger(event_trigger_data &, const event_trigger_hit &hit) noexcept
{
    if (hit.regs)
        trace_stack_record_regs(*hit.tr, hit.regs);
    else if (hit.stack_len)
        trace_stack_record_ips(*hit.tr, hit.pid, hit.stack, hit.stack_len);
}

void stacktrace_print(std::string &out, const event_trigger_data &d)
{
    event_trigger_print(out, "stacktrace", d);
}

int stacktrace_parse(const event_command &cmd, const trace_event_file &file, std::string_view glob,
                     std::string_view cmd_name, std::optional<std::string_view> param_and_filter)
{
    trace_stack_init();
    return event_trigger_parse(cmd, file, glob, cmd_name, param_and_filter);
}

const event_command trigger_stacktrace_cmd = {
    .name = "stacktrace",
    .trigger_type = ETT_STACKTRACE,
    .flags = EVENT_CMD_FL_POST_TRIGGER,
    .parse = stacktrace_parse,
    .trigger = stacktrace_trigger,
    .count_func = event_trigger_count,
    .print = stacktrace_print,
    .free = nullptr,
    .unreg_all = nullptr,
};

DPROBE_NOPROBE void event_enable_trigger(event_trigger_data &data,
                                         const event_trigger_hit &hit) noexcept
{
    const auto *ed = static_cast<const enable_trigger_data *>(data.private_data);
    trace_events::soft_enable(ed->target, hit.tr->id, ed->enable);
}

DPROBE_NOPROBE bool event_enable_count_func(event_trigger_data &data,
                                            const event_trigger_hit &hit) noexcept
{
    const auto *ed = static_cast<const enable_trigger_data *>(data.private_data);
    // Skipped (and not counted) when the event already is in that state.
    if (trace_events::soft_enabled(ed->target, hit.tr->id) == ed->enable) return false;
    return event_trigger_count(data, hit);
}

const event_command trigger_enable_cmd = {
    .name = "enable_event",
    .trigger_type = ETT_EVENT_ENABLE,
    .flags = 0,
    .parse = event_enable_trigger_parse,
    .trigger = event_enable_trigger,
    .count_func = event_enable_count_func,
    .print = event_enable_trigger_print,
    .free = event_enable_trigger_free,
    .unreg_all = nullptr,
};

const event_command trigger_disable_cmd = {
    .name = "disable_event",
    .trigger_type = ETT_EVENT_ENABLE,
    .flags = 0,
    .parse = event_enable_trigger_parse,
    .trigger = event_enable_trigger,
    .count_func = event_enable_count_func,
    .print = event_enable_trigger_print,
    .free = event_enable_trigger_free,
    .unreg_all = nullptr,
};

// The kernel's register_trigger_cmds order, ahead of commands other files registered
// before the first use (hist's, from their static initializers).
void register_builtin()
{
    std::lock_guard<std::mutex> g(event_trigger_lock());
    size_t at = 0;
    for (const event_command *c :
         {&trigger_traceon_cmd, &trigger_traceoff_cmd, &trigger_snapshot_cmd,
          &trigger_stacktrace_cmd, &trigger_enable_cmd, &trigger_disable_cmd})
        if (add_command(*c, at) == 0) at++;
}

} // namespace

// ---- enable_event / disable_event ----

int event_enable_trigger_parse(const event_command &cmd, const trace_event_file &file,
                               std::string_view glob, std::string_view cmd_name,
                               std::optional<std::string_view> param_and_filter)
{
    const bool remove = !glob.empty() && glob[0] == '!';
    if (!param_and_filter) return -EINVAL;
    std::optional<std::string_view> param, filter;
    if (int r = event_trigger_separate_filter(param_and_filter, &param, &filter, true)) return r;
    std::string_view system = strsep(param, ":");
    if (!param) return -EINVAL;
    std::string_view event = strsep(param, ":");
    trace_events &te = trace_events::instance();
    trace_event *target = te.find_event(system, event);
    if (!target) return -EINVAL;
    const bool hist = cmd_name == "enable_hist" || cmd_name == "disable_hist";
    const bool enable = cmd_name == "enable_event" || cmd_name == "enable_hist";
    if (remove) {
        for (event_trigger_data *t : event_triggers_of(file)) {
            auto *ed = static_cast<enable_trigger_data *>(t->private_data);
            if (ed && t->cmd->trigger_type == cmd.trigger_type && ed->target == target) {
                event_trigger_del(t);
                break;
            }
        }
        return 0;
    }
    auto ed = std::make_unique<enable_trigger_data>();
    ed->target = target;
    ed->system = std::string(system);
    ed->event = std::string(event);
    ed->enable = enable;
    ed->hist = hist;
    auto data = event_trigger_alloc(cmd, file, ed.get());
    if (int r = event_trigger_parse_num(param, *data)) return r;
    if (int r = event_trigger_set_filter(*data, filter)) return r;
    // The kernel's event_enable_register_trigger: one per type and target.
    for (event_trigger_data *t : event_triggers_of(file)) {
        auto *o = static_cast<enable_trigger_data *>(t->private_data);
        if (o && t->cmd->trigger_type == cmd.trigger_type && o->target == target) return -EEXIST;
    }
    // The target in soft mode (trace_event_enable_disable(file, 1, 1)): armed, recording
    // only once the trigger switches it on.
    if (int err = te.soft_mode(ed->system, ed->event, file.array, true)) return err;
    if (int err = event_trigger_add(std::move(data))) {
        te.soft_mode(ed->system, ed->event, file.array, false);
        return err;
    }
    ed.release();
    return 0;
}

void event_enable_trigger_print(std::string &out, const event_trigger_data &data)
{
    const auto *ed = static_cast<const enable_trigger_data *>(data.private_data);
    const char *name = ed->hist ? (ed->enable ? "enable_hist" : "disable_hist")
                                : (ed->enable ? "enable_event" : "disable_event");
    std::string head = std::string(name) + ":" + ed->system + ":" + ed->event;
    event_trigger_print(out, head.c_str(), data);
}

void event_enable_trigger_free(event_trigger_data &data)
{
    auto *ed = static_cast<enable_trigger_data *>(data.private_data);
    if (!ed) return;
    trace_events::instance().soft_mode(ed->system, ed->event, data.file.array, false);
    delete ed;
    data.private_data = nullptr;
}

} // namespace dprobe
