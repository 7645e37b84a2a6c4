// The kernel's binary ring-buffer format for the kernel's own tools (libtraceevent's kbuffer,
// libtracefs, trace-cmd): per_cpu/cpuN/trace_pipe_raw, events/header_page and
// events/header_event.
//
// A page is the kernel's buffer_data_page: u64 timestamp, a long `commit` (bytes of data
// used, with RB_MISSED_EVENTS / RB_MISSED_STORED in its top bits), then 4080 bytes of
// events. Each event has the compressed header {type_len:5, time_delta:27} (and a length
// word for long events), time extends when a delta does not fit 27 bits, padding to the
// page's end. Reads return whole 4096-byte pages (as many as the read asks for and are
// ready), as the kernel's trace_pipe_raw does.
//
// CPUs, not threads: dprobe's buffers are per thread, while libtracefs and trace-cmd open
// per_cpu/cpu0 .. cpuN-1 for N configured CPUs. Every record carries the CPU it was written
// on, so per_cpu/cpuN has exactly the records written on CPU N, in time order. Reading any of
// them consumes the array's buffer (like trace_pipe) and sorts the records into per-CPU page
// queues; a queue holds at most buffer_size_kb, beyond which its oldest pages are dropped
// and the next page says how many events were missed, as an overwritten kernel page would.
#pragma once

#include "tracefs/tracefs_tree.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dprobe
{

class trace_array;

inline constexpr size_t RB_PAGE_SIZE = 4096; // BUF_PAGE_SIZE + header
inline constexpr size_t RB_PAGE_HDR = 16;    // timestamp + commit
inline constexpr size_t RB_PAGE_DATA = RB_PAGE_SIZE - RB_PAGE_HDR;

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

// per_cpu/cpuN/trace_pipe_raw of TR.
std::unique_ptr<tracefs_file> raw_pipe_open(std::shared_ptr<trace_array> tr, unsigned cpu);
// per_cpu/cpuN/stats of TR.
std::string per_cpu_stats(trace_array &tr, unsigned cpu);

} // namespace dprobe
