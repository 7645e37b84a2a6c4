// The loader hook's site (see dl_hook_site.h).
#include "arch/x86_64/dl_hook_site.h"

#include "arch/x86_64/insn_bytes.h"

#include <algorithm>
#include <cerrno>

namespace dprobe::arch
{

namespace
{

bool is_padding_byte(uint8_t b)
{
    // NOPs (0x90, the bytes of `nopw %cs:0(%rax,%rax,1)` and its 0x66 prefixes), int3
    // filler, zero filler.
    return b == 0x90 || b == 0x66 || b == 0x2e || b == 0x0f || b == 0x1f || b == 0x84 ||
           b == 0x40 || b == 0x44 || b == 0x00 || b == INT3_INSN_OPCODE;
}

} // namespace

long dl_hook_site(uintptr_t r_brk, uintptr_t *at) noexcept
{
    uintptr_t a = r_brk;
    if (is_endbr64(reinterpret_cast<const uint8_t *>(a)))
        a += ENDBR64_INSN_SIZE; // keep the landing pad
    const auto *code = reinterpret_cast<const uint8_t *>(a);
    if (code[0] == INT3_INSN_OPCODE) return -EBUSY;
    if (code[0] != RET_INSN_OPCODE) return -EOPNOTSUPP;
    if (!std::all_of(code + 1, code + DL_HOOK_SITE_LEN, is_padding_byte)) return -EOPNOTSUPP;
    *at = a;
    return 0;
}

} // namespace dprobe::arch
