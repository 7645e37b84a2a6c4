// ucontext glue: what a SIGTRAP/SIGSEGV hook needs to read and redirect the interrupted
// thread (the user-space counterpart of the kernel's int3 handler fiddling with pt_regs).
#pragma once

#include "arch/x86_64/text_patching.h"

#include <cstdint>
#include <dprobe/ptrace.h>
#include <sys/user.h>
#include <ucontext.h>

namespace dprobe::arch
{

inline uintptr_t uc_ip(const ucontext_t *uc)
{
    return uc->uc_mcontext.gregs[REG_RIP];
}
inline void uc_set_ip(ucontext_t *uc, uintptr_t ip)
{
    uc->uc_mcontext.gregs[REG_RIP] = ip;
}
inline uintptr_t uc_sp(const ucontext_t *uc)
{
    return uc->uc_mcontext.gregs[REG_RSP];
}
inline void uc_set_sp(ucontext_t *uc, uintptr_t sp)
{
    uc->uc_mcontext.gregs[REG_RSP] = sp;
}

// Emulates `call target` whose return address is RET: the trapped thread continues as if
// the call instruction had executed.
inline void uc_emulate_call(ucontext_t *uc, uintptr_t ret, uintptr_t target)
{
    uintptr_t sp = uc_sp(uc) - 8;
    *reinterpret_cast<uintptr_t *>(sp) = ret;
    uc_set_sp(uc, sp);
    uc_set_ip(uc, target);
}

// The address of the int3 the thread trapped on (its ip is one past it).
inline uintptr_t uc_int3_addr(const ucontext_t *uc)
{
    return int3_trap_addr(uc_ip(uc));
}

// A thread that trapped on the protocol's breakpoint of R continues as if R's new first
// instruction had run (the kernel's poke_int3_handler: int3_emulate_nop/call/jmp). False
// when R says the int3 is someone else's (text_poke_req::emulate::trap).
inline bool uc_int3_emulate(ucontext_t *uc, const text_poke_req &r)
{
    switch (r.emu) {
    case text_poke_req::emulate::nop:
        uc_set_ip(uc, r.addr + r.len);
        return true;
    case text_poke_req::emulate::call:
        uc_emulate_call(uc, r.addr + r.insn_len, r.target);
        return true;
    case text_poke_req::emulate::jmp:
        uc_set_ip(uc, r.target);
        return true;
    case text_poke_req::emulate::trap:
        break;
    }
    return false;
}

// A stopped thread's registers (ptrace's user_regs_struct), as stop_machine hands them over.
inline uintptr_t user_regs_ip(const user_regs_struct &r)
{
    return r.rip;
}
inline void user_regs_set_ip(user_regs_struct &r, uintptr_t ip)
{
    r.rip = ip;
}
inline uintptr_t user_regs_sp(const user_regs_struct &r)
{
    return r.rsp;
}
// The trap flag: the thread is being single-stepped (a kprobe's out-of-line step).
inline bool user_regs_single_stepping(const user_regs_struct &r)
{
    return (r.eflags & 0x100) != 0;
}

// Whether the word at ADDR (below HI, the end of its stack) starts a signal frame whose
// return address is RESTORER (the kernel's rt_sigframe: sa_restorer, then the ucontext, at
// the handler's stack pointer on entry, which is 8 past a 16-byte boundary); if so, the
// interrupted instruction pointer in *IP. Reads only what lies below HI.
bool sigframe_at(uintptr_t addr, uintptr_t hi, uintptr_t restorer, uintptr_t *ip) noexcept;

// Copies between a ucontext and the kernel-layout pt_regs that kprobe handlers see.
void uc_to_pt_regs(const ucontext_t *uc, struct pt_regs *regs);
void pt_regs_to_uc(const struct pt_regs *regs, ucontext_t *uc);

} // namespace dprobe::arch
