// The -a, -A and -R options of `dprobe record` and `dprobe attach`: which arguments and return
// values the function graph records, in uftrace's spelling or in dynamic_events' fetch args,
// turned into the "GLOB ARGS" lines the agent compiles (tools/agent/graph_args.h).
//
//   -A 'GLOB@arg1,arg2/s'      uftrace: argN with an optional format (/d /i /u /x /s /c /p,
//                               sizes as /i32 /u8 /x16); /s reads the string it points to
//   -A 'GLOB@name,p->len'       parameters by their DWARF names (and members), typed by DWARF
//   -A 'GLOB@n=$arg2:s32,s=+0($arg1):string'   fetch args as dynamic_events spells them
//   -A 'GLOB@$arg*'             every parameter, from DWARF
//   -R 'GLOB@retval[/FMT]'      the return value (typed by DWARF without a format)
//   -a                          every traced function's parameters and return value where its
//                               debug information has them
#pragma once

#include <string>
#include <vector>

namespace dprobe::cli
{

// SPEC ("GLOB@ITEM,ITEM...") into a "GLOB ARGS" line; RET: an -R spec. False with *ERR.
bool graph_args_line(const std::string &spec, bool ret, std::string &line, std::string *err);

} // namespace dprobe::cli
