// The relocator, proven by execution: copies of instructions are placed in a page within
// ±2 GiB of the test's own code, run, and must behave exactly as the originals.
// Kept as written: the assembly listings below line up each instruction with its offset,
// which clang-format would reflow.
// clang-format off
#include "arch/x86_64/insn.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <immintrin.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

using namespace dprobe::arch;

#define FN(n) ".globl " #n "\n.type " #n ",@function\n" #n ":\n"
#define END(n) ".globl " #n "_end\n" #n "_end:\n.size " #n ", " #n "_end - " #n "\n"
asm(".pushsection .text.relocate_test,\"ax\",@progbits\n"
    // Records its return address, returns 2 * rdi.
    FN(rt_helper)
    "mov (%rsp),%rcx\n"
    "mov %rcx,rt_retaddr(%rip)\n"
    "lea (%rdi,%rdi),%rax\n"
    "ret\n"
    END(rt_helper)
    FN(rt_load)                      // rt_data + rdi
    "mov rt_data(%rip),%rax\n"       // 0 (7)
    "add %rdi,%rax\n"
    "ret\n"
    END(rt_load)
    FN(rt_store)                     // rt_data2 = rdi; return rt_data2
    "mov %rdi,rt_data2(%rip)\n"      // 0 (7)
    "mov rt_data2(%rip),%rax\n"
    "ret\n"
    END(rt_store)
    FN(rt_cmpimm)                    // (rt_data == 0x7b) ? 1 : 0, with an imm after the disp
    "xor %eax,%eax\n"                // 0 (2)
    "cmpl $0x7b,rt_data(%rip)\n"     // 2 (7)
    "sete %al\n"
    "ret\n"
    END(rt_cmpimm)
    FN(rt_jcc)                       // rdi < 10 ? 2 : 1
    "cmp $10,%rdi\n"                 // 0 (4)
    "jl 1f\n"                        // 4 (2)
    "mov $1,%eax\n"
    "ret\n"
    "1: mov $2,%eax\n"
    "ret\n"
    END(rt_jcc)
    FN(rt_jmp8)                      // rdi + 7
    "mov %rdi,%rax\n"                // 0 (3)
    "jmp 1f\n"                       // 3 (2)
    "ud2\n"
    "1: add $7,%rax\n"
    "ret\n"
    END(rt_jmp8)
    FN(rt_call)                      // 2 * rdi + 1, via a call
    "call rt_helper\n"               // 0 (5)
    "add $1,%rax\n"
    "ret\n"
    END(rt_call)
    FN(rt_callind)                   // same through call *rt_fnptr(%rip)
    "call *rt_fnptr(%rip)\n"         // 0 (6)
    "add $1,%rax\n"
    "ret\n"
    END(rt_callind)
    FN(rt_callreg)                   // same through call *%rax (rsi = target)
    "mov %rsi,%rax\n"                // 0 (3)
    "call *%rax\n"                   // 3 (2)
    "add $1,%rax\n"
    "ret\n"
    END(rt_callreg)
    FN(rt_callrsp)                   // same through call *(%rsp) (rsi = target)
    "xchg %ax,%ax\n"                 // 0 (2)
    "push %rsi\n"                    // 2 (1)
    "call *(%rsp)\n"                 // 3 (3)
    "pop %rcx\n"
    "add $1,%rax\n"
    "ret\n"
    END(rt_callrsp)
    FN(rt_loop)                      // (a, b, c, n): n == 1 ? 5 : n - 1
    "loop 1f\n"                      // 0 (2)
    "mov $5,%eax\n"                  // 2 (5)
    "ret\n"
    "1: mov %rcx,%rax\n"
    "ret\n"
    END(rt_loop)
    FN(rt_jrcxz)                     // (a, b, c, n): n == 0 ? 7 : 5
    "jrcxz 1f\n"                     // 0 (2)
    "mov $5,%eax\n"                  // 2 (5)
    "ret\n"
    "1: mov $7,%eax\n"
    "ret\n"
    END(rt_jrcxz)
    FN(rt_loop_mid)                  // 3 * rdi + 100 (rdi >= 1); probed in the middle
    "mov %rdi,%rcx\n"                // 0 (3)
    "xor %eax,%eax\n"                // 3 (2)
    "1: add $3,%rax\n"               // 5 (4)
    ".globl rt_loop_mid_probe\nrt_loop_mid_probe:\n"
    "loop 1b\n"                      // 9 (2)
    "add $100,%rax\n"                // 11 (4)
    "ret\n"
    END(rt_loop_mid)
    FN(rt_jcc_mid)                   // rdi * 2 if rdi is odd, else rdi; probed in the middle
    "mov %rdi,%rax\n"                // 0 (3)
    ".globl rt_jcc_mid_probe\nrt_jcc_mid_probe:\n"
    "test $1,%dil\n"                 // 3 (4)
    "jz 1f\n"                        // 7 (2)
    "add %rax,%rax\n"
    "1: ret\n"
    END(rt_jcc_mid)
    FN(rt_pushpop)                   // rdi + rsi via the stack
    "push %rdi\n"                    // 0
    "push %rsi\n"                    // 1
    "pop %rax\n"                     // 2
    "pop %rdx\n"                     // 3
    "add %rdx,%rax\n"                // 4 (3)
    "ret\n"
    END(rt_pushpop)
    FN(rt_ret)                       // rdi + 1, region ends with ret
    "lea 1(%rdi),%rax\n"             // 0 (4)
    "ret\n"                          // 4
    END(rt_ret)
    FN(rt_lea)                       // &rt_data
    "lea rt_data(%rip),%rax\n"       // 0 (7)
    "ret\n"
    END(rt_lea)
    FN(rt_movaps)                    // rt_vec in xmm0
    "movaps rt_vec(%rip),%xmm0\n"    // 0 (7)
    "ret\n"
    END(rt_movaps)
    FN(rt_movsd)                     // rt_dbl in xmm0
    "movsd rt_dbl(%rip),%xmm0\n"     // 0 (8)
    "ret\n"
    END(rt_movsd)
    FN(rt_vmovaps)                   // rt_vec in xmm0 through a VEX encoding
    "vmovaps rt_vec(%rip),%xmm0\n"   // 0 (8)
    "ret\n"
    END(rt_vmovaps)
    FN(rt_flags)                     // carry of rdi + rsi, computed across the region
    "xor %eax,%eax\n"                // 0 (2)
    "add %rsi,%rdi\n"                // 2 (3)
    "setc %al\n"
    "ret\n"
    END(rt_flags)
    ".popsection\n"
    ".pushsection .data.relocate_test,\"aw\",@progbits\n"
    ".balign 16\n"
    ".globl rt_vec\nrt_vec: .float 1.5, 2.5, 3.5, 4.5\n"
    ".globl rt_dbl\nrt_dbl: .double 6.25\n"
    ".globl rt_data\nrt_data: .quad 1000\n"
    ".globl rt_data2\nrt_data2: .quad 0\n"
    ".globl rt_retaddr\nrt_retaddr: .quad 0\n"
    ".globl rt_fnptr\nrt_fnptr: .quad rt_helper\n"
    ".popsection\n");

#define DECL(n) extern "C" const uint8_t n##_end[];
extern "C" {
long rt_helper(long);
long rt_load(long);
long rt_store(long);
long rt_cmpimm();
long rt_jcc(long);
long rt_jmp8(long);
long rt_call(long);
long rt_callind(long);
long rt_callreg(long, long (*)(long));
long rt_callrsp(long, long (*)(long));
long rt_loop(long, long, long, long);
long rt_jrcxz(long, long, long, long);
long rt_loop_mid(long);
long rt_jcc_mid(long);
long rt_pushpop(long, long);
long rt_ret(long);
const long *rt_lea();
__m128 rt_movaps();
double rt_movsd();
__m128 rt_vmovaps();
long rt_flags(unsigned long, unsigned long);
extern uint8_t rt_loop_mid_probe[], rt_jcc_mid_probe[];
extern long rt_data, rt_data2, rt_fnptr;
extern uintptr_t rt_retaddr;
}
DECL(rt_helper) DECL(rt_load) DECL(rt_store) DECL(rt_cmpimm) DECL(rt_jcc) DECL(rt_jmp8)
DECL(rt_call) DECL(rt_callind) DECL(rt_callreg) DECL(rt_callrsp) DECL(rt_loop) DECL(rt_jrcxz)
DECL(rt_loop_mid) DECL(rt_jcc_mid) DECL(rt_pushpop) DECL(rt_ret) DECL(rt_lea) DECL(rt_movaps)
DECL(rt_movsd) DECL(rt_vmovaps) DECL(rt_flags)

namespace {

template <typename F> uintptr_t addr_of(F *f) { return reinterpret_cast<uintptr_t>(f); }

const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A page within ±2 GiB of NEAR: try hints at growing distances below and above.
struct near_page {
    uint8_t *p = nullptr;
    explicit near_page(uintptr_t near)
    {
        for (uintptr_t d = 1 << 20; d < (1UL << 30) && !p; d += 1 << 20)
            for (int sign : {-1, 1}) {
                const uintptr_t hint = ((near + sign * static_cast<intptr_t>(d)) & ~(page - 1));
                void *m = mmap(reinterpret_cast<void *>(hint), page, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
                if (m == MAP_FAILED)
                    continue;
                p = static_cast<uint8_t *>(m);
                break;
            }
    }
    ~near_page()
    {
        if (p)
            munmap(p, page);
    }
    uintptr_t addr() const { return reinterpret_cast<uintptr_t>(p); }
    void load(const std::vector<uint8_t> &code, size_t at = 0)
    {
        ASSERT_EQ(mprotect(p, page, PROT_READ | PROT_WRITE), 0);
        std::memcpy(p + at, code.data(), code.size());
        ASSERT_EQ(mprotect(p, page, PROT_READ | PROT_EXEC), 0);
    }
};

func_analysis analyze(const void *start, const uint8_t *end)
{
    const auto s = reinterpret_cast<uintptr_t>(start);
    return analyze_function(s, reinterpret_cast<uintptr_t>(end) - s);
}

// Region at ADDR in the function [START, END), relocated into SLOT with a jmp back.
relocated build(near_page &slot, const void *start, const uint8_t *end, uintptr_t addr)
{
    auto fa = analyze(start, end);
    auto c = can_optimize_region(fa, addr);
    EXPECT_TRUE(c.ok()) << c.message;
    auto r = relocate_insns(c.region, slot.addr(), addr + c.len, true);
    EXPECT_TRUE(r.ok()) << r.error.message;
    if (!r.ok())
        return {};
    slot.load(r.copy->bytes);
    return *r.copy;
}

// Copies the first instructions of F and returns a pointer to call F through the copy.
template <typename F> F *through_slot(near_page &slot, F *f, const uint8_t *end)
{
    build(slot, reinterpret_cast<const void *>(f), end, addr_of(f));
    return reinterpret_cast<F *>(slot.p);
}

// Replaces [AT, AT+5) with a jmp to the slot for the scope (an optprobe without handlers).
struct text_patch {
    uint8_t *at;
    uint8_t saved[5];
    text_patch(uint8_t *where, uintptr_t to) : at(where)
    {
        std::memcpy(saved, at, 5);
        auto j = make_jmp_rel32(reinterpret_cast<uintptr_t>(at), to);
        EXPECT_TRUE(j);
        protect(PROT_READ | PROT_WRITE | PROT_EXEC);
        std::memcpy(at, j->data(), 5);
        protect(PROT_READ | PROT_EXEC);
    }
    ~text_patch()
    {
        protect(PROT_READ | PROT_WRITE | PROT_EXEC);
        std::memcpy(at, saved, 5);
        protect(PROT_READ | PROT_EXEC);
    }
    void protect(int prot)
    {
        const auto s = reinterpret_cast<uintptr_t>(at) & ~(page - 1);
        const auto e = (reinterpret_cast<uintptr_t>(at) + 5 + page - 1) & ~(page - 1);
        ASSERT_EQ(mprotect(reinterpret_cast<void *>(s), e - s, prot), 0);
    }
};

class relocate_exec : public ::testing::Test {
protected:
    near_page slot{addr_of(rt_load)};
    void SetUp() override { ASSERT_NE(slot.p, nullptr) << "no free page within 2 GiB of text"; }
};

TEST_F(relocate_exec, rip_relative_load)
{
    auto f = through_slot(slot, rt_load, rt_load_end);
    rt_data = 1000;
    EXPECT_EQ(f(5), rt_load(5));
    EXPECT_EQ(f(5), 1005);
    rt_data = -3;
    EXPECT_EQ(f(1), -2);
}

TEST_F(relocate_exec, rip_relative_store)
{
    auto f = through_slot(slot, rt_store, rt_store_end);
    EXPECT_EQ(f(77), 77);
    EXPECT_EQ(rt_data2, 77);
    EXPECT_EQ(f(-9), rt_store(-9));
}

TEST_F(relocate_exec, rip_relative_with_immediate)
{
    auto f = through_slot(slot, rt_cmpimm, rt_cmpimm_end);
    rt_data = 0x7b;
    EXPECT_EQ(f(), 1);
    rt_data = 0x7c;
    EXPECT_EQ(f(), 0);
    EXPECT_EQ(rt_cmpimm(), 0);
}

TEST_F(relocate_exec, lea_rip)
{
    auto f = through_slot(slot, rt_lea, rt_lea_end);
    EXPECT_EQ(f(), &rt_data);
    EXPECT_EQ(f(), rt_lea());
}

TEST_F(relocate_exec, sse_and_avx_rip_relative)
{
    auto a = through_slot(slot, rt_movaps, rt_movaps_end);
    float v[4];
    _mm_storeu_ps(v, a());
    EXPECT_EQ(v[0], 1.5f);
    EXPECT_EQ(v[3], 4.5f);

    near_page s2(addr_of(rt_movsd));
    auto d = through_slot(s2, rt_movsd, rt_movsd_end);
    EXPECT_EQ(d(), 6.25);

    if (!__builtin_cpu_supports("avx"))
        GTEST_SKIP() << "no AVX";
    near_page s3(addr_of(rt_vmovaps));
    auto va = through_slot(s3, rt_vmovaps, rt_vmovaps_end);
    _mm_storeu_ps(v, va());
    EXPECT_EQ(v[1], 2.5f);
    EXPECT_EQ(v[2], 3.5f);
}

TEST_F(relocate_exec, jcc_rel8_taken_and_not_taken)
{
    auto f = through_slot(slot, rt_jcc, rt_jcc_end);
    EXPECT_EQ(f(5), 2);
    EXPECT_EQ(f(20), 1);
    EXPECT_EQ(f(-100), rt_jcc(-100));
    // The copy holds jl rel32 aimed at the original target.
    auto i = insn_decode(slot.p + 4, 16, slot.addr() + 4);
    ASSERT_TRUE(i);
    EXPECT_EQ(i->k, insn::jcc_rel);
    EXPECT_EQ(i->len, 6);
    EXPECT_EQ(i->cc, 0xc);
    EXPECT_EQ(i->branch_target, addr_of(rt_jcc) + 12);
}

TEST_F(relocate_exec, jmp_rel8)
{
    auto f = through_slot(slot, rt_jmp8, rt_jmp8_end);
    EXPECT_EQ(f(10), 17);
}

TEST_F(relocate_exec, call_rel32_pushes_original_return_address)
{
    auto f = through_slot(slot, rt_call, rt_call_end);
    rt_retaddr = 0;
    EXPECT_EQ(f(20), 41);
    EXPECT_EQ(rt_retaddr, addr_of(rt_call) + 5);
    rt_retaddr = 0;
    EXPECT_EQ(rt_call(20), 41);
    EXPECT_EQ(rt_retaddr, addr_of(rt_call) + 5);
}

TEST_F(relocate_exec, call_indirect_rip_memory)
{
    auto f = through_slot(slot, rt_callind, rt_callind_end);
    rt_retaddr = 0;
    EXPECT_EQ(f(3), 7);
    EXPECT_EQ(rt_retaddr, addr_of(rt_callind) + 6);
}

TEST_F(relocate_exec, call_indirect_register)
{
    auto f = through_slot(slot, rt_callreg, rt_callreg_end);
    rt_retaddr = 0;
    EXPECT_EQ(f(4, rt_helper), 9);
    EXPECT_EQ(rt_retaddr, addr_of(rt_callreg) + 5);
}

TEST_F(relocate_exec, call_indirect_rsp_based)
{
    auto f = through_slot(slot, rt_callrsp, rt_callrsp_end);
    rt_retaddr = 0;
    EXPECT_EQ(f(6, rt_helper), 13);
    EXPECT_EQ(rt_retaddr, addr_of(rt_callrsp) + 6);
    EXPECT_EQ(rt_callrsp(6, rt_helper), 13);
}

TEST_F(relocate_exec, loop_and_jrcxz)
{
    auto f = through_slot(slot, rt_loop, rt_loop_end);
    EXPECT_EQ(f(0, 0, 0, 1), 5); // rcx 1 -> 0: not taken
    EXPECT_EQ(f(0, 0, 0, 9), 8); // taken, rcx = 8
    EXPECT_EQ(rt_loop(0, 0, 0, 9), 8);

    near_page s2(addr_of(rt_jrcxz));
    auto g = through_slot(s2, rt_jrcxz, rt_jrcxz_end);
    EXPECT_EQ(g(0, 0, 0, 0), 7);
    EXPECT_EQ(g(0, 0, 0, 3), 5);
}

TEST_F(relocate_exec, push_pop)
{
    auto f = through_slot(slot, rt_pushpop, rt_pushpop_end);
    EXPECT_EQ(f(40, 2), 42);
}

TEST_F(relocate_exec, ret_as_last_instruction)
{
    auto fa = analyze(reinterpret_cast<const void *>(rt_ret), rt_ret_end);
    auto c = can_optimize_region(fa, addr_of(rt_ret));
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.region.back().k, insn::ret);
    auto f = through_slot(slot, rt_ret, rt_ret_end);
    EXPECT_EQ(f(41), 42);
}

TEST_F(relocate_exec, flags_survive_the_detour)
{
    auto f = through_slot(slot, rt_flags, rt_flags_end);
    EXPECT_EQ(f(~0UL, 1), 1);
    EXPECT_EQ(f(1, 1), 0);
}

// Real optprobe layout: the original text jumps to the slot in the middle of a function.
TEST_F(relocate_exec, patched_mid_function_loop)
{
    const long want = rt_loop_mid(4);
    EXPECT_EQ(want, 112);
    auto r = build(slot, reinterpret_cast<const void *>(rt_loop_mid), rt_loop_mid_end,
                   addr_of(rt_loop_mid_probe));
    ASSERT_FALSE(r.bytes.empty());
    {
        text_patch p(rt_loop_mid_probe, slot.addr());
        EXPECT_EQ(rt_loop_mid(4), 112);
        EXPECT_EQ(rt_loop_mid(1), 103);
    }
    EXPECT_EQ(rt_loop_mid(2), 106);
}

TEST_F(relocate_exec, patched_mid_function_jcc)
{
    build(slot, reinterpret_cast<const void *>(rt_jcc_mid), rt_jcc_mid_end,
          addr_of(rt_jcc_mid_probe));
    text_patch p(rt_jcc_mid_probe, slot.addr());
    EXPECT_EQ(rt_jcc_mid(3), 6);
    EXPECT_EQ(rt_jcc_mid(4), 4);
}

// ---- single-step path: copy followed by int3, fixed up by ss_fixup_rip() -------------------

struct ss_state {
    const insn *orig;
    uintptr_t slot;
    int traps;
} ss;

void on_trap(int, siginfo_t *, void *ctx)
{
    auto *uc = static_cast<ucontext_t *>(ctx);
    // The int3 after the copy has executed: the copy ended at RIP - 1.
    const uintptr_t at = uc->uc_mcontext.gregs[REG_RIP] - 1;
    uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(ss_fixup_rip(*ss.orig, ss.slot, at));
    ++ss.traps;
}

TEST_F(relocate_exec, single_step_copy_with_trailing_int3)
{
    struct sigaction sa {}, old{};
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    ASSERT_EQ(sigaction(SIGTRAP, &sa, &old), 0);

    // mov rt_data(%rip),%rax alone, then int3; continues at rt_load+7.
    auto load = insn_decode(reinterpret_cast<const void *>(rt_load), 16, addr_of(rt_load));
    ASSERT_TRUE(load);
    auto r = relocate_insns({&*load, 1}, slot.addr(), 0, false);
    ASSERT_TRUE(r) << r.error.message;
    auto code = r.copy->bytes;
    ASSERT_EQ(code.size(), insn_copy_len(*load));
    code.push_back(INT3_INSN_OPCODE);
    slot.load(code);
    ss = {&*load, slot.addr(), 0};
    rt_data = 50;
    EXPECT_EQ(reinterpret_cast<long (*)(long)>(slot.p)(2), 52);
    EXPECT_EQ(ss.traps, 1);

    // jl alone (after the cmp ran in place): taken leaves for the original target without a
    // trap; not taken reaches the int3 and resumes at the original next instruction.
    near_page s2(addr_of(rt_jcc));
    auto jl = insn_decode(reinterpret_cast<const uint8_t *>(rt_jcc) + 4, 16, addr_of(rt_jcc) + 4);
    ASSERT_TRUE(jl);
    auto rj = relocate_insns({&*jl, 1}, s2.addr(), 0, false);
    ASSERT_TRUE(rj);
    auto cj = rj.copy->bytes;
    cj.push_back(INT3_INSN_OPCODE);
    // A stub: cmp $10,%rdi ; then the copy.
    std::vector<uint8_t> stub = {0x48, 0x83, 0xff, 0x0a};
    auto rj2 = relocate_insns({&*jl, 1}, s2.addr() + stub.size(), 0, false);
    ASSERT_TRUE(rj2);
    stub.insert(stub.end(), rj2.copy->bytes.begin(), rj2.copy->bytes.end());
    stub.push_back(INT3_INSN_OPCODE);
    s2.load(stub);
    ss = {&*jl, s2.addr() + 4, 0};
    auto f = reinterpret_cast<long (*)(long)>(s2.p);
    EXPECT_EQ(f(3), 2);
    EXPECT_EQ(ss.traps, 0);
    EXPECT_EQ(f(30), 1);
    EXPECT_EQ(ss.traps, 1);

    sigaction(SIGTRAP, &old, nullptr);
}

// ---- encodings and errors -----------------------------------------------------------------

insn dec(std::vector<uint8_t> b, uintptr_t at)
{
    auto i = insn_decode(b.data(), b.size(), at);
    EXPECT_TRUE(i);
    return *i;
}

std::vector<insn> decode_all(const std::vector<uint8_t> &b, uintptr_t at)
{
    std::vector<insn> out;
    for (size_t off = 0; off < b.size();) {
        auto i = insn_decode(b.data() + off, b.size() - off, at + off);
        EXPECT_TRUE(i) << off;
        if (!i)
            break;
        out.push_back(*i);
        off += i->len;
    }
    return out;
}

TEST(relocate, call_emulation_sequence)
{
    // Low address: push $imm32 alone holds the return address.
    const uintptr_t A = 0x400000, S = 0x500000;
    auto call = dec({0xe8, 0xfb, 0x00, 0x00, 0x00}, A);
    auto r = relocate_insns({&call, 1}, S, 0, false);
    ASSERT_TRUE(r);
    auto seq = decode_all(r.copy->bytes, S);
    ASSERT_EQ(seq.size(), 2u);
    EXPECT_STREQ(seq[0].mnemonic_name(), "push");
    EXPECT_EQ(seq[1].k, insn::jmp_rel);
    EXPECT_EQ(seq[1].branch_target, A + 0x100);

    // High address, and a low half with the sign bit set: the high half is fixed.
    const uintptr_t H = 0x7fff80001000;
    auto hcall = dec({0xe8, 0xfb, 0x00, 0x00, 0x00}, H);
    r = relocate_insns({&hcall, 1}, H + 0x10000, H + 5, true);
    ASSERT_TRUE(r);
    seq = decode_all(r.copy->bytes, H + 0x10000);
    ASSERT_EQ(seq.size(), 4u);
    EXPECT_STREQ(seq[0].mnemonic_name(), "push");
    EXPECT_STREQ(seq[1].mnemonic_name(), "mov");
    EXPECT_EQ(seq[2].branch_target, H + 0x100);
    EXPECT_EQ(seq[3].branch_target, H + 5); // jmp back
    EXPECT_EQ(r.copy->jmp_back_offset, seq[3].addr - (H + 0x10000));
    // Simulate the pushes on a fake stack: the word must be H + 5.
    int32_t lo;
    std::memcpy(&lo, seq[0].bytes + seq[0].len - 4, 4);
    uint32_t hi;
    std::memcpy(&hi, seq[1].bytes + seq[1].len - 4, 4);
    const uint64_t pushed = (static_cast<uint64_t>(hi) << 32) |
                            static_cast<uint32_t>(static_cast<uint64_t>(static_cast<int64_t>(lo)));
    EXPECT_EQ(pushed, H + 5);
}

TEST(relocate, insn_offsets_and_copy_of)
{
    const uintptr_t A = 0x400000, S = 0x410000;
    std::vector<insn> region = {dec({0x48, 0x89, 0xf8}, A), dec({0x74, 0x10}, A + 3),
                                dec({0x90}, A + 5)};
    auto r = relocate_insns(region, S, A + 6, true);
    ASSERT_TRUE(r);
    ASSERT_EQ(r.copy->insn_offsets.size(), 3u);
    EXPECT_EQ(r.copy->insn_offsets[0], 0u);
    EXPECT_EQ(r.copy->insn_offsets[1], 3u);
    EXPECT_EQ(r.copy->insn_offsets[2], 9u);
    EXPECT_EQ(r.copy->jmp_back_offset, 10u);
    EXPECT_EQ(r.copy->bytes.size(), 15u);
    EXPECT_EQ(r.copy->copy_of(region, A + 3), S + 3);
    EXPECT_EQ(r.copy->copy_of(region, A + 1), 0u);
}

TEST(relocate, errors)
{
    const uintptr_t A = 0x400000;
    EXPECT_EQ(relocate_insns({}, A, A, true).error.code, relocate_error::empty);

    auto int3 = dec({0xcc}, A);
    auto r = relocate_insns({&int3, 1}, A + 0x1000, A + 1, true);
    EXPECT_FALSE(r);
    EXPECT_EQ(r.error.code, relocate_error::unsupported);
    EXPECT_EQ(r.error.insn_addr, A);
    EXPECT_EQ(r.error.message.rfind("instruction cannot run out of line: int3", 0), 0u)
        << r.error.message;

    // RIP-relative operand, jcc, call and the jmp back, each beyond 2 GiB.
    const uintptr_t far = A + (3UL << 30);
    auto load = dec({0x48, 0x8b, 0x05, 0x00, 0x00, 0x00, 0x00}, A);
    r = relocate_insns({&load, 1}, far, far, false);
    EXPECT_EQ(r.error.code, relocate_error::out_of_range) << r.error.message;
    auto jz = dec({0x74, 0x10}, A);
    EXPECT_EQ(relocate_insns({&jz, 1}, far, far, false).error.code, relocate_error::out_of_range);
    auto call = dec({0xe8, 0, 0, 0, 0}, A);
    EXPECT_EQ(relocate_insns({&call, 1}, far, far, false).error.code,
              relocate_error::out_of_range);
    auto loop = dec({0xe2, 0x10}, A);
    EXPECT_EQ(relocate_insns({&loop, 1}, far, far, false).error.code,
              relocate_error::out_of_range);
    auto mov = dec({0x48, 0x89, 0xf8}, A);
    EXPECT_TRUE(relocate_insns({&mov, 1}, far, far + 100, true));
    EXPECT_EQ(relocate_insns({&mov, 1}, far, A, true).error.code, relocate_error::out_of_range);

    // The edge: a displacement of exactly INT32_MIN still fits.
    auto edge = dec({0x48, 0x8b, 0x05, 0x00, 0x00, 0x00, 0x80}, 0x100000000); // disp -2^31
    r = relocate_insns({&edge, 1}, 0x100000000, 0, false);
    ASSERT_TRUE(r);
    EXPECT_FALSE(relocate_insns({&edge, 1}, 0x100000001, 0, false));
}

TEST(relocate, copy_len_of_operands_at_the_edge_of_reach)
{
    // call *-2^31(%rip) (found by tests/fuzz/relocate_fuzz): its copy (push; jmp *x(%rip))
    // can be built near the operand, and insn_copy_len() must say how long it is.
    const uintptr_t A = 0x7f002e098f3c;
    auto call = dec({0xff, 0x15, 0x00, 0x00, 0x00, 0x80}, A);
    auto r = relocate_insns({&call, 1}, A - 0x10000000, 0, false);
    ASSERT_TRUE(r) << r.error.message;
    EXPECT_EQ(insn_copy_len(call), r.copy->bytes.size());
    // The same for a jcc and a call whose target is 2 GiB away.
    auto jz = dec({0x0f, 0x84, 0x00, 0x00, 0x00, 0x80}, A);
    r = relocate_insns({&jz, 1}, A - 0x10000000, 0, false);
    ASSERT_TRUE(r) << r.error.message;
    EXPECT_EQ(insn_copy_len(jz), r.copy->bytes.size());
    auto rel = dec({0xe8, 0x00, 0x00, 0x00, 0x80}, A);
    r = relocate_insns({&rel, 1}, A - 0x10000000, 0, false);
    ASSERT_TRUE(r) << r.error.message;
    EXPECT_EQ(insn_copy_len(rel), r.copy->bytes.size());
}

TEST(relocate, rip_relative_keeps_target_and_encoding)
{
    // vmovaps, cmpl $imm, lea, jmp *x(%rip), call *x(%rip): each copy refers to the same
    // absolute address, and all but the call keep their exact length.
    const uintptr_t A = 0x40001000, S = 0x20000000;
    const std::vector<std::vector<uint8_t>> cases = {
        {0xc5, 0xfc, 0x28, 0x0d, 0x20, 0x00, 0x00, 0x00},
        {0x83, 0x3d, 0xf0, 0xff, 0xff, 0xff, 0x7b},
        {0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00},
        {0xff, 0x25, 0x10, 0x00, 0x00, 0x00},
        {0xff, 0x15, 0x10, 0x00, 0x00, 0x00},
    };
    for (const auto &b : cases) {
        auto i = dec(b, A);
        auto r = relocate_insns({&i, 1}, S, 0, false);
        ASSERT_TRUE(r) << r.error.message;
        auto out = decode_all(r.copy->bytes, S);
        ASSERT_FALSE(out.empty());
        const insn &last = out.back();
        EXPECT_TRUE(last.is_rip_relative) << insn_to_string(last);
        EXPECT_EQ(last.rip_target, i.rip_target) << insn_to_string(last);
        if (i.k != insn::call_indirect) {
            EXPECT_EQ(out.size(), 1u);
            EXPECT_EQ(last.len, i.len);
            EXPECT_EQ(last.mnemonic, i.mnemonic);
        } else {
            EXPECT_EQ(last.k, insn::jmp_indirect);
        }
    }
}

} // namespace
