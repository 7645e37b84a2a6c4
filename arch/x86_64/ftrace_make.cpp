// ftrace_make_call()/ftrace_make_nop() requests (see ftrace_make.h).
#include "arch/x86_64/ftrace_make.h"

#include "arch/x86_64/ftrace_arch.h"

namespace dprobe::arch
{

text_poke_req ftrace_make_nop(uintptr_t ip, uint8_t len) noexcept
{
    text_poke_req r;
    r.addr = ip;
    r.len = len;
    site_nop_bytes(len, r.bytes);
    r.emu = text_poke_req::emulate::nop;
    return r;
}

bool ftrace_make_call(uintptr_t ip, uint8_t len, uintptr_t stub, text_poke_req *out) noexcept
{
    text_poke_req r;
    r.addr = ip;
    r.len = len;
    if (!site_jmp_bytes(ip, len, stub, r.bytes)) return false;
    r.emu = text_poke_req::emulate::jmp;
    r.target = stub;
    *out = r;
    return true;
}

void sled_moves(uintptr_t ip, uint8_t len, std::vector<rip_move> &out)
{
    // Every NOP of a sled is equivalent to running the rest of it.
    for (uint8_t i = 1; i < len; ++i)
        out.push_back({ip + i, ip + len});
}

} // namespace dprobe::arch
