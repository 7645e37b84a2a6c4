// Switch jump tables: the targets of gcc's position-independent dispatch
//     cmp $N, %idx ; ja default ; ... lea table(%rip), %base   (the lea before or after the bound)
//     movslq (%base,%idx,4), %tmp ; add %base, %tmp ; [notrack] jmp *%tmp
// are the N+1 table entries added to the table's address. Knowing them, the indirect jump
// no longer hides where it can land.
#include "arch/x86_64/jump_table.h"

#include <Zydis/Zydis.h>
#include <cstring>

namespace dprobe::arch
{
namespace
{

struct decoded {
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

bool decode(const insn &i, decoded &d)
{
    // Shared and read-only: a dynamic TLS variable would make a thread's first use take the
    // loader's TLS lock, which a dlopen holds while dprobe records the new object's sites.
    static const ZydisDecoder dec = [] {
        ZydisDecoder z;
        ZydisDecoderInit(&z, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        return z;
    }();
    return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, i.bytes, i.len, &d.insn, d.ops));
}

ZydisRegister full(ZydisRegister r)
{
    return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
}

bool is_reg(const ZydisDecodedOperand &o)
{
    return o.type == ZYDIS_OPERAND_TYPE_REGISTER;
}

// The instruction before insns[K] that last wrote register TARGET, looked for at most
// BACK instructions back in the same straight-line code (none past a branch), decoded into
// D. False when there is none or it cannot be decoded.
bool last_writer(const func_analysis &fa, size_t k, ZydisRegister target, size_t back, decoded &d)
{
    for (size_t n = 1; n <= back && n <= k; ++n) {
        const insn &i = fa.insns[k - n];
        if (i.is_branch || !decode(i, d)) return false;
        if (is_reg(d.ops[0]) && full(d.ops[0].reg.value) == target &&
            (d.ops[0].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
            return true;
    }
    return false;
}

} // namespace

std::optional<std::vector<uintptr_t>> jump_table_targets(const func_analysis &fa, size_t k,
                                                         const mem_view &mem)
{
    const insn &jmp = fa.insns[k];
    decoded dj;
    if (!decode(jmp, dj) || dj.insn.mnemonic != ZYDIS_MNEMONIC_JMP || !is_reg(dj.ops[0]))
        return std::nullopt;
    const ZydisRegister tmp = full(dj.ops[0].reg.value);
    ZydisRegister base = ZYDIS_REGISTER_NONE, idx = ZYDIS_REGISTER_NONE;
    uintptr_t table = 0;
    bool have_add = false, have_load = false;
    uint64_t entries = 0;
    // Walk back through the dispatch; give up at anything that is not part of it.
    for (size_t n = 1; n <= 16 && n <= k; ++n) {
        const insn &i = fa.insns[k - n];
        decoded d;
        if (!decode(i, d)) return std::nullopt;
        const auto m = d.insn.mnemonic;
        if (!have_add) {
            if (m != ZYDIS_MNEMONIC_ADD || !is_reg(d.ops[0]) || !is_reg(d.ops[1]) ||
                full(d.ops[0].reg.value) != tmp)
                return std::nullopt;
            base = full(d.ops[1].reg.value);
            have_add = true;
        } else if (!have_load) {
            if (m != ZYDIS_MNEMONIC_MOVSXD || full(d.ops[0].reg.value) != tmp ||
                d.ops[1].type != ZYDIS_OPERAND_TYPE_MEMORY || full(d.ops[1].mem.base) != base ||
                d.ops[1].mem.scale != 4 || d.ops[1].mem.disp.has_displacement)
                return std::nullopt;
            idx = full(d.ops[1].mem.index);
            have_load = true;
        } else if (!table) {
            if (m == ZYDIS_MNEMONIC_LEA && full(d.ops[0].reg.value) == base && i.is_rip_relative)
                table = i.rip_target;
            else if (is_reg(d.ops[0]) && (full(d.ops[0].reg.value) == base))
                return std::nullopt; // base computed some other way
        } else {
            // The bound: cmp $N, %idx immediately followed by ja (entries 0..N).
            if (m == ZYDIS_MNEMONIC_CMP && is_reg(d.ops[0]) && full(d.ops[0].reg.value) == idx &&
                d.ops[1].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && n >= 1) {
                const insn &next = fa.insns[k - n + 1];
                decoded dn;
                if (decode(next, dn) && dn.insn.mnemonic == ZYDIS_MNEMONIC_JNBE)
                    entries = d.ops[1].imm.value.u + 1;
                break;
            }
            // The bound's `ja` may come before the table's lea (gcc -O2: cmp; ja; lea; ...):
            // the cmp right before it is checked at the next step.
            if (i.is_branch && m == ZYDIS_MNEMONIC_JNBE && n < k) continue;
            if (i.is_branch) return std::nullopt;
            // Anything else writing the index (other than zero-extending it) breaks the chain.
            if (is_reg(d.ops[0]) && full(d.ops[0].reg.value) == idx &&
                !(m == ZYDIS_MNEMONIC_MOV && is_reg(d.ops[1]) && full(d.ops[1].reg.value) == idx))
                return std::nullopt;
        }
    }
    if (!table || !entries || entries > 4096) return std::nullopt;
    std::vector<uintptr_t> targets;
    for (uint64_t e = 0; e < entries; ++e) {
        int32_t rel;
        if (!mem.read(table + 4 * e, &rel, sizeof rel)) return std::nullopt;
        uintptr_t t = table + static_cast<intptr_t>(rel);
        if (t < fa.start || t >= fa.start + fa.size) return std::nullopt;
        targets.push_back(t);
    }
    return targets;
}

std::vector<int64_t> table_load_disps(const func_analysis &fa)
{
    std::vector<int64_t> out;
    for (const insn &i : fa.insns) {
        if (i.is_rip_relative || i.is_branch) continue;
        const char *m = i.mnemonic_name();
        if (std::strcmp(m, "movsxd") != 0 && std::strcmp(m, "mov") != 0) continue;
        decoded d;
        if (!decode(i, d) || d.ops[1].type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
        const auto &mem = d.ops[1].mem;
        if (mem.base == ZYDIS_REGISTER_NONE || mem.index == ZYDIS_REGISTER_NONE || mem.scale != 4)
            continue;
        if (mem.disp.has_displacement && mem.disp.value != 0) out.push_back(mem.disp.value);
    }
    return out;
}

bool is_relative_table_jump(const func_analysis &fa, size_t k)
{
    decoded dj;
    if (!decode(fa.insns[k], dj) || dj.insn.mnemonic != ZYDIS_MNEMONIC_JMP || !is_reg(dj.ops[0]))
        return false;
    const ZydisRegister target = full(dj.ops[0].reg.value);
    decoded d;
    if (!last_writer(fa, k, target, 16, d)) return false;
    if (d.insn.mnemonic != ZYDIS_MNEMONIC_ADD || !is_reg(d.ops[1]) || d.ops[0].size != 64 ||
        d.ops[1].size != 64)
        return false;
    // The base (either operand: `add %entry, %base` does it too) is a table's address the
    // function itself takes (lea T(%rip), %base): the scan starts from those, so a base from
    // anywhere else proves nothing.
    const ZydisRegister src = full(d.ops[1].reg.value);
    for (const insn &l : fa.insns) {
        if (!l.is_rip_relative || std::strcmp(l.mnemonic_name(), "lea") != 0) continue;
        decoded dl;
        if (decode(l, dl) && is_reg(dl.ops[0]) &&
            (full(dl.ops[0].reg.value) == src || full(dl.ops[0].reg.value) == target))
            return true;
    }
    return false;
}

bool is_pointer_tail_jump(const func_analysis &fa, size_t k)
{
    const insn &jmp = fa.insns[k];
    decoded dj;
    if (!decode(jmp, dj) || dj.insn.mnemonic != ZYDIS_MNEMONIC_JMP) return false;
    const ZydisDecodedOperand &op = dj.ops[0];
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY)
        return op.mem.index == ZYDIS_REGISTER_NONE && op.mem.segment != ZYDIS_REGISTER_FS &&
               op.mem.segment != ZYDIS_REGISTER_GS; // jmp *disp(%base): a loaded pointer
    if (!is_reg(op)) return false;
    // The instruction that last wrote the register loads it from memory.
    decoded d;
    return last_writer(fa, k, full(op.reg.value), 8, d) && d.insn.mnemonic == ZYDIS_MNEMONIC_MOV &&
           d.ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY && d.ops[1].mem.index == ZYDIS_REGISTER_NONE;
}

} // namespace dprobe::arch
