// The x86-64 names and numbers of the registers, for the offline tools that turn debug
// information and SDT notes into fetch args (perf's arch/x86/util/dwarf-regs.c,
// get_arch_regstr, and perf_regs.c's SDT operand table). Fetch args name registers as
// struct pt_regs does (<dprobe/ptrace.h>): "ax", "di", "r8", "ip".
#pragma once

#include <string_view>

namespace dprobe::arch
{

// The pt_regs name of DWARF register REGNO (the psABI's numbering: 0 ax, 1 dx, 2 cx, 3 bx,
// 4 si, 5 di, 6 bp, 7 sp, 8-15 r8-r15); nullptr for registers pt_regs does not hold (SSE,
// x87, ...).
const char *dwarf_regstr(unsigned regno) noexcept;

// What DWARF registers dwarf_regstr() does not name are, for an error message.
inline constexpr const char *DWARF_REG_UNNAMED = "an SSE or x87 register";

// The pt_regs name of the register an assembler operand names (without its '%': "rdi",
// "edi", "di", "dil", "rip"...); nullptr for registers pt_regs does not hold as such (SSE,
// the high bytes %ah..%dh).
const char *asm_reg_to_pt_regs(std::string_view name) noexcept;

} // namespace dprobe::arch
