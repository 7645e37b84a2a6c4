// trace_stat/function<N> text (see function_stat.h).
#include "tracefs/function_stat.h"

#include "tracefs/trace_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace dprobe
{

std::string function_stat_text(std::vector<function_stat> rows, uint64_t thresh_ns)
{
    std::string out = "  Function                               Hit    Time            Avg"
                      "             s^2\n"
                      "  --------                               ---    ----            ---"
                      "             ---\n";
    // The kernel's stat files sort by time, largest first.
    std::stable_sort(rows.begin(), rows.end(), [](const function_stat &a, const function_stat &b) {
        return a.time > b.time;
    });
    char line[256];
    for (const function_stat &s : rows) {
        if (!s.hits) continue;
        const uint64_t avg = s.time / s.hits;
        if (thresh_ns && avg < thresh_ns) continue;
        std::snprintf(line, sizeof line, "  %-30.30s  %10" PRIu64 "    ", s.name.c_str(), s.hits);
        out += line;
        // s^2 = (n * sum(x^2) - sum(x)^2) / (n * (n - 1)), in us^2 (ns^2 / 1000 here, the
        // duration printer divides by 1000 again).
        unsigned __int128 var = 0;
        const unsigned __int128 denom = (unsigned __int128)s.hits * (s.hits - 1) * 1000;
        if (denom) {
            unsigned __int128 a = (unsigned __int128)s.hits * s.time_sq;
            unsigned __int128 b = (unsigned __int128)s.time * s.time;
            var = a > b ? (a - b) / denom : 0;
        }
        trace_print_graph_duration(out, s.time);
        out += "    ";
        trace_print_graph_duration(out, avg);
        out += "    ";
        trace_print_graph_duration(out, uint64_t(var));
        out += '\n';
    }
    return out;
}

} // namespace dprobe
