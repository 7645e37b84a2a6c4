// What kprobes ask of x86 (arch/x86/kernel/kprobes/core.c and opt.c): where a probe at a
// function entry goes (after endbr64), the instruction slot of an int3 probe, the int3 that
// arms it, and the head of an optimized probe's detour (the detour itself is detour.h's).
// kprobe/ and core/optprobe decide what to probe and when; these build the bytes.
//
// The slot of an int3 probe (KPROBE_SLOT_SIZE bytes, never freed or rewritten while its
// record lives, see kprobe/kprobe_internal.h):
//     [boost copy: the instruction relocated, then `jmp *ret(%rip)`]  at 0, ret at
//                                                                     KPROBE_SLOT_BOOST_RET
//     [ss copy: the instruction relocated, then int3]                 at KPROBE_SLOT_SS
//     [`jmp *ss_ret(%rip)`]                        at KPROBE_SLOT_SS_RET_JMP, ss_ret at
//                                                                     KPROBE_SLOT_SS_RET
// The boost copy runs the instruction out of line and goes back through a word the optimizer
// may point into its detour (no register or flag touched); the ss copy's int3 tells the
// hook the instruction has run (the kernel's post-5.13 single-step scheme), and the hook
// sends the thread on through the ss return jump, whose word the optimizer points into its
// detour too: the thread reads it only once it is back from the signal handler, however
// long after the hook it gets there.
#pragma once

#include "arch/x86_64/insn.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/text_patching.h"

#include <cstddef>
#include <cstdint>

namespace dprobe::arch
{

// --- where a probe goes (arch_adjust_kprobe_addr) --------------------------------------------

// A probe at OFFSET of the function at FUNC (SIZE bytes readable): offset 0, or 4 past an
// endbr64, is the function entry, and goes after the endbr64 (the landing pad stays first).
// Returns the offset to probe; *ON_ENTRY tells whether it is the entry.
size_t adjust_kprobe_offset(uintptr_t func, size_t size, size_t offset, bool *on_entry) noexcept;
// Bytes to read at a function entry to decode its first instruction (after any endbr64),
// for an entry whose function's size is unknown.
inline constexpr size_t KPROBE_ENTRY_SPAN = 4 + MAX_INSN_SIZE;

// --- the int3 path (arch_prepare_kprobe, arch_arm_kprobe, arch_disarm_kprobe) -----------------

inline constexpr size_t KPROBE_SLOT_SIZE = 128;
inline constexpr size_t KPROBE_SLOT_BOOST_RET = 56; // the boost copy's return address (8 bytes)
inline constexpr size_t KPROBE_SLOT_SS = 64;
inline constexpr size_t KPROBE_SLOT_SS_RET_JMP = 104; // after the longest ss copy and its int3
inline constexpr size_t KPROBE_SLOT_SS_RET = 112;     // where it jumps (8 bytes)

struct kprobe_slot {
    bool boostable = false; // the boost copy exists
    bool has_ss = false;    // the ss copy exists
    uint8_t boost_len = 0;  // the boost copy without its jmp back
    uintptr_t boost_addr = 0, ss_addr = 0, ss_int3 = 0;
    uintptr_t ss_ret = 0; // the ss return jump (with the ss copy)
};

// What the int3 path keeps of the probed instruction (the kernel's arch_specific_insn).
struct kprobe_insn {
    insn i;               // the original instruction
    uint8_t opcode = 0;   // its first byte, which disarming writes back
    bool emulate = false; // a branch applied to the registers on a hit (kprobe_int3.h)
    // The slot must lie within reach of [reach_lo, reach_hi] (the instruction, its
    // rip-relative operand and its branch target: the copies address them with rel32).
    uintptr_t reach_lo = 0, reach_hi = 0;
    // The emulation reads no memory: the probe works without a slot (when none can be had
    // within reach).
    bool slot_optional = false;
};

// The kernel's arch_prepare_kprobe() up to the slot (can_probe, the choice of emulating or
// running a copy): the instruction at ADDR of the function at FUNC, whose FSIZE bytes as
// they were before any probe was armed are at CODE. 0; -EINVAL when ADDR is not an
// instruction boundary, does not decode, or the instruction cannot run out of line;
// -EOPNOTSUPP for a branch that is neither emulated nor stepped with an exit the hook sees.
int prepare_kprobe(const uint8_t *code, uintptr_t func, size_t fsize, uintptr_t addr,
                   kprobe_insn *out) noexcept;

// The rest of arch_prepare_kprobe() (prepare_boost and the copy stepped with an int3): the
// copies KI's hits need, written into the slot at RW, which runs at RX. 0, or -EINVAL when a
// copy the probe needs could not be made there (the slot is then not used).
int prepare_kprobe_copies(const kprobe_insn &ki, uint8_t *rw, uintptr_t rx,
                          kprobe_slot *out) noexcept;

// Writes the copies of I (the instruction at I.addr) into the slot at RW, which runs at RX:
// the boost copy (returning to the next instruction), and with SS the ss copy too (only for
// instructions that fall through: not for emulated branches). Each copy that cannot be made
// there is left out.
kprobe_slot prepare_kprobe_slot(const insn &i, bool ss, uint8_t *rw, uintptr_t rx) noexcept;
// Where the boost copy of the slot at SLOT_RW returns to (one atomic store).
void kprobe_slot_set_boost_ret(uint8_t *slot_rw, uintptr_t to) noexcept;
// Where the ss return jump of the slot at SLOT_RW goes (one atomic store).
void kprobe_slot_set_ss_ret(uint8_t *slot_rw, uintptr_t to) noexcept;

// The int3 over the probed instruction's first byte, and that byte back. A thread that meets
// the protocol's breakpoint meanwhile is the kprobe hook's.
text_poke_req arm_kprobe(uintptr_t addr) noexcept;
text_poke_req disarm_kprobe(uintptr_t addr, uint8_t opcode) noexcept;

// --- optimized probes (arch_prepare_optimized_kprobe) -------------------------------------------

// The head of an optimized probe's detour (optprobe_tramp.S explains it): skip the red zone,
// park r11, load OP into r11, call the caller whose address sits in the head (so that
// switching callers is one atomic store), come back over the red zone. The relocated region
// follows.
inline constexpr size_t OPTPROBE_HEAD_SIZE = 48;
void optprobe_write_head(uint8_t *rw, const void *op, uintptr_t caller) noexcept;
// Switches the detour whose head is at RW to CALLER; a thread already in the other caller
// finishes there.
void optprobe_set_caller(uint8_t *rw, uintptr_t caller) noexcept;
// What a detour's caller saves around the handlers: everything (xsavec of the whole extended
// state), the vector registers 0-15 and the MXCSR only (for handlers clean in
// ext_scope::vector), or the general registers and arithmetic flags only (the light caller,
// for handlers that leave the extended state alone, in functions that never set DF).
enum class optprobe_mode { full, vector, light };
uintptr_t optprobe_caller(optprobe_mode mode) noexcept;
// Whether the function may set DF (std, or flags popped from memory): the light caller
// neither saves nor clears it.
bool function_may_set_df(const func_analysis &fa) noexcept;

} // namespace dprobe::arch
