// Targets of switch jump tables (see jump_table.cpp).
#pragma once

#include "arch/x86_64/insn_analysis.h"

#include <optional>
#include <vector>

namespace dprobe::arch
{

// The targets of the indirect jump FA.insns[K] when it dispatches through a gcc-style
// position-independent jump table whose bound is known; nullopt otherwise. Reads the table
// from memory: FA must describe live code of this process.
std::optional<std::vector<uintptr_t>> jump_table_targets(const func_analysis &fa, size_t k);

// Whether the indirect jump FA.insns[K] is a tail call through a loaded pointer: `jmp *disp(%reg)`
// or `jmp *%reg` right after `mov disp(%base), %reg`, with no index (a vtable slot, a function
// pointer in an object). Compilers dispatch jump tables with scaled-index loads, never like
// this, and a function's own labels can only be reached by an address computed in it (which
// analyze_function records as a branch target).
bool is_pointer_tail_jump(const func_analysis &fa, size_t k);

} // namespace dprobe::arch
