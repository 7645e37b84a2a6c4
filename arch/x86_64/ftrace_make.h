// The requests of ftrace_replace_code() on x86 (the kernel's ftrace_make_call() and
// ftrace_make_nop()): a compiled-in site turned on is one `jmp stub` of the site's length
// (the stub calls the tracer, which calls the function body itself), turned off one NOP of
// that length. A jump site's on and off are its detour's (detour.h). A gcc sled of one-byte
// NOPs becomes one NOP with every thread stopped, a thread inside it moved to its end.
#pragma once

#include "arch/x86_64/text_patching.h"

#include <cstdint>
#include <vector>

namespace dprobe::arch
{

// The site of LEN bytes at IP turned off; a thread meeting the protocol's breakpoint goes
// past it.
text_poke_req ftrace_make_nop(uintptr_t ip, uint8_t len) noexcept;
// Turned on: `jmp STUB`; a thread meeting the breakpoint goes to STUB. False when STUB is
// out of reach or LEN is not 5 or 6.
bool ftrace_make_call(uintptr_t ip, uint8_t len, uintptr_t stub, text_poke_req *out) noexcept;
// Where threads stopped inside a sled of LEN one-byte NOPs at IP go when it becomes one NOP.
void sled_moves(uintptr_t ip, uint8_t len, std::vector<rip_move> &out);

} // namespace dprobe::arch
