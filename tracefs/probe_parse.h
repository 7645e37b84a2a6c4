// dynamic_events command lines -> probe definitions (the parse half of the kernel's
// trace_kprobe.c, trace_fprobe.c and trace_uprobe.c), as a pure library: nothing here
// registers a probe or looks a symbol up. The registering code takes a probe_definition,
// resolves and arms it, and reports registration failures (BAD_PROBE_ADDR,
// NON_UNIQ_SYMBOL, BAD_INSN_BNDRY, FAIL_REG_PROBE, BAD_RETPROBE) through the same
// probe_error / error_log plumbing, e.g. error_log.append(def.error_loc(), argv,
// registration_error(probe_err::BAD_PROBE_ADDR, -ENOENT)).
#pragma once

#include "tracefs/error_log.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/trace_btf.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

struct filter_field; // tracefs/event_filter.h

enum class probe_kind : uint8_t {
    kprobe, // p / r on sym[+off], lib:sym[+off] or an address
    fprobe, // f on a function entry / exit
    uprobe, // p / r on /path/to/file:0xoffset
    eprobe, // e on another event (place.object: its group, place.symbol: its event)
    synth,  // s: a synthetic event (trace_synth_format.h): its fields are the args
    tprobe, // t on a static (USDT) event (place.symbol: the tracepoint's name, place.object:
            // its group once known)
};

struct probe_place {
    enum class form : uint8_t { symbol, address, file_offset };
    form kind = form::symbol;
    std::string object;          // "libc.so.6" of lib:sym; the path of a file_offset place
    std::string symbol;          // without object and offset
    uint32_t offset = 0;         // symbol offset (kprobe)
    uintptr_t address = 0;       // form::address
    uint64_t file_offset = 0;    // form::file_offset
    uint64_t ref_ctr_offset = 0; // uprobe "(REF)" semaphore offset, 0 = none

    // "lib:sym" or "sym" (the kernel's trace_kprobe_symbol()).
    std::string qualified_symbol() const;
    // The place as the listing shows it and a delete request matches it:
    // "sym", "sym+4", "lib:sym", "0x0000000000401000", "/bin/zsh:0x0000000000046420(0x10)".
    std::string text() const;
};

struct probe_definition {
    probe_kind kind = probe_kind::kprobe;
    bool is_return = false;
    bool at_func_entry = false; // $argN readable from registers (kprobe at offset 0, fprobe)
    unsigned maxactive = 0;     // r<N>, 0 = default
    std::string group, event;
    probe_place place;
    std::vector<probe_arg> args;
    uint32_t args_size = 0;     // fixed part of the args in a record
    entry_arg_table entry_args; // function args a return probe saves at entry
    std::string filter;         // e: the "if FILTER" on the attached event's records

    // 'p', 'r', 'f', 't', 'e' or 's'.
    char type_char() const;
    // "trace_kprobe", "trace_fprobe", "trace_uprobe" or "event_probe": the error_log location.
    const char *error_loc() const;
    // The dynamic_events line (no trailing newline): "p:kprobes/myprobe do_sys_open dfd=%ax".
    std::string listing() const;
    // Bytes of entry data a return probe needs (0 when no $argN on exit).
    size_t entry_data_size() const { return entry_args.size(); }
    bool has_dynamic_args() const;
};

// The kernel's enum probe_print_type (trace_probe.h): what a record holds before its
// arguments, so how its format file, print fmt, filter fields and text begin.
enum class probe_print_type : uint8_t {
    normal, // __probe_ip: "(%lx)"
    ret,    // __probe_func, __probe_ret_ip: "(%lx <- %lx)"
    event,  // nothing: the arguments follow the common header (event probes)
};

struct probe_format_ops; // tracefs/event_format.h: a kind whose records have a format of their own
struct parse_options;

// What the offline tools know of one kind of probe (the offline half of the kernel's
// dyn_event_operations; tracefs/trace_probe.h holds the runtime half): how its lines are
// parsed, listed and matched, and what its records hold. Code that differs by kind asks
// the kind's entry, probe_kind_ops_of(def.kind), instead of testing the kind.
struct probe_kind_ops {
    probe_kind kind;
    // The line's first letter: TYPE, or RET_TYPE for a return probe ('p' / 'r').
    char type, ret_type;
    bool lists_maxactive;  // a return probe's listing says r<MAXACTIVE>
    unsigned accept;       // ACCEPT_*: the files whose lines may be of this kind
    const char *error_loc; // the error_log location of its parser ("trace_kprobe", ...)
    // PROBE_PRINT_NORMAL (RETURN for a return probe), or PROBE_PRINT_EVENT.
    probe_print_type print;
    bool raw_addresses; // its records print their addresses raw (user addresses, uprobes)
    // The kind whose events its probes may share: an event of kind A takes a probe of kind
    // B only when A == B (f and t lines are both the kernel's trace_fprobe: DIFF_PROBE_TYPE
    // between them, EVENT_EXIST between others).
    probe_kind family;
    bool appends; // more probes may join one of its events (not an event probe)
    // The kernel's create(): parses ARGV when it is a line of this kind, ECANCELED when it
    // is another kind's. nullptr: its lines are parsed elsewhere (synthetic events,
    // trace_synth_format.h).
    probe_error (*create)(std::span<const std::string> argv, const parse_options &opts,
                          probe_definition &out);
    // The place as the listing shows it ("do_sys_open+4", "vfs_read%return", "sched.switch").
    std::string (*show_place)(const probe_definition &def);
    // Whether a delete request's place (its first word) names DEF's; nullptr: any place does
    // (the kernel's synth_event_match).
    bool (*match_place)(std::string_view place, const probe_definition &def);
    // A kind whose records, format file and listing are its own (synthetic events), else
    // nullptr.
    const probe_format_ops *format;
};

// The kinds, in the order a create command tries them (the kernel's dyn_event_ops_list).
std::span<const probe_kind_ops *const> probe_kinds();
// The entry of KIND (inline: the record writer asks it at every hit).
extern const probe_kind_ops *const probe_kind_table[];
inline const probe_kind_ops &probe_kind_ops_of(probe_kind kind) noexcept
{
    return *probe_kind_table[static_cast<size_t>(kind)];
}
inline probe_print_type probe_print_type_of(const probe_definition &def) noexcept
{
    const probe_print_type p = probe_kind_ops_of(def.kind).print;
    return p == probe_print_type::normal && def.is_return ? probe_print_type::ret : p;
}

// A "-:[GRP/][EVENT] [PLACE [ARGS]]" or "!...:[GRP/]EVENT" line.
struct delete_request {
    std::optional<std::string> group; // absent: any group
    std::string event;                // empty: every event (of GROUP)
    std::vector<std::string> head;    // optional place and "name=comm" args to match
};
// Whether REQ selects DEF (the kernel's ->match()).
bool delete_matches(const delete_request &req, const probe_definition &def);

// Which kinds a file accepts: kprobe_events, uprobe_events, dynamic_events.
enum : unsigned {
    ACCEPT_KPROBE = 1u << 0,
    ACCEPT_UPROBE = 1u << 1,
    ACCEPT_FPROBE = 1u << 2,
    ACCEPT_EPROBE = 1u << 3,
    ACCEPT_SYNTH = 1u << 4, // s: lines and the synthetic_events file
    ACCEPT_DYNAMIC = ACCEPT_KPROBE | ACCEPT_UPROBE | ACCEPT_FPROBE | ACCEPT_EPROBE | ACCEPT_SYNTH,
};

struct parse_options {
    unsigned accept = ACCEPT_DYNAMIC;
    // Whether a kprobe place is a function entry (the kernel's kprobe_on_func_entry). Unset:
    // a symbol at offset 0 is, an address is not known to be (return probes on it are let
    // through for the registering code to check).
    std::function<bool(const probe_place &)> is_func_entry;
    // Check that an uprobe path exists and is a regular file (FILE_NOT_FOUND / NO_REGULAR_FILE).
    bool check_files = true;
    // Argument names, $arg* and typed $retval (the kernel's BTF arguments, from DWARF here;
    // trace_btf.h). func_info returns the function a probe at an entry or exit of DEF sits
    // on: nullptr when it has no debug info, nullopt when the caller cannot tell (names are
    // then accepted unchecked). Unset: no type information (NOSUP_BTFARG), unless
    // btf_unchecked, which accepts every name unchecked (an offline check that cannot see
    // the objects the process will load).
    std::function<std::optional<func_proto_ptr>(const probe_definition &def)> func_info;
    bool btf_unchecked = false;
    // e events: the fields of the event GROUP/EVENT an event probe attaches to, nullptr
    // when there is no such event (BAD_ATTACH_EVENT). Unset: fields are not checked.
    std::function<const std::vector<filter_field> *(std::string_view group, std::string_view event)>
        event_fields;
    // t events: the static event (a USDT probe's, trace_usdt.cpp) named TRACEPOINT: its
    // group and its fields (arg1..argN, in *FIELDS); false when there is none
    // (NO_TRACEPOINT). Unset: not checked, and $argN stays unresolved (an offline check).
    std::function<bool(std::string_view tracepoint, std::string &group,
                       std::vector<filter_field> &fields)>
        tracepoint;
};

struct dynevent_command {
    enum class type : uint8_t { create, remove };
    type kind = type::create;
    probe_definition def; // kind == create
    delete_request del;   // kind == remove
};

// Parses one command (already split into ARGV). On failure returns the error; *LOC (when
// given) is set to the error_log location of the parser that rejected it. Errors with
// err == NONE are not logged (ECANCELED lines become EINVAL, delete syntax errors).
probe_error parse_dynevent(std::span<const std::string> argv, const parse_options &opts,
                           dynevent_command &out, const char **loc = nullptr);

// The same, logging a rejected command to LOG. Returns 0 or -errno.
int parse_dynevent_logged(std::span<const std::string> argv, const parse_options &opts,
                          error_log &log, dynevent_command &out);

// Parses a create command only (the kernel's per-kind create functions in turn).
probe_error parse_probe_definition(std::span<const std::string> argv, const parse_options &opts,
                                   probe_definition &out, const char **loc = nullptr);

// The kernel's append rules (§3.6): adding NEWDEF to an event that already holds EXISTING
// probes (non-empty, same group/event). Returns EVENT_EXIST (another kind), DIFF_PROBE_TYPE
// (entry vs return), DIFF_ARG_TYPE (index of the first differing argument), SAME_PROBE, or
// success.
probe_error check_append(std::span<const probe_definition *const> existing,
                         const probe_definition &newdef);

// An error found while registering a parsed probe, pointed at the place (argv[1]):
// BAD_PROBE_ADDR, NON_UNIQ_SYMBOL, BAD_INSN_BNDRY, FAIL_REG_PROBE, BAD_RETPROBE.
probe_error registration_error(probe_err err, int errnum);

// argv_split(): tokens separated by whitespace (quotes are not special).
std::vector<std::string> argv_split(std::string_view line);

// Sanitizes an automatically built event name (':', '.', '*' and other non-identifier
// characters become '_'; a leading digit gets a '_' in front, as the kernel does for
// tracepoint event names), so that the event's listing parses back.
std::string sanitize_event_name(std::string name);

// The kernel's trace_parse_run_command(): splits BUF into lines, strips '#' comments, splits
// each line into argv and calls CREATE for each non-empty one, stopping at the first failure.
// A line longer than 4094 bytes fails with -EINVAL. Returns 0 or the failing -errno.
int trace_parse_run_command(std::string_view buf,
                            const std::function<int(std::span<const std::string>)> &create);

} // namespace dprobe
