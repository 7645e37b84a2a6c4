// The pieces of perf-probe syntax that name source places and variables, parsed without
// looking at any binary (perf's parse_perf_probe_point, parse_perf_probe_arg and
// parse_line_range_desc):
//
//   probe point:  FUNC[@SRC][+OFF|%return|:RLN]  or  SRC:ALN
//   argument:     [NAME=]VAR[->FIELD|.FIELD|[INDEX]]...[:TYPE]   ($vars, $params, or any
//                 dynamic_events fetch arg, which passes through)
//   line range:   FUNC[@SRC][:RLN[+NUM|-RLN2]]  or  SRC[:ALN[+NUM|-ALN2]]
//
// RLN counts from the line FUNC is declared on (FUNC:0 is that line); ALN is a line of SRC.
#pragma once

#include "tracefs/dwarf/dwarf_fetch.h"

#include <climits>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe::tools
{

struct perf_probe_point {
    std::string function; // empty for SRC:ALN
    std::string file;     // SRC, from FUNC@SRC or SRC:ALN; empty when not given
    bool has_line = false;
    int line = 0; // relative to FUNC's declaration when function is set, else absolute
    unsigned long offset = 0;
    bool retprobe = false;

    bool needs_debuginfo() const { return has_line || !file.empty(); }
};

// Parses TEXT (no event name, no arguments). False with *err set on bad syntax.
bool parse_perf_probe_point(std::string_view text, perf_probe_point &out, std::string *err);

using perf_probe_field = dwarf_field;

struct perf_probe_arg {
    std::string name; // NAME= when given
    std::string var;  // variable name, "$vars", "$params", or a raw fetch arg
    std::vector<perf_probe_field> fields;
    std::string type; // after ':'; empty when not given

    // A C variable reference (VAR with optional fields), to look up in the debug info.
    bool is_variable() const;
    // The name perf gives the argument when NAME= is absent: the last member name, else VAR.
    std::string default_name() const;
};

// Parses one argument. False with *err set on bad syntax.
bool parse_perf_probe_arg(std::string_view text, perf_probe_arg &out, std::string *err);

struct line_range_spec {
    std::string function;
    std::string file;
    int start = 0;     // relative to FUNC's declaration when function is set
    int end = INT_MAX; // inclusive; INT_MAX = to the end of FUNC (or of the file)
};

bool parse_line_range(std::string_view text, line_range_spec &out, std::string *err);

// Whether S is a C identifier.
bool is_c_identifier(std::string_view s);

} // namespace dprobe::tools
