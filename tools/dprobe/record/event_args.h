// The -e arguments of `dprobe record` and `dprobe attach`: dynamic_events lines, checked
// offline, names of probes stored by `dprobe probe --add`, USDT probes of the program and
// the libraries it loads ('sdt_libstdcxx:throw', perf's spelling), or perf-probe
// definitions on the program itself ('parse:4 len').
#pragma once

#include "tools/dprobe/resolve/elf_image.h"

#include <string>
#include <vector>

namespace dprobe::cli
{

// Whether E is a dynamic_events line (rather than a stored probe or a perf-probe definition).
bool looks_like_line(const std::string &e);

// Expands EVENTS into the lines to apply, each checked (against IMG, the program, for
// places in it; IMG may be null). False after printing what is wrong as "dprobe CMD: ...".
bool resolve_events(const char *cmd, const std::vector<std::string> &events,
                    const tools::elf_image *img, std::vector<std::string> &lines);

// TEXT with every line indented by two spaces (error_log entries under a message).
std::string indent(const std::string &text);

} // namespace dprobe::cli
