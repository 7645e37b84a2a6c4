// The dprobe command: shared declarations of the subcommands (one file each, like perf's
// builtin-*.c and uftrace's cmds/*.c).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace dprobe::cli
{

// Each subcommand adds itself to APP; its callback stores the exit status in exit_status.
void setup_record(CLI::App &app);
void setup_report(CLI::App &app);
void setup_probe(CLI::App &app);
void setup_funcs(CLI::App &app);
void setup_ctl(CLI::App &app);
void setup_attach(CLI::App &app); // attach and detach

extern int exit_status;

// Takes PROG [ARGS...] of "dprobe record [<options>] [--] PROG [ARGS...]" out of argv, for
// the record callback; returns the argc CLI11 parses (the options only).
int record_take_program(CLI::App &app, int argc, char **argv);

// The usage lines `--help` prints for SUB ("dprobe record [<options>] -- PROG [ARGS]").
void set_usage(CLI::App *sub, std::string usage);

// "dprobe <cmd>: MESSAGE" on stderr; returns 1 for `return fail(...)`.
int fail(const char *cmd, const std::string &message);

// Where `dprobe probe --add` keeps probe definitions: $DPROBE_PROBES, else
// $XDG_CACHE_HOME/dprobe/probes, else ~/.cache/dprobe/probes.
std::string probe_list_path();

} // namespace dprobe::cli
