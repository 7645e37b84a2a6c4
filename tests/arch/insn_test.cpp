// Decoder, boundary checking, optprobe region analysis, branch emulation and the fixed byte
// sequences of arch/x86_64.
// Kept as written: the assembly listings below line up each instruction with its offset,
// which clang-format would reflow.
// clang-format off
#include "arch/x86_64/insn.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"

#include <dprobe/ptrace.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace dprobe::arch;

// Functions with known layouts for boundary and region checks. Offsets in comments.
#define FN(n) ".globl " #n "\n.type " #n ",@function\n" #n ":\n"
#define END(n) ".globl " #n "_end\n" #n "_end:\n.size " #n ", " #n "_end - " #n "\n"
asm(".pushsection .text.insn_test,\"ax\",@progbits\n"
    FN(it_tiny)
    "xor %eax,%eax\n"            // 0 (2)
    "ret\n"                      // 2 (1)
    END(it_tiny)
    FN(it_loop)
    "xor %eax,%eax\n"            // 0 (2)
    "1: add $1,%eax\n"           // 2 (3)
    "dec %rdi\n"                 // 5 (3)
    "jnz 1b\n"                   // 8 (2)
    "ret\n"                      // 10
    END(it_loop)
    FN(it_indirect)
    "mov %rdi,%rax\n"            // 0 (3)
    "add $1,%rax\n"              // 3 (4)
    "jmp *%rsi\n"                // 7 (2)
    END(it_indirect)
    FN(it_tailcall)
    "mov %rdi,%rax\n"            // 0 (3)
    "add $1,%rax\n"              // 3 (4)
    "jmp *it_ptr(%rip)\n"        // 7 (6)
    END(it_tailcall)
    FN(it_int3)
    "int3\n"                     // 0
    "mov %rdi,%rax\n"            // 1
    "add $1,%rax\n"
    "ret\n"
    END(it_int3)
    FN(it_ret_mid)
    "mov %rdi,%rax\n"            // 0 (3)
    "ret\n"                      // 3 (1)
    ".byte 0x0f,0x1f,0x40,0x00\n" // 4: nopl 0(%rax)
    "ret\n"                      // 8
    END(it_ret_mid)
    FN(it_ret_last)
    "lea 1(%rdi),%rax\n"         // 0 (4)
    "ret\n"                      // 4 (1)
    END(it_ret_last)
    FN(it_call_mid)
    "xchg %ax,%ax\n"             // 0 (2)
    "call *%rax\n"               // 2 (2)
    "mov %rdi,%rax\n"            // 4 (3)
    "ret\n"
    END(it_call_mid)
    FN(it_call_last)
    "push %rbx\n"                // 0 (1)
    "call it_tiny\n"             // 1 (5)
    "pop %rbx\n"
    "ret\n"
    END(it_call_last)
    FN(it_endbr)
    "endbr64\n"                  // 0 (4)
    "mov %rdi,%rax\n"            // 4 (3)
    "add $1,%rax\n"              // 7 (4)
    "ret\n"                      // 11
    END(it_endbr)
    FN(it_baddata)
    "mov %rdi,%rax\n"            // 0 (3)
    "add $1,%rax\n"              // 3 (4)
    "ret\n"                      // 7
    ".byte 0x06,0x06,0x06\n"     // 8: invalid in 64-bit mode
    END(it_baddata)
    FN(it_ud2)
    "mov %rdi,%rax\n"            // 0 (3)
    "ud2\n"                      // 3 (2)
    "ret\n"
    END(it_ud2)
    // Jump tables whose dispatch has no shape jump_table_targets knows: the base loaded once
    // before a loop, no bound compared. 5 (the table's lea), then 12 the loop's head.
    FN(it_jt_far)
    "push %rbx\n"                // 0 (1)
    "mov %edi,%ebx\n"            // 1 (2)
    "xor %eax,%eax\n"            // 3 (2)
    "lea it_jt_far_tab(%rip),%r8\n" // 5 (7)
    "1: movslq (%r8,%rbx,4),%rcx\n" // 12
    "add %r8,%rcx\n"
    "jmp *%rcx\n"
    "2: add $1,%eax\n"
    "pop %rbx\n"
    "ret\n"
    "3: add $2,%eax\n"
    "pop %rbx\n"
    "ret\n"
    END(it_jt_far)
    // The same with a case on the instruction at offset 3, inside an entry region.
    FN(it_jt_entry)
    "push %rbx\n"                // 0 (1)
    "mov %edi,%ebx\n"            // 1 (2)
    "4: xor %eax,%eax\n"         // 3 (2): a case
    "lea it_jt_entry_tab(%rip),%r8\n" // 5 (7)
    "movslq (%r8,%rbx,4),%rcx\n"
    "add %r8,%rcx\n"
    "jmp *%rcx\n"
    "5: pop %rbx\n"
    "ret\n"
    END(it_jt_entry)
    // The dispatch's last steps with a base the function does not take itself (an
    // argument): no table to scan from.
    FN(it_jt_arg)
    "movslq (%rdi,%rsi,4),%rax\n"
    "add %rdi,%rax\n"
    "jmp *%rax\n"
    END(it_jt_arg)
    ".popsection\n"
    ".pushsection .rodata.insn_test,\"a\",@progbits\n"
    ".balign 4\n"
    "it_jt_far_tab: .long 2b - it_jt_far_tab, 3b - it_jt_far_tab, 2b - it_jt_far_tab\n"
    "it_jt_far_end_mark: .long 0x40000000\n" // points nowhere near code: the scan stops
    "it_jt_entry_tab: .long 5b - it_jt_entry_tab, 4b - it_jt_entry_tab\n"
    ".long 0x40000000\n"
    ".popsection\n"
    ".pushsection .data.insn_test,\"aw\",@progbits\n"
    ".globl it_ptr\nit_ptr: .quad 0\n"
    ".popsection\n");

#define DECL(n) extern "C" const uint8_t n[], n##_end[];
DECL(it_tiny) DECL(it_loop) DECL(it_indirect) DECL(it_tailcall) DECL(it_int3) DECL(it_ret_mid)
DECL(it_ret_last) DECL(it_call_mid) DECL(it_call_last) DECL(it_endbr) DECL(it_baddata)
DECL(it_ud2) DECL(it_jt_far) DECL(it_jt_entry) DECL(it_jt_arg)

namespace {

struct span_fn {
    uintptr_t start;
    size_t size;
};
#define FNSPAN(n) span_fn{reinterpret_cast<uintptr_t>(n), static_cast<size_t>(n##_end - n)}

func_analysis analyze(span_fn f) { return analyze_function(f.start, f.size); }

// ---- decoding -----------------------------------------------------------------------------

struct decode_case {
    std::vector<uint8_t> bytes;
    uint8_t len;
    insn::kind k;
    const char *mnemonic;
};

const uintptr_t A = 0x400000;

TEST(insn_decode, table_of_lengths_and_kinds)
{
    // Bytes from `as` + `objdump -d` listings.
    const std::vector<decode_case> cases = {
        {{0x90}, 1, insn::other, "nop"},
        {{0x66, 0x90}, 2, insn::other, "nop"},
        {{0x48, 0x89, 0xf8}, 3, insn::other, "mov"},
        {{0x48, 0x8b, 0x05, 0x78, 0x56, 0x34, 0x12}, 7, insn::other, "mov"},
        {{0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00}, 7, insn::other, "lea"},
        {{0x0f, 0x28, 0x05, 0x20, 0x00, 0x00, 0x00}, 7, insn::other, "movaps"},
        {{0xc5, 0xfc, 0x28, 0x0d, 0x20, 0x00, 0x00, 0x00}, 8, insn::other, "vmovaps"},
        {{0xeb, 0xfe}, 2, insn::jmp_rel, "jmp"},
        {{0xe9, 0xfb, 0x0f, 0x00, 0x00}, 5, insn::jmp_rel, "jmp"},
        {{0x74, 0xf7}, 2, insn::jcc_rel, "jz"},
        {{0x0f, 0x85, 0xfa, 0x0f, 0x00, 0x00}, 6, insn::jcc_rel, "jnz"},
        {{0xe2, 0xef}, 2, insn::loop_rel, "loop"},
        {{0xe3, 0xed}, 2, insn::loop_rel, "jrcxz"},
        {{0x67, 0xe3, 0xea}, 3, insn::loop_rel, "jecxz"},
        {{0xe0, 0xe8}, 2, insn::loop_rel, "loopne"},
        {{0xe8, 0xfb, 0x00, 0x00, 0x00}, 5, insn::call_rel, "call"},
        {{0xff, 0xd0}, 2, insn::call_indirect, "call"},
        {{0xff, 0x15, 0x10, 0x00, 0x00, 0x00}, 6, insn::call_indirect, "call"},
        {{0xff, 0x54, 0x24, 0x08}, 4, insn::call_indirect, "call"},
        {{0xff, 0xe0}, 2, insn::jmp_indirect, "jmp"},
        {{0x3e, 0xff, 0xe0}, 3, insn::jmp_indirect, "jmp"},
        {{0xff, 0x24, 0xf8}, 3, insn::jmp_indirect, "jmp"},
        {{0xff, 0x25, 0x10, 0x00, 0x00, 0x00}, 6, insn::jmp_indirect, "jmp"},
        {{0xc3}, 1, insn::ret, "ret"},
        {{0xc2, 0x10, 0x00}, 3, insn::ret, "ret"},
        {{0xcc}, 1, insn::int3, "int3"},
        {{0xcd, 0x03}, 2, insn::int3, "int"},
        {{0xcd, 0x80}, 2, insn::int_n, "int"},
        {{0x0f, 0x0b}, 2, insn::ud, "ud2"},
        {{0x0f, 0x05}, 2, insn::syscall, "syscall"},
        {{0xf4}, 1, insn::hlt, "hlt"},
        {{0xf3, 0x0f, 0x1e, 0xfa}, 4, insn::endbr, "endbr64"},
        {{0x9c}, 1, insn::other, "pushfq"},
        {{0x9d}, 1, insn::other, "popfq"},
        {{0xcb}, 1, insn::far_branch, "ret"},
        {{0x48, 0xcf}, 2, insn::iret, "iretq"},
        {{0xf0, 0x48, 0x0f, 0xb1, 0x0a}, 5, insn::other, "cmpxchg"},
        {{0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}, 9, insn::other, "mov"},
        {{0xc7, 0xf8, 0xa0, 0xff, 0xff, 0xff}, 6, insn::xbegin, "xbegin"},
        {{0x67, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00}, 7, insn::other, "mov"},
        {{0xf3, 0xa4}, 2, insn::other, "movsb"},
        {{0x0f, 0x01, 0xf8}, 3, insn::privileged, "swapgs"},
    };
    for (const auto &c : cases) {
        // Extra trailing bytes must not change the length.
        std::vector<uint8_t> buf = c.bytes;
        buf.insert(buf.end(), {0x90, 0x90, 0x90, 0x90});
        auto i = insn_decode(buf.data(), buf.size(), A);
        ASSERT_TRUE(i.has_value()) << c.mnemonic;
        EXPECT_EQ(i->len, c.len) << c.mnemonic;
        EXPECT_EQ(i->k, c.k) << c.mnemonic;
        EXPECT_STREQ(i->mnemonic_name(), c.mnemonic);
        EXPECT_EQ(std::memcmp(i->bytes, c.bytes.data(), c.len), 0);
        // Truncated encodings do not decode.
        EXPECT_FALSE(insn_decode(c.bytes.data(), c.len - 1, A).has_value()) << c.mnemonic;
    }
}

TEST(insn_decode, invalid_bytes)
{
    const uint8_t bad[] = {0x06, 0x90}; // push %es: invalid in 64-bit mode
    EXPECT_FALSE(insn_decode(bad, sizeof(bad), A).has_value());
    EXPECT_FALSE(insn_decode(bad, 0, A).has_value());
    uint8_t too_long[16];
    std::memset(too_long, 0x66, sizeof(too_long)); // 15+ prefixes
    EXPECT_FALSE(insn_decode(too_long, sizeof(too_long), A).has_value());
}

TEST(insn_decode, rip_relative_operands)
{
    const uint8_t load[] = {0x48, 0x8b, 0x05, 0x78, 0x56, 0x34, 0x12}; // mov 0x12345678(%rip),%rax
    auto i = insn_decode(load, sizeof(load), A);
    ASSERT_TRUE(i);
    EXPECT_TRUE(i->is_rip_relative);
    EXPECT_EQ(i->rip_disp, 0x12345678);
    EXPECT_EQ(i->rip_target, A + 7 + 0x12345678);
    EXPECT_EQ(i->disp_offset, 3);
    EXPECT_FALSE(i->is_branch);

    // cmpl $0x7b, -0x10(%rip): the immediate follows the displacement.
    const uint8_t cmp[] = {0x83, 0x3d, 0xf0, 0xff, 0xff, 0xff, 0x7b};
    i = insn_decode(cmp, sizeof(cmp), A);
    ASSERT_TRUE(i);
    EXPECT_TRUE(i->is_rip_relative);
    EXPECT_EQ(i->rip_target, A + 7 - 0x10);
    EXPECT_EQ(i->disp_offset, 2);

    const uint8_t vex[] = {0xc5, 0xfc, 0x28, 0x0d, 0x20, 0x00, 0x00, 0x00};
    i = insn_decode(vex, sizeof(vex), A);
    ASSERT_TRUE(i);
    EXPECT_TRUE(i->is_rip_relative);
    EXPECT_EQ(i->rip_target, A + 8 + 0x20);
    EXPECT_EQ(i->disp_offset, 4);

    const uint8_t eip[] = {0x67, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00};
    i = insn_decode(eip, sizeof(eip), A);
    ASSERT_TRUE(i);
    EXPECT_FALSE(i->is_rip_relative);
    EXPECT_TRUE(i->is_eip_relative);
    EXPECT_NE(insn_ool_refusal(*i), nullptr);

    const uint8_t plain[] = {0x48, 0x8b, 0x44, 0x24, 0x08}; // mov 8(%rsp),%rax
    i = insn_decode(plain, sizeof(plain), A);
    ASSERT_TRUE(i);
    EXPECT_FALSE(i->is_rip_relative);

    const uint8_t fs[] = {0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00};
    i = insn_decode(fs, sizeof(fs), A);
    ASSERT_TRUE(i);
    EXPECT_TRUE(i->has_segment_fs_gs);
    EXPECT_FALSE(i->is_rip_relative);
}

TEST(insn_decode, branch_targets_and_conditions)
{
    // At A+0x23 etc. as in the listing: every branch below targets A+0x23.
    struct c {
        uintptr_t at;
        std::vector<uint8_t> b;
        uint8_t imm_off, imm_size;
    };
    const std::vector<c> cases = {
        {A + 0x23, {0xeb, 0xfe}, 1, 1},
        {A + 0x2a, {0x74, 0xf7}, 1, 1},
        {A + 0x32, {0xe2, 0xef}, 1, 1},
        {A + 0x34, {0xe3, 0xed}, 1, 1},
        {A + 0x36, {0x67, 0xe3, 0xea}, 2, 1},
        {A + 0x39, {0xe0, 0xe8}, 1, 1},
        {A + 0x7d, {0xc7, 0xf8, 0xa0, 0xff, 0xff, 0xff}, 2, 4},
    };
    for (const auto &k : cases) {
        auto i = insn_decode(k.b.data(), k.b.size(), k.at);
        ASSERT_TRUE(i);
        EXPECT_TRUE(i->is_relative_branch());
        EXPECT_TRUE(i->is_branch);
        EXPECT_EQ(i->branch_target, A + 0x23) << i->mnemonic_name();
        EXPECT_EQ(i->imm_offset, k.imm_off);
        EXPECT_EQ(i->imm_size, k.imm_size);
    }
    const uint8_t jne32[] = {0x0f, 0x85, 0xfa, 0x0f, 0x00, 0x00};
    auto i = insn_decode(jne32, sizeof(jne32), A + 0x2c);
    ASSERT_TRUE(i);
    EXPECT_EQ(i->branch_target, A + 0x102c);
    EXPECT_EQ(i->cc, 5);
    const uint8_t je8[] = {0x74, 0x00};
    EXPECT_EQ(insn_decode(je8, 2, A)->cc, 4);
    const uint8_t jg8[] = {0x7f, 0x00};
    EXPECT_EQ(insn_decode(jg8, 2, A)->cc, 15);

    const uint8_t jecxz[] = {0x67, 0xe3, 0x00};
    i = insn_decode(jecxz, 3, A);
    EXPECT_EQ(i->counter_size, 4);
    EXPECT_EQ(i->loop, insn::op_jrcxz);
    const uint8_t loopne[] = {0xe0, 0x00};
    i = insn_decode(loopne, 2, A);
    EXPECT_EQ(i->counter_size, 8);
    EXPECT_EQ(i->loop, insn::op_loopnz);

    const uint8_t ret16[] = {0xc2, 0x10, 0x00};
    EXPECT_EQ(insn_decode(ret16, 3, A)->ret_imm, 0x10);
    const uint8_t pushf[] = {0x9c}, popf[] = {0x9d};
    EXPECT_TRUE(insn_decode(pushf, 1, A)->pushes_flags);
    EXPECT_TRUE(insn_decode(popf, 1, A)->pops_flags);
}

TEST(insn_decode, indirect_operands)
{
    const uint8_t call_rax[] = {0xff, 0xd0};
    auto i = insn_decode(call_rax, 2, A);
    EXPECT_FALSE(i->ind_is_mem);
    EXPECT_EQ(i->ind_reg, static_cast<int8_t>(offsetof(pt_regs, ax) / 8));
    EXPECT_TRUE(i->ind_emulatable);

    const uint8_t jmp_tab[] = {0xff, 0x24, 0xf8}; // jmp *(%rax,%rdi,8)
    i = insn_decode(jmp_tab, 3, A);
    EXPECT_TRUE(i->ind_is_mem);
    EXPECT_EQ(i->ind_reg, static_cast<int8_t>(offsetof(pt_regs, ax) / 8));
    EXPECT_EQ(i->ind_index, static_cast<int8_t>(offsetof(pt_regs, di) / 8));
    EXPECT_EQ(i->ind_scale, 8);

    const uint8_t call_rsp[] = {0xff, 0x54, 0x24, 0x08}; // call *8(%rsp)
    i = insn_decode(call_rsp, 4, A);
    EXPECT_TRUE(i->ind_uses_rsp);
    EXPECT_EQ(i->ind_disp, 8);

    const uint8_t call_fs[] = {0x64, 0xff, 0x14, 0x25, 0x10, 0, 0, 0}; // call *%fs:0x10
    i = insn_decode(call_fs, sizeof(call_fs), A);
    ASSERT_TRUE(i);
    EXPECT_EQ(i->k, insn::call_indirect);
    EXPECT_FALSE(i->ind_emulatable);
    EXPECT_FALSE(insn_can_emulate(*i));
    EXPECT_TRUE(insn_can_boost(*i));
}

TEST(insn_decode, to_string_is_att)
{
    const uint8_t load[] = {0x48, 0x8b, 0x05, 0x78, 0x56, 0x34, 0x12};
    auto i = insn_decode(load, sizeof(load), A);
    EXPECT_NE(insn_to_string(*i).find("%rax"), std::string::npos) << insn_to_string(*i);
    EXPECT_NE(insn_to_string(*i).find("mov"), std::string::npos);
}

// ---- boundaries ---------------------------------------------------------------------------

TEST(insn_boundary, asm_functions)
{
    auto f = FNSPAN(it_loop);
    const std::vector<size_t> starts = {0, 2, 5, 8, 10};
    for (size_t off = 0; off < f.size; ++off) {
        const bool want = std::find(starts.begin(), starts.end(), off) != starts.end();
        EXPECT_EQ(insn_boundary(f.start, f.size, f.start + off), want) << off;
    }
    EXPECT_FALSE(insn_boundary(f.start, f.size, f.start + f.size));
    EXPECT_FALSE(insn_boundary(f.start, f.size, f.start - 1));

    // Decoding stops at the invalid bytes: nothing after them is a boundary.
    auto b = FNSPAN(it_baddata);
    EXPECT_TRUE(insn_boundary(b.start, b.size, b.start + 7));
    EXPECT_FALSE(insn_boundary(b.start, b.size, b.start + 8));
    EXPECT_FALSE(insn_boundary(b.start, b.size, b.start + 9));
    EXPECT_FALSE(insn_boundary(b.start, b.size, b.start + 10));
}

// A compiled function: every address the sweep reports as a boundary must decode, and the
// sweep from the start must cover its return.
[[gnu::noinline]] int compiled_sum(const int *v, int n)
{
    int s = 0;
    for (int k = 0; k < n; ++k)
        s += v[k] * (k + 1);
    return s;
}

TEST(insn_boundary, compiled_function_agrees_with_analysis)
{
    const auto start = reinterpret_cast<uintptr_t>(&compiled_sum);
    // The size is unknown here; analyse up to the first ret (gcc emits one for this shape).
    size_t size = 0;
    for (size_t off = 0; off < 4096;) {
        auto i = insn_decode(reinterpret_cast<const void *>(start + off), 16, start + off);
        ASSERT_TRUE(i);
        off += i->len;
        if (i->k == insn::ret) {
            size = off;
            break;
        }
    }
    ASSERT_GT(size, 0u);
    auto fa = analyze_function(start, size);
    EXPECT_FALSE(fa.decode_failed);
    size_t covered = 0;
    for (const auto &i : fa.insns) {
        EXPECT_TRUE(insn_boundary(start, size, i.addr));
        for (size_t k = 1; k < i.len; ++k)
            EXPECT_FALSE(insn_boundary(start, size, i.addr + k));
        covered += i.len;
    }
    EXPECT_EQ(covered, size);
    int v[] = {1, 2, 3};
    EXPECT_EQ(compiled_sum(v, 3), 14);
}

// ---- optprobe regions ---------------------------------------------------------------------

TEST(can_optimize_region, short_function_crosses_end)
{
    auto fa = analyze(FNSPAN(it_tiny));
    auto c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::crosses_end) << c.message;
    EXPECT_EQ(c.message, "region crosses the end of the function");
}

TEST(can_optimize_region, jump_into_region)
{
    auto fa = analyze(FNSPAN(it_loop));
    ASSERT_EQ(fa.jump_targets.size(), 1u);
    EXPECT_EQ(fa.jump_targets[0].to, fa.start + 2);
    EXPECT_EQ(fa.jump_targets[0].from, fa.start + 8);

    auto c = can_optimize_region(fa, fa.start); // [0,5): jnz lands at 2
    EXPECT_EQ(c.reason, optimize_refusal::jump_into_region);
    char want[64];
    std::snprintf(want, sizeof(want), "(at 0x%lx", static_cast<unsigned long>(fa.start + 2));
    EXPECT_NE(c.message.find("a branch in the function targets the inside of the region"),
              std::string::npos)
        << c.message;
    EXPECT_NE(c.message.find(want), std::string::npos) << c.message;

    // A branch to the region's first byte is fine: it reaches the jmp to the detour.
    c = can_optimize_region(fa, fa.start + 2);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.len, 6u);
    ASSERT_EQ(c.region.size(), 2u);

    // [5,10): dec + jnz (a relative branch is relocatable).
    c = can_optimize_region(fa, fa.start + 5);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.len, 5u);
    EXPECT_EQ(c.region.back().k, insn::jcc_rel);

    // Not a boundary; outside.
    EXPECT_EQ(can_optimize_region(fa, fa.start + 3).reason, optimize_refusal::not_boundary);
    EXPECT_EQ(can_optimize_region(fa, fa.start + 100).reason, optimize_refusal::outside_function);

    // A longer minimum reaches the end.
    EXPECT_EQ(can_optimize_region(fa, fa.start + 5, 7).reason, optimize_refusal::crosses_end);
}

TEST(can_optimize_region, extra_targets)
{
    auto fa = analyze(FNSPAN(it_tailcall));
    ASSERT_TRUE(can_optimize_region(fa, fa.start).ok());
    const uintptr_t pad[] = {fa.start + 3};
    auto c = can_optimize_region(fa, fa.start, 5, pad);
    EXPECT_EQ(c.reason, optimize_refusal::jump_into_region) << c.message;
    const uintptr_t at_start[] = {fa.start, fa.start + 7};
    EXPECT_TRUE(can_optimize_region(fa, fa.start, 5, at_start).ok());
}

TEST(can_optimize_region, indirect_jump)
{
    auto fa = analyze(FNSPAN(it_indirect));
    EXPECT_TRUE(fa.has_indirect_jump);
    auto c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::indirect_jump);
    EXPECT_NE(c.message.find("indirect jump in the function (targets unknown)"), std::string::npos);

    // A tail call through a rip-relative pointer slot is not a jump table.
    fa = analyze(FNSPAN(it_tailcall));
    EXPECT_FALSE(fa.has_indirect_jump);
    c = can_optimize_region(fa, fa.start);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.len, 7u);
    // The tail call itself may be the region (it is the last instruction).
    c = can_optimize_region(fa, fa.start + 7);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.region[0].k, insn::jmp_indirect);
}

// This process's memory, knowing the test's functions as its code (as core/jump_plan.cpp's
// view knows an object's executable segments).
struct code_view final : mem_view {
    bool read(uintptr_t addr, void *out, size_t len) const noexcept override
    {
        return live_memory().read(addr, out, len);
    }
    bool knows_code() const noexcept override { return true; }
    bool is_code(uintptr_t a) const noexcept override
    {
        return (a >= reinterpret_cast<uintptr_t>(it_tiny) &&
                a < reinterpret_cast<uintptr_t>(it_ud2_end)) ||
               (a >= reinterpret_cast<uintptr_t>(it_jt_far) &&
                a < reinterpret_cast<uintptr_t>(it_jt_arg_end));
    }
};

TEST(can_optimize_region, jump_table_scanned)
{
    // Unknown to the pattern matcher, and to a view that cannot tell code from data.
    auto f = FNSPAN(it_jt_far);
    auto fa = analyze(f);
    EXPECT_TRUE(fa.has_indirect_jump);
    EXPECT_EQ(can_optimize_region(fa, fa.start).reason, optimize_refusal::indirect_jump);

    // Scanned: the table's three entries are the jump's targets, none in the entry region.
    const code_view view;
    fa = analyze_function(reinterpret_cast<const void *>(f.start), f.start, f.size, &view);
    EXPECT_FALSE(fa.has_indirect_jump);
    size_t from_jmp = 0;
    for (const auto &e : fa.jump_targets)
        if (fa.find(e.from) && fa.find(e.from)->k == insn::jmp_indirect) {
            ++from_jmp;
            EXPECT_GT(e.to, f.start + 12);
        }
    EXPECT_EQ(from_jmp, 3u);
    auto c = can_optimize_region(fa, fa.start);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.len, 5u);

    // A case on offset 3: inside the region, refused as a branch into it.
    f = FNSPAN(it_jt_entry);
    fa = analyze_function(reinterpret_cast<const void *>(f.start), f.start, f.size, &view);
    EXPECT_FALSE(fa.has_indirect_jump);
    c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::jump_into_region) << c.message;
    EXPECT_NE(c.message.find("targets the inside of the region"), std::string::npos);

    // A base from elsewhere: unknown, as before.
    f = FNSPAN(it_jt_arg);
    fa = analyze_function(reinterpret_cast<const void *>(f.start), f.start, f.size, &view);
    EXPECT_TRUE(fa.has_indirect_jump);
    EXPECT_EQ(can_optimize_region(fa, fa.start).reason, optimize_refusal::indirect_jump);
}

TEST(can_optimize_region, cannot_run_out_of_line)
{
    auto fa = analyze(FNSPAN(it_int3));
    auto c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::cannot_relocate);
    EXPECT_EQ(c.message.rfind("instruction cannot run out of line: int3", 0), 0u) << c.message;

    fa = analyze(FNSPAN(it_ud2));
    c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::cannot_relocate);
    EXPECT_NE(c.message.find("ud2"), std::string::npos) << c.message;
}

TEST(can_optimize_region, ret_and_call_positions)
{
    auto fa = analyze(FNSPAN(it_ret_mid));
    auto c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::exit_not_last) << c.message;

    fa = analyze(FNSPAN(it_ret_last));
    c = can_optimize_region(fa, fa.start);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.region.back().k, insn::ret);

    fa = analyze(FNSPAN(it_call_mid));
    c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::return_into_region) << c.message;

    fa = analyze(FNSPAN(it_call_last));
    c = can_optimize_region(fa, fa.start);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.len, 6u);
    EXPECT_EQ(c.region.back().k, insn::call_rel);
}

TEST(can_optimize_region, endbr64)
{
    auto fa = analyze(FNSPAN(it_endbr));
    ASSERT_TRUE(is_endbr64(reinterpret_cast<const uint8_t *>(fa.start)));
    auto c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::endbr_in_region);
    c = can_optimize_region(fa, fa.start + ENDBR64_INSN_SIZE);
    ASSERT_TRUE(c.ok()) << c.message;
    EXPECT_EQ(c.len, 7u);
}

TEST(can_optimize_region, undecodable_function)
{
    auto fa = analyze(FNSPAN(it_baddata));
    EXPECT_TRUE(fa.decode_failed);
    EXPECT_EQ(fa.decode_fail_addr, fa.start + 8);
    auto c = can_optimize_region(fa, fa.start);
    EXPECT_EQ(c.reason, optimize_refusal::decode_failed) << c.message;
    c = can_optimize_region(fa, fa.start + 9);
    EXPECT_EQ(c.reason, optimize_refusal::decode_failed) << c.message;
}

TEST(can_optimize_region, analysis_of_saved_copy)
{
    // The analysis reads the bytes given, not the live text: a copy with an int3 over the
    // first byte is refused, the original bytes pass.
    auto f = FNSPAN(it_tailcall);
    std::vector<uint8_t> copy(reinterpret_cast<const uint8_t *>(f.start),
                              reinterpret_cast<const uint8_t *>(f.start) + f.size);
    auto fa = analyze_function(copy.data(), f.start, f.size);
    EXPECT_TRUE(can_optimize_region(fa, f.start).ok());
    copy[0] = INT3_INSN_OPCODE;
    fa = analyze_function(copy.data(), f.start, f.size);
    EXPECT_EQ(can_optimize_region(fa, f.start).reason, optimize_refusal::cannot_relocate);
}

// ---- emulation ----------------------------------------------------------------------------

insn dec(std::vector<uint8_t> b, uintptr_t at)
{
    auto i = insn_decode(b.data(), b.size(), at);
    EXPECT_TRUE(i);
    return *i;
}

TEST(insn_emulate, condition_codes)
{
    constexpr unsigned long CF = 1, PF = 4, ZF = 0x40, SF = 0x80, OF = 0x800;
    EXPECT_TRUE(insn_cc_holds(0x0, OF));
    EXPECT_FALSE(insn_cc_holds(0x0, 0));
    EXPECT_TRUE(insn_cc_holds(0x2, CF));   // jb
    EXPECT_TRUE(insn_cc_holds(0x3, 0));    // jae
    EXPECT_TRUE(insn_cc_holds(0x4, ZF));   // je
    EXPECT_TRUE(insn_cc_holds(0x6, ZF));   // jbe
    EXPECT_FALSE(insn_cc_holds(0x7, CF));  // ja
    EXPECT_TRUE(insn_cc_holds(0x8, SF));   // js
    EXPECT_TRUE(insn_cc_holds(0xa, PF));   // jp
    EXPECT_TRUE(insn_cc_holds(0xc, SF));   // jl: SF != OF
    EXPECT_FALSE(insn_cc_holds(0xc, SF | OF));
    EXPECT_TRUE(insn_cc_holds(0xd, SF | OF)); // jge
    EXPECT_TRUE(insn_cc_holds(0xe, ZF));      // jle
    EXPECT_TRUE(insn_cc_holds(0xf, 0));       // jg
    EXPECT_FALSE(insn_cc_holds(0xf, ZF));
}

// Checks insn_cc_holds against the CPU: compare two values, read the flags, and see which
// setcc results the hardware gives.
TEST(insn_emulate, condition_codes_match_hardware)
{
    const long vals[] = {0, 1, -1, 5, 0x7fffffffffffffffL, (long)0x8000000000000000UL};
    for (long a : vals)
        for (long b : vals) {
            unsigned long flags;
            unsigned char set[16];
            asm volatile("cmp %[b], %[a]\n pushfq\n pop %[f]\n"
                         "seto 0(%[s])\n setno 1(%[s])\n setb 2(%[s])\n setae 3(%[s])\n"
                         "sete 4(%[s])\n setne 5(%[s])\n setbe 6(%[s])\n seta 7(%[s])\n"
                         "sets 8(%[s])\n setns 9(%[s])\n setp 10(%[s])\n setnp 11(%[s])\n"
                         "setl 12(%[s])\n setge 13(%[s])\n setle 14(%[s])\n setg 15(%[s])\n"
                         : [f] "=&r"(flags)
                         : [a] "r"(a), [b] "r"(b), [s] "r"(set)
                         : "memory", "cc");
            for (uint8_t cc = 0; cc < 16; ++cc)
                EXPECT_EQ(insn_cc_holds(cc, flags), set[cc] != 0) << a << " " << b << " " << int(cc);
        }
}

TEST(insn_emulate, branches_on_pt_regs)
{
    alignas(16) unsigned long stack[8] = {};
    pt_regs r{};
    r.sp = reinterpret_cast<unsigned long>(&stack[4]);

    // call rel32 at A to A+0x100: pushes A+5.
    auto call = dec({0xe8, 0xfb, 0x00, 0x00, 0x00}, A);
    ASSERT_TRUE(insn_emulate(call, &r));
    EXPECT_EQ(r.ip, A + 0x100);
    EXPECT_EQ(r.sp, reinterpret_cast<unsigned long>(&stack[3]));
    EXPECT_EQ(stack[3], A + 5);

    // ret $0x10 pops it and 16 more bytes.
    auto ret = dec({0xc2, 0x10, 0x00}, A + 0x100);
    ASSERT_TRUE(insn_emulate(ret, &r));
    EXPECT_EQ(r.ip, A + 5);
    EXPECT_EQ(r.sp, reinterpret_cast<unsigned long>(&stack[6]));

    // jz rel8: taken with ZF, else falls through.
    auto jz = dec({0x74, 0x10}, A);
    r.flags = 0x40;
    ASSERT_TRUE(insn_emulate(jz, &r));
    EXPECT_EQ(r.ip, A + 0x12);
    r.flags = 0;
    ASSERT_TRUE(insn_emulate(jz, &r));
    EXPECT_EQ(r.ip, A + 2);

    // loop: decrements rcx, taken while non-zero.
    auto loop = dec({0xe2, 0xfe}, A);
    r.cx = 2;
    ASSERT_TRUE(insn_emulate(loop, &r));
    EXPECT_EQ(r.cx, 1u);
    EXPECT_EQ(r.ip, A);
    ASSERT_TRUE(insn_emulate(loop, &r));
    EXPECT_EQ(r.cx, 0u);
    EXPECT_EQ(r.ip, A + 2);
    // loopne stops on ZF.
    auto loopne = dec({0xe0, 0xfe}, A);
    r.cx = 5;
    r.flags = 0x40;
    ASSERT_TRUE(insn_emulate(loopne, &r));
    EXPECT_EQ(r.ip, A + 2);
    EXPECT_EQ(r.cx, 4u);
    // jrcxz / jecxz read without writing.
    auto jrcxz = dec({0xe3, 0x10}, A);
    r.cx = 0x100000000UL;
    ASSERT_TRUE(insn_emulate(jrcxz, &r));
    EXPECT_EQ(r.ip, A + 2);
    auto jecxz = dec({0x67, 0xe3, 0x10}, A);
    ASSERT_TRUE(insn_emulate(jecxz, &r));
    EXPECT_EQ(r.ip, A + 0x13);
    EXPECT_EQ(r.cx, 0x100000000UL);
    // loop with a 32-bit counter is not emulated.
    auto loop32 = dec({0x67, 0xe2, 0x10}, A);
    EXPECT_FALSE(insn_can_emulate(loop32));
    EXPECT_FALSE(insn_emulate(loop32, &r));

    // call *8(%rsp) reads the operand before pushing.
    r.sp = reinterpret_cast<unsigned long>(&stack[4]);
    stack[5] = 0xabcdef;
    auto callm = dec({0xff, 0x54, 0x24, 0x08}, A);
    ASSERT_TRUE(insn_emulate(callm, &r));
    EXPECT_EQ(r.ip, 0xabcdefu);
    EXPECT_EQ(stack[3], A + 4);

    // jmp *(%rax,%rdi,8)
    unsigned long table[3] = {11, 22, 33};
    r.ax = reinterpret_cast<unsigned long>(table);
    r.di = 2;
    auto jtab = dec({0xff, 0x24, 0xf8}, A);
    ASSERT_TRUE(insn_emulate(jtab, &r));
    EXPECT_EQ(r.ip, 33u);

    // jmp *disp(%rip) reads the slot the displacement names.
    static unsigned long slot = 0x5151;
    const auto here = reinterpret_cast<uintptr_t>(&slot) - 0x40;
    std::vector<uint8_t> b = {0xff, 0x25, 0, 0, 0, 0};
    const int32_t d = static_cast<int32_t>(reinterpret_cast<uintptr_t>(&slot) - (here + 6));
    std::memcpy(&b[2], &d, 4);
    auto jrip = dec(b, here);
    ASSERT_TRUE(insn_emulate(jrip, &r));
    EXPECT_EQ(r.ip, 0x5151u);

    // call *%rdx
    r.dx = 0x777;
    auto callr = dec({0xff, 0xd2}, A);
    const auto sp0 = r.sp;
    ASSERT_TRUE(insn_emulate(callr, &r));
    EXPECT_EQ(r.ip, 0x777u);
    EXPECT_EQ(r.sp, sp0 - 8);

    // Non-branches are not emulated.
    auto mov = dec({0x48, 0x89, 0xf8}, A);
    EXPECT_FALSE(insn_can_emulate(mov));
    EXPECT_FALSE(insn_emulate(mov, &r));
}

// ---- boosting and single-step fixups ------------------------------------------------------

TEST(insn_can_boost, kernel_list_adapted)
{
    EXPECT_TRUE(insn_can_boost(dec({0x48, 0x89, 0xf8}, A)));               // mov
    EXPECT_TRUE(insn_can_boost(dec({0x48, 0x8b, 0x05, 0, 0, 0, 0}, A)));    // rip-relative
    EXPECT_TRUE(insn_can_boost(dec({0x74, 0x10}, A)));                      // jcc (relocated)
    EXPECT_TRUE(insn_can_boost(dec({0xe8, 0, 0, 0, 0}, A)));                // call (emulated)
    EXPECT_TRUE(insn_can_boost(dec({0xe2, 0x10}, A)));                      // loop
    EXPECT_TRUE(insn_can_boost(dec({0xc3}, A)));                            // ret
    EXPECT_TRUE(insn_can_boost(dec({0x9c}, A)));                            // pushf
    EXPECT_TRUE(insn_can_boost(dec({0x0f, 0x05}, A)));                      // syscall
    EXPECT_TRUE(insn_can_boost(dec({0xf3, 0xa4}, A)));                      // rep movsb
    EXPECT_TRUE(insn_can_boost(dec({0xd9, 0xc9}, A)));                      // fxch (x87)
    EXPECT_FALSE(insn_can_boost(dec({0xcc}, A)));                           // int3
    EXPECT_FALSE(insn_can_boost(dec({0xcd, 0x80}, A)));                     // int $0x80
    EXPECT_FALSE(insn_can_boost(dec({0x0f, 0x0b}, A)));                     // ud2
    EXPECT_FALSE(insn_can_boost(dec({0xf4}, A)));                           // hlt
    EXPECT_FALSE(insn_can_boost(dec({0x48, 0xcf}, A)));                     // iretq
    EXPECT_FALSE(insn_can_boost(dec({0xcb}, A)));                           // lret
    EXPECT_FALSE(insn_can_boost(dec({0xc7, 0xf8, 0, 0, 0, 0}, A)));         // xbegin
    EXPECT_FALSE(insn_can_boost(dec({0x67, 0x8b, 0x05, 0, 0, 0, 0}, A)));   // eip-relative
    EXPECT_FALSE(insn_can_boost(dec({0xff, 0xd4}, A)));                     // call *%rsp
    EXPECT_FALSE(insn_can_boost(dec({0x0f, 0x01, 0xf8}, A)));               // swapgs
    // A 0x66 prefix on a near branch means rel16 + truncated RIP on AMD, rel32 on Intel.
    auto jmp66 = dec({0x66, 0xe9, 0, 0, 0, 0}, A);
    EXPECT_TRUE(jmp66.branch_opsize_prefix);
    EXPECT_FALSE(insn_can_boost(jmp66));
    EXPECT_FALSE(insn_can_emulate(jmp66));
    // VEX-encoded mask jumps (Xeon Phi) are relative branches we do not relocate.
    auto odd = dec({0xc5, 0x78, 0x84, 0x64, 0xce, 0xf7, 0xe3}, A);
    EXPECT_EQ(odd.k, insn::odd_branch);
    EXPECT_TRUE(odd.is_relative_branch());
    EXPECT_FALSE(insn_can_boost(odd));
}

TEST(ss_fixup, maps_slot_addresses_back)
{
    const uintptr_t slot = 0x10000000;
    auto mov = dec({0x48, 0x89, 0xf8}, A);
    EXPECT_EQ(insn_copy_len(mov), 3u);
    EXPECT_EQ(ss_fixup_rip(mov, slot, slot + 3), A + 3);

    auto jz = dec({0x74, 0x10}, A); // copy: jz rel32 (6 bytes)
    EXPECT_EQ(insn_copy_len(jz), 6u);
    EXPECT_EQ(ss_fixup_rip(jz, slot, slot + 6), A + 2);      // not taken
    EXPECT_EQ(ss_fixup_rip(jz, slot, A + 0x12), A + 0x12);   // taken: already original

    auto loop = dec({0xe2, 0x10}, A); // loop +2; jmp +5; jmp target
    EXPECT_EQ(insn_copy_len(loop), 9u);
    EXPECT_EQ(ss_fixup_rip(loop, slot, slot + 2), A + 2);    // stepped, not taken
    EXPECT_EQ(ss_fixup_rip(loop, slot, slot + 4), A + 0x12); // stepped, taken
    EXPECT_EQ(ss_fixup_rip(loop, slot, slot + 9), A + 2);    // ran to the end

    auto call = dec({0xe8, 0xfb, 0x00, 0x00, 0x00}, A);
    const size_t n = insn_copy_len(call);
    EXPECT_GE(n, 10u);
    EXPECT_EQ(ss_fixup_rip(call, slot, slot + 5), 0u);       // between push and jmp
    EXPECT_EQ(ss_fixup_rip(call, slot, A + 0x100), A + 0x100);

    // pushf: the TF bit the single step pushed is cleared.
    auto pushf = dec({0x9c}, A);
    unsigned long word = 0x346;
    pt_regs r{};
    r.ip = slot + 1;
    r.sp = reinterpret_cast<unsigned long>(&word);
    ASSERT_TRUE(ss_fixup_regs(pushf, slot, &r));
    EXPECT_EQ(r.ip, A + 1);
    EXPECT_EQ(word, 0x246u);
    r.ip = slot + 5;
    EXPECT_FALSE(ss_fixup_regs(call, slot, &r));
    EXPECT_EQ(r.ip, slot + 5);
}

// ---- insn_bytes ---------------------------------------------------------------------------

TEST(insn_bytes, rel32_and_nops)
{
    auto c = make_call_rel32(0x1000, 0x2000);
    ASSERT_TRUE(c);
    const rel32_insn want_call = {0xe8, 0xfb, 0x0f, 0x00, 0x00};
    EXPECT_EQ(*c, want_call);
    auto j = make_jmp_rel32(0x2000, 0x1000);
    ASSERT_TRUE(j);
    const rel32_insn want_jmp = {0xe9, 0xfb, 0xef, 0xff, 0xff};
    EXPECT_EQ(*j, want_jmp);
    // Range: exactly INT32_MAX reachable, one more not.
    EXPECT_TRUE(make_jmp_rel32(0x100000000, 0x100000005 + 0x7fffffff));
    EXPECT_FALSE(make_jmp_rel32(0x100000000, 0x100000005 + 0x80000000UL));
    EXPECT_TRUE(make_jmp_rel32(0x100000000, 0x100000005 - 0x80000000UL));
    EXPECT_FALSE(make_call_rel32(0x100000000, 0x100000005 - 0x80000001UL));
    // What we make, the decoder reads back.
    auto di = insn_decode(j->data(), 5, 0x2000);
    ASSERT_TRUE(di);
    EXPECT_EQ(di->k, insn::jmp_rel);
    EXPECT_EQ(di->branch_target, 0x1000u);

    EXPECT_TRUE(nop_bytes(0).empty());
    EXPECT_TRUE(nop_bytes(9).empty());
    const std::vector<uint8_t> nop6 = {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00};
    EXPECT_EQ(std::vector<uint8_t>(nop_bytes(6).begin(), nop_bytes(6).end()), nop6);
    for (size_t len = 1; len <= ASM_NOP_MAX; ++len) {
        auto n = nop_bytes(len);
        ASSERT_EQ(n.size(), len);
        auto i = insn_decode(n.data(), n.size(), A); // one instruction of exactly len bytes
        ASSERT_TRUE(i);
        EXPECT_EQ(i->len, len);
        EXPECT_EQ(i->k, insn::other);
        EXPECT_TRUE(is_nop(n.data(), len));
    }
    uint8_t buf[19];
    fill_nops(buf, sizeof(buf)); // 8 + 8 + 3
    EXPECT_TRUE(is_nop(buf, 8));
    EXPECT_TRUE(is_nop(buf + 8, 8));
    EXPECT_TRUE(is_nop(buf + 16, 3));

    const uint8_t endbr[] = {0xf3, 0x0f, 0x1e, 0xfa};
    const uint8_t endbr32[] = {0xf3, 0x0f, 0x1e, 0xfb};
    EXPECT_TRUE(is_endbr64(endbr));
    EXPECT_FALSE(is_endbr64(endbr32));
    EXPECT_EQ(INT3_INSN_OPCODE, 0xcc);
    EXPECT_EQ(JMP32_INSN_SIZE, 5u);
    EXPECT_EQ(CALL_INSN_SIZE, 5u);
}

} // namespace
