// The dynamic-event registry (the kernel's trace_kprobe.c / trace_fprobe.c / trace_uprobe.c
// glue and trace_events.c's event files, for one process).
//
// Every event is GROUP/EVENT with an id, one or more probe definitions (a multi-probe event
// appends probes with identical arguments), an enable state, a filter and per-probe hit
// counters. Lines written to dynamic_events / kprobe_events / uprobe_events create and delete
// events; the events/ tree enables them and sets their filters.
//
// Registration follows the kernel:
//  - f events register nothing on creation (Linux 6.15+): the fprobe is registered when the
//    event is enabled and unregistered when it is disabled. Creation checks that the symbol
//    (or glob) names at least one function with a patch site (BAD_PROBE_ADDR otherwise).
//  - p/r events (and path:offset "uprobe" events, which dprobe serves with a kprobe at the
//    mapped address) register their kprobe / kretprobe disabled on creation, so a bad place
//    is reported then (BAD_PROBE_ADDR, NON_UNIQ_SYMBOL, BAD_INSN_BNDRY, FAIL_REG_PROBE), and
//    are armed on enable.
//
// When a probe fires, its handler builds the record in place in the ring buffer: reserve,
// common header (type = event id, flags 0, preempt count 0, pid = thread id), __probe_ip or
// __probe_func/__probe_ret_ip, the fetch args; then the event's filter decides between commit
// and discard. That path is noexcept, allocation-free and lock-free.
//
// Trace arrays (the top level and instances/, trace_array.h): each event has an enable and a
// filter per array (the kernel's trace_event_file), and a record goes to every array where
// it is enabled, subject to that array's filter and set_event_pid. The probes are
// registered while the event is enabled in at least one array. An array may also hold the
// event in soft mode (the enable_event/disable_event function commands): registered, and
// recording only while the command has switched it on; its enable file then reads "0*" or
// "1*".
#pragma once

#include "tracefs/error_log.h"
#include "tracefs/event_filter.h"
#include "tracefs/probe_parse.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dprobe {

struct trace_event;
struct trace_probe;

// Ids handed to dynamic events: the first one, as the kernel's come after its static events.
inline constexpr uint16_t TRACE_EVENT_FIRST_ID = 1000;

class trace_events {
public:
    // The process's registry (never destroyed: probe handlers may outlive static destructors).
    static trace_events &instance();

    error_log &errors() noexcept { return errors_; }

    // A write to dynamic_events (ACCEPT_DYNAMIC), kprobe_events (ACCEPT_KPROBE) or
    // uprobe_events (ACCEPT_UPROBE): lines run in order, stopping at the first failure, which
    // is logged in error_log when the kernel logs it. Returns 0 or -errno.
    int write_commands(std::string_view buf, unsigned accept);
    // One command, already split (argv_split).
    int run_command(std::span<const std::string> argv, unsigned accept);
    // O_TRUNC on those files: deletes every event of the kinds ACCEPT names; -EBUSY (and
    // nothing deleted) when one of them is enabled.
    int release_all(unsigned accept);
    // Their text: one listing line per probe, in creation order.
    std::string listing(unsigned accept) const;

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

    // set_event of ARRAY: every event enabled there, "group:event" a line.
    std::vector<std::string> enabled_events(unsigned array) const;
    // available_events: "group:event" of every event, sorted.
    std::vector<std::string> all_events() const;
    // set_event's "GROUP:EVENT", "GROUP:*", "*:EVENT", "EVENT" (any group), with globs in
    // both parts: enables (or disables) every matching event in ARRAY. -EINVAL when nothing
    // matches.
    int set_event_matching(std::string_view spec, bool on, unsigned array);

    // Soft mode (the enable_event/disable_event commands): REF counts users; while it is
    // above zero the event stays registered and records in ARRAY only when switched on with
    // soft_enable(). -ENOENT for an unknown event.
    int soft_mode(std::string_view group, std::string_view event, unsigned array, bool ref);
    // The event of GROUP/EVENT for soft_enable() (nullptr when there is none); valid while
    // soft mode holds it.
    trace_event *find_event(std::string_view group, std::string_view event) const;
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

    trace_events(const trace_events &) = delete;
    trace_events &operator=(const trace_events &) = delete;

private:
    trace_events();
    ~trace_events() = delete;

    int create(const probe_definition &def, std::span<const std::string> argv, const char *loc);
    int remove(const delete_request &req, unsigned accept);
    trace_event *find(std::string_view group, std::string_view event) const;
    int enable_locked(trace_event &ev, bool on, unsigned array);
    int register_locked(trace_event &ev);
    void unregister_locked(trace_event &ev);
    bool is_registered(const trace_event &ev) const;
    void free_event(trace_event *ev);
    uint16_t alloc_id();

    mutable std::mutex mutex_; // the kernel's event_mutex / dyn_event_ops_mutex
    error_log errors_;
    std::vector<trace_event *> events_; // creation order
    std::vector<trace_probe *> probes_; // creation order (the listing)
    // Definitions by id for formatting records, also of deleted events whose records may
    // still be in the buffer.
    mutable std::mutex fmt_mutex_;
    std::unordered_map<uint16_t, std::shared_ptr<const probe_definition>> formats_;
    std::unordered_map<std::string, std::string> group_filter_text_;
    uint16_t next_id_ = TRACE_EVENT_FIRST_ID;
};

// Resolves FILE_OFFSET of the file PATH to its address in this process (through
// /proc/self/maps), or nullopt when the file is not mapped there.
std::optional<uintptr_t> file_offset_to_addr(const std::string &path, uint64_t file_offset);

} // namespace dprobe
