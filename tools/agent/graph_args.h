// Arguments and return values in the function graph: `dprobe record -a`, `-A GLOB@ARGS`,
// `-R GLOB@retval` (uftrace's options; the kernel's function_graph options funcgraph-args and
// funcgraph-retval). A traced function that gets either is hooked by an fprobe of its own
// instead of the plain graph's, whose handlers write the graph's entry and exit records with
// the values folded in: the entry with its arguments, the exit with its return value, one
// record each (graph_args_record.h; tracefs/ftrace_entries.h, ftrace_graph_values_compact).
// Functions whose values are plain loads (registers, $stackN, one dereference) ride the
// light and direct paths as the plain graph's do; the others (strings, ...) the full path.
//
// Each function's fetch args are compiled once, at the start, by the dynamic_events parser on
// a kprobe line at the function's address (`p:graph_args/a 0xADDR $arg*`), so parameter
// names, `$arg*` and a typed `$retval` come from the DWARF of the function's object, in
// this process, as for any event. Functions with the same compiled arguments share one
// record layout, described in the trace file as an event of the group graph_args with an
// id from tracefile::GRAPH_ARGS_FIRST_ID on (EVENT_FL_GRAPH_VALUES): every reader of the
// trace file decodes the values with it (report shows them inline in the graph:
// `parse(0x7ff..., 12) = 3`). The hot path finds a function's layouts by its address in a
// table built before the fprobes are registered and never changed while they are.
//
// Not with --follow-loads (the CLI refuses it): functions of libraries loaded later are in
// the plain graph only. Functions with an int3 entry (a kretprobe) get no arguments either.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dprobe::agent
{

// What -a, -A and -R asked for, from the settings: "GLOB ARGS" lines, ARGS fetch args in
// dynamic_events spelling ("$arg*", "s=+0($arg1):string n=$arg2:s32", "name len"), for the
// entry (ARGS) and the exit (RETVALS); AUTO: every traced function's parameters ($arg*) and
// return value ($retval) where its debug information has them, when no GLOB names it.
struct graph_args_config {
    std::vector<std::string> args, retvals;
    bool auto_args = false;
    bool empty() const { return args.empty() && retvals.empty() && !auto_args; }
};

// Takes out of IPS (the graph's functions, sorted) those that get arguments or a return
// value, and hooks them with the arguments' fprobes, which write the graph's records too. What
// could not be had (a GLOB's arguments refused by a function: its error) goes to *WARN.
// Returns 0 or -errno with *ERR set.
int graph_args_start(const graph_args_config &c, std::vector<unsigned long> &ips, std::string *warn,
                     std::string *err);
// Unregisters those fprobes, if registered.
void graph_args_stop();
// The EVENT chunk payloads of the layouts in use (id, payload), for the trace file.
std::vector<std::pair<uint32_t, std::string>> graph_args_events();

} // namespace dprobe::agent
