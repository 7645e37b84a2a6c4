// What a write to code is, as the patching machinery carries it (the kernel's
// asm/text-patching.h: struct text_poke_loc, INT3 of text_poke_bp()): a request of new
// bytes with what a thread that meets the protocol's temporary breakpoint must do instead,
// the moves of threads stopped inside replaced instructions, and the few byte-level acts of
// the int3 protocol itself. core/text_poke.cpp applies requests; only arch/ builds them.
//
// Invariants: a request replaces whole instructions by whole instructions; its first byte is
// the one the protocol's breakpoint covers; everything here is noexcept and
// allocation-free (the SIGTRAP hooks use it).
#pragma once

#include "arch/x86_64/insn_bytes.h"

#include <cstddef>
#include <cstdint>
#include <ucontext.h>

namespace dprobe::arch
{

struct text_poke_req {
    uintptr_t addr = 0;
    uint8_t len = 0;        // bytes to write, at most 24 (an optimized probe's region)
    uint8_t bytes[24] = {}; // the new bytes
    // What a thread trapping on the temporary int3 does: as if the new first instruction ran.
    enum class emulate : uint8_t {
        nop,  // continue at addr + len
        call, // push addr + insn_len, continue at target
        jmp,  // continue at target
        trap, // the new first byte is itself an int3 owned by someone else: let them handle it
    } emu = emulate::nop;
    uint8_t insn_len = 0; // length of the new first instruction (call: 5)
    uintptr_t target = 0;
};

// Where a thread stopped at an old instruction boundary must continue instead, for writes
// that replace several instructions by one.
struct rip_move {
    uintptr_t from, to;
};

// The protocol's temporary breakpoint over the first byte of the instruction at ADDR (one
// atomic byte store, release order).
void text_poke_write_bp(uintptr_t addr) noexcept;

// Whether the byte at ADDR is a breakpoint (an int3): read through a volatile access, for
// hooks deciding whether the trap they handle is still armed (inline: they are hot paths).
inline bool breakpoint_at(uintptr_t addr) noexcept
{
    return *reinterpret_cast<const volatile uint8_t *>(addr) == INT3_INSN_OPCODE;
}

// The kernel's poke_int3_handler(): a thread (UC) that trapped on the protocol's temporary
// breakpoint of one of REQS (N requests, sorted by address) continues as if that request's
// new first instruction had run. False, UC unchanged, when the int3 is none of theirs or is
// someone else's to handle (text_poke_req::emulate::trap: a kprobe's own int3).
bool poke_int3_handler(ucontext_t *uc, const text_poke_req *reqs, size_t n) noexcept;

// Fills LEN bytes of fresh executable memory with instructions that trap (int3), so a stray
// jump into unused space stops there instead of running garbage.
void fill_trap(uint8_t *dst, size_t len) noexcept;

// `jmp TO` written at AT (a 5-byte jmp rel32 over whole instructions): a thread meeting the
// protocol's breakpoint goes to TO. False when TO is beyond ±2 GiB of AT.
bool jmp_req(uintptr_t at, uintptr_t to, text_poke_req *out) noexcept;

// An absolute jump to TARGET that touches no register (`jmp *0(%rip)` and the address):
// ABS_JMP_SIZE bytes at RW.
inline constexpr size_t ABS_JMP_SIZE = 14;
void write_abs_jmp(uint8_t *rw, uintptr_t target) noexcept;

} // namespace dprobe::arch
