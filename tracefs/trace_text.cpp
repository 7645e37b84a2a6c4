// The text of trace files that needs no buffer (see trace_text.h).
#include "tracefs/trace_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{

std::string trace_print_header(uint64_t entries, uint64_t written, int nr_cpus, const char *tracer)
{
    char line[128];
    std::string out = std::string("# tracer: ") + tracer + "\n#\n";
    snprintf(line, sizeof line,
             "# entries-in-buffer/entries-written: %" PRIu64 "/%" PRIu64 "   #P:%d\n", entries,
             written, nr_cpus);
    out += line;
    out += "#\n"
           "#                                _-----=> irqs-off/BH-disabled\n"
           "#                               / _----=> need-resched\n"
           "#                              | / _---=> hardirq/softirq\n"
           "#                              || / _--=> preempt-depth\n"
           "#                              ||| / _-=> migrate-disable\n"
           "#                              |||| /     delay\n"
           "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
           "#              | |         |   |||||     |         |\n";
    return out;
}

size_t trace_print_context(char *buf, size_t len, const char *comm, int32_t tid, unsigned cpu,
                           uint64_t ts, bool ts_in_ns)
{
    int n;
    if (ts_in_ns) {
        // The kernel rounds nanoseconds to the nearest microsecond (ns2usecs).
        uint64_t usecs = (ts + 500) / 1000;
        n = snprintf(buf, len, "%16s-%-7d [%03u] ..... %5" PRIu64 ".%06" PRIu64 ": ", comm, tid,
                     cpu, usecs / 1000000, usecs % 1000000);
    } else {
        n = snprintf(buf, len, "%16s-%-7d [%03u] ..... %12" PRIu64 ": ", comm, tid, cpu, ts);
    }
    return n < 0 ? 0 : static_cast<size_t>(n);
}

char trace_find_mark(uint64_t d)
{
    static const struct {
        uint64_t val;
        char sym;
    } marks[] = {{1000000000ULL, '$'}, {100000000ULL, '@'}, {10000000ULL, '*'},
                 {1000000ULL, '#'},    {100000ULL, '!'},    {10000ULL, '+'}};
    for (const auto &m : marks)
        if (d > m.val) return m.sym;
    return ' ';
}

void trace_print_graph_duration(std::string &out, uint64_t ns)
{
    const uint64_t usecs = ns / 1000, nsecs_rem = ns % 1000;
    std::string u = std::to_string(usecs);
    size_t len = u.size();
    out += u;
    // At most 7 digits in all: the nanoseconds fill what the microseconds leave.
    if (len < 7) {
        char ns_str[8];
        size_t slen = std::min<size_t>(5, 8 - len);
        std::snprintf(ns_str, slen, "%03" PRIu64, nsecs_rem);
        out += '.';
        out += ns_str;
        len += std::strlen(ns_str) + 1;
    }
    out += " us ";
    for (size_t i = len; i < 8; i++)
        out += ' ';
}

} // namespace dprobe
