// The places where jprobe_return() may simply return (jprobes_arch.h, jprobe_ret_sites).
//
// jprobe_return() ends a handler like longjmp: its `ret` goes to the landing after the call
// of the handler, which the return predictor never expects (it holds the return into the
// handler): one mispredicted return, about as costly as the rest of a direct hit together.
// Most handlers end with `jprobe_return(); return 0;`, which compiles to the call followed
// by an epilogue: registers loaded, the stack pointer moved up, `ret`. Returning into such
// code is the same as leaving the handler: it changes nothing but registers the landing
// restores anyway, and its `ret` takes the handler's own return address to the landing,
// predicted. So the call sites whose continuation is such an epilogue are listed when the
// jprobe is registered, each with where its final `ret` finds its return address, and
// jprobe_return() returns to them when that place is the handler's return-address slot (a
// run-time check: the same code reached from a deeper frame, or in a recursion, falls back
// to the jump).
#include "arch/x86_64/jprobes_arch.h"

#include "arch/x86_64/entry_insn.h"
#include "arch/x86_64/uaccess.h"

#include <Zydis/Zydis.h>

#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dprobe::arch
{

namespace
{

constexpr size_t max_scan = 4000;   // instructions of the handler looked at
constexpr size_t max_epilogue = 64; // instructions of one epilogue

struct decoded {
    ZydisDecodedInstruction zi;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

bool decode(const ZydisDecoder &dec, uintptr_t pc, decoded &d)
{
    uint8_t buf[ZYDIS_MAX_INSTRUCTION_LENGTH];
    size_t n = sizeof buf;
    if (copy_from_user_nofault(buf, reinterpret_cast<const void *>(pc), n) != 0) {
        // The last instructions before an unreadable page.
        n = 0;
        while (n < sizeof buf &&
               copy_from_user_nofault(buf + n, reinterpret_cast<const void *>(pc + n), 1) == 0)
            ++n;
    }
    return n && ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, buf, n, &d.zi, d.ops));
}

ZydisRegister gpr64(ZydisRegister r)
{
    return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
}

// What a call at PC (decoded as D) calls, when it is known: its direct target, the function a
// PLT entry it calls is bound to, or the pointer a `call *mem(%rip)` reads. 0 otherwise.
uintptr_t call_target(const decoded &d, uintptr_t pc)
{
    ZyanU64 t = 0;
    const ZydisDecodedOperand &op = d.ops[0];
    if (d.zi.raw.imm[0].is_relative) {
        if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.zi, &op, pc, &t))) return 0;
        uint8_t probe;
        if (copy_from_user_nofault(&probe, reinterpret_cast<const void *>(t), 1) != 0) return 0;
        if (auto slot = plt_got_slot(t)) {
            uintptr_t bound = 0;
            if (copy_from_user_nofault(&bound, reinterpret_cast<const void *>(*slot),
                                       sizeof bound) != 0)
                return 0;
            return bound; // not bound yet: the lazy resolver's stub, which matches nothing
        }
        return t;
    }
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_RIP &&
        op.mem.index == ZYDIS_REGISTER_NONE &&
        ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.zi, &op, pc, &t))) {
        uintptr_t ptr = 0;
        if (copy_from_user_nofault(&ptr, reinterpret_cast<const void *>(t), sizeof ptr) != 0)
            return 0;
        return ptr;
    }
    return 0;
}

// Whether an instruction only writes general registers other than the stack pointer and
// the flags, and no memory: an epilogue's loads, moves and arithmetic. Sets *RBP_WRITTEN.
bool writes_registers_only(const decoded &d, bool *rbp_written)
{
    switch (d.zi.meta.category) {
    case ZYDIS_CATEGORY_BINARY:
    case ZYDIS_CATEGORY_BITBYTE:
    case ZYDIS_CATEGORY_CMOV:
    case ZYDIS_CATEGORY_CONVERT:
    case ZYDIS_CATEGORY_DATAXFER:
    case ZYDIS_CATEGORY_LOGICAL:
    case ZYDIS_CATEGORY_MISC: // lea
    case ZYDIS_CATEGORY_ROTATE:
    case ZYDIS_CATEGORY_SETCC:
    case ZYDIS_CATEGORY_SHIFT:
        break;
    default:
        return false;
    }
    for (unsigned i = 0; i < d.zi.operand_count; ++i) {
        const ZydisDecodedOperand &op = d.ops[i];
        if (!(op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) continue;
        if (op.type != ZYDIS_OPERAND_TYPE_REGISTER) return false;
        const ZydisRegisterClass c = ZydisRegisterGetClass(op.reg.value);
        if (c == ZYDIS_REGCLASS_FLAGS) continue;
        if (c != ZYDIS_REGCLASS_GPR8 && c != ZYDIS_REGCLASS_GPR16 && c != ZYDIS_REGCLASS_GPR32 &&
            c != ZYDIS_REGCLASS_GPR64)
            return false;
        const ZydisRegister r = gpr64(op.reg.value);
        if (r == ZYDIS_REGISTER_RSP) return false;
        if (r == ZYDIS_REGISTER_RBP) *rbp_written = true;
    }
    return true;
}

// Whether the code at PC, reached by returning from a call, is an epilogue (see the top of
// this file); if so, where its `ret` finds its return address.
bool epilogue_at(const ZydisDecoder &dec, uintptr_t pc, jprobe_ret_site *site)
{
    bool from_rbp = false, rbp_written = false;
    long delta = 0; // the stack pointer: base + delta
    for (size_t n = 0; n < max_epilogue; ++n) {
        decoded d;
        if (!decode(dec, pc, d)) return false;
        const ZydisDecodedOperand *op = d.ops;
        const bool rsp_dest = d.zi.operand_count_visible >= 1 &&
                              op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                              op[0].reg.value == ZYDIS_REGISTER_RSP;
        switch (d.zi.mnemonic) {
        case ZYDIS_MNEMONIC_RET:
            site->slot_off = delta;
            site->from_rbp = from_rbp;
            return true;
        case ZYDIS_MNEMONIC_NOP:
        case ZYDIS_MNEMONIC_ENDBR64:
        case ZYDIS_MNEMONIC_VZEROUPPER: // the landing clears the upper state anyway
            break;
        case ZYDIS_MNEMONIC_POP:
            if (op[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
                ZydisRegisterGetClass(op[0].reg.value) != ZYDIS_REGCLASS_GPR64 ||
                op[0].reg.value == ZYDIS_REGISTER_RSP)
                return false;
            if (op[0].reg.value == ZYDIS_REGISTER_RBP) rbp_written = true;
            delta += 8;
            break;
        case ZYDIS_MNEMONIC_LEAVE:
            if (rbp_written) return false;
            from_rbp = true;
            delta = 8;
            rbp_written = true;
            break;
        case ZYDIS_MNEMONIC_JMP: {
            ZyanU64 t;
            if (!d.zi.raw.imm[0].is_relative ||
                !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.zi, &op[0], pc, &t)))
                return false;
            pc = static_cast<uintptr_t>(t);
            continue;
        }
        case ZYDIS_MNEMONIC_ADD:
        case ZYDIS_MNEMONIC_SUB:
            if (!rsp_dest) goto other;
            if (op[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) return false;
            delta += (d.zi.mnemonic == ZYDIS_MNEMONIC_ADD ? 1 : -1) * op[1].imm.value.s;
            break;
        case ZYDIS_MNEMONIC_LEA:
            if (!rsp_dest) goto other;
            if (op[1].mem.index != ZYDIS_REGISTER_NONE) return false;
            if (op[1].mem.base == ZYDIS_REGISTER_RSP) {
                delta += op[1].mem.disp.value;
            } else if (op[1].mem.base == ZYDIS_REGISTER_RBP && !rbp_written) {
                from_rbp = true;
                delta = op[1].mem.disp.value;
            } else {
                return false;
            }
            break;
        case ZYDIS_MNEMONIC_MOV:
            if (!rsp_dest) goto other;
            if (op[1].type != ZYDIS_OPERAND_TYPE_REGISTER ||
                op[1].reg.value != ZYDIS_REGISTER_RBP || rbp_written)
                return false;
            from_rbp = true;
            delta = 0;
            break;
        default:
        other:
            if (!writes_registers_only(d, &rbp_written)) return false;
        }
        pc += d.zi.length;
    }
    return false;
}

} // namespace

size_t jprobe_ret_sites(uintptr_t handler, uintptr_t jprobe_return_fn, jprobe_ret_site *out,
                        size_t max)
{
    ZydisDecoder dec;
    if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
        return 0;
    // The handler's own code: its branches followed, its calls not (a call of jprobe_return()
    // in a function it calls returns into that function, which the run-time check refuses).
    std::vector<uintptr_t> work{handler};
    std::unordered_set<uintptr_t> seen;
    size_t n = 0, insns = 0;
    while (!work.empty() && n < max) {
        uintptr_t pc = work.back();
        work.pop_back();
        while (n < max && seen.insert(pc).second && ++insns <= max_scan) {
            decoded d;
            if (!decode(dec, pc, d)) break;
            const uintptr_t next = pc + d.zi.length;
            const ZydisInstructionCategory cat = d.zi.meta.category;
            if (cat == ZYDIS_CATEGORY_RET || d.zi.mnemonic == ZYDIS_MNEMONIC_INT3 ||
                d.zi.mnemonic == ZYDIS_MNEMONIC_UD2)
                break;
            if (cat == ZYDIS_CATEGORY_CALL) {
                jprobe_ret_site s{next, 0, 0};
                if (call_target(d, pc) == jprobe_return_fn && epilogue_at(dec, next, &s))
                    out[n++] = s;
                pc = next;
                continue;
            }
            if (cat == ZYDIS_CATEGORY_COND_BR || cat == ZYDIS_CATEGORY_UNCOND_BR) {
                ZyanU64 t;
                if (!d.zi.raw.imm[0].is_relative ||
                    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d.zi, &d.ops[0], pc, &t)))
                    break; // an indirect jump: not followed
                if (cat == ZYDIS_CATEGORY_COND_BR) {
                    work.push_back(static_cast<uintptr_t>(t));
                    pc = next;
                } else {
                    pc = static_cast<uintptr_t>(t);
                }
                continue;
            }
            pc = next;
        }
    }
    return n;
}

namespace
{

constexpr size_t table_size = size_t{1} << JPROBE_RET_TABLE_BITS;
std::unordered_map<uintptr_t, unsigned> &published() // counts per return address
{
    static auto &m = *new std::unordered_map<uintptr_t, unsigned>;
    return m;
}

// jprobe_tramp.S's JRT_HASH.
size_t bucket(uintptr_t ret)
{
    return static_cast<size_t>((ret ^ (ret >> JPROBE_RET_TABLE_BITS)) & (table_size - 1));
}

unsigned long encode(const jprobe_ret_site &s)
{
    return static_cast<unsigned long>(s.slot_off * 2) | (s.from_rbp ? 1 : 0);
}

} // namespace

void jprobe_ret_publish(const jprobe_ret_site *sites, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        if (published()[sites[i].ret]++) continue;
        // Kept below half full: a lookup that misses stops at the first never-used entry.
        if (published().size() > table_size / 2) {
            published().erase(sites[i].ret);
            continue;
        }
        for (size_t b = bucket(sites[i].ret);; b = (b + 1) % table_size) {
            unsigned long *e = dprobe_jprobe_ret_table[b];
            const unsigned long key = __atomic_load_n(&e[0], __ATOMIC_RELAXED);
            if (key > 1) continue;
            // Its offset, then the key: a reader that finds the key finds the offset.
            __atomic_store_n(&e[1], encode(sites[i]), __ATOMIC_RELAXED);
            __atomic_store_n(&e[0], sites[i].ret, __ATOMIC_RELEASE);
            break;
        }
    }
}

void jprobe_ret_withdraw(const jprobe_ret_site *sites, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        auto it = published().find(sites[i].ret);
        if (it == published().end() || --it->second) continue;
        published().erase(it);
        for (size_t b = bucket(sites[i].ret);; b = (b + 1) % table_size) {
            unsigned long *e = dprobe_jprobe_ret_table[b];
            const unsigned long key = __atomic_load_n(&e[0], __ATOMIC_RELAXED);
            if (key == 0) break;
            if (key != sites[i].ret) continue;
            __atomic_store_n(&e[0], 1UL, __ATOMIC_RELEASE); // withdrawn: lookups go on
            break;
        }
    }
}

bool jprobe_may_jump(uintptr_t handler, uintptr_t jprobe_return_fn, const jprobe_ret_site *sites,
                     size_t nsites)
{
    ZydisDecoder dec;
    if (!ZYAN_SUCCESS(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)))
        return true;
    struct item {
        uintptr_t pc;
        bool in_handler; // reached from the handler's entry without a call
    };
    std::vector<item> work{{handler, true}};
    std::unordered_set<uintptr_t> seen[2], functions{handler};
    size_t insns = 0;
    while (!work.empty()) {
        const item it = work.back();
        work.pop_back();
        for (uintptr_t pc = it.pc; seen[it.in_handler].insert(pc).second;) {
            if (++insns > 20 * max_scan) return true;
            decoded d;
            if (!decode(dec, pc, d)) return true;
            const uintptr_t next = pc + d.zi.length;
            const ZydisInstructionCategory cat = d.zi.meta.category;
            if (cat == ZYDIS_CATEGORY_RET || d.zi.mnemonic == ZYDIS_MNEMONIC_UD2 ||
                d.zi.mnemonic == ZYDIS_MNEMONIC_HLT)
                break;
            if (d.zi.mnemonic == ZYDIS_MNEMONIC_INT3) return true; // a probe: unknown code
            const bool call = cat == ZYDIS_CATEGORY_CALL;
            const bool jump = cat == ZYDIS_CATEGORY_COND_BR || cat == ZYDIS_CATEGORY_UNCOND_BR;
            if (!call && !jump) {
                pc = next;
                continue;
            }
            const uintptr_t target = call_target(d, pc);
            if (!target) return true; // not known (indirect, or a PLT entry not bound yet)
            if (target == jprobe_return_fn) {
                if (!it.in_handler) return true;
                if (call) {
                    bool at_site = false;
                    for (size_t i = 0; i < nsites; ++i)
                        at_site |= sites[i].ret == next;
                    if (!at_site) return true;
                } else if (cat == ZYDIS_CATEGORY_UNCOND_BR) {
                    break; // the handler's tail call
                }
                pc = next;
                continue;
            }
            if (target == handler && call) return true; // recursion
            if (call) {
                if (functions.insert(target).second) work.push_back({target, false});
                pc = next;
            } else if (cat == ZYDIS_CATEGORY_COND_BR) {
                work.push_back({target, it.in_handler});
                pc = next;
            } else {
                pc = target;
            }
        }
    }
    return false;
}

} // namespace dprobe::arch
