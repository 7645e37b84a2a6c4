// The region a jmp replaces (see detour_region.h).
#include "arch/x86_64/detour_region.h"

#include <cstring>

namespace dprobe::arch
{

namespace
{

detour_region make_region(uintptr_t addr, size_t len, std::vector<insn> insns, const uint8_t *bytes)
{
    detour_region r;
    r.addr = addr;
    r.len = static_cast<uint8_t>(len);
    std::memcpy(r.orig, bytes, len);
    r.insns = std::move(insns);
    return r;
}

} // namespace

std::optional<detour_region> detour_region_at(const func_analysis &fa, const uint8_t *code,
                                              uintptr_t addr, std::string *why,
                                              optimize_refusal *refusal)
{
    auto check = can_optimize_region(fa, addr, JMP32_INSN_SIZE);
    if (refusal) *refusal = check.reason;
    if (!check.ok()) {
        *why = check.message;
        return std::nullopt;
    }
    if (check.len > DETOUR_MAX_REGION) {
        *why = "region too long";
        return std::nullopt;
    }
    return make_region(addr, check.len, std::move(check.region), code + (addr - fa.start));
}

bool is_padding(uintptr_t from, uintptr_t to, const mem_view &mem) noexcept
{
    uintptr_t at = from;
    while (at < to) {
        uint8_t buf[MAX_INSN_SIZE];
        size_t n = MAX_INSN_SIZE;
        // The last NOP may end near the end of what is readable: try shorter reads.
        while (n && !mem.read(at, buf, n))
            --n;
        if (!n) return false;
        auto i = insn_decode(buf, n, at);
        if (!i) return false;
        if (i->k != insn::int3 && std::strcmp(i->mnemonic_name(), "nop") != 0) return false;
        at += i->len;
    }
    return true;
}

std::optional<detour_region> short_function_region(const func_analysis &fa, uintptr_t ip,
                                                   const mem_view &mem)
{
    const uintptr_t end = fa.start + fa.size;
    if (end >= ip + JMP32_INSN_SIZE || !is_padding(end, ip + JMP32_INSN_SIZE, mem))
        return std::nullopt;
    if (fa.decode_failed || fa.has_indirect_jump) return std::nullopt;
    std::vector<insn> region;
    for (const insn &i : fa.insns) {
        if (i.addr < ip) continue;
        if (insn_ool_refusal(i)) return std::nullopt;
        region.push_back(i);
    }
    if (region.empty() || !region.back().is_unconditional_exit()) return std::nullopt;
    for (const insn &i : region)
        if (&i != &region.back() &&
            (i.is_unconditional_exit() || i.k == insn::call_rel || i.k == insn::call_indirect))
            return std::nullopt;
    // Nothing may branch into the function after its first instruction.
    for (const auto &e : fa.jump_targets)
        if (e.to > ip) return std::nullopt;
    // The bytes: the region runs into the padding after the function.
    uint8_t bytes[JMP32_INSN_SIZE];
    if (!mem.read(ip, bytes, sizeof bytes)) return std::nullopt;
    return make_region(ip, JMP32_INSN_SIZE, std::move(region), bytes);
}

} // namespace dprobe::arch
