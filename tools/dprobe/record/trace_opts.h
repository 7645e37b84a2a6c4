// What `dprobe record` and `dprobe attach` both record: their shared options, the default
// function-graph filter, and the trace file they create before the program is touched.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace dprobe::tools
{
class elf_image;
}

namespace dprobe::cli
{

struct trace_opts {
    std::vector<std::string> events;
    std::vector<std::string> triggers; // --trigger GROUP:EVENT:TRIGGER
    std::vector<std::string> graph_globs;
    std::vector<std::string> notrace;
    bool graph = false;
    bool follow_loads = false;
    unsigned graph_depth = 0;              // --graph-depth: 0 for no limit
    std::string tracer = "function_graph"; // -p: function_graph or function
    std::string output = "dprobe.dat";
    size_t buffer_kb = 0;
    std::string clock;
    bool quiet = false;
    bool no_tracefs = false;
    bool no_wait = false; // drop events rather than wait for room
    // -a, -A, -R: arguments and return values in the graph (record/graph_args_spec.h)
    bool auto_args = false;
    std::vector<std::string> arg_specs, retval_specs;
};

// -A and -R of O as the agent's "GLOB ARGS" lines. False with *ERR (a bad spec).
bool graph_args_lines(const trace_opts &o, std::vector<std::string> &args,
                      std::vector<std::string> &retvals, std::string *err);

// -F, -N, -g, --follow-loads, the tracer, -D, -o, -b, --clock and --trigger into O (each command
// adds -e, -q and --no-tracefs with its own wording). TRACER_NAMES: the option names of the tracer
// ("-p,--tracer"; attach's -p is the pid).
void add_trace_options(CLI::App *sub, trace_opts &o, const std::string &tracer_names);

// The function-graph filter of O into GLOBS and NOTRACE. Like uftrace: without -F, and
// when asked for (-g) or nothing else is recorded (no events), the graph covers the
// program's own functions, less the C runtime's start-up and tear-down helpers: then the
// result is true and GLOBS stays empty, for the agent to take the functions of whichever
// executable it finds itself in (the program's, or one it execs).
bool graph_filter(const trace_opts &o, bool have_events, std::vector<std::string> &globs,
                  std::vector<std::string> &notrace);

// Options that do not go together ("" when they do): --graph-depth needs the
// function_graph tracer (the function tracer records no returns, hence no depth); so do -a,
// -A and -R, which do not follow libraries loaded later (--follow-loads) either.
std::string trace_opts_conflict(const trace_opts &o);

// Creates (truncates) the trace file at PATH with its header, so an unwritable path fails
// before the program runs. Returns the open descriptor (EXTRA_FLAGS added to O_WRONLY |
// O_CREAT | O_TRUNC | O_CLOEXEC), or -1 with ERR set to a message naming the file.
int create_trace_file(const std::string &path, int extra_flags, std::string &err);

} // namespace dprobe::cli
