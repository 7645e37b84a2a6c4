// Out-of-line copies of instructions (the kernel's __copy_instruction / optprobe relocation,
// extended to branches): code that, placed at another address, behaves exactly as the
// original instructions at their original addresses.
#pragma once

#include "arch/x86_64/insn.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dprobe::arch
{

// Upper bound of the copy of one instruction (an emulated `call *mem`: 13 + 15 bytes).
inline constexpr size_t MAX_RELOCATED_INSN_SIZE = 32;

// How each kind of instruction is copied:
//  - RIP-relative memory operand: same bytes, disp32 adjusted to the same absolute address
//    (patched in place so prefixes and encoding stay exactly as compiled).
//  - jmp rel8/rel32, jcc rel8/rel32: re-encoded by Zydis as the rel32 form to the same target.
//  - loop/loopz/loopnz/jrcxz/jecxz (rel8 only): `<op> +2; jmp +5; jmp rel32 target`.
//  - call rel32: an emulated call that pushes the ORIGINAL return address, so returns,
//    unwinders and exception tables see the real caller:
//        push $lo32 (sign-extended) ; movl $hi32, 4(%rsp) (when needed) ; jmp rel32 target
//    Neither flags nor any register but rsp change, as with a real call.
//  - call *X: the same push, then `jmp *X`; X re-encoded when it is RIP-relative, and its
//    displacement raised by 8 when it is based on %rsp (the operand is read after the push).
//  - ret, jmp *X and everything else: copied (with the RIP-relative fix above).
//  - Refused (see insn_ool_refusal()): int3, int n, ud*, hlt, iret, sysret, far branches,
//    xbegin, privileged, eip-relative operands, call *%rsp.
// Note: an emulated call leaves a return address no `call` pushed, which a CET user shadow
// stack would reject; dprobe does not support processes with user shadow stacks enabled.

struct relocate_error {
    enum code_t { none, unsupported, out_of_range, encode_failed, empty } code = none;
    uintptr_t insn_addr = 0; // the original instruction at fault
    std::string message;     // readable, e.g. "instruction cannot run out of line: int3 at 0x..."
};

struct relocated {
    uintptr_t new_addr = 0;
    std::vector<uint8_t> bytes;
    // insn_offsets[i]: offset in bytes of the copy of region[i].
    std::vector<uint32_t> insn_offsets;
    // Offset of the trailing `jmp resume_addr`, when appended.
    std::optional<uint32_t> jmp_back_offset;

    // Where the copy of the original instruction starting at ORIG_ADDR begins (for moving a
    // thread caught inside the original region into the copy); 0 if ORIG_ADDR is not one.
    uintptr_t copy_of(std::span<const insn> region, uintptr_t orig_addr) const noexcept;
};

struct relocate_result {
    std::optional<relocated> copy;
    relocate_error error;
    bool ok() const noexcept { return copy.has_value(); }
    explicit operator bool() const noexcept { return ok(); }
};

// Builds the copy of REGION (consecutive instructions, in order) for address NEW_ADDR.
// With APPEND_JMP_BACK a `jmp rel32 RESUME_ADDR` follows. Fails when an instruction cannot
// run out of line or a target/operand is beyond ±2 GiB of the copy.
relocate_result relocate_insns(std::span<const insn> region, uintptr_t new_addr,
                               uintptr_t resume_addr, bool append_jmp_back);

// One instruction, allocation-free: writes the copy for address AT into OUT and returns its
// length, or a negative relocate_error::code_t with *WHY set to a static reason.
int relocate_one(const insn &i, uintptr_t at, uint8_t (&out)[MAX_RELOCATED_INSN_SIZE],
                 const char **why) noexcept;

} // namespace dprobe::arch
