// The arch verbs that build detours and kprobe slots (arch/x86_64/detour.h, kprobes_arch.h):
// the region and its map to the copies, the arm/disarm requests, a detour that runs like the
// code it stands for (a mid-function region and a function shorter than the jmp), an int3
// probe's slot, and where an entry probe goes.
#include "arch/x86_64/detour.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/kprobes_arch.h"
#include "core/exec_mem.h"

#include <gtest/gtest.h>

#include <cstring>

// leaf(a, b) = a + b + 16; tiny() = 0, three bytes followed by int3 padding; entry() starts
// with endbr64.
asm(R"(
	.text
	.p2align 4
	.globl detour_test_leaf, detour_test_leaf_end
	.type detour_test_leaf, @function
detour_test_leaf:
	movq %rdi, %rax
	addq %rsi, %rax
	leaq 0x10(%rax), %rax
	ret
detour_test_leaf_end:
	.size detour_test_leaf, . - detour_test_leaf

	.p2align 4
	.globl detour_test_tiny
	.type detour_test_tiny, @function
detour_test_tiny:
	xorl %eax, %eax
	ret
	.size detour_test_tiny, . - detour_test_tiny
	.fill 13, 1, 0xcc

	.p2align 4
	.globl detour_test_entry
	.type detour_test_entry, @function
detour_test_entry:
	endbr64
	movq %rdi, %rax
	ret
	.size detour_test_entry, . - detour_test_entry
)");

extern "C" {
unsigned long detour_test_leaf(unsigned long, unsigned long);
extern const unsigned char detour_test_leaf_end[];
unsigned long detour_test_tiny();
unsigned long detour_test_entry(unsigned long);
}

namespace
{

using namespace dprobe;

const auto leaf = reinterpret_cast<uintptr_t>(&detour_test_leaf);
const size_t leaf_size = reinterpret_cast<uintptr_t>(detour_test_leaf_end) - leaf;
const auto *leaf_bytes = reinterpret_cast<const uint8_t *>(leaf);

int32_t rel32_at(const uint8_t *p)
{
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// A detour of REGION with a jump site's head pointing at its own copy: calling it runs the
// region, then the rest of the function.
struct runnable {
    exec_chunk mem;
    arch::detour d;
};

runnable build_runnable(const arch::detour_region &r)
{
    runnable out;
    out.mem = exec_alloc(r.addr, r.addr + r.len, arch::detour_size(r, arch::JUMP_DETOUR_HEAD));
    std::string why;
    EXPECT_TRUE(arch::detour_build(r, out.mem.rw, out.mem.rx, arch::JUMP_DETOUR_HEAD, &out.d, &why))
        << why;
    EXPECT_TRUE(arch::detour_write_jmp_head(out.d, out.mem.rw, out.d.copy()));
    return out;
}

TEST(arch_detour, region_map_and_requests)
{
    auto fa = arch::analyze_function(leaf, leaf_size);
    std::string why;
    auto r = arch::detour_region_at(fa, leaf_bytes, leaf, &why);
    ASSERT_TRUE(r) << why;
    EXPECT_EQ(leaf, r->addr);
    EXPECT_EQ(6, r->len); // mov (3) + add (3): the first whole instructions covering 5 bytes
    ASSERT_EQ(2u, r->insns.size());
    EXPECT_EQ(0, std::memcmp(r->orig, leaf_bytes, 6));

    runnable x = build_runnable(*r);
    const arch::detour &d = x.d;
    EXPECT_EQ(x.mem.rx, d.rx);
    EXPECT_EQ(d.rx + arch::JUMP_DETOUR_HEAD, d.copy());
    EXPECT_EQ(d.copy(), d.copy_of(leaf));
    const uintptr_t add_copy = d.copy_of(leaf + 3);
    EXPECT_GT(add_copy, d.copy());
    EXPECT_EQ(leaf + 3, d.orig_of(add_copy));
    EXPECT_EQ(leaf, d.orig_of(d.copy()));
    EXPECT_EQ(0u, d.copy_of(leaf + 1)) << "not an instruction of the region";
    EXPECT_TRUE(d.in_copy(add_copy));
    EXPECT_FALSE(d.in_copy(d.rx));
    std::vector<arch::rip_move> moves;
    d.moves(moves);
    ASSERT_EQ(1u, moves.size()) << "the first instruction is where the jmp goes";
    EXPECT_EQ(leaf + 3, moves[0].from);
    EXPECT_EQ(add_copy, moves[0].to);

    // Arming: jmp rel32 to the detour, int3 over the rest; a trapped thread goes there.
    arch::text_poke_req on = arch::detour_arm_req(d);
    EXPECT_EQ(leaf, on.addr);
    EXPECT_EQ(6, on.len);
    EXPECT_EQ(0xe9, on.bytes[0]);
    EXPECT_EQ(static_cast<int64_t>(d.rx) - static_cast<int64_t>(leaf + 5), rel32_at(on.bytes + 1));
    EXPECT_EQ(0xcc, on.bytes[5]);
    EXPECT_EQ(arch::text_poke_req::emulate::jmp, on.emu);
    EXPECT_EQ(d.rx, on.target);
    // Disarming: the original bytes, a trapped thread runs the copy; or int3 + tail.
    arch::text_poke_req off = arch::detour_disarm_req(d, false);
    EXPECT_EQ(0, std::memcmp(off.bytes, leaf_bytes, 6));
    EXPECT_EQ(arch::text_poke_req::emulate::jmp, off.emu);
    EXPECT_EQ(d.copy(), off.target);
    arch::text_poke_req to_int3 = arch::detour_disarm_req(d, true);
    EXPECT_EQ(0xcc, to_int3.bytes[0]);
    EXPECT_EQ(0, std::memcmp(to_int3.bytes + 1, leaf_bytes + 1, 5));
    EXPECT_EQ(arch::text_poke_req::emulate::trap, to_int3.emu);

    // The detour runs like the function: the relocated region, then back to the lea.
    auto via = reinterpret_cast<unsigned long (*)(unsigned long, unsigned long)>(d.rx);
    EXPECT_EQ(detour_test_leaf(3, 4), via(3, 4));
    EXPECT_EQ(23UL, via(3, 4));
}

TEST(arch_detour, region_refusals)
{
    auto fa = arch::analyze_function(leaf, leaf_size);
    std::string why;
    arch::optimize_refusal refusal{};
    EXPECT_FALSE(arch::detour_region_at(fa, leaf_bytes, leaf + 1, &why, &refusal));
    EXPECT_EQ(arch::optimize_refusal::not_boundary, refusal);
    EXPECT_FALSE(why.empty());
    // From the lea: lea (4) + ret (1) is 5 bytes ending in ret: fine, no jump back.
    auto r = arch::detour_region_at(fa, leaf_bytes, leaf + 6, &why, &refusal);
    ASSERT_TRUE(r) << why;
    EXPECT_EQ(5, r->len);
    // From the ret: fewer than 5 bytes before the end.
    EXPECT_FALSE(arch::detour_region_at(fa, leaf_bytes, leaf + 10, &why, &refusal));
    EXPECT_EQ(arch::optimize_refusal::crosses_end, refusal);
}

TEST(arch_detour, short_function_uses_the_padding)
{
    const auto tiny = reinterpret_cast<uintptr_t>(&detour_test_tiny);
    auto fa = arch::analyze_function(tiny, 3);
    std::string why;
    arch::optimize_refusal refusal{};
    EXPECT_FALSE(
        arch::detour_region_at(fa, reinterpret_cast<const uint8_t *>(tiny), tiny, &why, &refusal));
    EXPECT_EQ(arch::optimize_refusal::crosses_end, refusal);
    EXPECT_TRUE(arch::is_padding(tiny + 3, tiny + 5));
    EXPECT_FALSE(arch::is_padding(tiny, tiny + 5));
    auto r = arch::short_function_region(fa, tiny);
    ASSERT_TRUE(r);
    EXPECT_EQ(5, r->len);
    EXPECT_EQ(2u, r->insns.size());
    runnable x = build_runnable(*r);
    auto via = reinterpret_cast<unsigned long (*)()>(x.d.rx);
    EXPECT_EQ(0UL, via());
    // The leaf does not end in padding: no such region.
    auto lfa = arch::analyze_function(leaf, leaf_size);
    EXPECT_FALSE(arch::short_function_region(lfa, leaf + 6));
}

TEST(arch_kprobes, slot_requests_and_entry)
{
    auto i = arch::insn_decode(leaf_bytes + 3, leaf_size - 3, leaf + 3); // addq %rsi,%rax
    ASSERT_TRUE(i);
    exec_chunk slot = exec_alloc(leaf, leaf + leaf_size, arch::KPROBE_SLOT_SIZE);
    ASSERT_TRUE(slot);
    arch::kprobe_slot ks = arch::prepare_kprobe_slot(*i, true, slot.rw, slot.rx);
    ASSERT_TRUE(ks.boostable);
    ASSERT_TRUE(ks.has_ss);
    // Boost copy: the instruction, then jmp *ret(%rip) through the word that says where.
    EXPECT_EQ(slot.rx, ks.boost_addr);
    EXPECT_EQ(3, ks.boost_len);
    EXPECT_EQ(0, std::memcmp(slot.rw, leaf_bytes + 3, 3));
    EXPECT_EQ(0xff, slot.rw[3]);
    EXPECT_EQ(0x25, slot.rw[4]);
    EXPECT_EQ(static_cast<int32_t>(arch::KPROBE_SLOT_BOOST_RET - 9), rel32_at(slot.rw + 5));
    uintptr_t ret;
    std::memcpy(&ret, slot.rw + arch::KPROBE_SLOT_BOOST_RET, 8);
    EXPECT_EQ(leaf + 6, ret);
    arch::kprobe_slot_set_boost_ret(slot.rw, 0x1234);
    std::memcpy(&ret, slot.rw + arch::KPROBE_SLOT_BOOST_RET, 8);
    EXPECT_EQ(0x1234u, ret);
    // ss copy: the instruction, then int3.
    EXPECT_EQ(slot.rx + arch::KPROBE_SLOT_SS, ks.ss_addr);
    EXPECT_EQ(ks.ss_addr + 3, ks.ss_int3);
    EXPECT_EQ(0, std::memcmp(slot.rw + arch::KPROBE_SLOT_SS, leaf_bytes + 3, 3));
    EXPECT_EQ(0xcc, slot.rw[arch::KPROBE_SLOT_SS + 3]);

    arch::text_poke_req on = arch::arm_kprobe(leaf + 3);
    EXPECT_EQ(1, on.len);
    EXPECT_EQ(0xcc, on.bytes[0]);
    EXPECT_EQ(arch::text_poke_req::emulate::trap, on.emu);
    arch::text_poke_req off = arch::disarm_kprobe(leaf + 3, leaf_bytes[3]);
    EXPECT_EQ(leaf_bytes[3], off.bytes[0]);

    // Entry probes go after endbr64; elsewhere the offset stays.
    const auto entry = reinterpret_cast<uintptr_t>(&detour_test_entry);
    bool on_entry = false;
    EXPECT_EQ(4u, arch::adjust_kprobe_offset(entry, 8, 0, &on_entry));
    EXPECT_TRUE(on_entry);
    EXPECT_EQ(4u, arch::adjust_kprobe_offset(entry, 8, 4, &on_entry));
    EXPECT_TRUE(on_entry);
    EXPECT_EQ(7u, arch::adjust_kprobe_offset(entry, 8, 7, &on_entry));
    EXPECT_FALSE(on_entry);
    EXPECT_EQ(0u, arch::adjust_kprobe_offset(leaf, leaf_size, 0, &on_entry));
    EXPECT_TRUE(on_entry);
    EXPECT_EQ(3u, arch::adjust_kprobe_offset(leaf, leaf_size, 3, &on_entry));
    EXPECT_FALSE(on_entry);
}

} // namespace
