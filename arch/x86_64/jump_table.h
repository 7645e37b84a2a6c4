// Targets of switch jump tables (see jump_table.cpp).
#pragma once

#include "arch/x86_64/insn_analysis.h"

#include <optional>
#include <vector>

namespace dprobe::arch
{

// The targets of the indirect jump FA.insns[K] when it dispatches through a gcc-style
// position-independent jump table whose bound is known; nullopt otherwise. Reads the table
// through MEM, at the address the code computes.
std::optional<std::vector<uintptr_t>> jump_table_targets(const func_analysis &fa, size_t k,
                                                         const mem_view &mem);

// The displacements of FA's loads of 4-byte table entries with a base and a scaled index
// (movslq D(%base,%idx,4), mov D(%base,%idx,4),%r32): where a table may start past the
// address its base register holds.
std::vector<int64_t> table_load_disps(const func_analysis &fa);

// Whether the indirect jump FA.insns[K] is `jmp *%reg` right after `add %base, %reg` in the
// same straight-line code, %base loaded somewhere in the function by lea T(%rip): a 4-byte
// entry of a position-independent table added to its base, the one dispatch a table scan
// may stand for (a table of absolute pointers, as computed gotos make, is not scanned: in a
// file its entries are relocations).
bool is_relative_table_jump(const func_analysis &fa, size_t k);

// Whether the indirect jump FA.insns[K] is a tail call through a loaded pointer: `jmp *disp(%reg)`
// or `jmp *%reg` right after `mov disp(%base), %reg`, with no index (a vtable slot, a function
// pointer in an object). Compilers dispatch jump tables with scaled-index loads, never like
// this, and a function's own labels can only be reached by an address computed in it (which
// analyze_function records as a branch target).
bool is_pointer_tail_jump(const func_analysis &fa, size_t k);

} // namespace dprobe::arch
