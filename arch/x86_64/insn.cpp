#include "arch/x86_64/insn.h"
#include "arch/x86_64/relocate.h"

#include <Zydis/Zydis.h>
#include <dprobe/ptrace.h>

#include <cstring>

namespace dprobe::arch
{

namespace
{

bool decode_full(const void *code, size_t avail, ZydisDecodedInstruction &zi,
                 ZydisDecodedOperand (&ops)[ZYDIS_MAX_OPERAND_COUNT]) noexcept
{
    ZydisDecoder dec;
    if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
        return false;
    return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code, avail, &zi, ops));
}

// A 64-bit general-purpose register as its slot in struct pt_regs, or -1.
int8_t pt_regs_slot(ZydisRegister r) noexcept
{
    switch (r) {
    case ZYDIS_REGISTER_R15:
        return offsetof(pt_regs, r15) / 8;
    case ZYDIS_REGISTER_R14:
        return offsetof(pt_regs, r14) / 8;
    case ZYDIS_REGISTER_R13:
        return offsetof(pt_regs, r13) / 8;
    case ZYDIS_REGISTER_R12:
        return offsetof(pt_regs, r12) / 8;
    case ZYDIS_REGISTER_RBP:
        return offsetof(pt_regs, bp) / 8;
    case ZYDIS_REGISTER_RBX:
        return offsetof(pt_regs, bx) / 8;
    case ZYDIS_REGISTER_R11:
        return offsetof(pt_regs, r11) / 8;
    case ZYDIS_REGISTER_R10:
        return offsetof(pt_regs, r10) / 8;
    case ZYDIS_REGISTER_R9:
        return offsetof(pt_regs, r9) / 8;
    case ZYDIS_REGISTER_R8:
        return offsetof(pt_regs, r8) / 8;
    case ZYDIS_REGISTER_RAX:
        return offsetof(pt_regs, ax) / 8;
    case ZYDIS_REGISTER_RCX:
        return offsetof(pt_regs, cx) / 8;
    case ZYDIS_REGISTER_RDX:
        return offsetof(pt_regs, dx) / 8;
    case ZYDIS_REGISTER_RSI:
        return offsetof(pt_regs, si) / 8;
    case ZYDIS_REGISTER_RDI:
        return offsetof(pt_regs, di) / 8;
    case ZYDIS_REGISTER_RSP:
        return offsetof(pt_regs, sp) / 8;
    default:
        return -1;
    }
}

unsigned long &reg_at(pt_regs *regs, int8_t slot) noexcept
{
    return reinterpret_cast<unsigned long *>(regs)[slot];
}

insn::kind classify(const ZydisDecodedInstruction &zi) noexcept
{
    const bool far = zi.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
    // A relative immediate (branch displacement); ZYDIS_ATTRIB_IS_RELATIVE would also flag
    // RIP-relative memory operands such as `call *x(%rip)`.
    const bool rel = zi.raw.imm[0].is_relative;
    switch (zi.mnemonic) {
    case ZYDIS_MNEMONIC_CALL:
        return far ? insn::far_branch : rel ? insn::call_rel : insn::call_indirect;
    case ZYDIS_MNEMONIC_JMP:
        return far ? insn::far_branch : rel ? insn::jmp_rel : insn::jmp_indirect;
    case ZYDIS_MNEMONIC_RET:
        return far ? insn::far_branch : insn::ret;
    case ZYDIS_MNEMONIC_LOOP:
    case ZYDIS_MNEMONIC_LOOPE:
    case ZYDIS_MNEMONIC_LOOPNE:
    case ZYDIS_MNEMONIC_JRCXZ:
    case ZYDIS_MNEMONIC_JECXZ:
    case ZYDIS_MNEMONIC_JCXZ:
        return insn::loop_rel;
    case ZYDIS_MNEMONIC_XBEGIN:
        return insn::xbegin;
    case ZYDIS_MNEMONIC_INT3:
        return insn::int3;
    case ZYDIS_MNEMONIC_INT:
        return zi.raw.imm[0].value.u == 3 ? insn::int3 : insn::int_n;
    case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INTO:
        return insn::int_n;
    case ZYDIS_MNEMONIC_SYSCALL:
    case ZYDIS_MNEMONIC_SYSENTER:
        return insn::syscall;
    case ZYDIS_MNEMONIC_SYSRET:
    case ZYDIS_MNEMONIC_SYSEXIT:
        return insn::sysret;
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ:
        return insn::iret;
    case ZYDIS_MNEMONIC_UD0:
    case ZYDIS_MNEMONIC_UD1:
    case ZYDIS_MNEMONIC_UD2:
        return insn::ud;
    case ZYDIS_MNEMONIC_HLT:
        return insn::hlt;
    case ZYDIS_MNEMONIC_ENDBR64:
    case ZYDIS_MNEMONIC_ENDBR32:
        return insn::endbr;
    default:
        break;
    }
    if (zi.meta.category == ZYDIS_CATEGORY_COND_BR || rel)
        return rel && zi.encoding == ZYDIS_INSTRUCTION_ENCODING_LEGACY ? insn::jcc_rel
                                                                       : insn::odd_branch;
    if (zi.attributes & ZYDIS_ATTRIB_IS_PRIVILEGED) return insn::privileged;
    return insn::other;
}

} // namespace

bool insn::is_unconditional_exit() const noexcept
{
    switch (k) {
    case jmp_rel:
    case jmp_indirect:
    case ret:
    case far_branch:
    case iret:
    case sysret:
    case ud:
    case hlt:
        return true;
    default:
        return false;
    }
}

const char *insn::mnemonic_name() const noexcept
{
    const char *s = ZydisMnemonicGetString(static_cast<ZydisMnemonic>(mnemonic));
    return s ? s : "(bad)";
}

std::optional<insn> insn_decode(const void *code, size_t avail, uintptr_t addr) noexcept
{
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!avail || !decode_full(code, avail, zi, ops)) return std::nullopt;

    insn i;
    i.addr = addr;
    i.len = zi.length;
    std::memcpy(i.bytes, code, zi.length);
    i.mnemonic = static_cast<uint16_t>(zi.mnemonic);
    i.k = classify(zi);
    i.is_privileged = zi.attributes & ZYDIS_ATTRIB_IS_PRIVILEGED;

    for (unsigned n = 0; n < zi.operand_count; ++n) {
        const auto &op = ops[n];
        if (op.type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
        if (op.mem.segment == ZYDIS_REGISTER_FS || op.mem.segment == ZYDIS_REGISTER_GS)
            i.has_segment_fs_gs = true;
        if (op.mem.base == ZYDIS_REGISTER_RIP || op.mem.base == ZYDIS_REGISTER_EIP) {
            // RIP-relative operands always carry a disp32 (there is no disp8 form).
            i.is_rip_relative = op.mem.base == ZYDIS_REGISTER_RIP;
            i.is_eip_relative = op.mem.base == ZYDIS_REGISTER_EIP;
            i.rip_disp = op.mem.disp.value;
            i.rip_target = i.next() + static_cast<uintptr_t>(op.mem.disp.value);
            i.disp_offset = zi.raw.disp.offset;
        }
    }

    if (i.is_relative_branch()) {
        i.imm_offset = zi.raw.imm[0].offset;
        i.imm_size = zi.raw.imm[0].size / 8;
        i.branch_target = i.next() + static_cast<uintptr_t>(zi.raw.imm[0].value.s);
    }
    switch (i.k) {
    case insn::jcc_rel:
        i.cc = zi.opcode & 0x0f; // 0x7x or 0x0f 0x8x: the condition is the low nibble
        break;
    case insn::loop_rel:
        i.counter_size = zi.address_width == 64 ? 8 : 4;
        i.loop = zi.mnemonic == ZYDIS_MNEMONIC_LOOP     ? insn::op_loop
                 : zi.mnemonic == ZYDIS_MNEMONIC_LOOPE  ? insn::op_loopz
                 : zi.mnemonic == ZYDIS_MNEMONIC_LOOPNE ? insn::op_loopnz
                                                        : insn::op_jrcxz;
        break;
    case insn::ret:
        if (zi.raw.imm[0].size) i.ret_imm = static_cast<uint16_t>(zi.raw.imm[0].value.u);
        break;
    case insn::call_indirect:
    case insn::jmp_indirect: {
        const auto &op = ops[0];
        if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) {
            i.ind_reg = pt_regs_slot(op.reg.value);
            i.ind_emulatable = i.ind_reg >= 0 && op.reg.value != ZYDIS_REGISTER_RSP;
        } else if (op.type == ZYDIS_OPERAND_TYPE_MEMORY) {
            i.ind_is_mem = true;
            i.ind_scale = op.mem.scale;
            i.ind_disp = op.mem.disp.value;
            i.ind_uses_rsp = op.mem.base == ZYDIS_REGISTER_RSP;
            bool ok = zi.address_width == 64 && !i.has_segment_fs_gs && !i.is_eip_relative &&
                      zi.operand_width == 64;
            if (op.mem.base != ZYDIS_REGISTER_NONE && op.mem.base != ZYDIS_REGISTER_RIP) {
                i.ind_reg = pt_regs_slot(op.mem.base);
                ok = ok && i.ind_reg >= 0;
            }
            if (op.mem.index != ZYDIS_REGISTER_NONE) {
                i.ind_index = pt_regs_slot(op.mem.index);
                ok = ok && i.ind_index >= 0;
            }
            i.ind_emulatable = ok;
        }
        break;
    }
    default:
        break;
    }

    switch (i.k) {
    case insn::call_rel:
    case insn::jmp_rel:
    case insn::jcc_rel:
    case insn::loop_rel:
    case insn::ret:
    case insn::call_indirect:
    case insn::jmp_indirect:
    case insn::far_branch:
    case insn::xbegin:
    case insn::iret:
    case insn::sysret:
    case insn::odd_branch:
        i.is_branch = true;
        break;
    default:
        break;
    }
    i.branch_opsize_prefix = (i.is_branch || i.k == insn::loop_rel) && i.k != insn::far_branch &&
                             (zi.attributes & ZYDIS_ATTRIB_HAS_OPERANDSIZE);
    i.pushes_flags = zi.mnemonic == ZYDIS_MNEMONIC_PUSHF || zi.mnemonic == ZYDIS_MNEMONIC_PUSHFQ ||
                     zi.mnemonic == ZYDIS_MNEMONIC_PUSHFD;
    i.pops_flags = zi.mnemonic == ZYDIS_MNEMONIC_POPF || zi.mnemonic == ZYDIS_MNEMONIC_POPFQ ||
                   zi.mnemonic == ZYDIS_MNEMONIC_POPFD || i.k == insn::iret;
    return i;
}

std::string insn_to_string(const insn &i)
{
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!decode_full(i.bytes, i.len, zi, ops)) return "(bad)";
    ZydisFormatter fmt;
    if (!ZYAN_SUCCESS(ZydisFormatterInit(&fmt, ZYDIS_FORMATTER_STYLE_ATT)))
        return i.mnemonic_name();
    char buf[256];
    if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&fmt, &zi, ops, zi.operand_count_visible, buf,
                                                      sizeof(buf), i.addr, nullptr)))
        return i.mnemonic_name();
    return buf;
}

bool insn_boundary(const void *code, uintptr_t func_start, size_t func_size,
                   uintptr_t addr) noexcept
{
    if (addr < func_start || addr >= func_start + func_size) return false;
    const auto *p = static_cast<const uint8_t *>(code);
    size_t off = 0;
    while (off < func_size) {
        const uintptr_t at = func_start + off;
        if (at > addr) return false;
        auto i = insn_decode(p + off, func_size - off, at);
        if (!i) return false; // undecodable: neither this nor any later address is a boundary
        if (at == addr) return true;
        off += i->len;
    }
    return false;
}

bool insn_boundary(uintptr_t func_start, size_t func_size, uintptr_t addr) noexcept
{
    return insn_boundary(reinterpret_cast<const void *>(func_start), func_start, func_size, addr);
}

const char *insn_ool_refusal(const insn &i) noexcept
{
    switch (i.k) {
    case insn::int3:
        return "int3 (a breakpoint owned by someone else)";
    case insn::int_n:
        return "software interrupt";
    case insn::sysret:
        return "sysret/sysexit";
    case insn::iret:
        return "iret";
    case insn::ud:
        return "undefined-instruction trap";
    case insn::hlt:
        return "hlt";
    case insn::far_branch:
        return "far branch";
    case insn::xbegin:
        return "xbegin (transaction abort path)";
    case insn::privileged:
        return "privileged instruction";
    case insn::odd_branch:
        return "relative branch of an unsupported ISA extension";
    default:
        break;
    }
    if (i.branch_opsize_prefix) return "operand-size prefix on a branch (vendor-dependent)";
    if (i.is_eip_relative) return "eip-relative operand";
    if (i.k == insn::call_indirect && !i.ind_is_mem && i.ind_reg < 0)
        return "indirect call through a non-64-bit register";
    if (i.k == insn::call_indirect && !i.ind_is_mem &&
        i.ind_reg == static_cast<int8_t>(offsetof(pt_regs, sp) / 8))
        return "call *%rsp";
    return nullptr;
}

bool insn_can_boost(const insn &i) noexcept
{
    return insn_ool_refusal(i) == nullptr;
}

bool insn_can_emulate(const insn &i) noexcept
{
    if (i.branch_opsize_prefix) return false;
    switch (i.k) {
    case insn::call_rel:
    case insn::jmp_rel:
    case insn::jcc_rel:
    case insn::ret:
        return true;
    case insn::loop_rel:
        // loop* with a 32-bit counter would write ecx: not emulated (never emitted by compilers).
        return i.counter_size == 8 || i.loop == insn::op_jrcxz;
    case insn::call_indirect:
    case insn::jmp_indirect:
        return i.ind_emulatable;
    default:
        return false;
    }
}

bool insn_cc_holds(uint8_t cc, unsigned long flags) noexcept
{
    const bool cf = flags & 0x001, pf = flags & 0x004, zf = flags & 0x040, sf = flags & 0x080,
               of = flags & 0x800;
    bool r;
    switch ((cc >> 1) & 7) {
    case 0:
        r = of;
        break;
    case 1:
        r = cf;
        break;
    case 2:
        r = zf;
        break;
    case 3:
        r = cf || zf;
        break;
    case 4:
        r = sf;
        break;
    case 5:
        r = pf;
        break;
    case 6:
        r = sf != of;
        break;
    default:
        r = zf || sf != of;
        break;
    }
    return (cc & 1) ? !r : r;
}

bool insn_emulate(const insn &i, pt_regs *regs) noexcept
{
    if (!insn_can_emulate(i)) return false;
    switch (i.k) {
    case insn::call_rel:
        regs->sp -= 8;
        *reinterpret_cast<unsigned long *>(regs->sp) = i.next();
        regs->ip = i.branch_target;
        return true;
    case insn::jmp_rel:
        regs->ip = i.branch_target;
        return true;
    case insn::jcc_rel:
        regs->ip = insn_cc_holds(i.cc, regs->flags) ? i.branch_target : i.next();
        return true;
    case insn::loop_rel: {
        const bool zf = regs->flags & 0x040;
        bool taken;
        if (i.loop == insn::op_jrcxz) {
            taken = (i.counter_size == 8 ? regs->cx : (regs->cx & 0xffffffffUL)) == 0;
        } else {
            regs->cx -= 1;
            taken = regs->cx != 0;
            if (i.loop == insn::op_loopz)
                taken = taken && zf;
            else if (i.loop == insn::op_loopnz)
                taken = taken && !zf;
        }
        regs->ip = taken ? i.branch_target : i.next();
        return true;
    }
    case insn::ret:
        regs->ip = *reinterpret_cast<const unsigned long *>(regs->sp);
        regs->sp += 8 + i.ret_imm;
        return true;
    case insn::call_indirect:
    case insn::jmp_indirect: {
        unsigned long target;
        if (!i.ind_is_mem) {
            target = reg_at(regs, i.ind_reg);
        } else {
            uintptr_t ea;
            if (i.is_rip_relative) {
                ea = i.rip_target;
            } else {
                ea = static_cast<uintptr_t>(i.ind_disp);
                if (i.ind_reg >= 0) ea += reg_at(regs, i.ind_reg);
                if (i.ind_index >= 0) ea += reg_at(regs, i.ind_index) * i.ind_scale;
            }
            // The operand may be unaligned, as x86 allows.
            std::memcpy(&target, reinterpret_cast<const void *>(ea), sizeof target);
        }
        if (i.k == insn::call_indirect) {
            regs->sp -= 8;
            const unsigned long ret = i.next();
            std::memcpy(reinterpret_cast<void *>(regs->sp), &ret, sizeof ret);
        }
        regs->ip = target;
        return true;
    }
    default:
        return false;
    }
}

size_t insn_copy_len(const insn &i) noexcept
{
    uint8_t buf[MAX_RELOCATED_INSN_SIZE];
    const char *why = nullptr;
    // Lengths never depend on where the copy goes (branches are always rel32, displacements
    // always disp32), so build it where its target is surely reachable: at the target itself.
    // (Not at the original address: a `call *disp(%rip)` copy reads its operand from after a
    // push, a few bytes further than the original did, too far when disp is near -2 GiB.)
    uintptr_t at = i.addr;
    if (i.is_rip_relative)
        at = i.rip_target;
    else if (i.k == insn::jmp_rel || i.k == insn::jcc_rel || i.k == insn::call_rel ||
             i.k == insn::loop_rel)
        at = i.branch_target;
    const int n = relocate_one(i, at, buf, &why);
    return n < 0 ? 0 : static_cast<size_t>(n);
}

uintptr_t ss_fixup_rip(const insn &orig, uintptr_t slot_addr, uintptr_t rip_after) noexcept
{
    const size_t n = insn_copy_len(orig);
    if (!n || rip_after < slot_addr || rip_after > slot_addr + n)
        return rip_after; // a relocated branch left for an original address
    const size_t off = rip_after - slot_addr;
    if (off == n) return orig.next();
    if (orig.k == insn::loop_rel) {
        // <loop +2> <jmp +5> <jmp rel32 target>: the first two exits.
        if (off == orig.len) return orig.next();
        if (off == orig.len + JMP8_INSN_SIZE) return orig.branch_target;
    }
    return 0;
}

bool ss_fixup_regs(const insn &orig, uintptr_t slot_addr, pt_regs *regs) noexcept
{
    const uintptr_t ip = ss_fixup_rip(orig, slot_addr, regs->ip);
    if (!ip) return false;
    regs->ip = ip;
    if (orig.pushes_flags && ip == orig.next())
        *reinterpret_cast<unsigned long *>(regs->sp) &= ~0x100UL; // TF
    return true;
}

} // namespace dprobe::arch
