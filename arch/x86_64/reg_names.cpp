// The x86-64 register names and numbers (see reg_names.h).
#include "arch/x86_64/reg_names.h"

namespace dprobe::arch
{

const char *dwarf_regstr(unsigned regno) noexcept
{
    static const char *const names[16] = {"ax", "dx", "cx",  "bx",  "si",  "di",  "bp",  "sp",
                                          "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"};
    return regno < 16 ? names[regno] : nullptr;
}

const char *asm_reg_to_pt_regs(std::string_view r) noexcept
{
    static const struct {
        const char *pt;
        const char *names[4];
    } regs[] = {
        {"ax", {"rax", "eax", "ax", "al"}},       {"bx", {"rbx", "ebx", "bx", "bl"}},
        {"cx", {"rcx", "ecx", "cx", "cl"}},       {"dx", {"rdx", "edx", "dx", "dl"}},
        {"si", {"rsi", "esi", "si", "sil"}},      {"di", {"rdi", "edi", "di", "dil"}},
        {"bp", {"rbp", "ebp", "bp", "bpl"}},      {"sp", {"rsp", "esp", "sp", "spl"}},
        {"r8", {"r8", "r8d", "r8w", "r8b"}},      {"r9", {"r9", "r9d", "r9w", "r9b"}},
        {"r10", {"r10", "r10d", "r10w", "r10b"}}, {"r11", {"r11", "r11d", "r11w", "r11b"}},
        {"r12", {"r12", "r12d", "r12w", "r12b"}}, {"r13", {"r13", "r13d", "r13w", "r13b"}},
        {"r14", {"r14", "r14d", "r14w", "r14b"}}, {"r15", {"r15", "r15d", "r15w", "r15b"}},
        {"ip", {"rip", "eip", "ip", nullptr}},
    };
    for (const auto &e : regs)
        for (const char *n : e.names)
            if (n && r == n) return e.pt;
    return nullptr;
}

} // namespace dprobe::arch
