// The three renderings of `dprobe report`.
#pragma once

#include "tools/dprobe/report_model.h"

#include <string>
#include <vector>

namespace dprobe::report {

struct report_opts {
    std::string input = "dprobe.dat";
    std::string format = "text";
    std::string output;
    std::vector<int> tids;
    bool no_header = false;
    bool no_events = false;
    bool wants(int32_t tid) const;
};

std::string format_text(const model &m, const report_opts &o);
std::string format_graph(const model &m, const report_opts &o);
std::string format_chrome(const model &m, const report_opts &o);

} // namespace dprobe::report
