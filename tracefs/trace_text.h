// The text of trace files that needs no buffer (the kernel's trace.c print_func_help_header_irq,
// trace_output.c trace_print_context, trace_functions_graph.c trace_print_graph_duration):
// the header block, the per-line context, and function durations. trace_output.h and
// graph_output.h frame the runtime's buffers with them; `dprobe report` frames recorded
// files with them. Offline library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dprobe
{

// "# tracer: nop" ... column headers, exactly as the kernel prints them with irq-info on.
// ENTRIES: records in the buffers; WRITTEN: ENTRIES plus records overwritten (the kernel's
// entries + overrun); NR_CPUS: the "#P:" figure (online CPUs).
std::string trace_print_header(uint64_t entries, uint64_t written, int nr_cpus,
                               const char *tracer = "nop");
// The line prefix up to and including ": ". Returns the length (snprintf semantics).
size_t trace_print_context(char *buf, size_t len, const char *comm, int32_t tid, unsigned cpu,
                           uint64_t ts, bool ts_in_ns);

// The kernel's trace_print_graph_duration (also used by trace_stat): "1.234 us " padded.
void trace_print_graph_duration(std::string &out, uint64_t ns);
// The overhead marker of a duration: '$' > 1 s, '@' > 100 ms, '*' > 10 ms, '#' > 1 ms,
// '!' > 100 us, '+' > 10 us, else ' ' (trace_find_mark).
char trace_find_mark(uint64_t ns);

} // namespace dprobe
