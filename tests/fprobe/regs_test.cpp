// Vector, x87 and flags state must reach the traced function and its caller unchanged,
// even when the handlers clobber every such register.
#include "targets.h"

#include "core/ftrace.h"

#include <dprobe/fprobe.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace
{

// Wreck the state a careless handler could: all ymm registers, the upper halves (via
// vzeroupper after), the x87 stack and MXCSR's exception flags.
__attribute__((noinline)) void clobber_everything()
{
    __asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"
                     "vmovdqa %%ymm0, %%ymm1\n\t"
                     "vmovdqa %%ymm0, %%ymm2\n\t"
                     "vmovdqa %%ymm0, %%ymm3\n\t"
                     "vmovdqa %%ymm0, %%ymm4\n\t"
                     "vmovdqa %%ymm0, %%ymm5\n\t"
                     "vmovdqa %%ymm0, %%ymm6\n\t"
                     "vmovdqa %%ymm0, %%ymm7\n\t"
                     "vzeroupper\n\t"
                     "fldpi\n\t"
                     "fldln2\n\t"
                     "faddp\n\t"
                     "fstp %%st(0)\n\t" ::
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "st",
                           "memory");
    volatile double x = 1.0, y = 3.0;
    volatile double z = x / y; // raises the inexact flag in MXCSR
    (void)z;
    // Arithmetic flags: leave a distinctive pattern.
    __asm__ volatile("xor %%eax, %%eax\n\tcmp $1, %%eax" ::: "eax", "cc");
}

int clobber_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    clobber_everything();
    return 0;
}
void clobber_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    clobber_everything();
}

class fprobe_regs : public ::testing::Test
{
  protected:
    void probe(const char *glob)
    {
        fp_ = {};
        fp_.entry_handler = clobber_entry;
        fp_.exit_handler = clobber_exit;
        ASSERT_EQ(0, register_fprobe(&fp_, glob, nullptr));
    }
    void TearDown() override
    {
        if (fprobe_is_registered(&fp_)) {
            EXPECT_EQ(0, unregister_fprobe(&fp_));
        }
    }
    struct fprobe fp_ = {};
};

using fp_fn = double (*)(float, double, long double, double);
using ld_fn = long double (*)(long double, long double);
using m256_fn = __m256 (*)(__m256, __m256);
using float_fn = float (*)(float);
volatile fp_fn fp_ptr = fp_target;
volatile ld_fn ld_ptr = ld_target;
volatile m256_fn m256_ptr = m256_target;
volatile float_fn float_ptr = float_target;

TEST_F(fprobe_regs, float_double_long_double_arguments_and_returns)
{
    const double want = fp_ptr(1.25f, 2.5, 3.75L, 0.125);
    const long double want_ld = ld_ptr(1.5L, 2.25L);
    const float want_f = float_ptr(0.3f);
    probe("*_target");
    EXPECT_EQ(want, fp_ptr(1.25f, 2.5, 3.75L, 0.125));
    EXPECT_EQ(want_ld, ld_ptr(1.5L, 2.25L));
    EXPECT_EQ(want_f, float_ptr(0.3f));
}

// Handlers reading vector arguments and results (ftrace_regs_get_xmm): the probe saves the
// vector registers for them (a handler that reads them is never light).
double seen_d, seen_extra, seen_ret;
int xmm_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *fregs, void *)
{
    std::memcpy(&seen_d, ftrace_regs_get_xmm(fregs, 1), sizeof seen_d);
    std::memcpy(&seen_extra, ftrace_regs_get_xmm(fregs, 2), sizeof seen_extra);
    return 0;
}
void xmm_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *fregs, void *)
{
    std::memcpy(&seen_ret, ftrace_regs_get_xmm(fregs, 0), sizeof seen_ret);
}

TEST(fprobe_xmm, handlers_read_vector_arguments_and_results)
{
    const double want = fp_ptr(1.25f, 2.5, 3.75L, 0.125);
    struct fprobe fp = {};
    fp.entry_handler = xmm_entry;
    fp.exit_handler = xmm_exit;
    ASSERT_EQ(0, register_fprobe(&fp, "fp_target", nullptr));
    const dprobe::ftrace_site *site =
        dprobe::ftrace_location(reinterpret_cast<uintptr_t>(fp_target));
    ASSERT_NE(nullptr, site);
    EXPECT_FALSE(site->light.load()) << "handlers reading vector registers must save them";
    for (int i = 0; i < 2; ++i) { // the thread's first hit, then the others
        seen_d = seen_extra = seen_ret = 0;
        EXPECT_EQ(want, fp_ptr(1.25f, 2.5, 3.75L, 0.125));
        EXPECT_EQ(2.5, seen_d);
        EXPECT_EQ(0.125, seen_extra);
        EXPECT_EQ(want, seen_ret);
    }
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// An exit handler using all eight x87 registers, as any ABI-conforming code may: a long
// double result left on the x87 stack would be lost to the stack overflow.
__attribute__((noinline)) void fill_x87_stack()
{
    __asm__ volatile(".rept 8\n\tfldz\n\t.endr\n\t.rept 8\n\tfstp %%st(0)\n\t.endr" ::
                         : "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
}
int plain_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    return 0;
}
void x87_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    fill_x87_stack();
}
long integer_exits;
void integer_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++integer_exits;
}

TEST(fprobe_x87, long_double_result_kept_from_exit_handlers_using_the_x87_stack)
{
    const long double want = ld_ptr(1.5L, 2.25L);
    // An exit handler that uses the x87 stack (it is set aside around it), then one that
    // provably does not (it runs with the result on the stack, untouched).
    for (auto *exit : {x87_exit, integer_exit}) {
        struct fprobe fp = {};
        fp.entry_handler = plain_entry;
        fp.exit_handler = exit;
        ASSERT_EQ(0, register_fprobe(&fp, "ld_target", nullptr));
        integer_exits = 0;
        EXPECT_EQ(want, ld_ptr(1.5L, 2.25L));
        EXPECT_EQ(want, ld_ptr(1.5L, 2.25L));
        EXPECT_EQ(exit == integer_exit ? 2 : 0, integer_exits);
        EXPECT_EQ(0, unregister_fprobe(&fp));
    }
}

TEST_F(fprobe_regs, m256_arguments_and_return)
{
    __m256 a = _mm256_setr_ps(1, 2, 3, 4, 5, 6, 7, 8);
    __m256 b = _mm256_setr_ps(8, 7, 6, 5, 4, 3, 2, 1);
    __m256 want = m256_ptr(a, b);
    probe("m256_target");
    __m256 got = m256_ptr(a, b);
    float w[8], g[8];
    _mm256_storeu_ps(w, want);
    _mm256_storeu_ps(g, got);
    for (int i = 0; i < 8; ++i)
        EXPECT_EQ(w[i], g[i]) << "lane " << i;
}

TEST_F(fprobe_regs, rflags_unchanged_in_function_and_caller)
{
    // CF, PF, AF, ZF, SF, OF and the always-one bit 1, in several combinations.
    const unsigned long arith = 0x8d5;
    const unsigned long patterns[] = {
        0x2, 0x2 | 0x1, 0x2 | 0x40 | 0x4, 0x2 | 0x80 | 0x800, 0x2 | 0x8d5, 0x2 | 0x10 | 0x800};
    unsigned long plain_entry[6], plain_after[6];
    for (int i = 0; i < 6; ++i)
        plain_after[i] = call_with_flags(patterns[i], &plain_entry[i]);
    probe("flags_probe_target");
    for (int i = 0; i < 6; ++i) {
        unsigned long at_entry = 0;
        unsigned long after = call_with_flags(patterns[i], &at_entry);
        EXPECT_EQ(plain_entry[i] & arith, at_entry & arith) << "pattern " << i;
        EXPECT_EQ(plain_after[i] & arith, after & arith) << "pattern " << i;
        EXPECT_EQ(patterns[i] & arith, at_entry & arith) << "pattern " << i;
    }
}

} // namespace
