#include "arch/x86_64/insn_bytes.h"

#include <cstring>

namespace dprobe::arch
{

namespace
{

// Intel's recommended multi-byte NOPs (0f 1f /0 with growing ModRM/SIB/disp), as the
// kernel's x86_nops[]: one instruction per length, so a thread never sees a partial NOP.
constexpr uint8_t nop1[] = {0x90};
constexpr uint8_t nop2[] = {0x66, 0x90};
constexpr uint8_t nop3[] = {0x0f, 0x1f, 0x00};
constexpr uint8_t nop4[] = {0x0f, 0x1f, 0x40, 0x00};
constexpr uint8_t nop5[] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
constexpr uint8_t nop6[] = {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00};
constexpr uint8_t nop7[] = {0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00};
constexpr uint8_t nop8[] = {0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00};

constexpr std::span<const uint8_t> nops[ASM_NOP_MAX + 1] = {
    {}, nop1, nop2, nop3, nop4, nop5, nop6, nop7, nop8,
};

std::optional<rel32_insn> make_rel32(uint8_t opcode, uintptr_t from, uintptr_t to) noexcept
{
    if (!rel32_reachable(from, to)) return std::nullopt;
    const auto rel = static_cast<int32_t>(static_cast<int64_t>(to - (from + 5)));
    rel32_insn out{opcode, 0, 0, 0, 0};
    std::memcpy(out.data() + 1, &rel, sizeof(rel));
    return out;
}

} // namespace

bool rel32_reachable(uintptr_t from, uintptr_t to) noexcept
{
    const auto rel = static_cast<int64_t>(to - (from + 5));
    return rel >= INT32_MIN && rel <= INT32_MAX;
}

std::optional<rel32_insn> make_call_rel32(uintptr_t from, uintptr_t to) noexcept
{
    return make_rel32(CALL_INSN_OPCODE, from, to);
}

std::optional<rel32_insn> make_jmp_rel32(uintptr_t from, uintptr_t to) noexcept
{
    return make_rel32(JMP32_INSN_OPCODE, from, to);
}

std::span<const uint8_t> nop_bytes(size_t len) noexcept
{
    return len <= ASM_NOP_MAX ? nops[len] : std::span<const uint8_t>{};
}

void fill_nops(uint8_t *dst, size_t len) noexcept
{
    while (len) {
        const size_t n = len > ASM_NOP_MAX ? ASM_NOP_MAX : len;
        std::memcpy(dst, nops[n].data(), n);
        dst += n;
        len -= n;
    }
}

bool is_nop(const uint8_t *p, size_t len) noexcept
{
    const auto n = nop_bytes(len);
    return !n.empty() && std::memcmp(p, n.data(), len) == 0;
}

bool is_endbr64(const uint8_t *p) noexcept
{
    return p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa;
}

} // namespace dprobe::arch
