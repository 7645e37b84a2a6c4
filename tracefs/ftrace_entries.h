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
#include <unordered_map>
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

// ---- compact forms ----
// The function graph and function records of `dprobe record` and `dprobe attach` (the agent's,
// tools/agent/funcgraph.cpp) are written in a shorter form: small ring-buffer events without
// the common fields (a record is in its thread's buffer, which says whose it is) and without
// the exit's call time (its entry's time stamp). They carry the same type ids as the full
// records above, which the tracefs tree's tracers write into the same buffers, and are told
// from them by their length: 12 bytes (graph) and 20 (function), where the full records take
// 24 and more. Every reader (trace, trace_pipe, trace_pipe_raw, `dprobe report`, trace.dat)
// expands them into the full records with ftrace_compact_expander.
struct __attribute__((packed, aligned(4))) ftrace_graph_compact {
    uint16_t type;  // TRACE_GRAPH_ENT or TRACE_GRAPH_RET
    uint16_t depth; // nesting depth; FTRACE_GRAPH_FL_UNWOUND in the top bit
    uint64_t func;  // the function's entry (its site)
};
static_assert(sizeof(ftrace_graph_compact) == 12);
inline constexpr uint16_t FTRACE_GRAPH_DEPTH_MAX = 0x7fff;
// A compact funcgraph_exit of a call that did not return: it was unwound (longjmp, a C++
// exception, thread exit), and the exit's time is when dprobe noticed.
inline constexpr uint16_t FTRACE_GRAPH_FL_UNWOUND = 0x8000;
struct __attribute__((packed, aligned(4))) ftrace_fn_compact {
    uint16_t type; // TRACE_FN
    uint16_t pad;
    uint64_t ip;        // the function's entry (its site)
    uint64_t parent_ip; // the return address: in its caller
};
static_assert(sizeof(ftrace_fn_compact) == 20);

// A compact graph record with values (`record -a/-A/-R`, tools/agent/graph_args.cpp): a
// funcgraph_entry and the call's arguments, or a funcgraph_exit and its return value, in one
// record (one reservation, one time stamp). Its type is the id of the values' layout: a probe
// event of the group graph_args, its id in [FTRACE_GRAPH_VALUES_FIRST_ID,
// FTRACE_GRAPH_VALUES_LAST_ID] (below the dynamic events' ids, above ftrace's record types);
// the top bit of depth says which of the two it is (such an exit is never an unwound one: a
// call that did not return has no value). The values follow at offset 12: the bytes of the
// layout's probe record (event_format.h) from its arguments on, the fixed part and then the
// dynamic data, whose __data_loc offsets count from where the probe record would start. So
// the probe record is this record with its first 4 bytes replaced by the common header, the
// ip and, for an exit, a 0 __probe_ret_ip (ftrace_graph_values_split). Every reader splits it
// into its two records; the payload is 4 bytes past an 8-aligned address in the buffer, so
// the values start 8-aligned as they do in the probe record.
struct __attribute__((packed, aligned(4))) ftrace_graph_values_compact {
    uint16_t type;  // the values' layout id
    uint16_t depth; // nesting depth; FTRACE_GRAPH_VALUES_FL_EXIT in the top bit
    uint64_t func;  // the function's entry (its site)
};
static_assert(sizeof(ftrace_graph_values_compact) == 12);
inline constexpr uint16_t FTRACE_GRAPH_VALUES_FIRST_ID = 100;
inline constexpr uint16_t FTRACE_GRAPH_VALUES_LAST_ID = 999;
inline constexpr uint16_t FTRACE_GRAPH_VALUES_FL_EXIT = 0x8000;
// Where the values start in such a record.
inline constexpr size_t FTRACE_GRAPH_VALUES_OFF = sizeof(ftrace_graph_values_compact);
// Where they start in the probe record of an entry's (args) and an exit's (return value)
// layout: after __probe_ip, and after __probe_func and __probe_ret_ip.
inline constexpr size_t FTRACE_GRAPH_VALUES_ENTRY_ARGS_OFF = TRACE_ENTRY_HEADER_SIZE + 8;
inline constexpr size_t FTRACE_GRAPH_VALUES_EXIT_ARGS_OFF = TRACE_ENTRY_HEADER_SIZE + 16;
// True when REC (LEN bytes) is a graph record with values: a record of one of those ids long
// enough. Where records of these ids are such records: in the buffers (the agent writes
// them only so), and in a trace file for the events it marks so
// (tracefile::EVENT_FL_GRAPH_VALUES; an older file has the probe records themselves, which
// also follow their graph records).
bool ftrace_is_graph_values(const void *rec, size_t len);
// Splits such a record: its graph part as a compact graph record in GRAPH, and the probe
// record of its values (common_pid PID) in VALUES. False when REC is no such record.
bool ftrace_graph_values_split(const void *rec, size_t len, int32_t pid,
                               ftrace_graph_compact &graph, std::vector<uint8_t> &values);

// The type of REC (LEN bytes) when it is a compact record, else 0 (a full record, or
// another type). Graph records with values are not among them (see above).
uint16_t ftrace_compact_type(const void *rec, size_t len);

// A full record, for the expansion of a compact one.
union ftrace_full_record {
    trace_entry_header ent;
    ftrace_entry fn;
    ftrace_graph_ent_entry graph_ent;
    ftrace_graph_ret_entry graph_ret;
};

// Expands the compact records of a sequence of records read in time order (each thread's in
// the order written): a graph exit gets its entry's time stamp as calltime, found among its
// thread's open calls (its own time when its entry was not seen: lost, or before the reading
// started).
// Memory: each thread's open calls, no deeper than its nesting.
class ftrace_compact_expander
{
  public:
    // GRAPH_VALUES: the records read are the buffers' (trace, trace_pipe, trace_pipe_raw),
    // where the ids of graph records with values are theirs alone.
    explicit ftrace_compact_expander(bool graph_values = false) : graph_values_(graph_values) {}
    // When REC (LEN bytes, written by thread TID at time TS) is compact: its full record in
    // OUT (common_pid TID), and its length; *UNWOUND says whether a graph exit was unwound.
    // 0 when REC is not compact (readers use it as it is). With GRAPH_VALUES, a graph record
    // with values gives its graph part (its values: ftrace_graph_values_split).
    size_t expand(const void *rec, size_t len, int32_t tid, uint64_t ts, ftrace_full_record &out,
                  bool *unwound = nullptr);

  private:
    struct frame {
        uint64_t func;
        int32_t depth;
        uint64_t ts;
    };
    std::unordered_map<int32_t, std::vector<frame>> open_;
    bool graph_values_;
};

// The length of the raw_data record REC (LEN bytes) as the kernel's ring buffer holds it:
// its id and its bytes, padded to 4. dprobe's own buffers round records up to 8 and keep the
// data's length in the last word (trace_marker.cpp), which readers of the kernel's format
// (trace_pipe_raw, trace.dat) must not see as data. LEN when REC is not a raw_data record.
size_t ftrace_raw_data_len(const void *rec, size_t len);

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

// How records print (the kernel's trace options sym-offset, sym-addr, print-parent), and
// how addresses are named: SYMBOLIZE, like sprint_symbol() ("func+0x4/0x20", "0x..." when
// unknown; snprintf's return), for a reader of recorded addresses (`dprobe report`); the
// process's own symbols when null.
struct ftrace_print_flags {
    bool sym_offset = false;
    bool sym_addr = false;
    bool print_parent = true;
    size_t (*symbolize)(char *buf, size_t len, uintptr_t addr) = nullptr;
};
// The kernel's seq_print_ip_sym(): "func", "func+0x4/0x20" with sym-offset, then
// " <0000000000401136>" with sym-addr; "0" for address 0.
void print_ip_sym(std::string &out, uint64_t ip, const ftrace_print_flags &f);
// The text of one of these records (full ones) after the line prefix, without the newline:
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
