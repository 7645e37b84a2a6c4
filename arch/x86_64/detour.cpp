// The one detour builder (see detour.h).
#include "arch/x86_64/detour.h"

#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"

#include <cstring>

namespace dprobe::arch
{

namespace
{

bool never_falls_through(const detour_region &r)
{
    return !r.insns.empty() && r.insns.back().is_unconditional_exit();
}

} // namespace

void detour::moves(std::vector<rip_move> &out) const
{
    for (size_t i = 1; i < region.insns.size(); ++i)
        out.push_back({region.insns[i].addr, rx + copy_off[i]});
}

size_t detour_size(const detour_region &r, size_t head) noexcept
{
    return head + r.insns.size() * MAX_RELOCATED_INSN_SIZE + JMP32_INSN_SIZE;
}

bool detour_build(const detour_region &r, uint8_t *rw, uintptr_t rx, size_t head, detour *out,
                  std::string *why)
{
    // A region ending in ret/jmp needs no jump back (and a short function's region ends in
    // padding, where there is nothing to come back to).
    auto rel = relocate_insns(r.insns, rx + head, r.addr + r.len, !never_falls_through(r));
    if (!rel) {
        *why = rel.error.message;
        return false;
    }
    std::memcpy(rw + head, rel.copy->bytes.data(), rel.copy->bytes.size());
    out->region = r;
    out->rx = rx;
    out->head = static_cast<uint32_t>(head);
    out->size = head + rel.copy->bytes.size();
    out->copy_off.clear();
    for (uint32_t off : rel.copy->insn_offsets)
        out->copy_off.push_back(static_cast<uint32_t>(head) + off);
    return true;
}

text_poke_req detour_arm_req(const detour &d) noexcept
{
    text_poke_req r;
    jmp_req(d.region.addr, d.rx, &r); // reachable: the detour was allocated near the region
    r.len = d.region.len;
    // The rest of the region is never executed: nothing jumps into it (checked).
    std::memset(r.bytes + JMP32_INSN_SIZE, INT3_INSN_OPCODE, d.region.len - JMP32_INSN_SIZE);
    return r;
}

text_poke_req detour_disarm_req(const detour &d, bool keep_breakpoint) noexcept
{
    text_poke_req r;
    r.addr = d.region.addr;
    r.len = d.region.len;
    std::memcpy(r.bytes, d.region.orig, d.region.len);
    if (keep_breakpoint) {
        r.bytes[0] = INT3_INSN_OPCODE;
        r.emu = text_poke_req::emulate::trap;
    } else {
        r.emu = text_poke_req::emulate::jmp;
        r.target = d.copy();
    }
    return r;
}

uintptr_t detour_back_target(const detour &d) noexcept
{
    return d.size && !never_falls_through(d.region) ? d.region.addr + d.region.len : 0;
}

bool detour_back_req(const detour &d, uintptr_t to, text_poke_req *out) noexcept
{
    // The relocated region ends with the jump back (detour_build).
    if (!detour_back_target(d) || d.size < d.head + JMP32_INSN_SIZE) return false;
    return jmp_req(d.rx + d.size - JMP32_INSN_SIZE, to, out);
}

bool detour_write_jmp_head(const detour &d, uint8_t *rw, uintptr_t to) noexcept
{
    auto jmp = make_jmp_rel32(d.rx, to);
    if (!jmp) return false;
    std::memcpy(rw, jmp->data(), jmp->size());
    return true;
}

} // namespace dprobe::arch
