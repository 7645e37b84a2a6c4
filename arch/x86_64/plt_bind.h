// What a lazily bound PLT entry will call (the x86-64 psABI's R_X86_64_JUMP_SLOT).
//
// A library linked without -z now (the C library itself) leaves each GOT slot of its PLT
// pointing back into the PLT until the first call, when the dynamic linker's resolver looks
// the symbol up and writes the function's address into the slot. Code that wants to know
// what such a call runs before it has ever run (the extended-state scan of a probe's
// handlers, arch/x86_64/ext_state.cpp) can only tell from the slot's relocation, which names
// the symbol. Reading relocations walks the loaded objects under the dynamic linker's lock:
// that is done once, when the runtime is loaded, for the slots the scan needs to know
// (plt_jump_slot), never during a scan, which may run while dprobe holds a lock that the
// loader's notifications take (a dlopen on another thread would then deadlock with it).
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

// The GOT slot of the PLT entry through which the loaded object whose file name ends in
// OBJECT (a soname: "libc.so.6") calls SYMBOL (its JUMP_SLOT relocation), or nothing. Takes
// the dynamic linker's lock: for load time (a constructor), not for a scan.
std::optional<uintptr_t> plt_jump_slot(const char *object, const char *symbol);

} // namespace dprobe::arch
