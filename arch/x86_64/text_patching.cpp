// The byte-level acts of code patching on x86-64 (see text_patching.h).
#include "arch/x86_64/text_patching.h"

#include "arch/x86_64/insn_bytes.h"

#include <cstring>

namespace dprobe::arch
{

void text_poke_write_bp(uintptr_t addr) noexcept
{
    __atomic_store_n(reinterpret_cast<uint8_t *>(addr), INT3_INSN_OPCODE, __ATOMIC_RELEASE);
}

void fill_trap(uint8_t *dst, size_t len) noexcept
{
    std::memset(dst, INT3_INSN_OPCODE, len);
}

bool jmp_req(uintptr_t at, uintptr_t to, text_poke_req *out) noexcept
{
    auto jmp = make_jmp_rel32(at, to);
    if (!jmp) return false;
    *out = {};
    out->addr = at;
    out->len = static_cast<uint8_t>(jmp->size());
    std::memcpy(out->bytes, jmp->data(), jmp->size());
    out->emu = text_poke_req::emulate::jmp;
    out->insn_len = static_cast<uint8_t>(jmp->size());
    out->target = to;
    return true;
}

void write_abs_jmp(uint8_t *rw, uintptr_t target) noexcept
{
    static const uint8_t jmp_rip[6] = {0xff, 0x25, 0, 0, 0, 0}; // jmp *0(%rip)
    std::memcpy(rw, jmp_rip, sizeof jmp_rip);
    std::memcpy(rw + sizeof jmp_rip, &target, sizeof target);
    static_assert(sizeof jmp_rip + sizeof target == ABS_JMP_SIZE);
}

} // namespace dprobe::arch
