// Non-local control flow across hooked frames: longjmp and siglongjmp out of functions whose
// exits are hooked (caught in a probed function and in unprobed code), and swapcontext
// coroutines that suspend in the middle of hooked calls while the other stacks run. The
// program computes what it computes without probes; every exit that happens is reported
// with its value; the frames left by a jump are counted as missed and gone from the shadow
// stack by the next probed call.
#include "flow_targets.h"
#include "probe_set.h"

#include <gtest/gtest.h>

#include <csetjmp>
#include <dlfcn.h>
#include <csignal>
#include <cstdlib>
#include <pthread.h>
#include <sys/mman.h>

namespace
{

using rel::probe_kind;
using rel::probe_set;
using rel::shadow_depth;

class flow : public ::testing::TestWithParam<probe_kind>
{
};

long (*volatile outer)(long) = lj_outer;
long (*volatile sig_outer)(long) = lj_sig_outer;
long (*volatile middle)(jmp_buf *, long) = lj_middle;
constexpr int rounds = 50;

TEST_P(flow, longjmp_to_a_probed_function)
{
    ASSERT_EQ(-1, outer(1));
    ASSERT_EQ(5, outer(0)); // lj_leaf(0) = 1, middle 2, outer 5
    probe_set ps(GetParam(), {{"lj_outer", (void *)lj_outer},
                              {"lj_middle", (void *)lj_middle},
                              {"lj_leaf", (void *)lj_leaf}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < rounds; ++i) {
        EXPECT_EQ(-1, outer(1));
        EXPECT_EQ(0u, shadow_depth());
        EXPECT_EQ(5, outer(0));
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(2 * rounds, ps.exits("lj_outer"));
    EXPECT_EQ(static_cast<unsigned long>(rounds * (-1 + 5)), ps.ret_sum("lj_outer"));
    EXPECT_EQ(rounds, ps.exits("lj_middle"));
    EXPECT_EQ(rounds, ps.exits("lj_leaf"));
    EXPECT_EQ(static_cast<unsigned long>(rounds), ps.ret_sum("lj_leaf"));
    EXPECT_EQ(2UL * rounds, ps.missed()); // lj_middle and lj_leaf jumped over
    EXPECT_EQ(0, ps.bad_ret_ips());
}

TEST_P(flow, siglongjmp_restores_the_mask_and_the_shadow_stack)
{
    probe_set ps(GetParam(), {{"lj_sig_outer", (void *)lj_sig_outer},
                              {"lj_sig_middle", (void *)lj_sig_middle},
                              {"lj_sig_leaf", (void *)lj_sig_leaf}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < rounds; ++i) {
        EXPECT_EQ(-2, sig_outer(2));
        EXPECT_EQ(5, sig_outer(0));
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(2 * rounds, ps.exits("lj_sig_outer"));
    EXPECT_EQ(static_cast<unsigned long>(rounds * (-2 + 5)), ps.ret_sum("lj_sig_outer"));
    EXPECT_EQ(2UL * rounds, ps.missed());
}

// setjmp in unprobed code: the jumped-over frames stay until the next probed call, which
// finds them gone and reports normally.
__attribute__((noinline)) bool jump_out_of_middle()
{
    jmp_buf buf;
    if (setjmp(buf) == 0) {
        middle(&buf, 3);
        return false;
    }
    return true;
}

TEST_P(flow, longjmp_to_unprobed_code)
{
    probe_set ps(GetParam(), {{"lj_middle", (void *)lj_middle}, {"lj_leaf", (void *)lj_leaf}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < rounds; ++i) {
        EXPECT_TRUE(jump_out_of_middle());
        jmp_buf unused;
        EXPECT_EQ(2, middle(&unused, 0)); // lj_leaf(0) = 1
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(rounds, ps.exits("lj_middle"));
    EXPECT_EQ(static_cast<unsigned long>(2 * rounds), ps.ret_sum("lj_middle"));
    EXPECT_EQ(rounds, ps.exits("lj_leaf"));
    EXPECT_EQ(2UL * rounds, ps.missed());
}

// --- swapcontext coroutines ---------------------------------------------------------------

constexpr long co_rounds = 20;
constexpr size_t co_stack_size = 256 * 1024;

// Two coroutines, one on a heap stack and one on an mmap'd stack, resumed in turn by the
// caller's stack: at every switch hooked frames are live on all three stacks.
void run_coroutines(probe_kind kind)
{
    void *heap_stack = std::malloc(co_stack_size);
    void *map_stack =
        mmap(nullptr, co_stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, map_stack);
    probe_set ps(kind, {{"uco_resume", (void *)uco_resume},
                        {"uco_work", (void *)uco_work},
                        {"uco_yield", (void *)uco_yield}});
    ASSERT_EQ(0, ps.attach());
    uco_setup(0, heap_stack, co_stack_size, co_rounds);
    uco_setup(1, map_stack, co_stack_size, co_rounds);
    long resumes = 0, resume_sum = 0;
    while (!uco[0].done || !uco[1].done) {
        for (int i = 0; i < 2; ++i) {
            if (uco[i].done) continue;
            resume_sum += uco_resume(i);
            ++resumes;
        }
    }
    ps.detach();
    // sum over n < rounds of (n + 1) * 2, per coroutine
    const long want = co_rounds * (co_rounds + 1);
    EXPECT_EQ(want, uco[0].sum);
    EXPECT_EQ(want, uco[1].sum);
    EXPECT_EQ(0u, shadow_depth());
    EXPECT_EQ(resumes, ps.exits("uco_resume"));
    EXPECT_EQ(static_cast<unsigned long>(resume_sum), ps.ret_sum("uco_resume"));
    EXPECT_EQ(2 * co_rounds, ps.exits("uco_work"));
    EXPECT_EQ(static_cast<unsigned long>(2 * want), ps.ret_sum("uco_work"));
    EXPECT_EQ(2 * co_rounds, ps.exits("uco_yield"));
    EXPECT_EQ(0UL, ps.missed());
    EXPECT_EQ(0, ps.bad_ret_ips());
    munmap(map_stack, co_stack_size);
    std::free(heap_stack);
}

TEST_P(flow, swapcontext_coroutines_on_the_main_stack)
{
    run_coroutines(GetParam());
}

// The same from a thread whose own stack lies below the coroutine stacks (in .bss), so the
// switches go both ways in address order.
alignas(64) char low_stack[1 << 20];

TEST_P(flow, swapcontext_coroutines_on_a_low_thread_stack)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    ASSERT_EQ(0, pthread_attr_setstack(&attr, low_stack, sizeof low_stack));
    static probe_kind kind;
    kind = GetParam();
    pthread_t th;
    ASSERT_EQ(0, pthread_create(
                     &th, &attr,
                     [](void *) -> void * {
                         run_coroutines(kind);
                         return nullptr;
                     },
                     nullptr));
    pthread_join(th, nullptr);
    pthread_attr_destroy(&attr);
}

// A switch dprobe cannot see (libc's swapcontext called behind dprobe's back, as a
// hand-written context switch would be): frames of the suspended stacks may be taken for
// gone. The program still runs exactly as before and every exit is either reported or
// counted as missed.
TEST_P(flow, unseen_stack_switches_lose_exits_but_nothing_else)
{
    using switch_fn = int (*)(ucontext_t *, const ucontext_t *);
    auto libc_swapcontext = reinterpret_cast<switch_fn>(dlsym(RTLD_NEXT, "swapcontext"));
    ASSERT_NE(nullptr, libc_swapcontext);
    void *stacks[2] = {std::malloc(co_stack_size), std::malloc(co_stack_size)};
    probe_set ps(GetParam(), {{"uco_resume", (void *)uco_resume},
                              {"uco_work", (void *)uco_work},
                              {"uco_yield", (void *)uco_yield}});
    ASSERT_EQ(0, ps.attach());
    uco_switch = libc_swapcontext;
    // (makecontext'd contexts are entered through the unseen switch too.)
    uco_setup(0, stacks[0], co_stack_size, co_rounds);
    uco_setup(1, stacks[1], co_stack_size, co_rounds);
    long resumes = 0;
    while (!uco[0].done || !uco[1].done)
        for (int i = 0; i < 2; ++i)
            if (!uco[i].done) {
                uco_resume(i);
                ++resumes;
            }
    uco_switch = swapcontext;
    ps.detach();
    const long want = co_rounds * (co_rounds + 1);
    EXPECT_EQ(want, uco[0].sum);
    EXPECT_EQ(want, uco[1].sum);
    EXPECT_EQ(0u, shadow_depth());
    EXPECT_EQ(ps.total_entries(), ps.total_exits() + static_cast<long>(ps.missed()));
    EXPECT_EQ(resumes + 4 * co_rounds, ps.total_entries());
    EXPECT_EQ(0, ps.bad_ret_ips());
    std::free(stacks[0]);
    std::free(stacks[1]);
}

INSTANTIATE_TEST_SUITE_P(kinds, flow, ::testing::Values(probe_kind::fprobe, probe_kind::kretprobe),
                         [](const auto &info) { return std::string(rel::kind_name(info.param)); });

} // namespace
