// The dynamic-event registry (dyn_event.c and trace_events.c's event files, for one
// process): the commands written to dynamic_events / kprobe_events / uprobe_events, the
// events they create and the events/ tree's enable and filter files.
//
// Every event is GROUP/EVENT with an id, one or more probe definitions (a multi-probe event
// appends probes with identical arguments), an enable state, a filter and per-probe hit
// counters. The registry is the same for every kind of event: what a kind does (register
// on creation or on enable, where its probe goes, how it is armed and freed) is in that
// kind's operations table (trace_probe.h: trace_kprobe.cpp, trace_uprobe.cpp,
// trace_fprobe.cpp, trace_eprobe.cpp), which the registry picks by the parsed command's
// kind and goes through. Registration follows the kernel:
//  - f events register nothing on creation (Linux 6.15+): the fprobe is registered when the
//    event is enabled and unregistered when it is disabled.
//  - p/r events (and path:offset "uprobe" events, which dprobe serves with a kprobe at the
//    mapped address) register their kprobe / kretprobe disabled on creation, so a bad place
//    is reported then, and are armed on enable.
//
// When a probe fires, its handler builds the record in place in the ring buffer
// (trace_probe_handlers.cpp): reserve, common header (type = event id, flags 0, preempt
// count 0, pid = thread id), __probe_ip or __probe_func/__probe_ret_ip, the fetch args;
// then the event's filter decides between commit and discard. That path is noexcept,
// allocation-free and lock-free.
//
// Trace arrays (the top level and instances/, trace_array.h): each event has an enable and a
// filter per array (the kernel's trace_event_file), and a record goes to every array where
// it is enabled, subject to that array's filter and set_event_pid. The probes are armed
// while the event is enabled in at least one array. An array may also hold the event in soft
// mode (the enable_event/disable_event function commands): armed, and recording only while
// the command has switched it on; its enable file then reads "0*" or "1*".
#pragma once

#include "core/fair_mutex.h"
#include "core/symbols.h"
#include "tracefs/error_log.h"
#include "tracefs/event_filter.h"
#include "tracefs/probe_parse.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dprobe
{

struct dl_notifier;
struct dyn_event_operations;
struct trace_event;
struct trace_probe;

// Ids handed to dynamic events: the first one, as the kernel's come after its static events.
inline constexpr uint16_t TRACE_EVENT_FIRST_ID = 1000;

class trace_events
{
  public:
    // The process's registry (never destroyed: probe handlers may outlive static destructors).
    static trace_events &instance();

    error_log &errors() noexcept { return errors_; }

    // A write to dynamic_events (ACCEPT_DYNAMIC), kprobe_events (ACCEPT_KPROBE) or
    // uprobe_events (ACCEPT_UPROBE): lines run in order, stopping at the first failure, which
    // is logged in error_log when the kernel logs it. Returns 0 or -errno.
    int write_commands(std::string_view buf, unsigned accept);
    // HOOK runs after each write_commands() batch (outside the registry's lock, on the
    // writing thread), and after static events (USDT tracepoints) were added for objects
    // loaded later (on the loading thread, inside dlopen): `dprobe record`'s agent describes
    // the events in its trace file before any record of them. Set it before the tree serves
    // requests.
    static void set_commands_hook(void (*hook)());
    // Probes created while OFF write every argument through the fetch-arg interpreter
    // instead of its compiled form (fetch_fast.h): for tests that compare the two.
    static void use_fast_stores(bool on);
    // One command, already split (argv_split).
    int run_command(std::span<const std::string> argv, unsigned accept);
    // A synthetic event command (trace_events_synth.cpp): a line of the synthetic_events file
    // ("NAME fields", "!NAME"), or with DYNEVENT an `s:` line of dynamic_events. Errors are
    // logged as the kernel's "synthetic_events" entries. 0 or -errno.
    int run_synth_command(std::string_view raw, bool dynevent);
    // The synthetic_events file's text: one "NAME\tTYPE FIELD; ..." line per synthetic event.
    std::string synth_listing() const;
    // O_TRUNC on those files: deletes every event of the kinds ACCEPT names; -EBUSY (and
    // nothing deleted) when one of them is enabled.
    int release_all(unsigned accept);
    // Their text: one listing line per probe, in creation order, the definition only (a
    // pending probe too: the kernel's lines carry no state, and tools such as perf probe -l
    // split them into words).
    std::string listing(unsigned accept) const;
    // The listing line of the first probe of GROUP/EVENT ("" when there is no such event):
    // what a command became once its names and $arg* were resolved.
    std::string listing_of(std::string_view group, std::string_view event) const;

    // kprobe_profile: "  %-44s %15lu %15lu\n" per kprobe (event name, hits, misses);
    // uprobe_profile: "  %s %-44s %15lu\n" (path, event name, hits).
    std::string kprobe_profile() const;
    std::string uprobe_profile() const;

    // ---- the events/ tree ----
    std::vector<std::string> groups() const;
    std::vector<std::string> events(std::string_view group) const; // empty: no such group
    bool has_group(std::string_view group) const;
    bool has_event(std::string_view group, std::string_view event) const;
    // -ENOENT for an unknown event.
    int event_id(std::string_view group, std::string_view event) const;
    std::optional<std::string> format(std::string_view group, std::string_view event) const;

    // enable files of array ARRAY (0: the top level). set_enabled returns 0 or -errno (a
    // registration failure on enable).
    int set_enabled(std::string_view group, std::string_view event, bool on, unsigned array = 0);
    int enabled(std::string_view group, std::string_view event,
                unsigned array = 0) const; // 0, 1 or -ENOENT
    // The enable file's text: "0", "1", "0*" / "1*" in soft mode; "" for an unknown event.
    std::string enable_text(std::string_view group, std::string_view event,
                            unsigned array = 0) const;
    // events/enable (GROUP empty) and events/<group>/enable: '0', '1' or 'X' (mixed).
    int set_group_enabled(std::string_view group, bool on, unsigned array = 0);
    char group_enabled(std::string_view group, unsigned array = 0) const;
    // Several events at once, their kprobes armed (or disarmed) in one batch: what enabling
    // thousands of p/r events costs is then what one f event on as many functions does.
    // All or nothing: on failure no event changed, and *FAILED (when given) is the index of
    // the first event that cannot be enabled on its own. -ENOENT for an unknown event.
    struct event_ref {
        std::string group, event;
    };
    int set_enabled(std::span<const event_ref> events, bool on, size_t *failed = nullptr,
                    unsigned array = 0);

    // set_event of ARRAY: every event enabled there, "group:event" a line.
    std::vector<std::string> enabled_events(unsigned array) const;
    // available_events: "group:event" of every event, sorted.
    std::vector<std::string> all_events() const;
    // set_event's "GROUP:EVENT", "GROUP:*", "*:EVENT", "EVENT" (any group): enables (or
    // disables) every matching event in ARRAY. -EINVAL when nothing matches.
    int set_event_matching(std::string_view spec, bool on, unsigned array);

    // Soft mode (the enable_event/disable_event commands): REF counts users; while it is
    // above zero the event stays armed and records in ARRAY only when switched on with
    // soft_enable(). -ENOENT for an unknown event.
    int soft_mode(std::string_view group, std::string_view event, unsigned array, bool ref);
    // The event of GROUP/EVENT for soft_enable() (nullptr when there is none); valid while
    // soft mode holds it.
    trace_event *find_event(std::string_view group, std::string_view event) const;
    // GROUP/EVENT kept from deletion (busy) until unpin_event(): what a trigger file's
    // write or read works on (event_trigger.cpp). nullptr when there is no such event.
    trace_event *pin_event(std::string_view group, std::string_view event);
    void unpin_event(trace_event *ev);
    // Switches recording in ARRAY on or off for an event held in soft mode. Hot path.
    static void soft_enable(trace_event *ev, unsigned array, bool on) noexcept;
    static bool soft_enabled(const trace_event *ev, unsigned array) noexcept;

    // rmdir of an instance: every event enabled there is disabled, its filters dropped.
    void remove_array(unsigned array);

    // filter files. Writing "0" clears; a bad expression fails with -EINVAL, disables the
    // event's filter and leaves the error text in the file (and an error_log entry).
    int set_filter(std::string_view group, std::string_view event, std::string_view text,
                   unsigned array = 0);
    std::optional<std::string> filter_text(std::string_view group, std::string_view event,
                                           unsigned array = 0) const;
    int set_group_filter(std::string_view group, std::string_view text, unsigned array = 0);
    std::string group_filter_text(std::string_view group, unsigned array = 0) const;

    // ---- trace output ----
    // Text of one record ("myprobe: (do_work+0x4/0x20) a=1"), "Unknown type <id>" when the
    // id belongs to no event this process ever defined.
    std::string format_record(const void *payload, size_t len) const;
    // format_record as a trace_payload_fn (CTX unused).
    static size_t payload_fn(char *buf, size_t len, const void *payload, size_t payload_len,
                             void *ctx);

    // Number of events / probes (tests).
    size_t nr_events() const;

    // ---- tracepoints: the process's USDT probes as static events (trace_usdt.cpp) ----
    // Makes a static event PROVIDER/NAME of every USDT note of the loaded objects, and of
    // those loaded from now on (the loader notifier stays installed). Serving the tree
    // (dprobe_tracefs_start) calls it; an in-process tree without it has no tracepoints.
    void usdt_start();
    // The uprobe-style line of each static event's first probe, as listing() writes lines:
    // what a recording needs to describe their records.
    std::string usdt_listing() const;

    // kprobes/list lines of the p/r events whose object is not mapped (no kprobe yet, or
    // its kprobe's code unloaded), as the kernel lists a probe whose code is gone.
    std::string pending_kprobes_list() const;
    // Every probe, in creation order (the listing). mutex_ held.
    const std::vector<trace_probe *> &probes_locked() const { return probes_; }

    // ---- for the event kinds' tables (trace_probe.h), with the registry's lock held ----
    // The event GROUP/EVENT, nullptr when there is none.
    trace_event *find_locked(std::string_view group, std::string_view event) const
    {
        return find(group, event);
    }
    // EV's probes armed (or disarmed): for an event probe, the event it reads.
    int arm_locked(trace_event &ev, bool on);

    trace_events(const trace_events &) = delete;
    trace_events &operator=(const trace_events &) = delete;

  private:
    trace_events();
    ~trace_events() = delete;

    // mutex_ held for a scope; on release, the rescan a dlopen asked for while it was held.
    class events_lock
    {
      public:
        explicit events_lock(const trace_events &te) : te_(const_cast<trace_events &>(te))
        {
            te_.mutex_.lock();
        }
        ~events_lock() { te_.unlock_and_rescan(); }
        events_lock(const events_lock &) = delete;
        events_lock &operator=(const events_lock &) = delete;

      private:
        trace_events &te_;
    };
    friend class events_lock;
    void unlock_and_rescan();

    // OPS: the kind's table when not def.kind's (USDT static events); LOC nullptr: a failure
    // is not logged.
    int create(const probe_definition &def, std::span<const std::string> argv, const char *loc,
               const dyn_event_operations *ops = nullptr);
    // ---- USDT static events (trace_usdt.cpp) ----
    // Events for the notes of the objects not scanned yet (rescan_locked calls it).
    void usdt_scan_locked();
    // The static event of tracepoint NAME (the parser's parse_options::tracepoint).
    bool usdt_tracepoint_locked(std::string_view name, std::string &group,
                                std::vector<filter_field> &fields) const;
    bool usdt_on_ = false;
    std::unordered_set<uint64_t> usdt_scanned_; // loaded_object::id
    // Static events were added since the commands hook last ran: it runs once the lock is
    // released (unlock_and_rescan).
    std::atomic<bool> usdt_added_{false};
    static void run_commands_hook();
    // ---- probes on objects the process loads (trace_events_notify.cpp) ----
    // Probes whose object is now mapped get their kprobe; probes whose object was
    // unloaded and is mapped again get a new one (the kernel's module notifier).
    void rescan_locked();
    // Installs the loader notifier while some probe waits for objects (its table's
    // waits_for_objects); removes it when none does.
    void update_dl_notifier();
    static void objects_changed(std::span<const object_ptr> added);
    static const dl_notifier &events_notifier();
    std::atomic<bool> rescan_{false};
    bool notifier_on_ = false;
    int remove(const delete_request &req, unsigned accept);
    trace_event *find(std::string_view group, std::string_view event) const;
    int enable_locked(trace_event &ev, bool on, unsigned array);
    int enable_many_locked(std::span<trace_event *const> evs, bool on, unsigned array);
    // EV enabled (or disabled) in ARRAY on its own; its probes armed or disarmed when that
    // changes whether it is armed at all.
    int enable_one_locked(trace_event &ev, bool on, unsigned array);
    // Arms (or disarms) the probes of EVS in one batch per arm function of their tables;
    // all or nothing.
    int arm_many_locked(std::span<trace_event *const> evs, bool on);
    // EV joins the registry (creation order, by name, its id taken); forget_event_locked()
    // drops its name and id (the caller takes it out of events_).
    void add_event_locked(trace_event *ev);
    void forget_event_locked(const trace_event *ev);
    // The id the next new event gets (taken by add_event_locked).
    uint16_t peek_id() const;
    static std::string key(std::string_view group, std::string_view event);

    mutable fair_mutex mutex_; // the kernel's event_mutex / dyn_event_ops_mutex
    error_log errors_;
    std::vector<trace_event *> events_;                      // creation order
    std::vector<trace_probe *> probes_;                      // creation order (the listing)
    std::unordered_map<std::string, trace_event *> by_name_; // key(group, event)
    std::vector<bool> id_used_ = std::vector<bool>(65536, false);
    // Definitions by id for formatting records, also of deleted events whose records may
    // still be in the buffer.
    mutable std::mutex fmt_mutex_;
    std::unordered_map<uint16_t, std::shared_ptr<const probe_definition>> formats_;
    std::unordered_map<std::string, std::string> group_filter_text_;
    uint16_t next_id_ = TRACE_EVENT_FIRST_ID;
};

} // namespace dprobe
