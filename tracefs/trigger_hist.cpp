// The hist, enable_hist and disable_hist trigger commands (the kernel's trigger_hist_cmd,
// trigger_hist_enable_cmd and trigger_hist_disable_cmd of trace_events_hist.c) on the event
// trigger framework (event_trigger.h), and the events/GROUP/EVENT/hist and hist_debug files.
//
// A hist trigger's private_data is a hist_priv holding its table (hist_trigger_data). A
// named trigger (name=NAME) shares the table of the first live trigger of that name, on
// any event (the kernel's named_data); the table is freed with the last trigger holding
// it, after the framework has made sure no handler can still run it.
//
// Invariants: everything but the trigger functions runs with event_trigger_lock() held; the
// trigger functions are the hot path (noexcept, no allocation, no lock).
#include "tracefs/trace_events_hist.h"

#include "core/compiler.h"
#include "core/task_ctx.h"
#include "core/trace_clock.h"
#include "tracefs/event_trigger.h"
#include "tracefs/snapshot.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_events.h"
#include "tracefs/trace_events_synth.h"

#include <cerrno>
#include <cstring>

namespace dprobe
{

namespace
{

// The traced process's side of hist_env: its trace clock and its unwinder.
bool hist_clock_in_ns() noexcept
{
    return trace_clock_in_ns(trace_clock_current());
}

size_t hist_stack_save(const pt_regs *regs, uint64_t *ips, size_t max) noexcept
{
    // From anywhere in a function (a probe at an offset, a USDT note), as the stacktrace
    // trigger walks.
    return trace_stack_save_regs(regs, ips, max);
}

[[maybe_unused]] const bool hist_env_set = [] {
    hist_environment.clock_in_ns = hist_clock_in_ns;
    hist_environment.stack_save = hist_stack_save;
    hist_environment.snapshot_alloc = snapshot_alloc;
    hist_environment.snapshot_take = snapshot_from_probe;
    hist_environment.synth_get = synth_event_get;
    hist_environment.synth_put = synth_event_put;
    hist_environment.synth_trace = synth_event_trace;
    return true;
}();

} // namespace

namespace
{

struct hist_priv {
    std::shared_ptr<hist_trigger_data> owner;
    hist_trigger_data *hd; // owner.get(), one load on the hot path
};

hist_trigger_data &hd_of(const event_trigger_data &d)
{
    return *static_cast<hist_priv *>(d.private_data)->hd;
}

// The kernel's named_triggers list (every live trigger with a name), lock held.
std::vector<event_trigger_data *> &named_triggers()
{
    static std::vector<event_trigger_data *> v;
    return v;
}

event_trigger_data *find_named_trigger(const std::string &name)
{
    for (event_trigger_data *d : named_triggers())
        if (d->name == name) return d;
    return nullptr;
}

void del_named_trigger(event_trigger_data *d)
{
    auto &v = named_triggers();
    for (auto it = v.begin(); it != v.end(); ++it)
        if (*it == d) {
            v.erase(it);
            return;
        }
}

// hist_trigger_match(): the same keys, values and sort keys (and filter, unless
// IGNORE_FILTER), and the same named table when NAMED is given.
bool hist_trigger_match(const event_trigger_data &data, const event_trigger_data &test,
                        const event_trigger_data *named, bool ignore_filter)
{
    // TEST uses the named table (the kernel compares with named_data, which keeps the first
    // trigger of the name alive; here that one may be gone while the table lives on).
    if (named && &hd_of(*named) != &hd_of(test)) return false;
    if (!named && !test.name.empty()) return false;
    if (!hd_of(data).same_layout(hd_of(test))) return false;
    if (!ignore_filter && data.filter_str != test.filter_str) return false;
    return true;
}

std::vector<event_trigger_data *> hist_triggers_of(const trace_event_file &file)
{
    std::vector<event_trigger_data *> v;
    for (event_trigger_data *d : event_triggers_of(file))
        if (d->cmd->trigger_type == ETT_EVENT_HIST) v.push_back(d);
    // The kernel appends hist triggers at the tail (hist_trigger_enable's
    // list_add_tail_rcu): oldest first.
    return {v.rbegin(), v.rend()};
}

// ---- the hist triggers of each (event, array), for enable_hist/disable_hist's hot path ----
// A fixed open-addressing table, slots never freed (one per event and array that ever had a
// hist trigger); each holds the published list of that file's hist triggers. Lists are
// replaced under the lock, the old one freed once no handler can read it.
struct hist_file_slot {
    std::atomic<const trace_event *> event{nullptr};
    std::atomic<unsigned> array{0};
    std::atomic<const std::vector<event_trigger_data *> *> list{nullptr};
};
constexpr unsigned HIST_FILE_SLOTS = 1024;
hist_file_slot hist_files[HIST_FILE_SLOTS];

DPROBE_NOPROBE unsigned hist_file_hash(const trace_event *ev, unsigned array) noexcept
{
    auto h = (reinterpret_cast<uintptr_t>(ev) >> 4) * 0x9e3779b97f4a7c15ULL + array;
    return static_cast<unsigned>(h >> 40) % HIST_FILE_SLOTS;
}

DPROBE_NOPROBE const std::vector<event_trigger_data *> *hist_file_list(const trace_event *ev,
                                                                       unsigned array) noexcept
{
    unsigned i = hist_file_hash(ev, array);
    for (unsigned n = 0; n < HIST_FILE_SLOTS; n++, i = (i + 1) % HIST_FILE_SLOTS) {
        const trace_event *e = hist_files[i].event.load(std::memory_order_acquire);
        if (!e) return nullptr;
        if (e == ev && hist_files[i].array.load(std::memory_order_relaxed) == array)
            return hist_files[i].list.load(std::memory_order_acquire);
    }
    return nullptr;
}

// Publishes FILE's hist triggers but EXCEPT (none at all with NONE); lock held.
void hist_file_publish(const trace_event_file &file, const event_trigger_data *except,
                       bool none = false);

void hist_log(const trace_event_file &file, const std::string &cmd, const hist_error &e)
{
    if (!e.logged()) {
        // A command that succeeded may have left entries on its way (a param looked for on
        // this event before the onmatch() event), as the kernel's do.
        const std::string loc = "hist:" + file.system() + ":" + file.name();
        for (const auto &[err, pos] : e.before)
            trace_events::instance().errors().append_message(loc, hist_err_text(err), cmd, pos);
        return;
    }
    const std::string loc = "hist:" + file.system() + ":" + file.name();
    for (const auto &[err, pos] : e.before)
        trace_events::instance().errors().append_message(loc, hist_err_text(err), cmd, pos);
    trace_events::instance().errors().append_message(loc, hist_err_text(e.err), cmd, e.pos);
}

void hist_file_publish(const trace_event_file &file, const event_trigger_data *except, bool none)
{
    auto *v = new std::vector<event_trigger_data *>;
    if (!none)
        for (event_trigger_data *d : hist_triggers_of(file))
            if (d != except) v->push_back(d);
    unsigned i = hist_file_hash(file.event, file.array);
    for (unsigned n = 0; n < HIST_FILE_SLOTS; n++, i = (i + 1) % HIST_FILE_SLOTS) {
        hist_file_slot &sl = hist_files[i];
        const trace_event *e = sl.event.load();
        if (e && !(e == file.event && sl.array.load() == file.array)) continue;
        if (!e) {
            sl.array.store(file.array);
            sl.event.store(file.event, std::memory_order_release);
        }
        const auto *old = sl.list.exchange(v, std::memory_order_acq_rel);
        if (old) {
            synchronize_dispatch();
            delete old;
        }
        return;
    }
    delete v; // table full: enable_hist/disable_hist on this file do nothing
}

// Pauses the triggers sharing D's table (all of its name, or D alone) and waits until no
// handler runs it, clears the table, and lets them run again (hist_clear).
void hist_clear(event_trigger_data &d)
{
    std::vector<std::pair<event_trigger_data *, bool>> paused;
    if (!d.name.empty()) {
        for (event_trigger_data *t : named_triggers())
            if (t->name == d.name) paused.emplace_back(t, t->paused.exchange(true));
    } else {
        paused.emplace_back(&d, d.paused.exchange(true));
    }
    synchronize_dispatch();
    hd_of(d).map().clear();
    for (auto &[t, was] : paused)
        t->paused.store(was);
}

// existing_hist_update_only(): :pause, :cont and :clear on an existing trigger.
bool existing_hist_update_only(const event_trigger_data &data, const trace_event_file &file)
{
    const auto &a = hd_of(data).attr();
    if (!a.pause && !a.cont && !a.clear) return false;
    event_trigger_data *named = nullptr;
    if (!a.name.empty()) {
        named = find_named_trigger(a.name);
        if (!named || !hist_trigger_match(data, *named, named, true)) return false;
    }
    for (event_trigger_data *test : hist_triggers_of(file)) {
        if (!hist_trigger_match(data, *test, named, false)) continue;
        if (a.pause)
            test->paused.store(true);
        else if (a.cont)
            test->paused.store(false);
        else
            hist_clear(*test);
        return true;
    }
    return false;
}

// Splits "PARAM [if FILTER]" as event_hist_trigger_parse() does (a word "if" between
// blanks). -EINVAL for "if" at the start or at the very end.
int split_hist_filter(std::string_view pf, std::string_view &param,
                      std::optional<std::string_view> &filter)
{
    auto blank = [](char c) { return c == ' ' || c == '\t'; };
    auto strip = [&](std::string_view s) {
        while (!s.empty() && (blank(s.front()) || s.front() == '\n'))
            s.remove_prefix(1);
        while (!s.empty() && (blank(s.back()) || s.back() == '\n'))
            s.remove_suffix(1);
        return s;
    };
    size_t p = 0;
    for (;;) {
        p = pf.find("if", p);
        if (p == std::string_view::npos) break;
        if (p == 0) return -EINVAL;
        if (!blank(pf[p - 1])) {
            p++;
            continue;
        }
        if (p + 3 >= pf.size()) return -EINVAL;
        if (!blank(pf[p + 2])) {
            p++;
            continue;
        }
        break;
    }
    if (p == std::string_view::npos) {
        param = pf;
        filter.reset();
    } else {
        param = strip(pf.substr(0, p - 1));
        filter = strip(pf.substr(p));
    }
    return 0;
}

// The trigger files an action param's field on another event goes through (hist_event_ctx).
bool field_var_compatible_hist(const hist_event_ctx &ctx, const hist_trigger_data &target,
                               std::string_view system, std::string_view event, std::string &keys,
                               std::string &filter);
int field_var_hist_command(const hist_event_ctx &ctx, std::string_view system,
                           std::string_view event, const std::string &cmd, bool remove);

int hist_parse(const event_command &cmd, const trace_event_file &file, std::string_view glob,
               std::string_view, std::optional<std::string_view> param_and_filter)
{
    const bool remove = !glob.empty() && glob[0] == '!';
    if (!param_and_filter || param_and_filter->empty()) return -EINVAL;
    const std::string last_cmd = "hist:" + std::string(*param_and_filter);
    std::string_view param;
    std::optional<std::string_view> filter;
    if (int r = split_hist_filter(*param_and_filter, param, filter)) return r;

    std::unique_ptr<hist_trigger_data> created;
    hist_error err;
    hist_event_ctx ev;
    ev.system = file.system();
    ev.event = file.name();
    ev.array = file.array;
    ev.tr = file.tr;
    ev.remove = remove;
    ev.event_exists = [](std::string_view sys, std::string_view name) {
        return trace_events::instance().has_event(sys, name);
    };
    ev.compatible_hist = field_var_compatible_hist;
    ev.hist_command = field_var_hist_command;
    const int created_r =
        hist_trigger_data::create(param, last_cmd, file.fields(), created, err, &ev);
    hist_log(file, last_cmd, err);
    if (created_r) return created_r;
    auto *priv = new hist_priv{std::shared_ptr<hist_trigger_data>(std::move(created)), nullptr};
    priv->hd = priv->owner.get();
    std::unique_ptr<event_trigger_data> data = event_trigger_alloc(cmd, file, priv);
    // The parsed trigger goes unregistered: what its actions added on other events with it.
    auto drop = [&](int r) {
        auto *pv = static_cast<hist_priv *>(data->private_data);
        if (pv->owner.use_count() == 1) pv->hd->unregister_field_var_hists();
        delete pv;
        data->private_data = nullptr;
        return r;
    };
    if (int r = event_trigger_set_filter(*data, filter)) return drop(r);
    const auto &a = priv->hd->attr();

    if (remove) {
        event_trigger_data *named = a.name.empty() ? nullptr : find_named_trigger(a.name);
        for (event_trigger_data *test : hist_triggers_of(file)) {
            if (!hist_trigger_match(*data, *test, named, false)) continue;
            // hist_trigger_check_refs(): its variables are read by another trigger.
            if (hd_of(*test).vars_referenced()) return drop(-EBUSY);
            del_named_trigger(test);
            hist_file_publish(file, test);
            event_trigger_del(test);
            hist_trigger_data &gone = hd_of(*test);
            if (static_cast<hist_priv *>(test->private_data)->owner.use_count() == 1)
                gone.unregister_field_var_hists();
            break;
        }
        return drop(0);
    }
    if (existing_hist_update_only(*data, file)) return drop(0);

    // hist_register_trigger()
    event_trigger_data *named = nullptr;
    if (!a.name.empty()) {
        named = find_named_trigger(a.name);
        if (named && !hist_trigger_match(*data, *named, named, true)) {
            hist_error e{EINVAL, hist_err::NAMED_MISMATCH,
                         static_cast<unsigned>(last_cmd.find(a.name) == std::string::npos
                                                   ? 0
                                                   : last_cmd.find(a.name))};
            hist_log(file, last_cmd, e);
            return drop(-EINVAL);
        }
    }
    if (a.name.empty() || named) {
        for (event_trigger_data *test : hist_triggers_of(file))
            if (hist_trigger_match(*data, *test, named, false)) {
                hist_log(file, last_cmd, hist_error{EEXIST, hist_err::TRIGGER_EEXIST, 0});
                return drop(-EEXIST);
            }
    }
    if (a.cont || a.clear) {
        hist_log(file, last_cmd, hist_error{ENOENT, hist_err::TRIGGER_ENOENT_CLEAR, 0});
        return drop(-ENOENT);
    }
    if (priv->hd->enable_timestamps() && a.clock != "global" &&
        a.clock != trace_clock_name(trace_clock_current())) {
        // dprobe's records keep the array's trace_clock; a hist may only name it.
        hist_error e{EINVAL, hist_err::SET_CLOCK_FAIL,
                     static_cast<unsigned>(last_cmd.rfind(a.clock))};
        hist_log(file, last_cmd, e);
        return drop(-EINVAL);
    }
    if (a.pause) data->paused.store(true);
    data->name = a.name;
    const bool is_named = !a.name.empty();
    if (named) {
        // Share the named table; the one just parsed is dropped (and A with it).
        priv->hd->unregister_field_var_hists();
        priv->owner = static_cast<hist_priv *>(named->private_data)->owner;
        priv->hd = priv->owner.get();
        data->named_data = named;
    }
    event_trigger_data *raw = data.get();
    if (is_named) named_triggers().push_back(raw);
    if (int r = event_trigger_add(std::move(data))) {
        del_named_trigger(raw);
        return r;
    }
    hist_file_publish(file, nullptr);
    // Its variables can be referenced from now on (save_hist_vars).
    static_cast<hist_priv *>(raw->private_data)->hd->save_hist_vars();
    return 0;
}

DPROBE_NOPROBE void hist_trigger(event_trigger_data &data, const event_trigger_hit &hit) noexcept
{
    if (unlikely(!hit.rec) || data.paused.load(std::memory_order_relaxed)) return;
    hist_trigger_data *hd = static_cast<hist_priv *>(data.private_data)->hd;
    hist_hit_ctx ctx;
    // The hit hands no stamp: the trace clock is read here, only for common_timestamp.
    if (hd->enable_timestamps()) ctx.ts = trace_clock_now();
    ctx.cpu = hit.cpu;
    ctx.regs = hit.regs;
    ctx.tr = hit.tr;
    hd->hit(hit.rec, hit.len, ctx);
}

void hist_print(std::string &out, const event_trigger_data &data)
{
    out += hd_of(data).print_spec(data.name);
    if (!data.filter_str.empty()) out += " if " + data.filter_str;
    out += data.paused.load() ? " [paused]" : " [active]";
    out += '\n';
}

void hist_free(event_trigger_data &data)
{
    del_named_trigger(&data);
    // Triggers removed by the framework itself (clear_event_triggers: reset, rmdir) reach
    // only here: enable_hist's list of the file must not keep this one.
    hist_file_publish(data.file, &data);
    delete static_cast<hist_priv *>(data.private_data);
    data.private_data = nullptr;
}

void hist_unreg_all(const trace_event_file &file)
{
    std::vector<event_trigger_data *> all = hist_triggers_of(file);
    if (all.empty()) return;
    // hist_file_check_refs(): nothing goes while another trigger reads a variable here.
    for (event_trigger_data *d : all)
        if (hd_of(*d).vars_referenced()) return;
    for (event_trigger_data *d : all)
        del_named_trigger(d);
    hist_file_publish(file, nullptr, true);
    for (event_trigger_data *d : all)
        event_trigger_del(d);
    for (event_trigger_data *d : all)
        if (static_cast<hist_priv *>(d->private_data)->owner.use_count() == 1)
            hd_of(*d).unregister_field_var_hists();
}

// enable_hist / disable_hist (hist_enable_trigger): the hist triggers of the target event
// in the trigger's array run again, or pause.
DPROBE_NOPROBE void hist_enable_trigger(event_trigger_data &data,
                                        const event_trigger_hit &) noexcept
{
    const auto *ed = static_cast<const enable_trigger_data *>(data.private_data);
    const auto *l = hist_file_list(ed->target, data.file.array);
    if (!l) return;
    for (event_trigger_data *t : *l)
        t->paused.store(!ed->enable, std::memory_order_relaxed);
}

void hist_enable_unreg_all(const trace_event_file &file)
{
    for (event_trigger_data *d : event_triggers_of(file))
        if (d->cmd->trigger_type == ETT_HIST_ENABLE) event_trigger_del(d);
}

const event_command trigger_hist_enable_cmd = {
    "enable_hist",
    ETT_HIST_ENABLE,
    0,
    event_enable_trigger_parse,
    hist_enable_trigger,
    event_trigger_count,
    event_enable_trigger_print,
    event_enable_trigger_free,
    hist_enable_unreg_all,
};
const event_command trigger_hist_disable_cmd = {
    "disable_hist",
    ETT_HIST_ENABLE,
    0,
    event_enable_trigger_parse,
    hist_enable_trigger,
    event_trigger_count,
    event_enable_trigger_print,
    event_enable_trigger_free,
    hist_enable_unreg_all,
};

const event_command trigger_hist_cmd = {
    "hist",     ETT_EVENT_HIST, EVENT_CMD_FL_NEEDS_REC, hist_parse, hist_trigger, nullptr,
    hist_print, hist_free,      hist_unreg_all,
};

// compatible_keys() / find_compatible_hist(): the first hist trigger of SYSTEM.EVENT in
// CTX's array (oldest first) whose keys have TARGET's types, sizes and signs.
bool field_var_compatible_hist(const hist_event_ctx &ctx, const hist_trigger_data &target,
                               std::string_view system, std::string_view event, std::string &keys,
                               std::string &filter)
{
    trace_event *ev = trace_events::instance().find_event(system, event);
    if (!ev || !ctx.tr) return false;
    const trace_event_file file{ev, ctx.tr, ctx.array};
    for (event_trigger_data *d : hist_triggers_of(file)) {
        const hist_trigger_data &h = hd_of(*d);
        if (h.n_keys() != target.n_keys()) continue;
        bool same = true;
        for (unsigned i = 0; i < h.n_keys() && same; i++) {
            const hist_field &a = h.fields()[h.n_vals() + i];
            const hist_field &b = target.fields()[target.n_vals() + i];
            same = a.type == b.type && a.size == b.size && a.is_signed == b.is_signed;
        }
        if (!same) continue;
        keys.clear();
        for (unsigned i = 0; i < h.n_keys(); i++)
            keys += (i ? "," : "") + h.fields()[h.n_vals() + i].name;
        filter = d->filter_str;
        return true;
    }
    return false;
}

// event_hist_trigger_parse() on another event's trigger file, in CTX's array.
int field_var_hist_command(const hist_event_ctx &ctx, std::string_view system,
                           std::string_view event, const std::string &cmd, bool remove)
{
    trace_events &te = trace_events::instance();
    trace_event *ev = te.pin_event(system, event);
    if (!ev) return -ENOENT;
    const trace_event_file file{ev, ctx.tr, ctx.array};
    int r = hist_parse(trigger_hist_cmd, file, remove ? "!hist" : "", "hist", cmd);
    te.unpin_event(ev);
    return r;
}

// hist's commands follow the built-ins, registered as this file is initialized (the
// kernel's register_trigger_hist_cmds, called from its trace_event_init): this file is
// always linked in, for event_hist_show serves the events' hist files.
[[maybe_unused]] const bool k_hist_cmds_registered = [] {
    register_event_command(trigger_hist_enable_cmd);
    register_event_command(trigger_hist_disable_cmd);
    register_event_command(trigger_hist_cmd);
    return true;
}();

} // namespace

std::string event_hist_show(const trace_event_file &file, bool debug)
{
    std::string s;
    int n = 0;
    for (event_trigger_data *d : hist_triggers_of(file)) {
        if (n++ > 0) s += "\n\n";
        s += "# event histogram\n#\n# trigger info: ";
        hist_print(s, *d);
        s += "#\n\n";
        s += debug ? hd_of(*d).debug_show() : hd_of(*d).show();
    }
    return s;
}

} // namespace dprobe
