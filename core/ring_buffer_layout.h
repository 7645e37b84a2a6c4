// The ring buffer's memory layout, shared by the writers (the traced process), its
// in-process readers, `dprobe record` (which maps the buffers of the processes it records)
// and the trace file reader (which reads pages copied from them). The kernel's
// include/linux/ring_buffer.h and kernel/trace/ring_buffer.c are the model: pages of events
// with 4-byte headers holding a type/length and a time delta, a time stamp per page.
//
// Event header: one u32, {type_len:5, time_delta:27}, then array[]:
//   type_len 1..28  data event of type_len * 4 bytes at array[0]   (small: graph records)
//   type_len 0      data event of array[0] bytes at array[1]       (8-aligned payload)
//   29 PADDING      array[0] = the event's whole length: a reserved event given back
//   30 TIME_EXTEND  the next event's delta is array[0] << 27 | time_delta, its own is 0
//   31 INFO         array[0] = kind << 24 | value: CPU (the writer moved: value is the CPU
//                   of the events that follow) or LOST (value events dropped right here,
//                   the buffer being full in discard mode). The kernel's 31 is an absolute
//                   time stamp; its buffers are per CPU and need no CPU record.
// Every event is a multiple of 8 bytes and starts 8-aligned. time_delta is relative to the
// previous event of the page, the first one's to the page's time stamp. Data events and
// padding take an index (the count of events ever placed in the buffer), so a reader that
// was lapped in overwrite mode knows how many it lost; TIME_EXTEND and INFO do not.
//
// A buffer's mapping: one page of buffer_ctl, npages data pages, then npages page_meta.
// An exported set of buffers (an arena: one memfd per process) starts with an arena_header
// whose slot table gives each buffer's offset in the file.
//
// Invariant: only the owning thread (and its signal handlers) writes the writer fields and
// the pages; a consumer writes read_pos (and, in an arena, recycles exited buffers).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dprobe::rb
{

inline constexpr size_t k_page_size = 4096; // data bytes of a page

inline constexpr uint32_t k_type_data_len = 0;
inline constexpr uint32_t k_type_data_max = 28;
inline constexpr uint32_t k_type_padding = 29;
inline constexpr uint32_t k_type_time_extend = 30;
inline constexpr uint32_t k_type_info = 31;
inline constexpr unsigned k_delta_bits = 27;
inline constexpr uint32_t k_delta_max = (1u << k_delta_bits) - 1;
inline constexpr size_t k_small_max = k_type_data_max * 4; // largest small payload

enum info_kind : uint32_t { INFO_CPU = 1, INFO_LOST = 2 };
inline constexpr uint32_t k_info_value_max = (1u << 24) - 1;

inline constexpr uint32_t event_header(uint32_t type_len, uint32_t delta)
{
    return type_len | (delta << 5);
}
inline constexpr uint32_t event_type_len(uint32_t h)
{
    return h & 31;
}
inline constexpr uint32_t event_delta(uint32_t h)
{
    return h >> 5;
}

// Bytes a data event of LEN payload bytes takes, and whether it is the small form.
inline constexpr bool small_event(size_t len)
{
    return len > 0 && len <= k_small_max && !(len & 3);
}
inline constexpr uint32_t data_event_size(size_t len)
{
    return static_cast<uint32_t>(small_event(len) ? (4 + len + 7) & ~size_t{7}
                                                  : (8 + len + 7) & ~size_t{7});
}

// Buffer states (buffer_ctl::state). EXITING: its thread ran its last key destructor, but
// may still write on its way out (the C library's own clean-up, probed); a reader that finds
// its tid gone treats it as EXITED.
enum buf_state : int { BUF_FREE, BUF_INIT, BUF_OWNED, BUF_EXITED, BUF_EXITING };

struct page_meta {
    std::atomic<uint64_t> seq;  // which page of the stream the slot holds now (seqlock)
    std::atomic<uint64_t> base; // index of its first event
    std::atomic<uint64_t> ts;   // its time stamp
    std::atomic<uint32_t> end;  // bytes used; final once the writer moved on
    std::atomic<uint32_t> cpu;  // the CPU its first event was written on
};
static_assert(sizeof(page_meta) == 32);

inline constexpr uint64_t k_no_seq = ~0ull;
// A position packs (page sequence, offset) in one word, so the writer publishes its commit
// point with a single store.
inline constexpr unsigned k_off_bits = 13; // offsets 0..4096 inclusive
static_assert(k_page_size < (1u << k_off_bits));
inline constexpr uint64_t make_pos(uint64_t seq, uint64_t off)
{
    return (seq << k_off_bits) | off;
}
inline constexpr uint64_t pos_seq(uint64_t pos)
{
    return pos >> k_off_bits;
}
inline constexpr uint32_t pos_off(uint64_t pos)
{
    return static_cast<uint32_t>(pos & ((1u << k_off_bits) - 1));
}

inline constexpr uint32_t k_ctl_magic = 0x64726231; // "drb1"

// The first page of a buffer's mapping.
struct buffer_ctl {
    uint32_t magic;
    uint32_t npages;
    std::atomic<int> state;
    std::atomic<int32_t> tid;
    std::atomic<uint64_t> comm[2]; // thread name, 16 bytes
    // Bumped each time the buffer is (re)initialised for a thread: a consumer that sees it
    // change starts again from the beginning.
    std::atomic<uint64_t> generation;
    // The owning process's own view of the mapping (a consumer in another process ignores
    // these): where the data pages and their meta are.
    char *data;
    page_meta *meta;

    // Writer (owning thread and its signal handlers).
    alignas(64) std::atomic<uint64_t> head_pos;
    std::atomic<uint64_t> placed;      // events given an index
    std::atomic<uint64_t> pending_seq; // page of the outermost uncommitted event
    std::atomic<uint32_t> nest;
    std::atomic<uint32_t> claiming;
    uint64_t written;      // events committed (one-instruction increments: local_t)
    uint64_t dropped;      // events not written: full (discard mode), nested too deep, too big
    uint64_t last_ts;      // time of the last event placed
    uint32_t cpu;          // CPU of the last event placed
    uint32_t lost_pending; // dropped since the last event placed: an INFO LOST goes first
    // The owning process's address of head_pos's page (data + seq % npages pages), set with
    // head_pos when it moves to another page: a write computes no division.
    char *head_page;

    alignas(64) std::atomic<uint64_t> commit_pos;
    // The consumer's position (the writer reads it in discard mode, when it needs a page).
    alignas(64) std::atomic<uint64_t> read_pos;
};
static_assert(sizeof(buffer_ctl) <= k_page_size);

inline size_t buffer_map_size(uint32_t npages)
{
    size_t len = k_page_size + npages * (k_page_size + sizeof(page_meta));
    return (len + k_page_size - 1) & ~(k_page_size - 1);
}
inline char *buffer_data(void *map)
{
    return static_cast<char *>(map) + k_page_size;
}
inline page_meta *buffer_meta(void *map, uint32_t npages)
{
    return reinterpret_cast<page_meta *>(buffer_data(map) + size_t{npages} * k_page_size);
}

// ---- an exported arena (one process's buffers in one memfd) ----

inline constexpr char k_arena_magic[8] = {'D', 'P', 'R', 'B', 'U', 'F', '\x01', '\n'};
inline constexpr uint32_t k_arena_version = 3;
inline constexpr uint32_t k_arena_slots = 8192;

// The process's state, for the consumer (arena_header::state).
enum arena_state : uint32_t {
    ARENA_RUNNING = 0,
    ARENA_EXITED = 1,   // exit()/_exit() called: status holds the exit status
    ARENA_SIGNALED = 2, // a fatal signal: status holds its number
    ARENA_EXEC = 3,     // execve() under way: a new image follows (the call may still fail)
};

struct arena_header {
    char magic[8];
    uint32_t version;
    uint32_t page_size;
    uint32_t ctl_size;
    uint32_t meta_size;
    uint32_t max_slots;
    int32_t pid;
    uint64_t clock_id;            // trace_clock_id of the stamps
    std::atomic<uint32_t> nslots; // slots handed out (their offsets may lag)
    std::atomic<uint32_t> state;  // arena_state
    std::atomic<int32_t> status;
    std::atomic<uint32_t> consumer_waiting; // the consumer sleeps until woken (wake_fd)
    // Discard mode, a consumer that keeps up (`dprobe record`): a writer that finds its
    // buffer full wakes the consumer and waits for room (a bounded time) rather than drop.
    std::atomic<uint32_t> consumer_blocking; // set by the consumer while it drains
    std::atomic<uint32_t> progress;          // bumped by each consumer pass (a futex word)
    std::atomic<uint32_t> writers_waiting;   // a writer waits on progress: wake it
    uint32_t pad0;
    std::atomic<uint64_t> file_end;                   // bytes of the file handed out to buffers
    std::atomic<uint64_t> orphan_dropped;             // events dropped with no buffer to count them
    std::atomic<uint64_t> slot_offset[k_arena_slots]; // 0: not published yet
};

inline constexpr size_t arena_header_size()
{
    return (sizeof(arena_header) + k_page_size - 1) & ~(k_page_size - 1);
}

// ---- decoding ----

// One decoded event of a page.
struct event {
    enum kind_t { DATA, PADDING, LOST } kind;
    uint64_t ts;
    uint32_t cpu;
    const void *payload; // DATA
    uint32_t len;        // DATA: payload bytes
    uint32_t size;       // bytes the event (and any TIME_EXTEND/CPU before it) took
    uint64_t lost;       // LOST: events dropped here
};

// Walks the events of one page's bytes [off, len), from the running time stamp TS and CPU
// at OFF (the page's own at offset 0). Stops (false) at the end or at a malformed event.
struct page_walker {
    const char *data;
    uint32_t len;
    uint32_t off;
    uint64_t ts;
    uint32_t cpu;
    bool bad = false;

    bool next(event &e) noexcept
    {
        const uint32_t start = off;
        while (off + 4 <= len) {
            uint32_t h;
            std::memcpy(&h, data + off, 4);
            const uint32_t tl = event_type_len(h);
            uint32_t arg = 0;
            if (tl > k_type_data_max || tl == k_type_data_len) {
                if (off + 8 > len) break;
                std::memcpy(&arg, data + off + 4, 4);
            }
            if (tl == k_type_time_extend) {
                ts += (uint64_t{arg} << k_delta_bits) | event_delta(h);
                off += 8;
                continue;
            }
            ts += event_delta(h);
            if (tl == k_type_info) {
                off += 8;
                const uint32_t kind = arg >> 24, value = arg & k_info_value_max;
                if (kind == INFO_CPU) {
                    cpu = value;
                    continue;
                }
                if (kind == INFO_LOST) {
                    e = {event::LOST, ts, cpu, nullptr, 0, off - start, value};
                    return true;
                }
                continue; // an unknown kind from a newer writer
            }
            uint32_t size, plen;
            const char *payload;
            if (tl == k_type_padding) {
                size = arg;
                if (size < 8 || (size & 7) || off + size > len) break;
                off += size;
                e = {event::PADDING, ts, cpu, nullptr, 0, off - start, 0};
                return true;
            }
            if (tl == k_type_data_len) {
                plen = arg;
                size = static_cast<uint32_t>((8 + size_t{plen} + 7) & ~size_t{7});
                payload = data + off + 8;
            } else {
                plen = tl * 4;
                size = (4 + plen + 7) & ~7u;
                payload = data + off + 4;
            }
            if (off + size > len) break;
            off += size;
            e = {event::DATA, ts, cpu, payload, plen, off - start, 0};
            return true;
        }
        bad = off < len;
        return false;
    }
};

} // namespace dprobe::rb
