// Kernel ring-buffer pages (see raw_page.h; the kernel's kernel/trace/ring_buffer.c event
// encoding, ring_buffer_print_page_header() and ring_buffer_print_entry_header()).
#include "tracefs/raw_page.h"

#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

// The compressed event header's type_len values (RINGBUF_TYPE_*).
constexpr uint32_t TYPE_DATA_LEN_MAX = 28;
constexpr uint32_t TYPE_PADDING = 29;
constexpr uint32_t TYPE_TIME_EXTEND = 30;
constexpr uint32_t TYPE_TIME_STAMP = 31;
constexpr unsigned TS_SHIFT = 27;
constexpr uint64_t TS_MASK = (uint64_t{1} << TS_SHIFT) - 1;
constexpr size_t RB_MAX_SMALL_DATA = TYPE_DATA_LEN_MAX * 4;

void put64(std::string &page, size_t off, uint64_t v)
{
    std::memcpy(&page[off], &v, 8);
}

} // namespace

std::string ring_buffer_header_page()
{
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
                  "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
                  "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
                  "\tfield: char data;\toffset:%zu;\tsize:%zu;\tsigned:1;\n",
                  RB_PAGE_HDR, RB_PAGE_DATA);
    return buf;
}

std::string ring_buffer_header_event()
{
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "# compressed entry header\n"
                  "\ttype_len    :    5 bits\n"
                  "\ttime_delta  :   27 bits\n"
                  "\tarray       :   32 bits\n"
                  "\n"
                  "\tpadding     : type == %u\n"
                  "\ttime_extend : type == %u\n"
                  "\ttime_stamp : type == %u\n"
                  "\tdata max type_len  == %u\n",
                  TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP, TYPE_DATA_LEN_MAX);
    return buf;
}

// ---- kpage_writer -----------------------------------------------------------------------

void kpage_writer::start(uint64_t ts, uint64_t lost)
{
    cur_.assign(RB_PAGE_SIZE, '\0');
    put64(cur_, 0, ts);
    used_ = 0;
    last_ts_ = ts;
    missed_ = lost;
    open_ = true;
}

void kpage_writer::flush()
{
    if (!open_ || used_ == 0) return;
    uint64_t commit = used_;
    if (missed_) {
        // The count of events lost before this page goes right after its data when it fits.
        if (RB_PAGE_DATA - used_ >= sizeof(uint64_t)) {
            put64(cur_, RB_PAGE_HDR + used_, missed_);
            commit |= RB_MISSED_STORED;
        }
        commit |= RB_MISSED_EVENTS;
    }
    put64(cur_, 8, commit);
    pages.push_back(std::move(cur_));
    cur_.clear();
    open_ = false;
}

void kpage_writer::add(uint64_t ts, const void *payload, size_t len, uint64_t lost)
{
    // Data events: up to 112 bytes take type_len = len / 4; longer ones type_len 0 and a
    // length word. The length is rounded up to 4 bytes (RB_ALIGNMENT), the page's zeroes
    // padding the payload.
    const size_t plen = len;
    len = (len + 3) & ~size_t{3};
    const size_t ev = len <= RB_MAX_SMALL_DATA ? 4 + len : 8 + len;
    if (ev + 8 > RB_PAGE_DATA) // cannot fit in any page, even with a time extend
        return;
    if (lost && open_) flush(); // the page that follows a gap says so
    if (open_ && ts < last_ts_)
        ts = last_ts_; // merged from several threads: never step back within a page
    uint64_t delta = open_ ? ts - last_ts_ : 0;
    size_t need = ev + (delta > TS_MASK ? 8 : 0);
    if (open_ && used_ + need > RB_PAGE_DATA - (missed_ ? 8 : 0)) flush();
    if (!open_) {
        start(ts, lost);
        delta = 0;
    }
    char *p = &cur_[RB_PAGE_HDR + used_];
    if (delta > TS_MASK) {
        uint32_t h = TYPE_TIME_EXTEND | uint32_t((delta & TS_MASK) << 5);
        uint32_t hi = uint32_t(delta >> TS_SHIFT);
        std::memcpy(p, &h, 4);
        std::memcpy(p + 4, &hi, 4);
        p += 8;
        used_ += 8;
        delta = 0;
    }
    uint32_t h;
    if (len <= RB_MAX_SMALL_DATA) {
        h = uint32_t(len / 4) | uint32_t(delta << 5);
        std::memcpy(p, &h, 4);
        std::memcpy(p + 4, payload, plen);
    } else {
        h = uint32_t(delta << 5); // type_len 0
        uint32_t l = uint32_t(len + 4);
        std::memcpy(p, &h, 4);
        std::memcpy(p + 4, &l, 4);
        std::memcpy(p + 8, payload, plen);
    }
    used_ += ev;
    last_ts_ = ts;
}

} // namespace dprobe
