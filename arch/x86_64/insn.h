// x86-64 instruction decoding for the probe layers (the kernel's insn.h / insn_decode()).
// Built on Zydis; nothing above arch/ looks at instruction bytes, only at struct insn.
#pragma once

#include "arch/x86_64/insn_bytes.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

struct pt_regs;

namespace dprobe::arch
{

// One decoded instruction at its (original) address.
struct insn {
    enum kind : uint8_t {
        other,         // anything that does not transfer control and may run anywhere
        call_rel,      // call rel32
        jmp_rel,       // jmp rel8 / rel32
        jcc_rel,       // jcc rel8 / rel32
        loop_rel,      // loop, loopz, loopnz, jrcxz, jecxz (rel8 only)
        ret,           // ret, ret imm16 (near)
        call_indirect, // call *reg / call *mem (near)
        jmp_indirect,  // jmp *reg / jmp *mem (near)
        int3,          // int3 (0xcc) and `int 3` (cd 03)
        int_n,         // int imm8, int1 (f1), into
        syscall,       // syscall, sysenter
        sysret,        // sysret, sysexit (never valid in user space)
        iret,          // iret/iretd/iretq
        ud,            // ud0, ud1, ud2
        hlt,           // hlt
        far_branch,    // far call/jmp/ret (lcall, ljmp, lret)
        xbegin,        // xbegin rel (RTM: aborts land on a relative fallback)
        endbr,         // endbr64 / endbr32
        privileged,    // ring-0 only (faults in user space)
        odd_branch,    // other relative branches (e.g. VEX-encoded mask jumps of Xeon Phi)
    };

    uintptr_t addr = 0;
    uint8_t len = 0;
    kind k = other;
    uint8_t bytes[MAX_INSN_SIZE] = {};

    // Relative branches (call_rel, jmp_rel, jcc_rel, loop_rel, xbegin): absolute target,
    // and where the relative immediate sits in bytes[].
    uintptr_t branch_target = 0;
    uint8_t imm_offset = 0, imm_size = 0;

    // A memory operand addressed relative to RIP: its displacement (disp32 at
    // bytes[disp_offset]) and the absolute address it refers to.
    bool is_rip_relative = false;
    int64_t rip_disp = 0;
    uintptr_t rip_target = 0;
    uint8_t disp_offset = 0;
    bool is_eip_relative = false; // addr32 + RIP base: 32-bit wrap-around, not relocated

    // jcc_rel: condition code (low nibble of the 0x7x / 0x0f 0x8x opcode).
    uint8_t cc = 0;
    // loop_rel: counter width (4 when a 0x67 prefix selects ecx) and which of the five.
    uint8_t counter_size = 8;
    enum loop_op : uint8_t { op_loop, op_loopz, op_loopnz, op_jrcxz } loop = op_loop;
    // ret imm16
    uint16_t ret_imm = 0;

    // call_indirect / jmp_indirect operand, for emulation from a pt_regs snapshot. Register
    // numbers are pt_regs offsets / 8, -1 for none.
    bool ind_is_mem = false;
    int8_t ind_reg = -1;   // register form, or memory base
    int8_t ind_index = -1; // memory index
    uint8_t ind_scale = 0;
    int64_t ind_disp = 0;
    bool ind_uses_rsp = false;   // memory operand based on %rsp
    bool ind_emulatable = false; // operand readable from pt_regs alone (no fs/gs, no addr32)

    bool is_branch = false;         // may transfer control elsewhere than the next insn
    bool pushes_flags = false;      // pushf: a single-stepped copy pushes TF set
    bool pops_flags = false;        // popf/iret: may change TF
    bool has_segment_fs_gs = false; // memory operand through fs/gs
    bool is_privileged = false;
    // A 0x66 prefix on a near branch/call/ret: Intel ignores it in 64-bit mode, AMD truncates
    // the target to 16 bits (and reads a rel16). Never emitted by compilers; not relocated.
    bool branch_opsize_prefix = false;

    uint16_t mnemonic = 0; // ZydisMnemonic

    uintptr_t next() const noexcept { return addr + len; }
    bool is_relative_branch() const noexcept
    {
        return k == call_rel || k == jmp_rel || k == jcc_rel || k == loop_rel || k == xbegin ||
               k == odd_branch;
    }
    // Control never falls through to next() (jmp, ret, ...).
    bool is_unconditional_exit() const noexcept;
    // Lower-case mnemonic ("jmp", "movaps"), never null.
    const char *mnemonic_name() const noexcept;
};

// Decodes one instruction from CODE (AVAIL readable bytes) as if it were at ADDR. nullopt on
// invalid or truncated encodings. Allocation-free.
std::optional<insn> insn_decode(const void *code, size_t avail, uintptr_t addr) noexcept;

// AT&T text of an instruction ("movq 0x2f1e(%rip), %rax"), for messages and logs.
std::string insn_to_string(const insn &i);

// Linear-sweep boundary check (the kernel's can_probe()): decodes from FUNC_START through
// FUNC_SIZE bytes of CODE (the function's bytes, e.g. a saved copy when the live text is
// already patched); true iff ADDR starts a decoded instruction. Decoding stops at the first
// invalid instruction; later addresses are not boundaries.
bool insn_boundary(const void *code, uintptr_t func_start, size_t func_size,
                   uintptr_t addr) noexcept;
// Same, reading the function's bytes at FUNC_START itself.
bool insn_boundary(uintptr_t func_start, size_t func_size, uintptr_t addr) noexcept;

// --- kprobe int3 path (the kernel's can_boost / emulate / resume_execution) ---

// Why the instruction cannot run out of line (from a copy made by relocate_insns()), e.g.
// "int3" or "eip-relative operand"; nullptr when it can.
const char *insn_ool_refusal(const insn &i) noexcept;

// Whether the instruction can run out of line from a slot built by relocate_insns() and
// followed by a jmp back, with exactly the effect it has in place (one trap per hit).
// Relative branches and calls qualify because the relocator rewrites them to reach the
// original targets (and pushes the original return address for calls). Refused: whatever
// relocate_insns() refuses (int3, int n, ud*, hlt, iret, far branches, sysret, xbegin,
// privileged, eip-relative). syscall/sysenter qualify: rcx receives the slot's address
// instead of the original one (the ABI says rcx is clobbered), and a thread blocked in the
// system call sits in the slot, so slots are freed only after quiescence, as any slot.
bool insn_can_boost(const insn &i) noexcept;

// Control-transfer instructions the int3 path emulates on a pt_regs snapshot instead of
// running a copy (as the kernel does since 5.13): call_rel, jmp_rel, jcc_rel, loop_rel,
// ret, and call/jmp indirect through registers or plain memory.
bool insn_can_emulate(const insn &i) noexcept;

// Applies the instruction's effect to REGS (ip; sp for call/ret; cx for loop; flags are never
// changed by these instructions). A call writes the return address to the
// stack at the new regs->sp; ret and memory-indirect branches read memory. false (REGS
// unchanged) when insn_can_emulate() is false. Async-signal-safe.
bool insn_emulate(const insn &i, struct pt_regs *regs) noexcept;

// Whether condition code CC (0..15) holds for RFLAGS.
bool insn_cc_holds(uint8_t cc, unsigned long flags) noexcept;

// Length of the copy relocate_insns({i}, slot, ..., /*append_jmp_back=*/false) produces for
// one instruction, without building it (0 when it cannot be relocated).
size_t insn_copy_len(const insn &i) noexcept;

// After a copy of ORIG built at SLOT_ADDR by relocate_insns({orig}, SLOT_ADDR, ..., false) has
// run up to RIP_AFTER (the next instruction it would execute: after a TF single-step, or the
// address of an int3 placed at SLOT_ADDR + insn_copy_len(orig)), the address in the original
// code the thread should continue at:
//  - the end of the copy (fall-through)              -> orig.next()
//  - a loop_rel copy's inner exits                    -> orig.next() / orig.branch_target
//  - outside the slot (a relocated branch was taken)  -> RIP_AFTER unchanged (it is already
//                                                        an original address)
//  - inside a multi-instruction copy (emulated call)  -> 0: not an exit, keep going (use
//                                                        insn_emulate() for calls instead)
uintptr_t ss_fixup_rip(const insn &orig, uintptr_t slot_addr, uintptr_t rip_after) noexcept;

// ss_fixup_rip() applied to REGS->ip, plus the kernel's resume_execution() flag fix: a
// single-stepped pushf pushed TF set, cleared here in the word at REGS->sp. Returns false
// when ss_fixup_rip() returned 0 (REGS unchanged).
bool ss_fixup_regs(const insn &orig, uintptr_t slot_addr, struct pt_regs *regs) noexcept;

} // namespace dprobe::arch
