// Classifying a function's entry and following a PLT entry to its GOT slot
// (arch/x86_64/entry_insn.h). Reads the bytes it is given, nothing else.
#include "arch/x86_64/entry_insn.h"

#include "arch/x86_64/insn_bytes.h"

#include <Zydis/Zydis.h>
#include <cstring>

namespace dprobe::arch
{

entry_insn classify_entry(uintptr_t ip) noexcept
{
    const auto *p = reinterpret_cast<const uint8_t *>(ip);
    entry_insn e;
    if (p[0] == CALL_INSN_OPCODE) {
        int32_t rel;
        std::memcpy(&rel, p + 1, 4);
        e = {entry_kind::fentry_call, 5, ip + 5 + static_cast<intptr_t>(rel)};
    } else if (p[0] == 0x67 && p[1] == CALL_INSN_OPCODE) {
        // addr32 call: the linker's relaxation of call *__fentry__@GOTPCREL(%rip) when
        // __fentry__ is defined in the same executable.
        int32_t rel;
        std::memcpy(&rel, p + 2, 4);
        e = {entry_kind::fentry_call, 6, ip + 6 + static_cast<intptr_t>(rel)};
    } else if (p[0] == 0xff && p[1] == 0x15) {
        int32_t disp;
        std::memcpy(&disp, p + 2, 4);
        e = {entry_kind::fentry_got, 6, ip + 6 + static_cast<intptr_t>(disp)};
    } else if (is_nop(p, 6)) {
        e = {entry_kind::nop, 6, 0};
    } else if (is_nop(p, 5)) {
        e = {entry_kind::nop, 5, 0};
    } else if (std::memcmp(p, "\x90\x90\x90\x90\x90", 5) == 0) {
        e = {entry_kind::nop_sled, 5, 0};
    }
    return e;
}

std::optional<uintptr_t> plt_got_slot(uintptr_t plt_entry) noexcept
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    uintptr_t at = plt_entry;
    for (int i = 0; i < 3; ++i) {
        ZydisDecodedInstruction insn;
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(
                ZydisDecoderDecodeFull(&dec, reinterpret_cast<const void *>(at), 16, &insn, ops)))
            return std::nullopt;
        if (insn.mnemonic == ZYDIS_MNEMONIC_ENDBR64) {
            at += insn.length;
            continue;
        }
        if (insn.mnemonic == ZYDIS_MNEMONIC_JMP && ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
            ops[0].mem.base == ZYDIS_REGISTER_RIP) {
            ZyanU64 slot;
            if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&insn, &ops[0], at, &slot)))
                return static_cast<uintptr_t>(slot);
        }
        return std::nullopt;
    }
    return std::nullopt;
}

} // namespace dprobe::arch
