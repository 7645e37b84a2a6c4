// The text of the kernel's function profiler (trace_stat/function<N>, kernel/trace/ftrace.c
// function_stat_show): one line per function with its hit count, its time, the average and
// the variance s^2, largest time first. Shared by the live profiler (function_profile.cpp)
// and `dprobe report --format profile`, which computes the same sums from a recording.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dprobe
{

struct function_stat {
    std::string name;
    uint64_t hits = 0;
    uint64_t time = 0;    // ns, summed over the hits
    uint64_t time_sq = 0; // sum of each hit's time squared (ns^2), for s^2
};

// The file's text: the header, then ROWS sorted by time (largest first). Rows without hits,
// and (THRESH_NS > 0, the kernel's tracing_thresh) rows whose average is below it, are left
// out.
std::string function_stat_text(std::vector<function_stat> rows, uint64_t thresh_ns);

} // namespace dprobe
