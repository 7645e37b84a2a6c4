// Where dprobe hooks the dynamic loader's notification (dl_hook.S is the hook itself):
// _dl_debug_state(), the function r_debug.r_brk names, which the loader calls at every
// change of the object list. It is `ret` (after endbr64 in CET builds of glibc) padded to the
// next function, 16-byte aligned: room for a 5-byte jmp over the ret and the padding.
// core/dl_notify.cpp decides when to hook and checks the symbol table; this reads the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dprobe::arch
{

inline constexpr size_t DL_HOOK_SITE_LEN = 5;

// The address at R_BRK (past an endbr64) where the hook's jmp goes, or -EBUSY when a
// debugger's breakpoint sits there (it would write its saved byte back over ours), or
// -EOPNOTSUPP when the function does not have that shape.
long dl_hook_site(uintptr_t r_brk, uintptr_t *at) noexcept;

} // namespace dprobe::arch
