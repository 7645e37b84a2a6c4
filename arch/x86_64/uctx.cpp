#include "arch/x86_64/uctx.h"

#include <cstddef>

namespace dprobe::arch
{

void uc_to_pt_regs(const ucontext_t *uc, struct pt_regs *regs)
{
    const greg_t *g = uc->uc_mcontext.gregs;
    regs->r15 = g[REG_R15];
    regs->r14 = g[REG_R14];
    regs->r13 = g[REG_R13];
    regs->r12 = g[REG_R12];
    regs->bp = g[REG_RBP];
    regs->bx = g[REG_RBX];
    regs->r11 = g[REG_R11];
    regs->r10 = g[REG_R10];
    regs->r9 = g[REG_R9];
    regs->r8 = g[REG_R8];
    regs->ax = g[REG_RAX];
    regs->cx = g[REG_RCX];
    regs->dx = g[REG_RDX];
    regs->si = g[REG_RSI];
    regs->di = g[REG_RDI];
    regs->orig_ax = ~0UL;
    regs->ip = g[REG_RIP];
    regs->cs = g[REG_CSGSFS] & 0xffff;
    regs->flags = g[REG_EFL];
    regs->sp = g[REG_RSP];
    regs->ss = 0x2b; // __USER_DS on x86-64 Linux
}

void pt_regs_to_uc(const struct pt_regs *regs, ucontext_t *uc)
{
    greg_t *g = uc->uc_mcontext.gregs;
    g[REG_R15] = regs->r15;
    g[REG_R14] = regs->r14;
    g[REG_R13] = regs->r13;
    g[REG_R12] = regs->r12;
    g[REG_RBP] = regs->bp;
    g[REG_RBX] = regs->bx;
    g[REG_R11] = regs->r11;
    g[REG_R10] = regs->r10;
    g[REG_R9] = regs->r9;
    g[REG_R8] = regs->r8;
    g[REG_RAX] = regs->ax;
    g[REG_RCX] = regs->cx;
    g[REG_RDX] = regs->dx;
    g[REG_RSI] = regs->si;
    g[REG_RDI] = regs->di;
    g[REG_RIP] = regs->ip;
    // Only the arithmetic flags, DF and TF may be changed by a handler; the kernel would
    // refuse other bits too.
    constexpr unsigned long user_flags = 0x8d5 | 0x400 | 0x100;
    g[REG_EFL] = (g[REG_EFL] & ~user_flags) | (regs->flags & user_flags);
    g[REG_RSP] = regs->sp;
}

bool sigframe_at(uintptr_t addr, uintptr_t hi, uintptr_t restorer, uintptr_t *ip) noexcept
{
    // glibc's ucontext_t agrees with the kernel's frame up to uc_mcontext; what follows
    // differs (the kernel's is shorter), so only that much is read.
    const size_t head = offsetof(ucontext_t, uc_sigmask);
    if ((addr & 15) != 8 || addr + 8 + head > hi) return false;
    if (*reinterpret_cast<const volatile uintptr_t *>(addr) != restorer) return false;
    const auto *uc = reinterpret_cast<const ucontext_t *>(addr + 8);
    // The saved extended state lies above the frame, 64-byte aligned for xsave (or there is
    // none): a return address that only happens to equal sa_restorer has no such pointer.
    const auto fp = reinterpret_cast<uintptr_t>(uc->uc_mcontext.fpregs);
    if (fp && (fp < addr + 8 + head || fp >= hi || (fp & 15) != 0)) return false;
    *ip = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
    return true;
}

} // namespace dprobe::arch
