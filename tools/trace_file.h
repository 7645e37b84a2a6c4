// The dprobe trace file (`dprobe record` writes it, `dprobe report` reads it).
//
// Layout: a 32-byte file header, then chunks appended one write() each:
//
//   file header  "DPROBE\x01\n" magic, u32 version, u32 header size, u64 created (realtime ns),
//                u64 reserved
//   chunk        u32 type, u32 crc32 of the payload, u64 session, u32 payload length,
//                u32 reserved, payload (padded to 8 bytes; the padding is not in the length)
//
// A session is one process image: the program, a forked child, or the image after an exec.
// Each session's chunks carry its id ((pid << 32) | exec number), so processes sharing the
// file (O_APPEND, one write per chunk) interleave at chunk granularity and stay apart.
//
// Chunk types:
//   SESSION  text "key=value" lines: pid ppid comm exe argv clock clock_in_ns tsc_khz
//            start_realtime_ns start_clock_ns nr_cpus reason (start, fork, exec)
//   OBJECTS  text lines "+ 0x<load bias> <path>" (loaded) or "- 0x<bias> <path>" (unloaded):
//            what report needs to symbolize addresses offline
//   EVENT    u32 id, u32 0, then NUL-terminated strings: "group/event", the definition
//            (a dynamic_events line, or "" for built-in events), the `format` file text
//   COMM     text lines "<tid> <comm>"
//   RECORDS  raw ring-buffer records: {u64 ts, s32 tid, u16 cpu, u8 flags, u8 0,
//            u32 payload length, u32 0, u64 lost_before} + payload padded to 8 bytes
//   STATS    text lines "tid=<tid> entries= written= read= overrun= dropped=" per thread
//            buffer, then "total ..." for the whole process
//   END      text "reason=exit|signal|exec" lines, "status=" / "signal="
//
// Crash safety: a chunk is written with one write() once complete, so a crash loses the
// records not yet drained into a chunk; a torn last chunk fails its length or CRC check and
// is dropped by the reader with a warning.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe::tracefile {

inline constexpr char k_magic[8] = {'D', 'P', 'R', 'O', 'B', 'E', '\x01', '\n'};
inline constexpr uint32_t k_version = 1;
inline constexpr size_t k_file_header_size = 32;
inline constexpr size_t k_chunk_header_size = 24;
inline constexpr uint32_t k_max_chunk = 64u << 20;

enum chunk_type : uint32_t {
    CHUNK_SESSION = 1,
    CHUNK_OBJECTS = 2,
    CHUNK_EVENT = 3,
    CHUNK_COMM = 4,
    CHUNK_RECORDS = 5,
    CHUNK_STATS = 6,
    CHUNK_END = 7,
};

struct record_header {
    uint64_t ts;
    int32_t tid;
    uint16_t cpu;
    uint8_t flags;
    uint8_t zero;
    uint32_t len;
    uint32_t zero2;
    uint64_t lost_before;
};
static_assert(sizeof(record_header) == 32);

// ---- function-graph records (the kernel's ftrace/funcgraph_entry and funcgraph_exit) ----
inline constexpr uint16_t FUNCGRAPH_EXIT_ID = 10;  // the kernel's TRACE_GRAPH_RET
inline constexpr uint16_t FUNCGRAPH_ENTRY_ID = 11; // the kernel's TRACE_GRAPH_ENT
struct funcgraph_entry_rec {
    uint16_t type;
    uint8_t flags, preempt_count;
    int32_t pid;
    uint64_t func;
    int32_t depth;
    uint32_t pad;
};
struct funcgraph_exit_rec {
    uint16_t type;
    uint8_t flags, preempt_count;
    int32_t pid;
    uint64_t func;
    int32_t depth;
    uint32_t overrun;
    uint64_t calltime;
    uint64_t rettime;
};
static_assert(sizeof(funcgraph_entry_rec) == 24 && sizeof(funcgraph_exit_rec) == 40);
// funcgraph_exit_rec::flags: the call did not return, it was unwound (longjmp, a C++
// exception, thread exit); rettime is when dprobe noticed (the catch, the next hit).
inline constexpr uint8_t FUNCGRAPH_FL_UNWOUND = 0x01;
// The events/ftrace/funcgraph_{entry,exit}/format texts for these records.
std::string funcgraph_entry_format();
std::string funcgraph_exit_format();

// ---- writing ----

// The file header bytes.
std::string file_header(uint64_t created_realtime_ns);
// One whole chunk (header, payload, padding), ready for a single write().
std::string make_chunk(chunk_type type, uint64_t session, std::string_view payload);
// Appends one record to a RECORDS payload.
void append_record(std::string &payload, uint64_t ts, int32_t tid, uint16_t cpu, uint8_t flags,
                   uint64_t lost_before, const void *data, uint32_t len);
// An EVENT payload.
std::string event_payload(uint32_t id, std::string_view name, std::string_view definition,
                          std::string_view format);
// "key=value\n" with newlines and backslashes in value escaped.
void append_kv(std::string &out, std::string_view key, std::string_view value);

// Writes all of DATA to FD (retrying short writes and EINTR). Async-signal-safe.
bool write_all(int fd, const void *data, size_t len) noexcept;

// ---- reading ----

struct object_info {
    std::string path;
    uint64_t load_bias = 0;
    bool unloaded = false;
};
struct event_info {
    uint32_t id = 0;
    std::string name;       // "group/event"
    std::string definition; // dynamic_events line ("" for built-in events)
    std::string format;
};
struct record {
    uint64_t ts;
    int32_t tid;
    uint16_t cpu;
    uint8_t flags;
    uint64_t lost_before;
    std::string data; // payload
};
struct thread_stats {
    int32_t tid = 0;
    uint64_t entries = 0, written = 0, read = 0, overrun = 0, dropped = 0;
};
struct session {
    uint64_t id = 0;
    std::map<std::string, std::string> info; // SESSION keys
    std::vector<object_info> objects;
    std::map<uint32_t, event_info> events;
    std::map<int32_t, std::string> comms;
    std::vector<record> records;
    std::vector<thread_stats> stats;
    bool has_total = false;
    thread_stats total;
    std::map<std::string, std::string> end; // END keys; empty: the process did not finish
    std::string get(const std::string &key, const std::string &dflt = "") const;
    int32_t pid() const { return static_cast<int32_t>(id >> 32); }
};
struct trace_data {
    uint32_t version = 0;
    uint64_t created_realtime_ns = 0;
    std::vector<session> sessions; // in order of first appearance
    std::string warning;           // e.g. a torn tail that was dropped
    uint64_t bytes = 0;
};

// Reads a whole trace file. Returns false and sets *err when the file cannot be opened or
// is not a dprobe trace file; a damaged tail only sets data.warning.
bool read_trace(const std::string &path, trace_data &data, std::string *err);
// The same over bytes in memory.
bool parse_trace(std::string_view bytes, trace_data &data, std::string *err);

// key=value lines (as append_kv writes them) back to a map.
std::map<std::string, std::string> parse_kv(std::string_view text);

} // namespace dprobe::tracefile
