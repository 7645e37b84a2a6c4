// Event triggers (the kernel's kernel/trace/trace_events_trigger.c, and the event_command /
// event_trigger_data declarations of kernel/trace/trace.h): the events/GROUP/EVENT/trigger
// file of every event in every trace array, the registry of trigger commands, and the call
// of an event's triggers when its probe fires.
//
// How it fits together
// --------------------
// A *command* (struct event_command) is one word a user can write into a trigger file:
// traceon, traceoff, snapshot, stacktrace, enable_event, disable_event (event_trigger.cpp),
// hist, enable_hist, disable_hist (trace_events_hist.cpp). Commands register once, at
// start-up, with register_event_command(); the list is the kernel's trigger_commands, and a
// trigger file that holds no trigger lists the commands in registration order:
//     # Available triggers:
//     # traceon traceoff snapshot stacktrace enable_event disable_event enable_hist ...
//
// A write "[!]CMD[:PARAM_AND_FILTER]" to the trigger file of an event in an array (a
// trace_event_file) is stripped, split at the first ':', ' ' or '\t', and handed to the
// parse function of the command named CMD (-EINVAL when there is none). parse owns the rest,
// as in the kernel: the generic one (event_trigger_parse(), used by the simple commands)
// separates "[N] [if FILTER]", allocates an event_trigger_data, compiles the filter on the
// event's fields (errors in error_log as "event filter parse error" with the caret, like the
// kernel's set_trigger_filter → create_event_filter with set_str), and registers it. A
// leading '!' removes: the command's unreg finds the trigger to remove (the simple commands
// match by trigger_type, enable_event/disable_event also by target event, hist by its keys
// and values); removing a trigger that is not there succeeds and changes nothing (the
// kernel's unregister_trigger is void and event_trigger_parse returns 0).
//
// The data of a registered trigger belongs to the framework from event_trigger_add() on: it
// is published to the hot path as an immutable list per (event, array), and after
// event_trigger_del() it is freed (command's free, then the object) only once no probe
// handler can still hold it (synchronize_dispatch, the kernel's
// tracepoint_synchronize_unregister).
//
// A trigger holds its event in soft mode in its array (the kernel's
// trace_event_trigger_enable_disable → trace_event_enable_disable(file, 1, 1)): the probes
// stay armed and the enable file reads "0*" while only triggers hold it; the event's records
// are written only where it is enabled. So an event with triggers is busy (it cannot be
// deleted) until they are removed.
//
// The hit (hot path; noexcept, allocation-free, lock-free, DPROBE_NOPROBE)
// -------------------------------------------------------------------------
// For each array where the event has triggers, as the kernel's trace_trigger_soft_disabled /
// event_triggers_call / event_triggers_post_call do:
//  - when no trigger of the list needs the record (no filter, not POST_TRIGGER, not
//    NEEDS_REC: the list's `cond` is false), every trigger runs before the record is built,
//    with hit.rec == nullptr;
//  - otherwise the record is built (in the array's buffer when the event records there,
//    else in a scratch area: the kernel's temp_buffer), then each trigger whose filter
//    passes runs with hit.rec/len set: at once, unless its command is POST_TRIGGER, in which
//    case it runs after the event's own record is committed (traceoff, stacktrace: the
//    record that turned tracing off is still in the trace, the stack follows its event),
//    without the record. Triggers run whatever the event's own filter and set_event_pid
//    say, as in the kernel.
// A trigger with a count (`:N`) runs through its command's count_func first (the kernel's
// EVENT_TRIGGER_FL_COUNT): the simple commands use event_trigger_count(), which takes one
// from data.count with a CAS (-1: unlimited) and says whether to fire.
//
// Locking: every function below except the hot-path ones is called with event_trigger_lock()
// held (parse, print, free and unreg_all are called with it held). It is taken after
// trace_types_lock() and before the event registry's own mutex.
#pragma once

#include "tracefs/event_filter.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct pt_regs;

namespace dprobe
{

class trace_array;
struct trace_event;

// The kernel's enum event_trigger_type: one bit per kind of trigger; a simple command
// accepts one trigger of its type per event file (register_trigger's -EEXIST).
enum event_trigger_type : unsigned {
    ETT_NONE = 0,
    ETT_TRACE_ONOFF = 1u << 0,
    ETT_SNAPSHOT = 1u << 1,
    ETT_STACKTRACE = 1u << 2,
    ETT_EVENT_ENABLE = 1u << 3,
    ETT_EVENT_HIST = 1u << 4,
    ETT_HIST_ENABLE = 1u << 5,
    ETT_EVENT_EPROBE = 1u << 6,
};

// The kernel's EVENT_CMD_FL_*.
enum event_command_flags : unsigned {
    // Runs after the event's record is committed (traceoff, stacktrace).
    EVENT_CMD_FL_POST_TRIGGER = 1u << 0,
    // Needs the record even without a filter (hist: its keys and values are fields).
    EVENT_CMD_FL_NEEDS_REC = 1u << 1,
};

// One event in one trace array: what a trigger file belongs to (the kernel's
// trace_event_file). EVENT stays valid while a trigger holds it (soft mode makes it busy).
struct trace_event_file {
    trace_event *event = nullptr;
    trace_array *tr = nullptr;
    unsigned array = 0; // tr->id
    const std::string &system() const;
    const std::string &name() const;
    // The fields of the event's records, for filters and hist keys (probe_filter_fields):
    // common_* with their offsets, the probe ip(s), the arguments, then CPU/cpu, COMM/comm.
    const std::vector<filter_field> &fields() const;
};

// What a trigger sees when its event fires.
struct event_trigger_hit {
    trace_array *tr = nullptr; // the array of the trigger's file
    trace_event *event = nullptr;
    // The record (common header first), as event_filter::match() and the format file see
    // it; nullptr (and len 0) in the unconditional call, when no trigger of the file needs
    // it, and for POST_TRIGGER commands (run after the commit, as the kernel's
    // event_triggers_post_call passes no record). Valid during the call only.
    const uint8_t *rec = nullptr;
    size_t len = 0;
    // The registers of the probe hit (stack traces); nullptr when the event has none (an
    // event probe's records come from another event's).
    const struct pt_regs *regs = nullptr;
    unsigned cpu = 0; // the CPU the record was written on
    // Without registers, what is known of the stack of the record's writer (a trace_marker
    // write served for another process: its one frame, tracing_mark_write), and the pid the
    // record carries when it is not the calling thread's (0: the calling thread's). What a
    // stacktrace trigger records then.
    const uint64_t *stack = nullptr;
    unsigned stack_len = 0;
    int32_t pid = 0;
};

struct event_command;

// One registered trigger (the kernel's struct event_trigger_data).
struct event_trigger_data {
    const event_command *cmd = nullptr;
    trace_event_file file;
    // Fires left: -1 unlimited (printed ":unlimited"), else ":count=N". Written by
    // count_func on the hot path.
    std::atomic<long> count{-1};
    // Set when the trigger was written with ":N" (the kernel's EVENT_TRIGGER_FL_COUNT):
    // the hit goes through cmd->count_func first.
    bool counted = false;
    // The compiled "if" filter (read by the hot path) and its text as written after "if "
    // (printed " if TEXT"); nullptr / empty without one.
    std::atomic<const event_filter *> filter{nullptr};
    std::unique_ptr<event_filter> filter_owned;
    std::string filter_str;
    // hist's :pause / :cont (the kernel's data->paused): a paused trigger is skipped.
    std::atomic<bool> paused{false};
    // The command's own state (enable_event's target, hist's table); released by cmd->free.
    void *private_data = nullptr;
    // Named triggers (hist's name=): the kernel's data->name / named_data; the framework
    // only stores them.
    std::string name;
    event_trigger_data *named_data = nullptr;
};

// A trigger command (the kernel's struct event_command). Optional entries are nullptr.
struct event_command {
    const char *name;
    unsigned trigger_type; // one event_trigger_type bit
    unsigned flags;        // event_command_flags
    // The write "GLOB[:PARAM_AND_FILTER]": GLOB is CMD with its optional '!'; PARAM_AND_FILTER
    // is what follows the first ':', ' ' or '\t' (leading blanks skipped), nullopt when
    // nothing does. Registers (or, with '!', removes) a trigger on FILE. Returns 0 or
    // -errno; logs the errors the kernel logs in trace_events::instance().errors().
    int (*parse)(const event_command &cmd, const trace_event_file &file, std::string_view glob,
                 std::string_view cmd_name, std::optional<std::string_view> param_and_filter);
    // The trigger's effect (hot path). HIT.rec is set when the file's list needs records.
    void (*trigger)(event_trigger_data &data, const event_trigger_hit &hit) noexcept;
    // With a count: whether this hit fires (and takes one from data.count). Hot path.
    bool (*count_func)(event_trigger_data &data, const event_trigger_hit &hit) noexcept;
    // One line of the trigger file, newline included ("traceoff:5 if pid > 10\n").
    void (*print)(std::string &out, const event_trigger_data &data);
    // Releases data.private_data (and what the trigger holds: soft mode of its target,
    // snapshot buffer...). Called once, after the trigger is out of its list and no
    // handler can hold it.
    void (*free)(event_trigger_data &data);
    // O_TRUNC of the trigger file: removes every trigger of this command on FILE.
    void (*unreg_all)(const trace_event_file &file);
};

// ---- the command registry (the kernel's register_event_command) ----

// The events/GROUP/EVENT/hist file of FILE (hist_debug with DEBUG): every hist trigger's
// table, oldest first (trigger_hist.cpp). Lock held.
std::string event_hist_show(const trace_event_file &file, bool debug);

// Adds CMD (static storage) to the list: -EBUSY when a command of that name exists. Takes
// event_trigger_lock(). The built-in commands (the kernel's register_trigger_cmds) are
// registered on first use of the framework and always come first, in the kernel's order;
// another file's commands (hist: enable_hist, disable_hist, hist, in that order) register
// from a static initializer of that file, or at any time before their first use: they
// follow the built-ins in the order they registered. (No weak symbol: the agent must not
// import anything from the program's scope.)
int register_event_command(const event_command &cmd);
// The commands in registration order.
std::vector<const event_command *> event_commands();

// event_trigger_lock(): the kernel's event_mutex for triggers (see Locking above).
std::mutex &event_trigger_lock();

// ---- the trigger files ----

// Runs FN(file) for GROUP/EVENT in TR with trace_types_lock() and event_trigger_lock() held
// and the event pinned (it cannot be deleted meanwhile): the trigger file's write and read,
// and hist's hist file. -ENODEV when there is no such event; else what FN returns.
int with_trace_event_file(trace_array &tr, std::string_view group, std::string_view event,
                          const std::function<int(const trace_event_file &)> &fn);
// A write to the trigger file (strim'd, as the kernel's event_trigger_regex_write): 0 or
// -errno (-EINVAL for an unknown command or a write of a page or more).
int event_trigger_write(trace_array &tr, std::string_view group, std::string_view event,
                        std::string_view text);
// O_TRUNC of the trigger file: every command's unreg_all.
int event_trigger_truncate(trace_array &tr, std::string_view group, std::string_view event);
// The file's text: one print() per trigger, newest first (the kernel's list_add_rcu at the
// head), or the "# Available triggers:" lines.
std::string event_trigger_show(trace_array &tr, std::string_view group, std::string_view event);

// Every trigger of every event in ARRAY removed (the kernel's clear_event_triggers): reset
// and instance rmdir. trace_types_lock() held by the caller; takes event_trigger_lock().
void clear_event_triggers(unsigned array);
// Number of triggers on all files (tests). Takes the lock.
size_t event_triggers_count();

// ---- for commands' parse/unreg (lock held) ----

// The triggers of FILE, newest first.
std::vector<event_trigger_data *> event_triggers_of(const trace_event_file &file);
// A fresh trigger of CMD on FILE: count -1, no filter, PRIVATE_DATA as given.
std::unique_ptr<event_trigger_data>
event_trigger_alloc(const event_command &cmd, const trace_event_file &file, void *private_data);
// The kernel's event_trigger_separate_filter: PARAM_AND_FILTER "[param] [if filter]" split
// into *PARAM and *FILTER (the filter text still starts with "if"). A param is only taken
// when PARAM_REQUIRED or it starts with a digit (":N"). -EINVAL when a required param is
// missing.
int event_trigger_separate_filter(std::optional<std::string_view> param_and_filter,
                                  std::optional<std::string_view> *param,
                                  std::optional<std::string_view> *filter, bool param_required);
// The kernel's event_trigger_parse_num: PARAM's text up to the next ':' as the count
// (kstrtoul, base 0); sets data.count and data.counted. -EINVAL on a bad or empty number.
int event_trigger_parse_num(std::optional<std::string_view> param, event_trigger_data &data);
// The kernel's set_trigger_filter: FILTER must be "if EXPR"; EXPR is compiled on the
// event's fields into DATA. A bad expression is logged in error_log ("event filter parse
// error", the caret under the offending column of EXPR) and returns -EINVAL; a FILTER that
// is not "if ..." returns -EINVAL without a log entry. nullopt: no filter, 0.
int event_trigger_set_filter(event_trigger_data &data, std::optional<std::string_view> filter);
// Puts DATA on its file's list (at the head) and publishes it; takes the soft-mode hold of
// the event in the array (the kernel's trace_event_trigger_enable_disable(file, 1)); on
// failure DATA is destroyed (without cmd->free) and -errno returned.
int event_trigger_add(std::unique_ptr<event_trigger_data> data);
// Takes DATA off its file's list, drops the soft-mode hold, and frees it (cmd->free, then
// the object) once no handler can hold it.
void event_trigger_del(event_trigger_data *data);

// The generic pieces the simple commands are made of, for other commands to reuse:
// event_trigger_parse (the kernel's function of that name: "[N] [if FILTER]", registering
// with register_trigger / removing with unregister_trigger), the kernel's register_trigger
// (-EEXIST when FILE has a trigger of the same trigger_type) and unregister_trigger (removes
// the first trigger of that type; returns whether one was), and the count_func the simple
// commands use.
int event_trigger_parse(const event_command &cmd, const trace_event_file &file,
                        std::string_view glob, std::string_view cmd_name,
                        std::optional<std::string_view> param_and_filter);
int register_trigger(std::unique_ptr<event_trigger_data> data);
bool unregister_trigger(const trace_event_file &file, unsigned trigger_type);
bool event_trigger_count(event_trigger_data &data, const event_trigger_hit &hit) noexcept;
// The kernel's event_trigger_print: "NAME:unlimited" or "NAME:count=N", " if FILTER", "\n".
void event_trigger_print(std::string &out, const char *name, const event_trigger_data &data);

// enable_event / disable_event (and hist's enable_hist / disable_hist, which share them, as
// in the kernel): "CMD:SYSTEM:EVENT[:N] [if FILTER]" on another event of the same array,
// which the trigger holds in soft mode. private_data is an enable_trigger_data.
struct enable_trigger_data {
    trace_event *target = nullptr; // held in soft mode in the trigger's array
    std::string system, event;
    bool enable = false;
    bool hist = false; // enable_hist / disable_hist
};
// The kernel's event_enable_trigger_parse / _print / _free, and its register (-EEXIST for a
// trigger of the same type on the same target) and unregister.
int event_enable_trigger_parse(const event_command &cmd, const trace_event_file &file,
                               std::string_view glob, std::string_view cmd_name,
                               std::optional<std::string_view> param_and_filter);
void event_enable_trigger_print(std::string &out, const event_trigger_data &data);
void event_enable_trigger_free(event_trigger_data &data);

// ---- the hot path (trace_probe_handlers.cpp, trace_eprobe.cpp) ----

// The triggers of one event in one array, as a handler sees them (immutable once published).
struct event_trigger_list {
    bool cond = false; // some trigger has a filter, is POST_TRIGGER or NEEDS_REC
    std::vector<event_trigger_data *> triggers; // newest first
};

// The unconditional call (list.cond false): every trigger, HIT.rec nullptr.
void event_triggers_call(const event_trigger_list &list, const event_trigger_hit &hit) noexcept;
// The call on the record (list.cond true): each trigger whose filter passes HIT.rec runs,
// except POST_TRIGGER ones, returned as a mask of their positions in the list (the first
// 64) for event_triggers_post_call() once the event's record is committed.
uint64_t event_triggers_call_rec(const event_trigger_list &list,
                                 const event_trigger_hit &hit) noexcept;
void event_triggers_post_call(const event_trigger_list &list, uint64_t post,
                              const event_trigger_hit &hit) noexcept;

} // namespace dprobe
