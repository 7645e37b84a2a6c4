// The one detour: what stands in for instructions a jmp replaces (the kernel's optprobe
// detour buffer, arch/x86/kernel/kprobes/opt.c; dprobe's jump sites apply the same scheme to
// a function entry). Laid out as
//     [head][the region's instructions, relocated][jmp back to after the region]
// where the head is its user's: `jmp stub` for a jump site (the tracer runs, then the
// relocated entry), the register-saving handler call for an optimized kprobe. The region
// (whole instructions covering at least the 5 bytes of the jmp, the kernel's can_optimize()
// checks: detour_region.h, offline, which `dprobe funcs` uses too) and its map to the
// copies (where a thread stopped inside the region continues, where a fault in a copy
// really happened) are computed once for every user.
//
// Arming writes `jmp detour` over the region's first 5 bytes and int3 over the rest (never
// executed: nothing jumps into the region); disarming writes the original bytes back, or an
// int3 and their tail when a kprobe stays armed there. Generic code allocates the memory
// (near the region) and decides when to arm; it never sees the bytes.
#pragma once

#include "arch/x86_64/insn.h"
#include "arch/x86_64/detour_region.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/text_patching.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dprobe::arch
{

static_assert(DETOUR_MAX_REGION == sizeof(text_poke_req::bytes),
              "a region's bytes are written by one text_poke_req");

struct detour {
    detour_region region;
    uintptr_t rx = 0;               // where the detour runs (its head)
    uint32_t head = 0;              // the head's size: the relocated region follows
    size_t size = 0;                // bytes used
    std::vector<uint32_t> copy_off; // each region instruction's copy, from rx

    // The relocated region: the original instructions, run from here.
    uintptr_t copy() const noexcept { return rx + head; }
    // The copy of the region instruction at ORIG (0 if ORIG is none of them). Inline and
    // allocation-free: the SIGTRAP and fault hooks use them.
    uintptr_t copy_of(uintptr_t orig) const noexcept
    {
        for (size_t i = 0; i < region.insns.size(); ++i)
            if (region.insns[i].addr == orig) return rx + copy_off[i];
        return 0;
    }
    // The region instruction whose copy starts at COPY_IP (0 if none).
    uintptr_t orig_of(uintptr_t copy_ip) const noexcept
    {
        for (size_t i = 0; i < region.insns.size(); ++i)
            if (rx + copy_off[i] == copy_ip) return region.insns[i].addr;
        return 0;
    }
    // Whether IP lies in the relocated region.
    bool in_copy(uintptr_t ip) const noexcept { return ip >= copy() && ip < rx + size; }
    // Moves for threads stopped at a region instruction past the first: to its copy (the
    // first one's address is where the jmp goes, a valid place to stop).
    void moves(std::vector<rip_move> &out) const;
};

// Bytes a detour of REGION with a HEAD-byte head needs at most.
size_t detour_size(const detour_region &r, size_t head) noexcept;

// Builds the detour at RW (which runs at RX, with detour_size() bytes): HEAD bytes left for
// its user's head, the region relocated after them and, unless its last instruction never
// falls through (ret, jmp), a jmp back to the instruction after it. Returns false with *WHY
// set when an instruction cannot run there.
bool detour_build(const detour_region &r, uint8_t *rw, uintptr_t rx, size_t head, detour *out,
                  std::string *why);

// Arming: `jmp D.rx` over the region, int3 after it. A thread meeting the protocol's
// breakpoint meanwhile continues at the detour.
text_poke_req detour_arm_req(const detour &d) noexcept;
// Disarming: the original bytes back, or with KEEP_BREAKPOINT an int3 followed by their tail
// (a kprobe stays armed there). A thread meeting the breakpoint meanwhile runs the relocated
// region (or, with KEEP_BREAKPOINT, is the kprobe hook's).
text_poke_req detour_disarm_req(const detour &d, bool keep_breakpoint) noexcept;

// Where the detour's jump back goes when it was built (the instruction after its region), or 0
// when it has none (a region ending in ret or jmp).
uintptr_t detour_back_target(const detour &d) noexcept;
// Re-aims the detour's jump back at TO: while another detour's jmp covers the place it returns
// to, at that detour's copy of the same instruction (see kprobe/kprobe_arm.cpp). False when it
// has no jump back or TO is out of reach.
bool detour_back_req(const detour &d, uintptr_t to, text_poke_req *out) noexcept;

// A jump site's head: `jmp TO` (the site's stub), JUMP_DETOUR_HEAD bytes at the detour's
// start. False when TO is out of reach.
inline constexpr size_t JUMP_DETOUR_HEAD = 5;
bool detour_write_jmp_head(const detour &d, uint8_t *rw, uintptr_t to) noexcept;

} // namespace dprobe::arch
