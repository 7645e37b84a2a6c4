// The kernel's binary ring-buffer page (kernel/trace/ring_buffer.c), as the kernel's own
// tools read it (libtraceevent's kbuffer, libtracefs, trace-cmd): trace_pipe_raw serves
// such pages (raw_buffer.h) and `dprobe report -f trace-dat` writes them into trace.dat
// files. The format only, no buffer: part of the offline library.
//
// A page is the kernel's buffer_data_page: u64 timestamp, a long `commit` (bytes of data
// used, with RB_MISSED_EVENTS / RB_MISSED_STORED in its top bits), then 4080 bytes of
// events. Each event has the compressed header {type_len:5, time_delta:27} (and a length
// word for long events), time extends when a delta does not fit 27 bits, padding to the
// page's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dprobe
{

inline constexpr size_t RB_PAGE_SIZE = 4096; // BUF_PAGE_SIZE + header
inline constexpr size_t RB_PAGE_HDR = 16;    // timestamp + commit
inline constexpr size_t RB_PAGE_DATA = RB_PAGE_SIZE - RB_PAGE_HDR;
// Bits of the commit word: events were lost before this page; and their count is stored
// after the page's data.
inline constexpr uint64_t RB_MISSED_EVENTS = uint64_t{1} << 31;
inline constexpr uint64_t RB_MISSED_STORED = uint64_t{1} << 30;

// The events/header_page and events/header_event files: the page and event headers
// described in the format libtraceevent parses.
std::string ring_buffer_header_page();
std::string ring_buffer_header_event();

// Encodes records into kernel pages (one CPU's stream).
class kpage_writer
{
  public:
    // Appends one event of LEN payload bytes at time TS; LOST: events missed before it.
    void add(uint64_t ts, const void *payload, size_t len, uint64_t lost);
    // Finishes the page being filled (if it has events) so it can be taken.
    void flush();
    // Complete pages, oldest first.
    std::vector<std::string> pages;

  private:
    void start(uint64_t ts, uint64_t lost);
    std::string cur_;
    size_t used_ = 0; // data bytes in cur_
    uint64_t last_ts_ = 0;
    uint64_t missed_ = 0;
    bool open_ = false;
};

} // namespace dprobe
