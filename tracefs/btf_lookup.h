// The debug information of the running process's functions for dynamic_events arguments
// (the kernel's btf_find_func_proto() over vmlinux and module BTF): the function a probe
// place names, looked up through kallsyms, its object's DWARF (the file itself, or the
// separate debug file its build id or .gnu_debuglink names) opened once per file and kept
// for the life of the process.
// Not thread-safe: trace_events calls it under its mutex.
#pragma once

#include "tracefs/probe_parse.h"
#include "tracefs/trace_btf.h"

namespace dprobe
{

// The function a probe of DEF at its entry or exit sits on, nullptr when the place is not a
// single loaded function (a glob, an unknown or not yet loaded symbol, an uprobe) or its
// object has no debug information.
std::optional<func_proto_ptr> func_proto_of_place(const probe_definition &def);

// The debug information of the file PATH, nullptr when it has none; opened once per path.
std::shared_ptr<const debuginfo> debuginfo_of_file(const std::string &path);
// Drops the cache (its files are closed once the last user lets go): the end of a session.
void debuginfo_cache_release();

} // namespace dprobe
