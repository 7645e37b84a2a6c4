// The few x86-64 byte sequences the patching code writes itself: call/jmp rel32, int3, the
// recommended multi-byte NOPs, and endbr64 detection. Everything here is noexcept and
// allocation-free, so the int3 handler and text_poke may use it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace dprobe::arch
{

inline constexpr uint8_t INT3_INSN_OPCODE = 0xcc;
inline constexpr size_t INT3_INSN_SIZE = 1;
inline constexpr uint8_t CALL_INSN_OPCODE = 0xe8;
inline constexpr size_t CALL_INSN_SIZE = 5;
inline constexpr uint8_t JMP32_INSN_OPCODE = 0xe9;
inline constexpr size_t JMP32_INSN_SIZE = 5;
inline constexpr uint8_t JMP8_INSN_OPCODE = 0xeb;
inline constexpr size_t JMP8_INSN_SIZE = 2;
inline constexpr uint8_t RET_INSN_OPCODE = 0xc3;
inline constexpr size_t ENDBR64_INSN_SIZE = 4;
inline constexpr size_t MAX_INSN_SIZE = 15;
inline constexpr size_t ASM_NOP_MAX = 8;

using rel32_insn = std::array<uint8_t, 5>;

// The ip a thread reports when it traps on an int3 at ADDR: one past it. kprobe handlers see
// it in regs->ip on every path (int3, optimized, on a patch site), as the kernel's do.
inline constexpr uintptr_t int3_trap_ip(uintptr_t addr) noexcept
{
    return addr + INT3_INSN_SIZE;
}
// The address of the int3 a thread trapped on, from the ip its trap reports.
inline constexpr uintptr_t int3_trap_addr(uintptr_t ip) noexcept
{
    return ip - INT3_INSN_SIZE;
}

// Whether a rel32 branch at FROM (5 bytes long) can reach TO.
bool rel32_reachable(uintptr_t from, uintptr_t to) noexcept;

// `call TO` / `jmp TO` encoded for address FROM; nullopt when TO is beyond ±2 GiB.
std::optional<rel32_insn> make_call_rel32(uintptr_t from, uintptr_t to) noexcept;
std::optional<rel32_insn> make_jmp_rel32(uintptr_t from, uintptr_t to) noexcept;

// The recommended NOP of LEN bytes (1..8; the kernel's x86_nops table, from Intel's
// optimization manual). An empty span for any other length.
std::span<const uint8_t> nop_bytes(size_t len) noexcept;

// Fills LEN bytes at DST with the fewest recommended NOPs (largest first).
void fill_nops(uint8_t *dst, size_t len) noexcept;

// Whether the LEN bytes at P are exactly one recommended NOP of that length.
bool is_nop(const uint8_t *p, size_t len) noexcept;

// f3 0f 1e fa: the CET indirect-branch landing pad. P must have 4 readable bytes.
bool is_endbr64(const uint8_t *p) noexcept;

} // namespace dprobe::arch
