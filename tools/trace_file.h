// The dprobe trace file (`dprobe record` and `dprobe attach` write it, `dprobe report` reads
// it; tools/trace_reader.h is the reader). The role of trace-cmd's trace.dat: metadata, then
// the ring buffer's own pages, copied as they are.
//
// Layout: a 32-byte file header, then chunks appended one write() each:
//
//   file header  "DPROBE\x01\n" magic, u32 version (2), u32 header size, u64 created
//                (realtime ns), u64 reserved
//   chunk        u32 type, u32 CRC-32C of the payload, u64 session, u32 payload length,
//                u32 reserved, payload (padded to 8 bytes; the padding is not in the length)
//
// A session is one process image: the program, a forked child, or the image after an exec.
// Each session's chunks carry its id ((pid << 32) | a stamp), so processes sharing the file
// (O_APPEND, one write per chunk) interleave at chunk granularity and stay apart.
//
// Chunk types:
//   SESSION  text "key=value" lines: pid ppid comm exe argv clock clock_in_ns tsc_khz
//            start_realtime_ns start_clock_ns nr_cpus reason (start, fork, exec, attach)
//   OBJECTS  text lines "+ 0x<load bias> <path>" (loaded) or "- 0x<bias> <path>" (unloaded),
//            after an optional first line "@ <ts>": the trace-clock time from which the
//            change holds (none: from the start). What report needs to symbolize addresses
//            offline, also when a library is unloaded and another loaded at its address.
//            Lines "= 0x<address> <name>": a function's name at an address no symbol
//            table has (the implementation an IFUNC symbol resolved to, under its name).
//   EVENT    u32 id, u32 flags (EVENT_FL_*), then NUL-terminated strings: "group/event",
//            the definition (a dynamic_events line, or "" for built-in events), the `format`
//            file text
//   PAGES    ring-buffer pages of one thread's buffer, in order: pages_header, then for
//            each page a page_header and its bytes [off, len) padded to 8 (the events, as
//            core/ring_buffer_layout.h lays them out)
//   STATS    text lines "tid=<tid> written=<n> dropped=<n> lost=<n>" per thread buffer,
//            then "total written=<n> dropped=<n> lost=<n> orphans=<n>"
//   END      text "reason=exit|signal|exec|killed|detach" lines, "status=" / "signal="
//   HIST     text: "group/event" on the first line, then that event's `hist` file as the
//            session left it (the --trigger hist:... histograms, written at its end)
//
// Crash safety: a chunk is written with one write() once complete; a torn last chunk fails
// its length or CRC check and is dropped by the reader with a warning.
#pragma once

#include "tracefs/ftrace_entries.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe::tracefile
{

inline constexpr char k_magic[8] = {'D', 'P', 'R', 'O', 'B', 'E', '\x01', '\n'};
inline constexpr uint32_t k_version = 2;
inline constexpr size_t k_file_header_size = 32;
inline constexpr size_t k_chunk_header_size = 24;
inline constexpr uint32_t k_max_chunk = 64u << 20;

enum chunk_type : uint32_t {
    CHUNK_SESSION = 1,
    CHUNK_OBJECTS = 2,
    CHUNK_EVENT = 3,
    CHUNK_COMM = 4,    // version 1 only
    CHUNK_RECORDS = 5, // version 1 only
    CHUNK_STATS = 6,
    CHUNK_END = 7,
    CHUNK_PAGES = 8,
    CHUNK_HIST = 9,
};

struct chunk_header {
    uint32_t type;
    uint32_t crc;
    uint64_t session;
    uint32_t len;
    uint32_t reserved;
};
static_assert(sizeof(chunk_header) == k_chunk_header_size);

// ---- PAGES ----
struct pages_header {
    int32_t tid;
    uint32_t npages;
    char comm[16];
    uint64_t reserved;
};
static_assert(sizeof(pages_header) == 32);
struct page_header {
    uint64_t seq;   // the page's number in its buffer
    uint64_t index; // index of the first event in [off, len)
    uint64_t ts;    // time stamp at off (the page's own when off is 0)
    uint64_t lost;  // events overwritten right before it
    uint32_t cpu;   // CPU at off
    uint32_t off, len;
    uint32_t reserved;
};
static_assert(sizeof(page_header) == 48);

// ---- function-graph events (the kernel's ftrace/funcgraph_entry and funcgraph_exit) ----
// Small ring-buffer events: 4 bytes of header and these 12 bytes, 16 in all (the kernel's
// carry the common fields, a pid, and the call time in the exit: per-thread buffers make the
// pid redundant, and a call's time is its entry's). The time stamp of the event is the
// call's (entry) or the return's (exit). They are ftrace's compact records
// (tracefs/ftrace_entries.h), which every reader tells from the full ones the tracefs tree's
// tracers write with the same ids by their length.
inline constexpr uint16_t FUNCGRAPH_EXIT_ID = TRACE_GRAPH_RET;  // 10
inline constexpr uint16_t FUNCGRAPH_ENTRY_ID = TRACE_GRAPH_ENT; // 11
using funcgraph_rec = ftrace_graph_compact;
inline constexpr uint16_t FUNCGRAPH_DEPTH_MAX = FTRACE_GRAPH_DEPTH_MAX;
// funcgraph_exit: the call did not return, it was unwound (longjmp, a C++ exception, thread
// exit); the exit's time is when dprobe noticed (the catch, the next hit).
inline constexpr uint16_t FUNCGRAPH_FL_UNWOUND = FTRACE_GRAPH_FL_UNWOUND;
// The events/ftrace/funcgraph_{entry,exit}/format texts for these events.
std::string funcgraph_entry_format();
std::string funcgraph_exit_format();

// ---- function events (the kernel's ftrace/function: `record -p function`) ----
// A call of a traced function: where, and the return address it was called with. 4 bytes
// of header and these 20 (the kernel's carries the common fields too): ftrace's compact
// function record.
inline constexpr uint16_t FUNCTION_ID = TRACE_FN; // 1
using function_rec = ftrace_fn_compact;
std::string function_format();

// ---- arguments and return values in the graph (record -a, -A, -R) ----
// A function's arguments and its return value are described as probe events
// (tracefs/event_format.h) of the group graph_args, "args<N>" or "retval<N>", one per
// distinct layout, with ids in [GRAPH_ARGS_FIRST_ID, GRAPH_ARGS_LAST_ID]: below the dynamic
// events' first id, above ftrace's record types. Their EVENT chunks say EVENT_FL_GRAPH_VALUES:
// the records are graph records with values (tracefs/ftrace_entries.h,
// ftrace_graph_values_compact), a call's funcgraph_entry with its arguments or its
// funcgraph_exit with its return value in one record, which the reader's cursor hands out as
// the two records they stand for: the compact graph record, then the probe record of the
// values (ftrace_graph_values_split). An EVENT without the flag (an older file) has its
// probe records written as they are, right after their graph records.
inline constexpr uint16_t GRAPH_ARGS_FIRST_ID = FTRACE_GRAPH_VALUES_FIRST_ID;
inline constexpr uint16_t GRAPH_ARGS_LAST_ID = FTRACE_GRAPH_VALUES_LAST_ID;
inline constexpr const char *GRAPH_ARGS_GROUP = "graph_args";
// EVENT flags.
inline constexpr uint32_t EVENT_FL_GRAPH_VALUES = 1;

// ---- writing ----

// The file header bytes.
std::string file_header(uint64_t created_realtime_ns);
// One whole chunk (header, payload, padding), ready for a single write().
std::string make_chunk(chunk_type type, uint64_t session, std::string_view payload);
// An EVENT payload.
std::string event_payload(uint32_t id, std::string_view name, std::string_view definition,
                          std::string_view format, uint32_t flags = 0);
// "key=value\n" with newlines and backslashes in value escaped.
void append_kv(std::string &out, std::string_view key, std::string_view value);
// key=value lines (as append_kv writes them) back to a map.
std::map<std::string, std::string> parse_kv(std::string_view text);

// A PAGES chunk assembled from pieces that stay where they are (the pages are written
// straight from the consumer's copy), for one writev().
class pages_chunk
{
  public:
    pages_chunk(uint64_t session, int32_t tid, const char *comm);
    // DATA: the page's bytes; [off, len) are written.
    void add(const page_header &h, const char *data);
    size_t pages() const { return heads_.size(); }
    size_t bytes() const { return payload_len_ + k_chunk_header_size; }
    // Writes the chunk with one writev. False when the write failed.
    bool write(int fd);

  private:
    chunk_header ch_{};
    pages_header ph_{};
    std::vector<page_header> heads_;
    std::vector<const char *> datas_;
    uint32_t crc_ = 0;
    size_t payload_len_ = sizeof(pages_header);
};

// Writes all of DATA to FD (retrying short writes and EINTR). Async-signal-safe.
bool write_all(int fd, const void *data, size_t len) noexcept;

} // namespace dprobe::tracefile
