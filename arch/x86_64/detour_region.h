// The region a 5-byte jmp replaces at a function entry or a probe address: whole instructions
// covering at least the jmp, the kernel's can_optimize() checks. Offline: `dprobe funcs`
// decides from a file what the runtime decides from the live text (see detour.h for what is
// done with a region).
#pragma once

#include "arch/x86_64/insn.h"
#include "arch/x86_64/insn_analysis.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dprobe::arch
{

// The most bytes a jmp over whole instructions may replace (the region's original bytes are
// kept in a text_poke_req: detour.h checks the two agree).
inline constexpr size_t DETOUR_MAX_REGION = 24;

// What the jmp replaces.
struct detour_region {
    uintptr_t addr = 0;
    uint8_t len = 0;                      // >= 5, whole instructions
    uint8_t orig[DETOUR_MAX_REGION] = {}; // their original bytes
    std::vector<insn> insns;              // the instructions, in order
};

// The region a jmp at ADDR may replace in the function analysed as FA (whose bytes, with any
// probe undone, start at CODE): can_optimize_region()'s checks and the size limit. nullopt
// with *WHY (and *REFUSAL) set when it may not.
std::optional<detour_region> detour_region_at(const func_analysis &fa, const uint8_t *code,
                                              uintptr_t addr, std::string *why,
                                              optimize_refusal *refusal = nullptr);

// For a function shorter than the jmp: the rest of the function from IP (after any endbr64),
// when it ends in ret or jmp, nothing branches into it past IP, and the bytes after it up to
// IP + 5 are alignment padding (int3 or NOPs), read through MEM. The jmp then overwrites
// padding that never runs. The caller checks that no other function starts in those bytes.
// nullopt when the function does not have that shape.
std::optional<detour_region> short_function_region(const func_analysis &fa, uintptr_t ip,
                                                   const mem_view &mem = live_memory());

// Whether [FROM, TO) is alignment padding: int3s, or NOPs (any length or prefix) decoded
// from FROM, the last of which may extend past TO. Read through MEM; false when unreadable.
bool is_padding(uintptr_t from, uintptr_t to, const mem_view &mem = live_memory()) noexcept;

} // namespace dprobe::arch
