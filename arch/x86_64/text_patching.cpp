// The byte-level acts of code patching on x86-64 (see text_patching.h).
#include "arch/x86_64/text_patching.h"

#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/uctx.h"

#include <cstring>

namespace dprobe::arch
{

void text_poke_write_bp(uintptr_t addr) noexcept
{
    __atomic_store_n(reinterpret_cast<uint8_t *>(addr), INT3_INSN_OPCODE, __ATOMIC_RELEASE);
}

bool poke_int3_handler(ucontext_t *uc, const text_poke_req *reqs, size_t n) noexcept
{
    const uintptr_t at = uc_int3_addr(uc);
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (reqs[mid].addr < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && reqs[lo].addr == at && uc_int3_emulate(uc, reqs[lo]);
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
