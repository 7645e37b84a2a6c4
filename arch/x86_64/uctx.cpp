#include "arch/x86_64/uctx.h"

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

} // namespace dprobe::arch
