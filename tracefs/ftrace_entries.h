// The records ftrace itself writes (the kernel's kernel/trace/trace_entries.h): the function
// tracer's, the function graph tracer's, stack traces and trace_marker's. Their format files
// are events/ftrace/<name>/format; like the kernel's they cannot be enabled as events, they
// are written by the tracers and files that own them.
//
// Layouts are the kernel's on x86-64 (field names, order and offsets; tools read fields by
// name through the format files): funcgraph_exit is the 6.x one with `retval`. Every record
// starts with the common header (trace_entry_header: common_type, common_flags,
// common_preempt_count, common_pid); the ring buffer pads payloads to 8 bytes.
#pragma once

#include "tracefs/event_filter.h"
#include "tracefs/event_format.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

// The kernel's enum trace_type values for these records.
enum trace_type : uint16_t {
    TRACE_FN = 1,
    TRACE_STACK = 4,
    TRACE_PRINT = 5,
    TRACE_GRAPH_RET = 10,
    TRACE_GRAPH_ENT = 11,
    TRACE_RAW_DATA = 16,
};

struct ftrace_entry {
    trace_entry_header ent;
    uint64_t ip;
    uint64_t parent_ip;
};
static_assert(sizeof(ftrace_entry) == 24);

struct ftrace_graph_ent_entry {
    trace_entry_header ent;
    uint64_t func;
    int32_t depth;
    uint32_t pad;
};
static_assert(sizeof(ftrace_graph_ent_entry) == 24);

struct ftrace_graph_ret_entry {
    trace_entry_header ent;
    uint64_t func;
    uint64_t retval;
    int32_t depth;
    uint32_t overrun;
    uint64_t calltime;
    uint64_t rettime;
};
static_assert(sizeof(ftrace_graph_ret_entry) == 48);

// kernel_stack: SIZE return addresses follow (the kernel's __dynamic_array caller).
struct stack_entry {
    trace_entry_header ent;
    int32_t size;
    uint32_t pad;
    uint64_t caller[];
};
inline constexpr size_t FTRACE_STACK_ENTRIES_MAX = 64;

// print: the NUL-terminated text follows IP (trace_marker, dprobe_trace_marker()).
struct print_entry {
    trace_entry_header ent;
    uint64_t ip;
    char buf[];
};

// raw_data: trace_marker_raw's id, then its bytes.
struct raw_data_entry {
    trace_entry_header ent;
    uint32_t id;
    char buf[];
};

// The events/ftrace/ names, and each one's format file ("" for an unknown name).
const std::vector<std::string> &ftrace_event_names();
std::string ftrace_event_format(std::string_view name);
// The id of a name (-1 when unknown).
int ftrace_event_id(std::string_view name);
bool is_ftrace_type(uint16_t type);

// events/ftrace/<name>/filter (per trace array). The kernel keeps these files but no longer
// applies them (since 6.12 nothing checks an ftrace event's filter; the function event's
// `ip` filter was for perf only): they are checked and shown, and change no record.
// The function event takes only `ip` (a function name, quoted), others their numeric fields.
// 0, or -EINVAL with the file's error text in ERROR_TEXT.
int ftrace_event_check_filter(std::string_view name, std::string_view text,
                              std::string &error_text);

// How records print (the kernel's trace options sym-offset, sym-addr, print-parent).
struct ftrace_print_flags {
    bool sym_offset = false;
    bool sym_addr = false;
    bool print_parent = true;
};
// The kernel's seq_print_ip_sym(): "func", "func+0x4/0x20" with sym-offset, then
// " <0000000000401136>" with sym-addr; "0" for address 0.
void print_ip_sym(std::string &out, uint64_t ip, const ftrace_print_flags &f);
// The text of one of these records after the line prefix, without the newline:
//   function       "do_work <-main"
//   kernel_stack   "<stack trace>\n => do_work\n => main"
//   print          "tracing_mark_write: hello"
//   raw_data       "# 2a buf: 01 02"
//   funcgraph_*    "--> do_work (1)" / "<-- do_work (1) ..." (outside the graph tracer's view)
// False when RECORD is not one of them.
bool ftrace_print_entry(std::string &out, const uint8_t *record, size_t len,
                        const ftrace_print_flags &f);

// The ip that print records of trace_marker writes carry (prints as tracing_mark_write).
uintptr_t trace_marker_ip() noexcept;

} // namespace dprobe
