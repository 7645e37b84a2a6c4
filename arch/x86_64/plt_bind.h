// What a lazily bound PLT entry will call (the x86-64 psABI's R_X86_64_JUMP_SLOT).
//
// A library linked without -z now (the C library itself) leaves each GOT slot of its PLT
// pointing back into the PLT until the first call, when the dynamic linker's resolver looks
// the symbol up and writes the function's address into the slot. Code that wants to know
// what such a call runs before it has ever run (the extended-state scan of a probe's
// handlers, arch/x86_64/ext_state.cpp) asks the same question the resolver will: the
// slot's relocation names a symbol (and its version), looked up in the global scope.
#pragma once

#include <cstdint>
#include <optional>

namespace dprobe::arch
{

// Whether the GOT slot's value SLOT_VALUE, for a PLT entry at PLT_ENTRY, still leads to the
// lazy-binding resolver: back into the entry (`jmp *slot; push $n; jmp PLT0`), or to a
// `push $n; jmp` stub of its own (the IBT layout's .plt, reached from .plt.sec). SLOT_VALUE
// must be an address of loaded code (not 0: an undefined weak symbol): it is read.
bool plt_slot_unbound(uintptr_t plt_entry, uintptr_t slot_value) noexcept;

// The function the resolver will bind the GOT slot at GOT_SLOT to: the symbol of the slot's
// JUMP_SLOT relocation, with its version, looked up with dlvsym/dlsym in the global scope (an
// IFUNC's selected implementation). Nothing when the slot belongs to no loaded object, has
// no such relocation, or the symbol is not found (a library loaded RTLD_LOCAL binds in a
// scope of its own, which this lookup cannot reproduce). Not for hot paths: it walks the
// loaded objects and their relocations.
std::optional<uintptr_t> plt_lazy_target(uintptr_t got_slot);

} // namespace dprobe::arch
