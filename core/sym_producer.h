// Whether a function's callers may rely on which call-clobbered registers it leaves alone.
//
// GCC at -O2 (-fipa-ra) lets a caller keep a value in a call-clobbered register across a call
// of a function of the same unit that provably never writes that register. A trampoline that
// saves only what the ABI needs (the argument registers at the entry, the results at the
// return) would then let a handler clobber the caller's value. GCC turns -fipa-ra off for a
// whole unit built with -fpatchable-function-entry, -pg or -mfentry, and clang has no such
// allocation by default; but a function given the patchable_function_entry attribute in a
// unit built without the option is a patch site whose callers may still rely on it. Only the
// unit's DW_AT_producer (GCC records its options there by default) tells the two apart.
// Thread-safe; the first query on an object reads the producers of all its units.
#pragma once

#include <cstdint>
#include <string_view>

namespace dprobe
{

struct loaded_object;

// False only when the compile unit holding FUNC (a runtime address in OBJ) is known to be
// built with no interprocedural register allocation: by clang, or by GCC with
// -fpatchable-function-entry, -pg, -fno-ipa-ra or -O0 among the options its producer
// records. True when anything is unknown (no DWARF, no unit covers FUNC, an assembler).
bool callers_may_rely_on_clobbers(const loaded_object &obj, uintptr_t func);

// The decision for one DW_AT_producer string (exposed for tests).
bool producer_allows_ipa_ra(std::string_view producer);

} // namespace dprobe
