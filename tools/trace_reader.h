// Reading a dprobe trace file (trace_file.h) in bounded memory, whatever its size: one pass
// over the chunk headers keeps the metadata (sessions, objects, event formats, stats) and
// where each thread's PAGES chunks are; the events are then read one chunk at a time, per
// thread (a cursor), or merged across threads in time order (a merge of cursors). The role
// of libtracecmd's input side (tracecmd_read_data over per-CPU streams).
#pragma once

#include "tools/trace_file.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dprobe::tracefile
{

struct object_info {
    std::string path;
    uint64_t load_bias = 0;
    bool unloaded = false;
    uint64_t ts = 0; // the change holds from this trace-clock time on (0: from the start)
};
struct event_info {
    uint32_t id = 0;
    std::string name;       // "group/event"
    std::string definition; // dynamic_events line ("" for built-in events)
    std::string format;
    uint32_t flags = 0; // EVENT_FL_*
};
struct thread_stats {
    int32_t tid = 0;
    uint64_t written = 0, dropped = 0, lost = 0, orphans = 0;
};
struct session {
    uint64_t id = 0;
    std::map<std::string, std::string> info;             // SESSION keys
    std::vector<object_info> objects;                    // in the order of the file
    std::vector<std::pair<uint64_t, std::string>> names; // "=" lines: address, function
    std::map<uint32_t, event_info> events;
    std::vector<thread_stats> stats;
    bool has_total = false;
    thread_stats total;
    std::map<std::string, std::string> end; // END keys; empty: the process did not finish
    // HIST chunks: "group/event" and its hist file at the session's end, in file order.
    std::vector<std::pair<std::string, std::string>> hists;
    std::string get(const std::string &key, const std::string &dflt = "") const;
    int32_t pid() const { return static_cast<int32_t>(id >> 32); }
};

// One event of a thread.
struct event {
    uint64_t ts;
    uint32_t cpu;
    int32_t tid;
    uint64_t lost_before; // events of this thread lost right before this one
    const void *payload;  // valid until the cursor moves
    uint32_t len;
};

// Where one thread's events are: its PAGES chunks, in file order.
struct thread_stream {
    size_t session;
    int32_t tid;
    std::string comm;
    std::vector<std::pair<uint64_t, uint32_t>> chunks; // offset of the payload, its length
    uint64_t first_ts = 0;                             // time stamp of its first page
};

class trace_reader
{
  public:
    // Scans PATH. False with *err when it cannot be opened or is not a dprobe trace file; a
    // damaged tail only sets warning.
    bool open(const std::string &path, std::string *err);
    ~trace_reader();

    std::vector<session> sessions;
    std::vector<thread_stream> streams; // in order of first appearance
    std::string warning;
    uint32_t version = 0;
    uint64_t created_realtime_ns = 0;
    uint64_t bytes = 0;

    // The events of streams[I] in order, one chunk in memory at a time. A graph record with
    // values (EVENT_FL_GRAPH_VALUES) comes out as its two records, with its time stamp: the
    // compact graph record, then the probe record of the values.
    class cursor
    {
      public:
        cursor(const trace_reader &r, size_t stream);
        bool next(event &e);
        // A chunk that failed its checksum stops the stream: why, or "".
        const std::string &error() const { return error_; }

      private:
        bool load_chunk();
        // When E is a graph record with values: E becomes its graph record, its values wait.
        bool split(event &e);
        const trace_reader &r_;
        const thread_stream &s_;
        size_t chunk_ = 0;
        std::vector<char> buf_;
        size_t pos_ = 0; // next page header in buf_
        size_t pages_left_ = 0;
        // the page being walked
        const char *page_ = nullptr;
        uint32_t off_ = 0, len_ = 0;
        uint64_t ts_ = 0, lost_ = 0;
        uint32_t cpu_ = 0;
        bool in_page_ = false;
        std::string error_;
        // The ids of the session's graph records with values (from GRAPH_ARGS_FIRST_ID on);
        // the two records of the last one read, the second still to hand out when PENDING_.
        std::vector<bool> graph_values_;
        ftrace_graph_compact graph_part_{};
        std::vector<uint8_t> values_part_;
        bool pending_ = false;
        event pending_event_{};
    };

    // Every stream's events merged by time stamp (ties: stream order).
    class merged
    {
      public:
        explicit merged(const trace_reader &r);
        // The next event and the stream it is from.
        bool next(event &e, size_t &stream);

      private:
        std::vector<std::unique_ptr<cursor>> cur_;
        std::vector<event> head_;
        std::vector<bool> has_;
        std::vector<size_t> heap_;
        long pending_ = -1; // the stream whose event was handed out last: moved on next time
        void push(size_t i);
    };

  private:
    friend class cursor;
    int fd_ = -1;
};

// The session's OBJECTS lines.
void parse_objects(session &s, std::string_view text);

} // namespace dprobe::tracefile
