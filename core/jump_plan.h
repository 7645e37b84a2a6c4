// What a function without a patch site gets at its entry: a jump site (the region of its
// first instructions a 5-byte jmp replaces) or, with the reason, none (an int3 entry then).
// One decision, made from the function's bytes wherever they are read: the runtime reads
// the live text (core/ftrace_jump.cpp), `dprobe funcs` the file (arch::mem_view), and the
// two agree. What only a running process knows (dprobe's own objects, a probe already in
// the bytes) is checked by the runtime before it asks.
#pragma once

#include "arch/x86_64/detour_region.h"
#include "core/symbols.h"

#include <optional>
#include <string>

namespace dprobe
{

struct jump_plan {
    std::optional<arch::detour_region> region; // set: the function gets a jump site
    uintptr_t ip = 0;                          // where the jmp goes (after any endbr64)
    std::string why;                           // unset region: why not
};

// The plan for SYM of OBJ whose bytes (and the bytes around them: jump tables, padding)
// MEM reads at their addresses in OBJ.
jump_plan plan_jump_site(const loaded_object &obj, const ksym &sym, const arch::mem_view &mem);

// A "f.cold" fragment gcc's hot/cold splitting leaves: jumped into, never called.
bool jump_is_fragment(const ksym &sym);

// Functions that never get a jump site, by name or object: they return twice, run on
// borrowed stacks, have no ordinary caller, or are what dprobe itself uses while it patches.
bool jump_never_hooked_name(const loaded_object &obj, const ksym &sym);

} // namespace dprobe
