// Register names of struct pt_regs, for fetch args (%di) and regs_query_register_offset().
#include <dprobe/ptrace.h>

#include <cstddef>
#include <cstring>

namespace
{

struct reg_name {
    const char *name;
    unsigned int offset;
};

#define REG(r)                                                                                     \
    {                                                                                              \
#r, offsetof(struct pt_regs, r)                                                            \
    }
constexpr reg_name regs_table[] = {
    REG(r15), REG(r14),     REG(r13), REG(r12), REG(bp),    REG(bx), REG(r11),
    REG(r10), REG(r9),      REG(r8),  REG(ax),  REG(cx),    REG(dx), REG(si),
    REG(di),  REG(orig_ax), REG(ip),  REG(cs),  REG(flags), REG(sp), REG(ss),
};
#undef REG

} // namespace

extern "C" int regs_query_register_offset(const char *name)
{
    if (!name) return -1;
    for (const auto &r : regs_table)
        if (std::strcmp(r.name, name) == 0) return static_cast<int>(r.offset);
    return -1;
}

extern "C" const char *regs_query_register_name(unsigned int offset)
{
    for (const auto &r : regs_table)
        if (r.offset == offset) return r.name;
    return nullptr;
}
