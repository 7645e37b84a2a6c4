// Fuzz target for the instruction layer: decode arbitrary bytes as a function, analyse it,
// pick optprobe regions, relocate them and check that every copy means what the original
// meant (same absolute operand and branch targets, original return addresses, jmp back).
// Input: 16 bytes choosing the function's address, the slot's distance and the smallest
// region, then up to 512 bytes of code.
#include "tests/fuzz/fuzz_driver.h"

#include "arch/x86_64/insn.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"

#include <dprobe/ptrace.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace dprobe::arch;

namespace
{

const insn *current; // the original instruction under check, for the report

[[noreturn]] void fail(const char *what, uintptr_t at)
{
    std::fprintf(stderr, "relocate_fuzz: invariant broken: %s at 0x%lx\n", what,
                 static_cast<unsigned long>(at));
    if (current) {
        std::fprintf(stderr, "  instruction at 0x%lx: %s [",
                     static_cast<unsigned long>(current->addr), insn_to_string(*current).c_str());
        for (unsigned n = 0; n < current->len; ++n)
            std::fprintf(stderr, " %02x", current->bytes[n]);
        std::fprintf(stderr, " ]\n");
    }
    std::abort();
}
#define CHECK(c, at)                                                                               \
    do {                                                                                           \
        if (!(c)) fail(#c, at);                                                                    \
    } while (0)

uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

std::vector<insn> sweep(const std::vector<uint8_t> &b, uintptr_t at)
{
    std::vector<insn> out;
    for (size_t off = 0; off < b.size();) {
        auto i = insn_decode(b.data() + off, b.size() - off, at + off);
        CHECK(i.has_value(), at + off);
        out.push_back(*i);
        off += i->len;
    }
    return out;
}

// The value a `push $imm` [+ `movl $hi, 4(%rsp)`] prologue leaves on the stack; advances K.
uint64_t pushed_value(const std::vector<insn> &seq, size_t &k)
{
    CHECK(k < seq.size() && std::strcmp(seq[k].mnemonic_name(), "push") == 0, seq[0].addr);
    const insn &p = seq[k++];
    int64_t v;
    if (p.bytes[0] == 0x6a)
        v = static_cast<int8_t>(p.bytes[1]);
    else {
        CHECK(p.bytes[0] == 0x68 && p.len == 5, p.addr);
        int32_t imm;
        std::memcpy(&imm, p.bytes + 1, 4);
        v = imm;
    }
    uint64_t value = static_cast<uint64_t>(v);
    if (k < seq.size() && std::strcmp(seq[k].mnemonic_name(), "mov") == 0) {
        const insn &m = seq[k++];
        // movl $imm32, 4(%rsp): c7 44 24 04 imm32
        CHECK(m.len == 8 && m.bytes[0] == 0xc7 && m.bytes[1] == 0x44 && m.bytes[2] == 0x24 &&
                  m.bytes[3] == 0x04,
              m.addr);
        uint32_t hi;
        std::memcpy(&hi, m.bytes + 4, 4);
        value = (value & 0xffffffffULL) | (static_cast<uint64_t>(hi) << 32);
    }
    return value;
}

// The copy of ORIG (bytes starting at its offset in the relocated block) against its meaning.
void check_copy(const insn &orig, const std::vector<uint8_t> &bytes, uintptr_t at)
{
    current = &orig;
    const auto seq = sweep(bytes, at);
    CHECK(!seq.empty(), at);
    size_t k = 0;
    switch (orig.k) {
    case insn::jmp_rel:
    case insn::jcc_rel:
        CHECK(seq.size() == 1 && seq[0].k == orig.k, at);
        CHECK(seq[0].branch_target == orig.branch_target, at);
        CHECK(seq[0].imm_size == 4, at);
        if (orig.k == insn::jcc_rel) CHECK(seq[0].cc == orig.cc, at);
        return;
    case insn::loop_rel:
        CHECK(seq.size() == 3 && seq[0].k == insn::loop_rel && seq[0].mnemonic == orig.mnemonic,
              at);
        CHECK(seq[0].counter_size == orig.counter_size, at);
        CHECK(seq[0].branch_target == seq[2].addr, at);
        CHECK(seq[1].k == insn::jmp_rel && seq[1].branch_target == at + bytes.size(), at);
        CHECK(seq[2].k == insn::jmp_rel && seq[2].branch_target == orig.branch_target, at);
        return;
    case insn::call_rel:
        CHECK(pushed_value(seq, k) == orig.next(), at);
        CHECK(k + 1 == seq.size() && seq[k].k == insn::jmp_rel, at);
        CHECK(seq[k].branch_target == orig.branch_target, at);
        return;
    case insn::call_indirect: {
        CHECK(pushed_value(seq, k) == orig.next(), at);
        CHECK(k + 1 == seq.size() && seq[k].k == insn::jmp_indirect, at);
        const insn &j = seq[k];
        CHECK(j.ind_is_mem == orig.ind_is_mem && j.ind_reg == orig.ind_reg, at);
        CHECK(j.ind_index == orig.ind_index && j.ind_scale == orig.ind_scale, at);
        CHECK(j.has_segment_fs_gs == orig.has_segment_fs_gs, at);
        if (orig.is_rip_relative)
            CHECK(j.is_rip_relative && j.rip_target == orig.rip_target, at);
        else if (orig.ind_is_mem)
            CHECK(j.ind_disp == orig.ind_disp + (orig.ind_uses_rsp ? 8 : 0), at);
        return;
    }
    default:
        break;
    }
    // Copied as is, except a re-aimed RIP-relative displacement.
    CHECK(seq.size() == 1 && seq[0].len == orig.len && seq[0].mnemonic == orig.mnemonic, at);
    if (orig.is_rip_relative) {
        CHECK(seq[0].is_rip_relative && seq[0].rip_target == orig.rip_target, at);
        CHECK(std::memcmp(seq[0].bytes, orig.bytes, orig.disp_offset) == 0, at);
        CHECK(std::memcmp(seq[0].bytes + orig.disp_offset + 4, orig.bytes + orig.disp_offset + 4,
                          orig.len - orig.disp_offset - 4) == 0,
              at);
    } else {
        CHECK(std::memcmp(seq[0].bytes, orig.bytes, orig.len) == 0, at);
    }
}

void check_emulation(const insn &i)
{
    current = &i;
    if (!insn_can_emulate(i) || i.k == insn::call_indirect || i.k == insn::jmp_indirect)
        return; // memory operands would read arbitrary addresses
    alignas(16) unsigned long stack[8] = {0, 0, 0, 0, 0x1234, 0, 0, 0};
    pt_regs r{};
    r.sp = reinterpret_cast<unsigned long>(&stack[4]);
    r.flags = i.addr & 0x8d5;
    r.cx = i.addr & 3;
    CHECK(insn_emulate(i, &r), i.addr);
    switch (i.k) {
    case insn::call_rel:
        CHECK(r.ip == i.branch_target && stack[3] == i.next(), i.addr);
        break;
    case insn::ret:
        CHECK(r.ip == 0x1234 && r.sp == reinterpret_cast<unsigned long>(&stack[5]) + i.ret_imm,
              i.addr);
        break;
    default:
        CHECK(r.ip == i.branch_target || r.ip == i.next(), i.addr);
        break;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16) return 0;
    const uint64_t h0 = rd64(data), h1 = rd64(data + 8);
    data += 16;
    size -= 16;
    if (size > 512) size = 512;
    const uintptr_t base = 0x7f0000000000ULL + (h0 & 0xffffffffULL);
    // Slots mostly near the function, sometimes beyond ±2 GiB.
    const int64_t delta = static_cast<int64_t>(h1 % (5ULL << 30)) - (5LL << 29);
    const uintptr_t slot = base + static_cast<uintptr_t>(delta);
    const size_t min_len = 1 + ((h0 >> 32) % 12);

    const auto fa = analyze_function(data, base, size);

    // The sweep is contiguous and agrees with insn_boundary().
    uintptr_t expect = base;
    for (const insn &i : fa.insns) {
        CHECK(i.addr == expect && i.len >= 1 && i.len <= MAX_INSN_SIZE, i.addr);
        expect += i.len;
    }
    CHECK(fa.decode_failed ? expect == fa.decode_fail_addr : expect == base + size, expect);
    // insn_boundary() decodes from the start each time: every offset of the first 64 bytes,
    // then a sample (all of them made long inputs ten times slower to fuzz).
    for (size_t off = 0; off < size; off += off < 64 ? 1 : 13)
        CHECK(insn_boundary(data, base, size, base + off) == fa.is_boundary(base + off),
              base + off);
    for (size_t n = 1; n < fa.jump_targets.size(); ++n)
        CHECK(fa.jump_targets[n - 1].to <= fa.jump_targets[n].to, fa.jump_targets[n].to);

    for (const insn &i : fa.insns) {
        check_emulation(i);

        // Single-instruction copies (the kprobe int3 path).
        if (insn_can_boost(i)) {
            const auto r = relocate_insns({&i, 1}, slot, i.next(), false);
            if (r) {
                CHECK(r.copy->bytes.size() == insn_copy_len(i), i.addr);
                check_copy(i, r.copy->bytes, slot);
                CHECK(ss_fixup_rip(i, slot, slot + r.copy->bytes.size()) == i.next(), i.addr);
            } else {
                CHECK(r.error.code == relocate_error::out_of_range, i.addr);
            }
        } else {
            const auto r = relocate_insns({&i, 1}, slot, i.next(), true);
            CHECK(!r && r.error.code == relocate_error::unsupported, i.addr);
        }

        // Optprobe regions.
        const auto c = can_optimize_region(fa, i.addr, min_len);
        if (!c.ok()) {
            CHECK(!c.message.empty(), i.addr);
            continue;
        }
        size_t len = 0;
        for (const insn &ri : c.region) {
            CHECK(ri.addr == i.addr + len, ri.addr);
            len += ri.len;
        }
        CHECK(len == c.len && len >= min_len, i.addr);
        for (const auto &e : fa.jump_targets)
            CHECK(!(e.to > i.addr && e.to < i.addr + len), e.to);
        CHECK(!fa.has_indirect_jump && !fa.decode_failed, i.addr);

        const auto r = relocate_insns(c.region, slot, i.addr + len, true);
        if (!r) {
            CHECK(r.error.code == relocate_error::out_of_range, i.addr);
            continue;
        }
        const auto &cp = *r.copy;
        CHECK(cp.insn_offsets.size() == c.region.size() && cp.jmp_back_offset, i.addr);
        for (size_t n = 0; n < c.region.size(); ++n) {
            const size_t from = cp.insn_offsets[n];
            const size_t to =
                n + 1 < c.region.size() ? cp.insn_offsets[n + 1] : *cp.jmp_back_offset;
            CHECK(from < to && to <= cp.bytes.size(), c.region[n].addr);
            check_copy(c.region[n],
                       std::vector<uint8_t>(cp.bytes.begin() + from, cp.bytes.begin() + to),
                       slot + from);
        }
        auto back = insn_decode(cp.bytes.data() + *cp.jmp_back_offset, JMP32_INSN_SIZE,
                                slot + *cp.jmp_back_offset);
        CHECK(back && back->k == insn::jmp_rel && back->branch_target == i.addr + len, i.addr);
        CHECK(*cp.jmp_back_offset + JMP32_INSN_SIZE == cp.bytes.size(), i.addr);
    }
    return 0;
}

#ifdef DPROBE_FUZZ_STANDALONE
// Inputs for the standalone driver: random bytes, x86-flavoured random instructions, and real
// code of this executable and of libc with a few bytes mutated.
void dprobe_fuzz_generate(std::vector<uint8_t> &in, fuzz_rng &rng)
{
    const auto next = [&rng] { return rng.next(); };
    // Fragments that make branches, rip-relative operands and prefixes frequent.
    static const std::vector<std::vector<uint8_t>> frags = {
        {0x74},
        {0x0f, 0x85},
        {0xeb},
        {0xe9},
        {0xe8},
        {0xe2},
        {0xe3},
        {0x67, 0xe3},
        {0xe0},
        {0xe1},
        {0xff, 0x15},
        {0xff, 0x25},
        {0xff, 0xd0},
        {0xff, 0x54, 0x24},
        {0xff, 0x14, 0x24},
        {0x48, 0x8b, 0x05},
        {0x48, 0x8d, 0x3d},
        {0x0f, 0x28, 0x05},
        {0xc5, 0xf8, 0x28, 0x05},
        {0x83, 0x3d},
        {0xc3},
        {0xc2, 0x08, 0x00},
        {0xcc},
        {0x0f, 0x05},
        {0x90},
        {0x66},
        {0xf3, 0x0f, 0x1e, 0xfa},
        {0x3e},
        {0x2e},
        {0xf2},
        {0x48},
        {0x41},
        {0x64},
        {0x9c},
        {0x0f, 0x1f, 0x44, 0x00, 0x00},
        {0x3e, 0xff, 0xe0},
        {0xc7, 0xf8},
    };
    const auto *self = reinterpret_cast<const uint8_t *>(&LLVMFuzzerTestOneInput);
    const auto *libc = reinterpret_cast<const uint8_t *>(&std::memcpy);

    for (int k = 0; k < 2; ++k) {
        const uint64_t v = next();
        in.insert(in.end(), reinterpret_cast<const uint8_t *>(&v),
                  reinterpret_cast<const uint8_t *>(&v) + 8);
    }
    const size_t len = 1 + next() % 200;
    switch (next() % 3) {
    case 0:
        while (in.size() < 16 + len)
            in.push_back(static_cast<uint8_t>(next()));
        break;
    case 1:
        while (in.size() < 16 + len) {
            const auto &f = frags[next() % frags.size()];
            in.insert(in.end(), f.begin(), f.end());
            for (uint64_t n = next() % 6; n; --n)
                in.push_back(static_cast<uint8_t>(next()));
        }
        break;
    default: {
        const uint8_t *src = (next() & 1) ? self : libc;
        const size_t off = next() % 256;
        in.insert(in.end(), src + off, src + off + len);
        for (uint64_t n = next() % 3; n; --n)
            in[16 + next() % len] = static_cast<uint8_t>(next());
        break;
    }
    }
}
#endif
