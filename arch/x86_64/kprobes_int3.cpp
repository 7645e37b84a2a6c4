// x86's side of a kprobe hit (see kprobes_int3.h).
#include "arch/x86_64/kprobes_int3.h"

#include "arch/x86_64/uaccess.h"

#include <dprobe/ptrace.h>

// The section of core/compiler.h's DPROBE_NOPROBE (arch sits below core and does not include
// it): the int3 hook runs these.
#define KPROBE_NOPROBE __attribute__((section("dprobe_noprobe_text")))

namespace dprobe::arch
{

namespace
{

// pt_regs as the array of words insn's register numbers index (insn.h: ind_reg and ind_index
// are pt_regs offsets / 8).
KPROBE_NOPROBE unsigned long reg_word(const struct pt_regs *regs, int8_t n) noexcept
{
    return reinterpret_cast<const unsigned long *>(regs)[n];
}

// The address a memory-indirect branch reads its target from, with REGS' values.
KPROBE_NOPROBE uintptr_t indirect_ea(const insn &i, const struct pt_regs *regs) noexcept
{
    if (i.is_rip_relative) return i.rip_target;
    uintptr_t ea = static_cast<uintptr_t>(i.ind_disp);
    if (i.ind_reg >= 0) ea += reg_word(regs, i.ind_reg);
    if (i.ind_index >= 0) ea += reg_word(regs, i.ind_index) * i.ind_scale;
    return ea;
}

} // namespace

KPROBE_NOPROBE bool kprobe_emulate_insn(const insn &i, struct pt_regs *regs) noexcept
{
    if ((i.k == insn::call_indirect || i.k == insn::jmp_indirect) && i.ind_is_mem) {
        // insn_emulate reads the operand; check it first through the nofault copy.
        unsigned long target;
        if (copy_from_user_nofault(&target, reinterpret_cast<const void *>(indirect_ea(i, regs)),
                                   sizeof target))
            return false;
    }
    regs->ip = i.addr;
    return insn_emulate(i, regs);
}

KPROBE_NOPROBE bool kprobe_boost_fault(const insn &i, uintptr_t boost, size_t len,
                                       ucontext_t *uc) noexcept
{
    const uintptr_t ip = uc_ip(uc);
    if (ip == boost) {
        uc_set_ip(uc, i.addr);
        return true;
    }
    if (ip > boost && ip < boost + len && i.k == insn::call_indirect) {
        // The relocated `call *mem` pushed its return address, then its jmp faulted.
        uc_set_sp(uc, uc_sp(uc) + sizeof(uintptr_t));
        uc_set_ip(uc, i.addr);
        return true;
    }
    return false;
}

} // namespace dprobe::arch
