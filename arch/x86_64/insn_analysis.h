// Whole-function analysis for jump optimization (the kernel's optprobe can_optimize()):
// decode a function from its start, record where its branches go, and decide whether a
// region at a probe address may be replaced by a 5-byte jmp to a detour buffer.
#pragma once

#include "arch/x86_64/insn.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace dprobe::arch
{

// One branch inside the function whose target is known.
struct branch_edge {
    uintptr_t from; // address of the branch instruction
    uintptr_t to;   // its target
};

struct func_analysis {
    uintptr_t start = 0;
    size_t size = 0;
    std::vector<insn> insns; // linear sweep from start, in address order
    // Decoding stopped before the end (invalid bytes, or an instruction crossing the end).
    bool decode_failed = false;
    uintptr_t decode_fail_addr = 0;
    // Indirect jumps whose targets cannot be known (jump tables, `jmp *%reg`, ...). A
    // `jmp *disp(%rip)` without index is a tail call through a pointer slot (GOT with -fno-plt,
    // a function-pointer variable): compilers only emit it to leave the function, so it is
    // not counted here. Any other indirect jump might land anywhere in the function.
    bool has_indirect_jump = false;
    std::vector<uintptr_t> indirect_jumps;
    // Relative branches (jmp, jcc, loop, call, xbegin) whose target lies inside the function,
    // sorted by target.
    std::vector<branch_edge> jump_targets;

    // The instruction starting at ADDR, or nullptr.
    const insn *find(uintptr_t addr) const noexcept;
    bool is_boundary(uintptr_t addr) const noexcept { return find(addr) != nullptr; }
};

// Where the analysis reads what lies around a function's code (its jump tables, the padding
// after it) by address: this process's memory, or an ELF file's image read from disk
// (`dprobe funcs`), so that both see the same thing.
struct mem_view {
    // Copies the LEN bytes at ADDR to OUT; false when they are not there.
    virtual bool read(uintptr_t addr, void *out, size_t len) const noexcept = 0;
    // Whether ADDR is code of the object being analysed (an executable segment). A view that
    // cannot tell (knows_code() false) gets no table scan (see analyze_function).
    virtual bool knows_code() const noexcept { return false; }
    virtual bool is_code(uintptr_t) const noexcept { return false; }

  protected:
    ~mem_view() = default;
};
// This process's memory, read in place (the caller knows the addresses are mapped).
const mem_view &live_memory() noexcept;

// Decodes the SIZE bytes of the function at START whose bytes are readable at CODE (the live
// text, or a saved copy of its original bytes when probes are already armed in it). Jump
// tables are read through MEM when given, else from this process when CODE is the live text
// (START itself); otherwise an indirect jump stays unknown.
//
// A switch dispatch whose shape jump_table_targets does not know (the table's base loaded
// long before, the index copied or widened, the bound compared in memory), recognised by its
// last step (`add %base, %reg; jmp *%reg`: a 4-byte entry of a position-independent table
// added to the table's address), is made known when MEM knows the object's code: every
// table the function may use is scanned, from each address it takes outside itself
// (lea X(%rip), plus each displacement its scaled 4-byte loads add), 4-byte entries relative
// to that base; while they point into the object's code (a real table's entries all do, cold
// parts included), those inside the function are counted as branch targets. Reading past a
// table's end only adds targets: more refusals, never fewer. Other indirect jumps (tables
// of absolute pointers, as computed gotos make) stay unknown.
func_analysis analyze_function(const void *code, uintptr_t start, size_t size,
                               const mem_view *mem = nullptr);
inline func_analysis analyze_function(uintptr_t start, size_t size)
{
    return analyze_function(reinterpret_cast<const void *>(start), start, size);
}

enum class optimize_refusal {
    none,
    outside_function,  // the address is not inside the analysed function
    not_boundary,      // the address is not the start of an instruction
    decode_failed,     // part of the function could not be decoded: branches unknown
    crosses_end,       // fewer than min_len bytes of whole instructions before the end
    jump_into_region,  // a branch (or an extra target) lands strictly inside the region
    indirect_jump,     // the function has an indirect jump with unknown targets
    cannot_relocate,   // an instruction of the region cannot run out of line
    endbr_in_region,   // an endbr64 (indirect-branch landing pad) inside the region
    exit_not_last,     // jmp/ret (control never falls through) before the region's end
    return_into_region // call/syscall whose return address would lie inside the region
};

struct optimize_check {
    optimize_refusal reason = optimize_refusal::none;
    std::string message;      // readable reason, empty when ok
    uintptr_t addr = 0;       // region start
    size_t len = 0;           // region length (>= min_len when ok)
    std::vector<insn> region; // whole instructions covering [addr, addr+len)
    bool ok() const noexcept { return reason == optimize_refusal::none; }
};

// Whether the region of whole instructions starting at ADDR and covering at least MIN_LEN
// bytes can be replaced by a jmp rel32 to a detour that runs a relocated copy of it.
// EXTRA_TARGETS are addresses reached from outside the decoded code that the caller knows of
// (C++ landing pads from .gcc_except_table, setjmp return points, other functions' jumps):
// none may lie strictly inside the region. Rules (after the kernel's can_optimize()):
//  - the region lies inside the function and is made of whole, decodable instructions;
//  - the whole function decodes (else branches into the region cannot be ruled out);
//  - no branch of the function targets addr+1 .. addr+len-1 (addr itself is fine: it becomes
//    the jmp to the detour);
//  - the function has no indirect jump with unknown targets;
//  - each instruction can run out of line (insn_ool_refusal()); relative branches are fine,
//    the relocator rewrites them;
//  - a jmp/ret may only be the region's last instruction (what follows is reached only by
//    branches, which the decoding cannot fully see when the region goes on);
//  - a call or syscall may only be the last instruction: its return address must not point
//    into the bytes the jmp replaces;
//  - no endbr64 in the region (a landing pad must stay in place; when probing a function
//    entry pass the address after its endbr64).
optimize_check can_optimize_region(const func_analysis &fa, uintptr_t addr,
                                   size_t min_len = JMP32_INSN_SIZE,
                                   std::span<const uintptr_t> extra_targets = {});

const char *optimize_refusal_name(optimize_refusal r) noexcept;

} // namespace dprobe::arch
