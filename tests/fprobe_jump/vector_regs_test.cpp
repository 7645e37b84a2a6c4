// A plain function's callers may keep values in vector registers across a call to it when
// the compiler knows the function leaves them alone (-fipa-ra, on at -O2 for functions of
// the same unit). Handlers are ordinary C++ free to clobber every call-clobbered register:
// the trampolines of a jump site and the return trampoline must keep all sixteen.
#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

extern "C" {
long vr_leaf(long);
// Loads xmm0-15 from PATTERN, calls vr_leaf(ARG), stores xmm0-15 to OUT; returns its result.
long vr_caller(long arg, const uint8_t *pattern, uint8_t *out);
}

// vr_leaf touches rax only, as a leaf the compiler has seen would be known to.
__asm__(".text\n"
        ".globl vr_leaf\n"
        ".type vr_leaf, @function\n"
        "vr_leaf:\n"
        "  .cfi_startproc\n"
        "  mov %rdi, %rax\n"
        "  add $1, %rax\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size vr_leaf, .-vr_leaf\n"
        ".globl vr_caller\n"
        ".type vr_caller, @function\n"
        "vr_caller:\n"
        "  .cfi_startproc\n"
        "  push %rbx\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  mov %rdx, %rbx\n"
        "  .irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n"
        "  movdqu \\n * 16(%rsi), %xmm\\n\n"
        "  .endr\n"
        "  call vr_leaf\n"
        "  .irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n"
        "  movdqu %xmm\\n, \\n * 16(%rbx)\n"
        "  .endr\n"
        "  pop %rbx\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size vr_caller, .-vr_caller\n");

namespace
{

// What a handler may do: overwrite every call-clobbered vector register.
void clobber_vectors()
{
    __asm__ volatile("pcmpeqb %%xmm0, %%xmm0\n\t"
                     ".irp n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n\t"
                     "movdqa %%xmm0, %%xmm\\n\n\t"
                     ".endr" ::
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

int hits;
int clobber_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++hits;
    clobber_vectors();
    return 0;
}
void clobber_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++hits;
    clobber_vectors();
}
int clobber_ret(struct kretprobe_instance *, struct pt_regs *)
{
    ++hits;
    clobber_vectors();
    return 0;
}

struct vector_check {
    uint8_t pattern[256], out[256];
    vector_check()
    {
        for (int i = 0; i < 256; ++i)
            pattern[i] = static_cast<uint8_t>(i * 7 + 3);
    }
    // Registers whose value did not survive the call, as a bit mask.
    unsigned lost()
    {
        std::memset(out, 0, sizeof out);
        EXPECT_EQ(42, vr_caller(41, pattern, out));
        unsigned mask = 0;
        for (int r = 0; r < 16; ++r)
            if (std::memcmp(pattern + 16 * r, out + 16 * r, 16) != 0) mask |= 1u << r;
        return mask;
    }
};

TEST(fprobe_jump, handlers_clobbering_vector_registers_change_nothing)
{
    vector_check v;
    ASSERT_EQ(0u, v.lost()); // untraced
    struct fprobe fp = {};
    fp.entry_handler = clobber_entry;
    fp.exit_handler = clobber_exit;
    ASSERT_EQ(0, register_fprobe(&fp, "vr_leaf", nullptr));
    hits = 0;
    EXPECT_EQ(0u, v.lost()) << "a set bit is a vector register the caller lost";
    EXPECT_EQ(2, hits);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

TEST(fprobe_jump, kretprobe_handler_clobbering_vector_registers_changes_nothing)
{
    vector_check v;
    struct kretprobe rp = {};
    rp.kp.symbol_name = "vr_leaf";
    rp.handler = clobber_ret;
    rp.maxactive = 4;
    ASSERT_EQ(0, register_kretprobe(&rp));
    hits = 0;
    EXPECT_EQ(0u, v.lost()) << "a set bit is a vector register the caller lost";
    EXPECT_EQ(1, hits);
    unregister_kretprobe(&rp);
}

} // namespace
