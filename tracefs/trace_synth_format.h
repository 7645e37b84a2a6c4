// Synthetic events, the offline half (the kernel's kernel/trace/trace_events_synth.c minus
// registration): the command grammar of the synthetic_events file and of `s:` lines in
// dynamic_events, the record layout, the events/synthetic/NAME/format file, the text of a
// record in the trace, the listing lines, and the fields filters and hist triggers see.
//
//   synthetic_events:  NAME TYPE FIELD[; TYPE FIELD]...      !NAME
//   dynamic_events:    s:[synthetic/]NAME TYPE FIELD[; ...]  -:[synthetic/]NAME
//
// TYPE is one of the kernel's: s64 u64 s32 u32 s16 u16 s8 u8 char "unsigned char" int
// "unsigned int" long "unsigned long" bool pid_t gfp_t, a string `char NAME[N]` (N <=
// STR_VAR_LEN_MAX), a dynamic string `char NAME[]`, or a stack trace `unsigned long[] NAME`
// (any type with "long[", as the kernel's synth_field_is_stack: its value is a hist
// variable of common_stacktrace). Like the kernel, other arrays (`u64 arr[4]`) are refused
// (INVALID_TYPE).
//
// Record layout (the kernel's struct synth_trace_event): the 8-byte common header, then one
// u64 slot per field (a number stored with its own size at the slot's start; a dynamic
// string's or a stack's u32 __data_loc), except a static string, which takes STR_VAR_LEN_MAX
// bytes; the bytes of dynamic strings and stacks follow the fixed part. A stack's bytes are
// the variable's words as the kernel's trace_stack copies them: their count, then the return
// addresses, up to the first zero word (at most HIST_STACKTRACE_DEPTH words in all).
//
// A synthetic event is a probe_definition of kind probe_kind::synth in the registry (group
// "synthetic"); its fields are the definition's args: name, type_text (the kernel's type
// string, "__data_loc char[]" for a dynamic string), offset (from the record start minus 8,
// as every kind's args), field_size (the format file's size) and `fmt`, the printf format.
#pragma once

#include "tracefs/event_filter.h"
#include "tracefs/probe_parse.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

inline constexpr const char SYNTH_SYSTEM[] = "synthetic";
inline constexpr unsigned SYNTH_FIELDS_MAX = 32;
inline constexpr unsigned STR_VAR_LEN_MAX = MAX_FILTER_STR_VAL;

// The kernel's err_text[] of trace_events_synth.c, in its order.
#define DPROBE_SYNTH_ERRORS                                                                        \
    C(BAD_NAME, "Illegal name")                                                                    \
    C(INVALID_CMD, "Command must be of the form: <name> field[;field] ...")                        \
    C(INVALID_DYN_CMD, "Command must be of the form: s or -:[synthetic/]<name> field[;field] ...") \
    C(EVENT_EXISTS, "Event already exists")                                                        \
    C(TOO_MANY_FIELDS, "Too many fields")                                                          \
    C(INCOMPLETE_TYPE, "Incomplete type")                                                          \
    C(INVALID_TYPE, "Invalid type")                                                                \
    C(INVALID_FIELD, "Invalid field")                                                              \
    C(INVALID_ARRAY_SPEC, "Invalid array specification")

#define C(name, text) name,
enum class synth_err : uint8_t { DPROBE_SYNTH_ERRORS };
#undef C
const char *synth_err_text(synth_err e) noexcept;

// A rejected command: errno, and when the kernel logs it, the error and the caret's column
// in the command as written (the kernel's last_cmd).
struct synth_error {
    int errnum = 0; // positive
    bool logged = false;
    synth_err err = synth_err::BAD_NAME;
    unsigned pos = 0;
};

// One command of the synthetic_events file or an `s:` line of dynamic_events, whole (the
// kernel's raw_command: leading blanks skipped by the caller).
struct synth_command {
    enum class type : uint8_t { none, create, remove };
    type kind = type::none; // none: an empty line
    probe_definition def;   // create: kind synth, group "synthetic", the fields as args
    std::string name;       // remove: the event ("!NAME")
};

// The synthetic_events grammar (create_or_delete_synth_event): "NAME fields" or "!NAME".
// EXISTS says whether a synthetic event of a name exists (EVENT_EXISTS).
int parse_synth_events_line(std::string_view raw, bool (*exists)(std::string_view),
                            synth_command &out, synth_error &err);
// An `s:[synthetic/]NAME fields` line of dynamic_events (create_synth_event). -ECANCELED when
// RAW is not an `s:` line.
int parse_synth_dynevent(std::string_view raw, bool (*exists)(std::string_view), synth_command &out,
                         synth_error &err);

// The record: slot offsets (from the record start) of each field, fixed size.
size_t synth_fixed_size(const probe_definition &def);
// "lat=%llu, pid=%d", REC->lat, REC->pid (set_synth_event_print_fmt).
std::string synth_print_fmt(const probe_definition &def);
std::string synth_format_file(const probe_definition &def, int id);
// "wakeup_latency: lat=12 pid=345" (print_synth_event), without the newline; a stack prints
// "stack=STACK:" and a "=> SYM" line per address, each with its newline (the record's line
// then ends with an empty one, as the kernel's). SYM symbolizes them (nullptr: "0x<hex>").
std::string synth_format_record(const probe_definition &def, const uint8_t *rec, size_t size,
                                symbolize_fn sym = nullptr);
// "NAME\tu64 lat; pid_t pid": the synthetic_events line; dynamic_events prefixes
// "s:synthetic/".
std::string synth_show(const probe_definition &def);
// The record's fields for filters and hist triggers (probe_filter_fields()).
std::vector<filter_field> synth_filter_fields(const probe_definition &def);

// What a field of a synthetic event is (for the hist actions' type check and the writer).
struct synth_field_info {
    std::string_view type; // the kernel's type string
    unsigned size = 0;     // 1, 2, 4, 8; a static string's N; 8 for a dynamic string
    bool is_signed = false, is_string = false, is_dynamic = false, is_stack = false;
};
// A stack field's words at most (the kernel's HIST_STACKTRACE_DEPTH).
inline constexpr unsigned SYNTH_STACK_WORDS_MAX = 16;
synth_field_info synth_field_of(const probe_arg &a);

} // namespace dprobe
