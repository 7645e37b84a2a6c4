// Helpers of the tests of the in-process tree (tests/tracefs, tests/pending, tests/sdt):
// reading and writing its files, searching text, regular expressions, and putting the tree
// back to its defaults. One set for every test: a test that needs another helper adds it
// here.
#pragma once

#include "core/ring_buffer.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include <gtest/gtest.h>

#include <regex.h>

#include <string>
#include <vector>

namespace ftt
{

inline dprobe::tracefs_tree &T = dprobe::tracefs_tree::instance();

inline std::string rd(const std::string &path)
{
    std::string s;
    int r = T.read_file(path, s);
    EXPECT_EQ(r, 0) << path;
    return s;
}

// echo DATA >> PATH (TRUNC: echo DATA > PATH), with echo's newline. 0 or -errno. (Like the
// kernel's parser, the filter files take a last token without white space only when the file
// is closed, where an error can no longer be reported.)
inline int wr(const std::string &path, const std::string &data, bool trunc = false)
{
    return T.write_file(path, data.empty() || data.back() == '\n' ? data : data + "\n", trunc);
}

inline bool has(const std::string &hay, const std::string &needle)
{
    return hay.find(needle) != std::string::npos;
}

// How many times NEEDLE occurs in HAY (overlapping occurrences count).
inline size_t count(const std::string &hay, const std::string &needle)
{
    size_t n = 0;
    for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1))
        n++;
    return n;
}

inline std::vector<std::string> lines(const std::string &s)
{
    std::vector<std::string> v;
    size_t i = 0;
    while (i < s.size()) {
        size_t nl = s.find('\n', i);
        v.push_back(s.substr(i, nl - i));
        i = nl == std::string::npos ? s.size() : nl + 1;
    }
    return v;
}

// Event lines of the buffer, consumed.
inline std::vector<std::string> pipe_lines()
{
    return lines(rd("trace_pipe"));
}

// The lines of a trace without the '#' header.
inline std::vector<std::string> body(const std::string &s)
{
    std::vector<std::string> v;
    for (auto &l : lines(s))
        if (!l.empty() && l[0] != '#') v.push_back(l);
    return v;
}

// POSIX extended regular expression search; GROUPS receives the submatches.
inline bool matches(const std::string &s, const std::string &re,
                    std::vector<std::string> *groups = nullptr)
{
    regex_t rx;
    if (regcomp(&rx, re.c_str(), REG_EXTENDED)) {
        ADD_FAILURE() << "bad regex " << re;
        return false;
    }
    regmatch_t m[10];
    bool ok = regexec(&rx, s.c_str(), 10, m, 0) == 0;
    if (ok && groups) {
        groups->clear();
        for (size_t i = 0; i <= rx.re_nsub && i < 10; i++)
            groups->push_back(m[i].rm_so < 0
                                  ? std::string()
                                  : s.substr(size_t(m[i].rm_so), size_t(m[i].rm_eo - m[i].rm_so)));
    }
    regfree(&rx);
    return ok;
}

// The kernel selftests' initialize_ftrace(), in the tree's own terms: tracer nop, no
// filters, pid lists, commands, events, snapshot or instances, default options, an empty
// buffer with tracing on.
inline void reset_ftrace()
{
    EXPECT_EQ(wr("tracing_on", "0"), 0);
    EXPECT_EQ(wr("current_tracer", "nop"), 0);
    // Commands go one by one with "!": read them back and remove each, as the kernel's
    // reset_ftrace_filter does (a counted one with its "count=N": it is another probe).
    for (auto &l : lines(rd("set_ftrace_filter"))) {
        if (l.empty() || l[0] == '#') continue;
        size_t c = l.find(':');
        if (c == std::string::npos) continue;
        std::string cmd = l.ends_with(":unlimited") ? l.substr(0, l.rfind(':')) : l;
        wr("set_ftrace_filter", "!" + cmd);
    }
    for (const char *f :
         {"set_ftrace_filter", "set_ftrace_notrace", "set_graph_function", "set_graph_notrace",
          "set_ftrace_pid", "set_ftrace_notrace_pid", "set_event_pid", "set_event_notrace_pid",
          "stack_trace_filter", "set_event"})
        EXPECT_EQ(wr(f, "", true), 0) << f;
    EXPECT_EQ(wr("snapshot", "0"), 0);
    EXPECT_EQ(wr("max_graph_depth", "0"), 0);
    EXPECT_EQ(wr("tracing_thresh", "0"), 0);
    EXPECT_EQ(wr("function_profile_enabled", "0"), 0);
    EXPECT_EQ(wr("stack_tracer_enabled", "0"), 0);
    EXPECT_EQ(wr("stack_max_size", "0"), 0);
    std::vector<std::string> inst;
    T.list("instances", inst);
    for (auto &i : inst) {
        wr("instances/" + i + "/current_tracer", "nop");
        EXPECT_EQ(T.rmdir("instances/" + i), 0) << i;
    }
    for (unsigned o = 0; o < dprobe::OPT__COUNT; o++) {
        auto &info = dprobe::trace_opt_info_of(dprobe::trace_opt(o));
        EXPECT_EQ(wr(std::string("options/") + info.name, info.dflt ? "1" : "0"), 0);
    }
    for (const auto &n : dprobe::ftrace_event_names())
        EXPECT_EQ(wr("events/ftrace/" + n + "/filter", "0"), 0);
    dprobe::trace_events::instance().set_group_enabled("", false);
    EXPECT_EQ(wr("dynamic_events", "", true), 0);
    EXPECT_EQ(wr("error_log", "", true), 0);
    EXPECT_EQ(wr("trace", "", true), 0);
    EXPECT_EQ(wr("tracing_on", "1"), 0);
}

} // namespace ftt
