// x86's side of kprobes and optimized probes (see kprobes_arch.h).
#include "arch/x86_64/kprobes_arch.h"

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"

#include <Zydis/Mnemonic.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <optional>

extern "C" void dprobe_optprobe_caller();
extern "C" void dprobe_optprobe_caller_light();
extern "C" void dprobe_optprobe_caller_vec_16();
extern "C" void dprobe_optprobe_caller_vec_32();
extern "C" void dprobe_optprobe_caller_vec_64();

namespace dprobe::arch
{

size_t adjust_kprobe_offset(uintptr_t func, size_t size, size_t offset, bool *on_entry) noexcept
{
    if (size >= ENDBR64_INSN_SIZE && is_endbr64(reinterpret_cast<const uint8_t *>(func))) {
        *on_entry = offset == 0 || offset == ENDBR64_INSN_SIZE;
        return *on_entry ? ENDBR64_INSN_SIZE : offset;
    }
    *on_entry = offset == 0;
    return offset;
}

static_assert(KPROBE_ENTRY_SPAN == ENDBR64_INSN_SIZE + MAX_INSN_SIZE);

kprobe_slot prepare_kprobe_slot(const insn &i, bool ss, uint8_t *rw, uintptr_t rx) noexcept
{
    kprobe_slot s;
    uint8_t buf[MAX_RELOCATED_INSN_SIZE];
    const char *why = nullptr;
    // The boost copy goes back through `jmp *ret(%rip)` (no flags or registers touched).
    constexpr size_t jmp_ind_len = 6;
    int n = relocate_one(i, rx, buf, &why);
    if (n > 0 && static_cast<size_t>(n) + jmp_ind_len <= KPROBE_SLOT_BOOST_RET) {
        std::memcpy(rw, buf, static_cast<size_t>(n));
        const uint8_t jmp[2] = {0xff, 0x25}; // jmp *disp32(%rip)
        const auto disp =
            static_cast<int32_t>(KPROBE_SLOT_BOOST_RET - (static_cast<size_t>(n) + jmp_ind_len));
        std::memcpy(rw + n, jmp, sizeof jmp);
        std::memcpy(rw + n + sizeof jmp, &disp, sizeof disp);
        const uintptr_t next = i.next();
        std::memcpy(rw + KPROBE_SLOT_BOOST_RET, &next, sizeof next);
        s.boostable = true;
        s.boost_addr = rx;
        s.boost_len = static_cast<uint8_t>(n);
    }
    if (!ss) return s;
    // The ss copy falls through to its int3: only instructions that fall through get one.
    static_assert(KPROBE_SLOT_SS + MAX_RELOCATED_INSN_SIZE + INT3_INSN_SIZE <=
                      KPROBE_SLOT_SS_RET_JMP &&
                  KPROBE_SLOT_SS_RET_JMP + jmp_ind_len <= KPROBE_SLOT_SS_RET &&
                  KPROBE_SLOT_SS_RET + 8 <= KPROBE_SLOT_SIZE);
    n = relocate_one(i, rx + KPROBE_SLOT_SS, buf, &why);
    if (n > 0) {
        std::memcpy(rw + KPROBE_SLOT_SS, buf, static_cast<size_t>(n));
        rw[KPROBE_SLOT_SS + static_cast<size_t>(n)] = INT3_INSN_OPCODE;
        s.has_ss = true;
        s.ss_addr = rx + KPROBE_SLOT_SS;
        s.ss_int3 = s.ss_addr + static_cast<size_t>(n);
        const uint8_t jmp[2] = {0xff, 0x25}; // jmp *disp32(%rip)
        const auto disp =
            static_cast<int32_t>(KPROBE_SLOT_SS_RET - (KPROBE_SLOT_SS_RET_JMP + jmp_ind_len));
        std::memcpy(rw + KPROBE_SLOT_SS_RET_JMP, jmp, sizeof jmp);
        std::memcpy(rw + KPROBE_SLOT_SS_RET_JMP + sizeof jmp, &disp, sizeof disp);
        const uintptr_t next = i.next();
        std::memcpy(rw + KPROBE_SLOT_SS_RET, &next, sizeof next);
        s.ss_ret = rx + KPROBE_SLOT_SS_RET_JMP;
    }
    return s;
}

int prepare_kprobe(const uint8_t *code, uintptr_t func, size_t fsize, uintptr_t addr,
                   kprobe_insn *out) noexcept
{
    if (!insn_boundary(code, func, fsize, addr)) return -EINVAL;
    const size_t off = addr - func;
    const std::optional<insn> i = insn_decode(code + off, fsize - off, addr);
    if (!i) return -EINVAL;
    const bool emu = insn_can_emulate(*i);
    if (!emu) {
        switch (i->k) {
        case insn::call_indirect:
        case insn::jmp_indirect:
        case insn::loop_rel:
            return -EOPNOTSUPP; // neither emulated nor stepped with an exit we can see
        default:
            break;
        }
        if (insn_ool_refusal(*i)) return -EINVAL;
    }
    out->i = *i;
    out->opcode = code[off];
    out->emulate = emu;
    out->reach_lo = addr;
    out->reach_hi = i->next();
    if (i->is_rip_relative) {
        out->reach_lo = std::min(out->reach_lo, i->rip_target);
        out->reach_hi = std::max(out->reach_hi, i->rip_target);
    }
    if (i->is_relative_branch()) {
        out->reach_lo = std::min(out->reach_lo, i->branch_target);
        out->reach_hi = std::max(out->reach_hi, i->branch_target);
    }
    out->slot_optional = emu && !i->ind_is_mem;
    return 0;
}

int prepare_kprobe_copies(const kprobe_insn &ki, uint8_t *rw, uintptr_t rx,
                          kprobe_slot *out) noexcept
{
    // The boost copy (copy + jmp back through a word the optimizer points into its detour
    // when the jmp it writes covers where the copy would return, so a thread already on its
    // way there lands somewhere valid), and for instructions that fall through, the ss copy
    // (copy + int3).
    *out = prepare_kprobe_slot(ki.i, !ki.emulate, rw, rx);
    if (!ki.emulate && (!out->boostable || !out->has_ss)) return -EINVAL;
    // The emulation of a memory-indirect branch reads its target; when that is unreadable
    // the copy runs (and faults like the original would): no copy, no probe.
    if (ki.i.ind_is_mem && !out->boostable) return -EINVAL;
    return 0;
}

void kprobe_slot_set_boost_ret(uint8_t *slot_rw, uintptr_t to) noexcept
{
    __atomic_store_n(reinterpret_cast<uintptr_t *>(slot_rw + KPROBE_SLOT_BOOST_RET), to,
                     __ATOMIC_RELEASE);
}

void kprobe_slot_set_ss_ret(uint8_t *slot_rw, uintptr_t to) noexcept
{
    __atomic_store_n(reinterpret_cast<uintptr_t *>(slot_rw + KPROBE_SLOT_SS_RET), to,
                     __ATOMIC_RELEASE);
}

text_poke_req arm_kprobe(uintptr_t addr) noexcept
{
    return disarm_kprobe(addr, INT3_INSN_OPCODE);
}

text_poke_req disarm_kprobe(uintptr_t addr, uint8_t opcode) noexcept
{
    text_poke_req q;
    q.addr = addr;
    q.len = INT3_INSN_SIZE;
    q.bytes[0] = opcode;
    // A thread trapping on a temporary int3 of the protocol lands in the kprobe hook, which
    // restarts it at the address when the byte is not an int3 any more.
    q.emu = text_poke_req::emulate::trap;
    return q;
}

namespace
{

constexpr size_t k_caller_slot = 32; // 8-byte aligned (detours are 16-aligned)
static_assert(k_caller_slot % 8 == 0);

} // namespace

void optprobe_write_head(uint8_t *rw, const void *op, uintptr_t caller) noexcept
{
    size_t n = 0;
    auto put = [&](std::initializer_list<uint8_t> b) {
        for (uint8_t x : b)
            rw[n++] = x;
    };
    put({0x48, 0x8d, 0x64, 0x24, 0x80}); // lea -0x80(%rsp),%rsp
    // r11 goes below the slot the call's return address takes: the caller's frame top.
    put({0x4c, 0x89, 0x5c, 0x24, 0xf0}); // mov %r11,-0x10(%rsp)
    put({0x49, 0xbb});                   // movabs $op,%r11
    const auto v = reinterpret_cast<uintptr_t>(op);
    std::memcpy(rw + n, &v, 8);
    n += 8;
    put({0xff, 0x15, 0x06, 0, 0, 0}); // call *6(%rip): the caller's address at k_caller_slot
    put({0xeb, 0x0c});                // jmp over the padding and the slot, to 40
    put({0xcc, 0xcc, 0xcc, 0xcc});
    std::memcpy(rw + n, &caller, 8);
    n += 8;
    put({0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0}); // lea 0x80(%rsp),%rsp
    (void)n;
}

void optprobe_set_caller(uint8_t *rw, uintptr_t caller) noexcept
{
    __atomic_store_n(reinterpret_cast<uintptr_t *>(rw + k_caller_slot), caller, __ATOMIC_RELEASE);
}

uintptr_t optprobe_caller(optprobe_mode mode) noexcept
{
    switch (mode) {
    case optprobe_mode::light:
        return reinterpret_cast<uintptr_t>(&dprobe_optprobe_caller_light);
    case optprobe_mode::full:
        break;
    case optprobe_mode::vector:
        switch (vector_size()) {
        case 64:
            return reinterpret_cast<uintptr_t>(&dprobe_optprobe_caller_vec_64);
        case 32:
            return reinterpret_cast<uintptr_t>(&dprobe_optprobe_caller_vec_32);
        default:
            return reinterpret_cast<uintptr_t>(&dprobe_optprobe_caller_vec_16);
        }
    }
    return reinterpret_cast<uintptr_t>(&dprobe_optprobe_caller);
}

bool function_may_set_df(const func_analysis &fa) noexcept
{
    for (const insn &i : fa.insns)
        if (i.mnemonic == ZYDIS_MNEMONIC_STD || i.pops_flags) return true;
    return false;
}

} // namespace dprobe::arch
