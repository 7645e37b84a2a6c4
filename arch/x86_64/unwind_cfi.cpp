// A DWARF call-frame-information unwinder for x86-64 (see unwind_cfi.h). It interprets the
// CIE/FDE programs of .eh_frame up to the return address being unwound, as the DWARF 4
// specification (section 6.4) and the x86-64 psABI describe them, for the register rules
// compilers emit: CFA = register + offset, registers saved at CFA + offset, kept, or in
// another register. Expression rules end the walk.
#include "arch/x86_64/unwind_cfi.h"

#include "arch/x86_64/uaccess.h"

#include <dprobe/ptrace.h>

#include <dlfcn.h>
#include <link.h>

#include <cstring>

// The walks run in probe handlers: they go in the section dprobe never probes, as
// core/compiler.h's DPROBE_NOPROBE puts them (arch sits below core and does not include it).
#define UNWIND_NOPROBE __attribute__((section("dprobe_noprobe_text")))

namespace dprobe::arch
{
namespace
{

// DWARF register numbers (x86-64 psABI figure 3.36).
enum : unsigned {
    DW_RAX = 0,
    DW_RDX,
    DW_RCX,
    DW_RBX,
    DW_RSI,
    DW_RDI,
    DW_RBP,
    DW_RSP,
    DW_R8,
    DW_R9,
    DW_R10,
    DW_R11,
    DW_R12,
    DW_R13,
    DW_R14,
    DW_R15,
    DW_RA,
    DW_NREGS
};

enum : uint8_t {
    DW_EH_PE_absptr = 0x00,
    DW_EH_PE_uleb128 = 0x01,
    DW_EH_PE_udata2 = 0x02,
    DW_EH_PE_udata4 = 0x03,
    DW_EH_PE_udata8 = 0x04,
    DW_EH_PE_sleb128 = 0x09,
    DW_EH_PE_sdata2 = 0x0a,
    DW_EH_PE_sdata4 = 0x0b,
    DW_EH_PE_sdata8 = 0x0c,
    DW_EH_PE_pcrel = 0x10,
    DW_EH_PE_datarel = 0x30,
    DW_EH_PE_indirect = 0x80,
    DW_EH_PE_omit = 0xff,
};

enum rule_kind : uint8_t { R_UNDEF, R_SAME, R_OFFSET, R_VAL_OFFSET, R_REGISTER, R_UNSUPPORTED };

struct reg_rule {
    rule_kind kind;
    uint8_t reg; // R_REGISTER
    int64_t off;
};

struct cfi_state {
    unsigned cfa_reg;
    int64_t cfa_off;
    bool cfa_expr;
    reg_rule rules[DW_NREGS];
};

// A reader over mapped, trusted object data (.eh_frame of a loaded object).
struct reader {
    const uint8_t *p;
    const uint8_t *end;
    bool ok = true;

    bool need(size_t n)
    {
        if (!ok || size_t(end - p) < n) ok = false;
        return ok;
    }
    template <class T> T fixed()
    {
        T v{};
        if (need(sizeof(T))) {
            std::memcpy(&v, p, sizeof(T));
            p += sizeof(T);
        }
        return v;
    }
    uint64_t uleb()
    {
        uint64_t v = 0;
        unsigned shift = 0;
        for (;;) {
            if (!need(1)) return 0;
            uint8_t b = *p++;
            if (shift < 64) v |= uint64_t(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80)) return v;
        }
    }
    int64_t sleb()
    {
        int64_t v = 0;
        unsigned shift = 0;
        uint8_t b;
        do {
            if (!need(1)) return 0;
            b = *p++;
            if (shift < 64) v |= int64_t(b & 0x7f) << shift;
            shift += 7;
        } while (b & 0x80);
        if (shift < 64 && (b & 0x40)) v |= -(int64_t(1) << shift);
        return v;
    }
    // A pointer in ENC (DW_EH_PE_*); DATAREL is the base of datarel encodings.
    uintptr_t encoded(uint8_t enc, uintptr_t datarel)
    {
        if (enc == DW_EH_PE_omit) return 0;
        const uintptr_t here = reinterpret_cast<uintptr_t>(p);
        uint64_t v;
        switch (enc & 0x0f) {
        case DW_EH_PE_absptr:
            v = fixed<uint64_t>();
            break;
        case DW_EH_PE_uleb128:
            v = uleb();
            break;
        case DW_EH_PE_udata2:
            v = fixed<uint16_t>();
            break;
        case DW_EH_PE_udata4:
            v = fixed<uint32_t>();
            break;
        case DW_EH_PE_udata8:
            v = fixed<uint64_t>();
            break;
        case DW_EH_PE_sleb128:
            v = uint64_t(sleb());
            break;
        case DW_EH_PE_sdata2:
            v = uint64_t(int64_t(fixed<int16_t>()));
            break;
        case DW_EH_PE_sdata4:
            v = uint64_t(int64_t(fixed<int32_t>()));
            break;
        case DW_EH_PE_sdata8:
            v = uint64_t(fixed<int64_t>());
            break;
        default:
            ok = false;
            return 0;
        }
        switch (enc & 0x70) {
        case 0:
            break;
        case DW_EH_PE_pcrel:
            v += here;
            break;
        case DW_EH_PE_datarel:
            v += datarel;
            break;
        default:
            ok = false;
            return 0;
        }
        if (enc & DW_EH_PE_indirect) {
            uint64_t target = 0;
            if (copy_from_user_nofault(&target, reinterpret_cast<const void *>(v), 8)) {
                ok = false;
                return 0;
            }
            v = target;
        }
        return v;
    }
};

struct cie_info {
    uint64_t code_align;
    int64_t data_align;
    unsigned ra_reg;
    uint8_t fde_enc = DW_EH_PE_absptr;
    bool aug_z = false;
    bool signal_frame = false;
    const uint8_t *insns;
    const uint8_t *end;
};

bool parse_cie(const uint8_t *cie, cie_info &ci)
{
    reader r{cie, cie + 4};
    uint32_t len = r.fixed<uint32_t>();
    if (!r.ok || len == 0 || len == 0xffffffff) return false;
    r.end = cie + 4 + len;
    if (r.fixed<uint32_t>() != 0) // CIE id
        return false;
    uint8_t version = r.fixed<uint8_t>();
    const char *aug = reinterpret_cast<const char *>(r.p);
    size_t alen = strnlen(aug, size_t(r.end - r.p));
    if (alen == size_t(r.end - r.p)) return false;
    r.p += alen + 1;
    ci.code_align = r.uleb();
    ci.data_align = r.sleb();
    ci.ra_reg = version == 1 ? r.fixed<uint8_t>() : unsigned(r.uleb());
    const uint8_t *aug_end = nullptr;
    for (const char *a = aug; *a && r.ok; a++) {
        switch (*a) {
        case 'z': {
            uint64_t n = r.uleb();
            ci.aug_z = true;
            aug_end = r.p + n;
            break;
        }
        case 'R':
            ci.fde_enc = r.fixed<uint8_t>();
            break;
        case 'P': {
            uint8_t enc = r.fixed<uint8_t>();
            r.encoded(enc & 0x7f, 0); // the personality routine: not needed here
            break;
        }
        case 'L':
            r.fixed<uint8_t>();
            break;
        case 'S':
            ci.signal_frame = true;
            break;
        default:
            // An augmentation not understood: 'z' says how much to skip.
            if (!aug_end) return false;
            r.p = aug_end;
            a = " "; // stop scanning letters
            break;
        }
    }
    if (aug_end) r.p = aug_end;
    if (!r.ok || r.p > r.end) return false;
    ci.insns = r.p;
    ci.end = r.end;
    return true;
}

// Runs the CFA program [P, END) while its location is at most TARGET. INIT: the CIE's
// rules (for DW_CFA_restore), nullptr while running the CIE itself.
bool run_cfi(const uint8_t *p, const uint8_t *end, const cie_info &ci, uintptr_t loc,
             uintptr_t target, cfi_state &st, const cfi_state *init)
{
    reader r{p, end};
    cfi_state saved[8];
    unsigned nsaved = 0;
    auto set = [&](uint64_t reg, rule_kind k, int64_t off, unsigned r2 = 0) {
        if (reg < DW_NREGS) st.rules[reg] = reg_rule{k, uint8_t(r2), off};
    };
    auto advance = [&](uint64_t delta) {
        uintptr_t next = loc + delta * ci.code_align;
        if (next > target) return false;
        loc = next;
        return true;
    };
    while (r.p < r.end && r.ok) {
        uint8_t op = *r.p++;
        switch (op & 0xc0) {
        case 0x40:
            if (!advance(op & 0x3f)) return true;
            continue;
        case 0x80:
            set(op & 0x3f, R_OFFSET, int64_t(r.uleb()) * ci.data_align);
            continue;
        case 0xc0:
            if ((op & 0x3f) < DW_NREGS)
                st.rules[op & 0x3f] = init ? init->rules[op & 0x3f] : reg_rule{R_SAME, 0, 0};
            continue;
        }
        switch (op) {
        case 0x00:
            break;   // nop
        case 0x01: { // set_loc
            uintptr_t next = r.encoded(ci.fde_enc, 0);
            if (next > target) return true;
            loc = next;
            break;
        }
        case 0x02:
            if (!advance(r.fixed<uint8_t>())) return true;
            break;
        case 0x03:
            if (!advance(r.fixed<uint16_t>())) return true;
            break;
        case 0x04:
            if (!advance(r.fixed<uint32_t>())) return true;
            break;
        case 0x05: {
            uint64_t reg = r.uleb();
            set(reg, R_OFFSET, int64_t(r.uleb()) * ci.data_align);
            break;
        }
        case 0x06: {
            uint64_t reg = r.uleb();
            if (reg < DW_NREGS) st.rules[reg] = init ? init->rules[reg] : reg_rule{R_SAME, 0, 0};
            break;
        }
        case 0x07:
            set(r.uleb(), R_UNDEF, 0);
            break;
        case 0x08:
            set(r.uleb(), R_SAME, 0);
            break;
        case 0x09: {
            uint64_t reg = r.uleb();
            uint64_t r2 = r.uleb();
            set(reg, r2 < DW_NREGS ? R_REGISTER : R_UNSUPPORTED, 0, unsigned(r2));
            break;
        }
        case 0x0a:
            if (nsaved == 8) return false;
            saved[nsaved++] = st;
            break;
        case 0x0b:
            if (!nsaved) return false;
            {
                // The CFA rule is not part of the saved state's restore in practice
                // (compilers re-state it); restore everything, as libgcc does.
                st = saved[--nsaved];
            }
            break;
        case 0x0c:
            st.cfa_reg = unsigned(r.uleb());
            st.cfa_off = int64_t(r.uleb());
            st.cfa_expr = false;
            break;
        case 0x0d:
            st.cfa_reg = unsigned(r.uleb());
            st.cfa_expr = false;
            break;
        case 0x0e:
            st.cfa_off = int64_t(r.uleb());
            break;
        case 0x0f: {
            uint64_t n = r.uleb();
            r.need(n);
            r.p += n;
            st.cfa_expr = true;
            break;
        }
        case 0x10: {
            uint64_t reg = r.uleb();
            uint64_t n = r.uleb();
            r.need(n);
            r.p += n;
            set(reg, R_UNSUPPORTED, 0);
            break;
        }
        case 0x11: {
            uint64_t reg = r.uleb();
            set(reg, R_OFFSET, r.sleb() * ci.data_align);
            break;
        }
        case 0x12:
            st.cfa_reg = unsigned(r.uleb());
            st.cfa_off = r.sleb() * ci.data_align;
            st.cfa_expr = false;
            break;
        case 0x13:
            st.cfa_off = r.sleb() * ci.data_align;
            break;
        case 0x14: {
            uint64_t reg = r.uleb();
            set(reg, R_VAL_OFFSET, int64_t(r.uleb()) * ci.data_align);
            break;
        }
        case 0x15: {
            uint64_t reg = r.uleb();
            set(reg, R_VAL_OFFSET, r.sleb() * ci.data_align);
            break;
        }
        case 0x16: {
            uint64_t reg = r.uleb();
            uint64_t n = r.uleb();
            r.need(n);
            r.p += n;
            set(reg, R_UNSUPPORTED, 0);
            break;
        }
        case 0x2e:
            r.uleb();
            break; // GNU_args_size
        case 0x2f: {
            uint64_t reg = r.uleb();
            set(reg, R_OFFSET, -int64_t(r.uleb()) * ci.data_align);
            break;
        }
        default:
            return false;
        }
    }
    return r.ok;
}

// The FDE covering PC through the object's .eh_frame_hdr binary-search table.
const uint8_t *find_fde(uintptr_t pc)
{
    struct dl_find_object dlfo;
    if (_dl_find_object(reinterpret_cast<void *>(pc), &dlfo) != 0 || !dlfo.dlfo_eh_frame)
        return nullptr;
    const auto *hdr = static_cast<const uint8_t *>(dlfo.dlfo_eh_frame);
    const uintptr_t base = reinterpret_cast<uintptr_t>(hdr);
    if (hdr[0] != 1) return nullptr;
    const uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
    // The table's entries are read directly below: only the usual 4-byte datarel form.
    if (count_enc == DW_EH_PE_omit || table_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
        return nullptr;
    reader r{hdr + 4, hdr + 64};
    r.encoded(ptr_enc, base);
    uint64_t count = r.encoded(count_enc, base);
    if (!r.ok || count == 0) return nullptr;
    const auto *table = reinterpret_cast<const int32_t *>(r.p);
    uint64_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (base + int64_t(table[2 * mid]) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if (base + int64_t(table[2 * lo]) > pc) return nullptr;
    return reinterpret_cast<const uint8_t *>(base + int64_t(table[2 * lo + 1]));
}

// The rules at PC. False when PC has no description or one this unwinder does not follow.
bool rules_at(uintptr_t pc, cfi_state &st, bool &signal_frame)
{
    const uint8_t *fde = find_fde(pc);
    if (!fde) return false;
    reader r{fde, fde + 8};
    uint32_t len = r.fixed<uint32_t>();
    if (!r.ok || len == 0 || len == 0xffffffff) return false;
    r.end = fde + 4 + len;
    const uint8_t *cie_ptr_at = r.p;
    uint32_t cie_off = r.fixed<uint32_t>();
    if (!r.ok || cie_off == 0) return false;
    cie_info ci;
    if (!parse_cie(cie_ptr_at - cie_off, ci)) return false;
    uintptr_t start = r.encoded(ci.fde_enc, 0);
    uintptr_t range = r.encoded(ci.fde_enc & 0x0f, 0);
    if (!r.ok || pc < start || pc >= start + range) return false;
    if (ci.aug_z) {
        uint64_t n = r.uleb();
        r.p += n;
    }
    if (!r.ok || r.p > r.end) return false;
    cfi_state init{};
    init.cfa_reg = DW_RSP;
    for (unsigned i = 0; i < DW_NREGS; i++)
        init.rules[i] = reg_rule{R_SAME, 0, 0};
    if (!run_cfi(ci.insns, ci.end, ci, start, ~uintptr_t{0}, init, nullptr)) return false;
    st = init;
    if (!run_cfi(r.p, r.end, ci, start, pc, st, &init)) return false;
    signal_frame = ci.signal_frame;
    return ci.ra_reg == DW_RA;
}

} // namespace

namespace
{

struct unwind_regs {
    uint64_t val[DW_NREGS];
    bool known[DW_NREGS];
};

// One step: from the frame at PC (exact when EXACT, else a return address, looked up at
// PC - 1) with registers R, to its caller. Returns false at the end of the walk.
bool step(uintptr_t pc, bool exact, unwind_regs &r, uintptr_t &ra, uintptr_t &slot) noexcept
{
    cfi_state st;
    bool signal_frame = false;
    if (!rules_at(exact ? pc : pc - 1, st, signal_frame) || signal_frame || st.cfa_expr)
        return false;
    if (st.cfa_reg >= DW_NREGS || !r.known[st.cfa_reg]) return false;
    const uintptr_t cfa = r.val[st.cfa_reg] + st.cfa_off;
    const reg_rule &rr = st.rules[DW_RA];
    if (rr.kind != R_OFFSET) // R_UNDEF: the outermost frame
        return false;
    // The stack grows down: each caller's frame is above the last one.
    if (r.known[DW_RSP] && cfa <= r.val[DW_RSP]) return false;
    unwind_regs n = r;
    for (unsigned i = 0; i < DW_NREGS; i++) {
        const reg_rule &x = st.rules[i];
        switch (x.kind) {
        case R_SAME:
            break;
        case R_UNDEF:
        case R_UNSUPPORTED:
            n.known[i] = false;
            break;
        case R_OFFSET:
            if (copy_from_user_nofault(&n.val[i], reinterpret_cast<const void *>(cfa + x.off), 8))
                return false;
            n.known[i] = true;
            break;
        case R_VAL_OFFSET:
            n.val[i] = cfa + x.off, n.known[i] = true;
            break;
        case R_REGISTER:
            n.val[i] = r.val[x.reg], n.known[i] = r.known[x.reg];
            break;
        }
    }
    n.val[DW_RSP] = cfa, n.known[DW_RSP] = true;
    slot = cfa + rr.off;
    ra = n.val[DW_RA];
    r = n;
    return ra != 0;
}

size_t walk(unwind_regs &r, uintptr_t ra, uintptr_t slot, unwind_frame *out, size_t n, size_t max,
            unwind_fix_return fix) noexcept
{
    while (n < max) {
        uintptr_t next_ra, next_slot;
        if (!step(ra, false, r, next_ra, next_slot) || next_slot <= slot) break;
        if (fix) next_ra = fix(next_ra, next_slot);
        ra = next_ra;
        slot = next_slot;
        out[n++] = unwind_frame{ra, slot};
    }
    return n;
}

} // namespace

UNWIND_NOPROBE size_t unwind_from_entry(const struct pt_regs *regs, unwind_frame *out, size_t max,
                                        unwind_fix_return fix, bool callee_saved) noexcept
{
    if (!max) return 0;
    unwind_regs r{};
    // At a function entry the callee-saved registers are the caller's.
    r.val[DW_RBP] = regs->bp, r.known[DW_RBP] = true;
    r.val[DW_RBX] = regs->bx, r.known[DW_RBX] = callee_saved;
    r.val[DW_R12] = regs->r12, r.known[DW_R12] = callee_saved;
    r.val[DW_R13] = regs->r13, r.known[DW_R13] = callee_saved;
    r.val[DW_R14] = regs->r14, r.known[DW_R14] = callee_saved;
    r.val[DW_R15] = regs->r15, r.known[DW_R15] = callee_saved;
    uintptr_t slot = regs->sp;
    uintptr_t ra;
    if (copy_from_user_nofault(&ra, reinterpret_cast<const void *>(slot), sizeof ra)) return 0;
    if (fix) ra = fix(ra, slot);
    r.val[DW_RSP] = slot + 8, r.known[DW_RSP] = true;
    out[0] = unwind_frame{ra, slot};
    return ra ? walk(r, ra, slot, out, 1, max, fix) : 1;
}

UNWIND_NOPROBE size_t unwind_from_regs(const struct pt_regs *regs, unwind_frame *out, size_t max,
                                       unwind_fix_return fix) noexcept
{
    if (!max) return 0;
    unwind_regs r{};
    const unsigned long v[DW_NREGS] = {regs->ax,  regs->dx,  regs->cx,  regs->bx,  regs->si,
                                       regs->di,  regs->bp,  regs->sp,  regs->r8,  regs->r9,
                                       regs->r10, regs->r11, regs->r12, regs->r13, regs->r14,
                                       regs->r15, regs->ip};
    for (unsigned i = 0; i < DW_NREGS; i++)
        r.val[i] = v[i], r.known[i] = true;
    out[0] = unwind_frame{regs->ip, 0};
    if (max == 1) return 1;
    uintptr_t ra, slot;
    if (!step(regs->ip, true, r, ra, slot)) return 1;
    if (fix) ra = fix(ra, slot);
    out[1] = unwind_frame{ra, slot};
    return walk(r, ra, slot, out, 2, max, fix);
}

} // namespace dprobe::arch
