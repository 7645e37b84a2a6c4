// The exception-table lookup behind the nofault reads of uaccess.S.
#include "arch/x86_64/uaccess.h"

#include <cstdint>

namespace
{

struct extable_entry {
    int32_t insn;  // faulting instruction, relative to &insn
    int32_t fixup; // where to resume, relative to &fixup
};

} // namespace

extern "C" const extable_entry dprobe_uaccess_extable_start[];
extern "C" const extable_entry dprobe_uaccess_extable_end[];

namespace dprobe
{
namespace
{

// The fixup address for a faulting RIP, or 0.
uintptr_t search_extable(uintptr_t rip)
{
    for (const extable_entry *e = dprobe_uaccess_extable_start; e < dprobe_uaccess_extable_end;
         e++) {
        uintptr_t insn = reinterpret_cast<uintptr_t>(&e->insn) + static_cast<intptr_t>(e->insn);
        if (insn == rip)
            return reinterpret_cast<uintptr_t>(&e->fixup) + static_cast<intptr_t>(e->fixup);
    }
    return 0;
}

} // namespace

bool uaccess_is_fixup_insn(unsigned long addr)
{
    return search_extable(addr) != 0;
}

bool uaccess_fixup_fault(int sig, siginfo_t *info, ucontext_t *uc)
{
    (void)info;
    if ((sig != SIGSEGV && sig != SIGBUS) || !uc) return false;
    auto rip = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
    uintptr_t fixup = search_extable(rip);
    if (!fixup) return false;
    uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(fixup);
    return true;
}

} // namespace dprobe
