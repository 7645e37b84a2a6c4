// An int3 probe hit by a thread that blocked every signal, or by a signal handler installed
// with a full mask. The kernel does not leave a breakpoint's SIGTRAP pending when the thread
// blocks it: it resets the signal to its default action and the process dies. So while dprobe
// owns SIGTRAP the masks the program installs leave it out (core/sigmask_interpose.cpp), and
// the program still reads back the masks it set. Without that, this binary is killed by
// SIGTRAP at the first case.
#include "targets.h"

#include "core/signal_chain.h"

#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <pthread.h>
#include <thread>

namespace
{

unsigned (*volatile target)(unsigned) = kprobe_target;
std::atomic<int> hits;

int count_pre(struct kprobe *, struct pt_regs *)
{
    hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

// An int3 kprobe on kprobe_target for the test's life.
class sigmask : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        ASSERT_EQ(0, kprobes_set_optimization(0));
        kp = {};
        kp.symbol_name = "kprobe_target";
        kp.pre_handler = count_pre;
        ASSERT_EQ(0, register_kprobe(&kp));
        registered = true;
        ASSERT_TRUE(dprobe::signal_chain_owns(SIGTRAP)) << "no int3 probe: the case tests nothing";
        hits = 0;
    }
    void TearDown() override
    {
        if (registered) unregister_kprobe(&kp);
        kprobes_set_optimization(1);
    }
    struct kprobe kp = {};
    bool registered = false;
};

bool trap_blocked_now()
{
    sigset_t cur;
    EXPECT_EQ(0, pthread_sigmask(SIG_BLOCK, nullptr, &cur));
    return sigismember(&cur, SIGTRAP) == 1;
}

TEST_F(sigmask, thread_that_blocked_every_signal_hits_an_int3_probe)
{
    bool blocked_seen = false;
    unsigned r = 0;
    std::thread t([&] {
        sigset_t all;
        sigfillset(&all);
        ASSERT_EQ(0, pthread_sigmask(SIG_SETMASK, &all, nullptr));
        blocked_seen = trap_blocked_now(); // the program sees what it set
        r = target(7);
    });
    t.join();
    EXPECT_EQ(1, hits.load());
    EXPECT_EQ(kprobe_target(7), r);
    EXPECT_TRUE(blocked_seen);
}

// A thread started while its creator blocked every signal (liblzma's worker threads).
TEST_F(sigmask, thread_created_with_every_signal_blocked_hits_an_int3_probe)
{
    sigset_t all, old;
    sigfillset(&all);
    ASSERT_EQ(0, pthread_sigmask(SIG_SETMASK, &all, &old));
    std::thread t([] { target(3); });
    ASSERT_EQ(0, pthread_sigmask(SIG_SETMASK, &old, nullptr));
    t.join();
    EXPECT_EQ(1, hits.load());
}

std::atomic<unsigned> in_handler;

void full_mask_handler(int)
{
    in_handler = target(5);
}

TEST_F(sigmask, handler_with_a_full_mask_hits_an_int3_probe)
{
    struct sigaction sa = {}, old = {};
    sa.sa_handler = full_mask_handler;
    sigfillset(&sa.sa_mask);
    ASSERT_EQ(0, sigaction(SIGUSR1, &sa, &old));
    in_handler = 0;
    raise(SIGUSR1);
    ASSERT_EQ(0, sigaction(SIGUSR1, &old, nullptr));
    EXPECT_EQ(1, hits.load());
    EXPECT_EQ(kprobe_target(5), in_handler.load());
}

TEST_F(sigmask, masks_read_back_as_the_program_set_them)
{
    std::thread t([] {
        sigset_t trap, old;
        sigemptyset(&trap);
        sigaddset(&trap, SIGTRAP);
        ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &trap, &old));
        EXPECT_EQ(0, sigismember(&old, SIGTRAP));
        EXPECT_TRUE(trap_blocked_now());
        target(1); // hit anyway
        ASSERT_EQ(0, pthread_sigmask(SIG_UNBLOCK, &trap, &old));
        EXPECT_EQ(1, sigismember(&old, SIGTRAP));
        EXPECT_FALSE(trap_blocked_now());
    });
    t.join();
    EXPECT_EQ(1, hits.load());
}

} // namespace
