// x86's side of an int3 kprobe (arch/x86_64/kprobes_arch.h, kprobes_int3.h) and of a thread
// meeting the text-patching protocol's breakpoint (text_patching.h): what the instruction
// allows, the slot's copies and their refusals, the trap address, branch emulation with an
// unreadable target, a fault inside a boost copy.
#include "arch/x86_64/kprobes_arch.h"
#include "arch/x86_64/kprobes_int3.h"
#include "arch/x86_64/text_patching.h"
#include "arch/x86_64/uaccess.h"
#include "core/exec_mem.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace dprobe;

namespace
{

// A function's bytes, decoded as if at their own address:
//   0: mov 0x10(%rip),%rax     7: jmp +0x10     9: jmp *0(%rip)     15: loop (ecx) -2
//  18: int3                   19: ret
alignas(16) const uint8_t code[] = {0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, // mov
                                    0xeb, 0x10,                               // jmp rel8
                                    0xff, 0x25, 0x00, 0x00, 0x00, 0x00,       // jmp *0(%rip)
                                    0x67, 0xe2, 0xfe,                         // loop (ecx)
                                    0xcc,                                     // int3
                                    0xc3};                                    // ret
const uintptr_t func = reinterpret_cast<uintptr_t>(code);

TEST(arch_prepare_kprobe, what_each_instruction_allows)
{
    arch::kprobe_insn ki;
    ASSERT_EQ(0, arch::prepare_kprobe(code, func, sizeof code, func, &ki));
    EXPECT_FALSE(ki.emulate); // runs from a copy
    EXPECT_EQ(0x48, ki.opcode);
    EXPECT_EQ(func, ki.i.addr);
    EXPECT_EQ(7, ki.i.len);
    // The copy addresses the operand at func + 7 + 0x10 with rel32.
    EXPECT_EQ(func, ki.reach_lo);
    EXPECT_EQ(func + 0x17, ki.reach_hi);
    EXPECT_FALSE(ki.slot_optional);

    ASSERT_EQ(0, arch::prepare_kprobe(code, func, sizeof code, func + 7, &ki));
    EXPECT_TRUE(ki.emulate);
    EXPECT_EQ(0xeb, ki.opcode);
    EXPECT_EQ(func + 7, ki.reach_lo);
    EXPECT_EQ(func + 9 + 0x10, ki.reach_hi);
    EXPECT_TRUE(ki.slot_optional); // applied to the registers, reads nothing

    // Emulated, but reads its target: the copy is the way out when that is unreadable.
    ASSERT_EQ(0, arch::prepare_kprobe(code, func, sizeof code, func + 9, &ki));
    EXPECT_TRUE(ki.emulate);
    EXPECT_FALSE(ki.slot_optional);

    EXPECT_EQ(-EOPNOTSUPP, arch::prepare_kprobe(code, func, sizeof code, func + 15, &ki));
    EXPECT_EQ(-EINVAL, arch::prepare_kprobe(code, func, sizeof code, func + 18, &ki));
    EXPECT_EQ(-EINVAL, arch::prepare_kprobe(code, func, sizeof code, func + 1, &ki));
}

TEST(arch_prepare_kprobe, copies_and_their_refusals)
{
    arch::kprobe_insn mov, jmp, jmp_mem;
    ASSERT_EQ(0, arch::prepare_kprobe(code, func, sizeof code, func, &mov));
    ASSERT_EQ(0, arch::prepare_kprobe(code, func, sizeof code, func + 7, &jmp));
    ASSERT_EQ(0, arch::prepare_kprobe(code, func, sizeof code, func + 9, &jmp_mem));

    exec_chunk slot = exec_alloc(mov.reach_lo, mov.reach_hi, arch::KPROBE_SLOT_SIZE);
    ASSERT_TRUE(slot);
    arch::kprobe_slot ks;
    ASSERT_EQ(0, arch::prepare_kprobe_copies(mov, slot.rw, slot.rx, &ks));
    EXPECT_TRUE(ks.boostable);
    EXPECT_TRUE(ks.has_ss);
    EXPECT_EQ(slot.rx, ks.boost_addr);
    EXPECT_EQ(slot.rx + arch::KPROBE_SLOT_SS, ks.ss_addr);
    // A branch is emulated: no ss copy, the boost copy only for its unreadable-target case.
    ASSERT_EQ(0, arch::prepare_kprobe_copies(jmp, slot.rw, slot.rx, &ks));
    EXPECT_FALSE(ks.has_ss);
    ASSERT_EQ(0, arch::prepare_kprobe_copies(jmp_mem, slot.rw, slot.rx, &ks));
    EXPECT_TRUE(ks.boostable);
    EXPECT_FALSE(ks.has_ss);
    exec_free(slot);

    // A slot beyond rel32 reach of the operands: no copy, so no probe.
    alignas(16) uint8_t far[arch::KPROBE_SLOT_SIZE];
    const uintptr_t far_rx = func + (uintptr_t{1} << 40);
    EXPECT_EQ(-EINVAL, arch::prepare_kprobe_copies(mov, far, far_rx, &ks));
    EXPECT_EQ(-EINVAL, arch::prepare_kprobe_copies(jmp_mem, far, far_rx, &ks));
    // The plain jmp needs none.
    EXPECT_EQ(0, arch::prepare_kprobe_copies(jmp, far, far_rx, &ks));
}

TEST(arch_kprobe_hit, trap_and_handler_ips)
{
    ucontext_t uc{};
    arch::uc_set_ip(&uc, 0x401001);
    EXPECT_EQ(0x401000u, arch::kprobe_trap_addr(&uc));
    EXPECT_EQ(0x401001u, arch::kprobe_hit_ip(0x401000));
    EXPECT_EQ(0x401005u, arch::kprobe_ftrace_step_ip(0x401000, 5));
}

std::atomic<int> traps{0};
std::atomic<bool> was_int3{false};
std::atomic<uintptr_t> trap_at{0};

void on_trap(int, siginfo_t *info, void *ucv)
{
    was_int3 = arch::kprobe_trap_is_int3(info);
    trap_at = arch::kprobe_trap_addr(static_cast<ucontext_t *>(ucv));
    traps.fetch_add(1);
}

TEST(arch_kprobe_hit, an_int3_and_a_raise)
{
    struct sigaction sa {
    }, old{};
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(0, sigaction(SIGTRAP, &sa, &old));
    uintptr_t at;
    // The int3 traps with the ip past it; the thread continues there.
    asm volatile("1: int3\n\tlea 1b(%%rip), %0" : "=r"(at));
    EXPECT_EQ(1, traps.load());
    EXPECT_TRUE(was_int3.load());
    EXPECT_EQ(at, trap_at.load());
    raise(SIGTRAP);
    EXPECT_EQ(2, traps.load());
    EXPECT_FALSE(was_int3.load());
    sigaction(SIGTRAP, &old, nullptr);
}

void fault_handler(int sig, siginfo_t *info, void *ucv)
{
    if (uaccess_fixup_fault(sig, info, static_cast<ucontext_t *>(ucv))) return;
    signal(sig, SIG_DFL);
    raise(sig);
}

arch::insn dec(std::initializer_list<uint8_t> b, uintptr_t at)
{
    const std::vector<uint8_t> v(b);
    auto i = arch::insn_decode(v.data(), v.size(), at);
    EXPECT_TRUE(i);
    return i ? *i : arch::insn{};
}

TEST(arch_kprobe_hit, emulation_reads_the_target_without_faulting)
{
    struct sigaction sa {
    }, old_segv{}, old_bus{};
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void *none = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, none);

    constexpr uintptr_t A = 0x500000;
    alignas(16) unsigned long stack[8] = {};
    unsigned long table[4] = {0x111, 0x222, 0x333, 0x444};

    // call *(%rax): pushes A + 2, continues at the word %rax points to.
    const arch::insn call_mem = dec({0xff, 0x10}, A);
    pt_regs r{};
    r.sp = reinterpret_cast<unsigned long>(&stack[4]);
    r.ax = reinterpret_cast<unsigned long>(&table[1]);
    ASSERT_TRUE(arch::kprobe_emulate_insn(call_mem, &r));
    EXPECT_EQ(0x222u, r.ip);
    EXPECT_EQ(reinterpret_cast<unsigned long>(&stack[3]), r.sp);
    EXPECT_EQ(A + 2, stack[3]);

    // The same through an unreadable pointer: nothing changes, the copy will fault instead.
    r = pt_regs{};
    r.sp = reinterpret_cast<unsigned long>(&stack[4]);
    r.ax = reinterpret_cast<unsigned long>(none);
    r.ip = 0x1234;
    const pt_regs before = r;
    EXPECT_FALSE(arch::kprobe_emulate_insn(call_mem, &r));
    EXPECT_EQ(0, std::memcmp(&before, &r, sizeof r));

    // jmp *0x8(%rax,%rcx,8): base, index, scale and displacement.
    const arch::insn jmp_sib = dec({0xff, 0x64, 0xc8, 0x08}, A);
    r = pt_regs{};
    r.ax = reinterpret_cast<unsigned long>(&table[0]);
    r.cx = 2;
    ASSERT_TRUE(arch::kprobe_emulate_insn(jmp_sib, &r));
    EXPECT_EQ(0x444u, r.ip);

    // jmp *0(%rip): the word right after the instruction, where it really is.
    alignas(8) uint8_t rip_code[16] = {0xff, 0x25, 0, 0, 0, 0};
    const unsigned long target = 0x777;
    std::memcpy(rip_code + 6, &target, sizeof target);
    auto jmp_rip =
        arch::insn_decode(rip_code, sizeof rip_code, reinterpret_cast<uintptr_t>(rip_code));
    ASSERT_TRUE(jmp_rip);
    r = pt_regs{};
    ASSERT_TRUE(arch::kprobe_emulate_insn(*jmp_rip, &r));
    EXPECT_EQ(0x777u, r.ip);

    munmap(none, page);
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
}

TEST(arch_kprobe_hit, a_fault_in_the_boost_copy)
{
    constexpr uintptr_t A = 0x500000, boost = 0x7000, len = 10, sp = 0x9000;
    const arch::insn call_mem = dec({0xff, 0x10}, A);
    const arch::insn mov = dec({0x48, 0x8b, 0x00}, A);
    ucontext_t uc{};
    // The copy's first instruction faulted: as if the original had.
    arch::uc_set_ip(&uc, boost);
    arch::uc_set_sp(&uc, sp);
    EXPECT_TRUE(arch::kprobe_boost_fault(mov, boost, len, &uc));
    EXPECT_EQ(A, arch::uc_ip(&uc));
    EXPECT_EQ(sp, arch::uc_sp(&uc));
    // `call *mem` runs as push + jmp: the jmp faulted after the push, which is undone.
    arch::uc_set_ip(&uc, boost + 5);
    EXPECT_TRUE(arch::kprobe_boost_fault(call_mem, boost, len, &uc));
    EXPECT_EQ(A, arch::uc_ip(&uc));
    EXPECT_EQ(sp + 8, arch::uc_sp(&uc));
    // Inside another copy's instructions, or past the copy: not the copy's fault.
    arch::uc_set_ip(&uc, boost + 5);
    arch::uc_set_sp(&uc, sp);
    EXPECT_FALSE(arch::kprobe_boost_fault(mov, boost, len, &uc));
    arch::uc_set_ip(&uc, boost + len);
    EXPECT_FALSE(arch::kprobe_boost_fault(call_mem, boost, len, &uc));
    EXPECT_EQ(boost + len, arch::uc_ip(&uc));
    EXPECT_EQ(sp, arch::uc_sp(&uc));
}

TEST(arch_text_patching, poke_int3_handler)
{
    arch::text_poke_req reqs[4];
    reqs[0].addr = 0x1000;
    reqs[0].len = 5;
    reqs[0].emu = arch::text_poke_req::emulate::nop;
    reqs[1].addr = 0x2000;
    reqs[1].len = 5;
    reqs[1].emu = arch::text_poke_req::emulate::jmp;
    reqs[1].target = 0x3000;
    reqs[2].addr = 0x2100;
    reqs[2].len = 1;
    reqs[2].emu = arch::text_poke_req::emulate::trap;
    reqs[3].addr = 0x2200;
    reqs[3].len = 5;
    reqs[3].emu = arch::text_poke_req::emulate::call;
    reqs[3].insn_len = 5;
    reqs[3].target = 0x5000;

    ucontext_t uc{};
    arch::uc_set_ip(&uc, 0x1001);
    EXPECT_TRUE(arch::poke_int3_handler(&uc, reqs, 4));
    EXPECT_EQ(0x1005u, arch::uc_ip(&uc));
    arch::uc_set_ip(&uc, 0x2001);
    EXPECT_TRUE(arch::poke_int3_handler(&uc, reqs, 4));
    EXPECT_EQ(0x3000u, arch::uc_ip(&uc));
    // A kprobe's int3 is its hook's; an address with no request is nobody's here.
    arch::uc_set_ip(&uc, 0x2101);
    EXPECT_FALSE(arch::poke_int3_handler(&uc, reqs, 4));
    EXPECT_EQ(0x2101u, arch::uc_ip(&uc));
    arch::uc_set_ip(&uc, 0x1801);
    EXPECT_FALSE(arch::poke_int3_handler(&uc, reqs, 4));
    arch::uc_set_ip(&uc, 0x1001);
    EXPECT_FALSE(arch::poke_int3_handler(&uc, reqs, 0));
    // A call: its return address pushed.
    alignas(16) uintptr_t stack[4] = {};
    arch::uc_set_ip(&uc, 0x2201);
    arch::uc_set_sp(&uc, reinterpret_cast<uintptr_t>(&stack[2]));
    EXPECT_TRUE(arch::poke_int3_handler(&uc, reqs, 4));
    EXPECT_EQ(0x5000u, arch::uc_ip(&uc));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(&stack[1]), arch::uc_sp(&uc));
    EXPECT_EQ(0x2205u, stack[1]);
}

} // namespace
