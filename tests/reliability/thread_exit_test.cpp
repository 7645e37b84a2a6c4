// Threads that end inside probed functions: pthread_exit, cancellation at a cancellation
// point in a probed function and inside a handler, asynchronous cancellation while the
// thread runs probed code in a loop, and threads ending while their probe is unregistered.
// The thread unwinds as it would without probes (destructors and cleanup handlers run), its
// joiner gets the same result, and the next threads are traced normally.
#include "probe_set.h"
#include "thread_targets.h"

#include <gtest/gtest.h>

#include <atomic>
#include <pthread.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{

using rel::probe_kind;
using rel::probe_set;
using rel::shadow_depth;

class thread_exit : public ::testing::TestWithParam<probe_kind>
{
};

std::atomic<int> cleanups;
void count_cleanup(void *)
{
    cleanups.fetch_add(1);
}

long (*volatile exit_outer)(long) = thr_exit_outer;
long (*volatile cancel_outer)(int) = thr_cancel_outer;
unsigned long (*volatile spin)(unsigned long) = thr_spin;

std::vector<rel::probed_func> exit_funcs()
{
    return {{"thr_exit_outer", (void *)thr_exit_outer},
            {"thr_exit_middle", (void *)thr_exit_middle},
            {"thr_exit_leaf", (void *)thr_exit_leaf}};
}

void *run_exit_outer(void *arg)
{
    long r;
    pthread_cleanup_push(count_cleanup, nullptr);
    r = exit_outer(reinterpret_cast<long>(arg));
    pthread_cleanup_pop(0);
    return reinterpret_cast<void *>(r);
}

void *join(pthread_t th)
{
    void *ret = nullptr;
    EXPECT_EQ(0, pthread_join(th, &ret));
    return ret;
}

// A new thread (which may reuse the context of one that ended) is traced normally.
void expect_next_thread_traced(probe_set &ps)
{
    ps.reset_counts();
    pthread_t th;
    ASSERT_EQ(0, pthread_create(&th, nullptr, run_exit_outer, nullptr));
    EXPECT_EQ(reinterpret_cast<void *>(5), join(th)); // ((0 + 1) * 2) + 3
    EXPECT_EQ(1, ps.exits("thr_exit_outer"));
    EXPECT_EQ(1, ps.exits("thr_exit_leaf"));
    EXPECT_EQ(0UL, ps.missed());
}

TEST_P(thread_exit, pthread_exit_from_a_probed_function)
{
    probe_set ps(GetParam(), exit_funcs());
    ASSERT_EQ(0, ps.attach());
    constexpr int rounds = 20;
    for (int i = 0; i < rounds; ++i) {
        thr_dtor_runs = 0;
        cleanups = 0;
        pthread_t th;
        ASSERT_EQ(0, pthread_create(&th, nullptr, run_exit_outer, reinterpret_cast<void *>(9)));
        EXPECT_EQ(reinterpret_cast<void *>(9), join(th));
        EXPECT_EQ(2, thr_dtor_runs.load()); // thr_exit_middle's and thr_exit_outer's objects
        EXPECT_EQ(1, cleanups.load());
    }
    EXPECT_EQ(rounds, ps.entries("thr_exit_leaf"));
    EXPECT_EQ(0, ps.total_exits());
    EXPECT_EQ(3UL * rounds, ps.missed());
    expect_next_thread_traced(ps);
}

void *run_cancel_outer(void *arg)
{
    long r;
    pthread_cleanup_push(count_cleanup, nullptr);
    r = cancel_outer(static_cast<int>(reinterpret_cast<long>(arg)));
    pthread_cleanup_pop(0);
    return reinterpret_cast<void *>(r);
}

TEST_P(thread_exit, cancelled_at_a_cancellation_point_in_a_probed_function)
{
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    probe_set ps(GetParam(), {{"thr_cancel_outer", (void *)thr_cancel_outer},
                              {"thr_cancel_middle", (void *)thr_cancel_middle},
                              {"thr_cancel_leaf", (void *)thr_cancel_leaf}});
    ASSERT_EQ(0, ps.attach());
    constexpr int rounds = 20;
    for (int i = 0; i < rounds; ++i) {
        thr_dtor_runs = 0;
        cleanups = 0;
        pthread_t th;
        ASSERT_EQ(0, pthread_create(&th, nullptr, run_cancel_outer,
                                    reinterpret_cast<void *>(static_cast<long>(fds[0]))));
        while (ps.entries("thr_cancel_leaf") <= i)
            usleep(100);
        ASSERT_EQ(0, pthread_cancel(th));
        EXPECT_EQ(PTHREAD_CANCELED, join(th));
        EXPECT_EQ(2, thr_dtor_runs.load());
        EXPECT_EQ(1, cleanups.load());
    }
    // And one that is not cancelled returns through the hooked frames.
    pthread_t th;
    ASSERT_EQ(0, pthread_create(&th, nullptr, run_cancel_outer,
                                reinterpret_cast<void *>(static_cast<long>(fds[0]))));
    ASSERT_EQ(1, write(fds[1], "x", 1));
    EXPECT_EQ(reinterpret_cast<void *>(3), join(th));
    EXPECT_EQ(1, ps.exits("thr_cancel_outer"));
    EXPECT_EQ(3UL, ps.last_ret("thr_cancel_outer"));
    EXPECT_EQ(3UL * rounds, ps.missed());
    close(fds[0]);
    close(fds[1]);
}

// Cancellation acted upon inside a handler (the handler reaches a cancellation point): the
// thread unwinds out of dprobe's own frames, then the probed function's.
thread_local int cancel_in_handler = -1; // 0: entry handlers, 1: exit handlers
void cancel_point_in_handler(bool exit)
{
    if (cancel_in_handler == static_cast<int>(exit)) pthread_testcancel();
}

void *cancel_self_then_call(void *arg)
{
    cancel_in_handler = static_cast<int>(reinterpret_cast<long>(arg));
    long r;
    pthread_cleanup_push(count_cleanup, nullptr);
    pthread_cancel(pthread_self()); // pending until the next cancellation point
    r = exit_outer(0);
    pthread_cleanup_pop(0);
    return reinterpret_cast<void *>(r);
}

TEST_P(thread_exit, cancelled_inside_a_handler)
{
    probe_set ps(GetParam(), exit_funcs());
    ASSERT_EQ(0, ps.attach());
    probe_set::set_handler_hook(cancel_point_in_handler);
    for (long where : {0L, 1L}) {
        SCOPED_TRACE(where ? "exit handler" : "entry handler");
        for (int i = 0; i < 10; ++i) {
            thr_dtor_runs = 0;
            cleanups = 0;
            pthread_t th;
            ASSERT_EQ(0, pthread_create(&th, nullptr, cancel_self_then_call,
                                        reinterpret_cast<void *>(where)));
            EXPECT_EQ(PTHREAD_CANCELED, join(th));
            EXPECT_EQ(1, cleanups.load());
            // Entry: cancelled in thr_exit_outer's entry, before its object exists. Exit:
            // in thr_exit_leaf's exit, with both objects alive.
            EXPECT_EQ(where ? 2 : 0, thr_dtor_runs.load());
        }
    }
    probe_set::set_handler_hook(nullptr);
    expect_next_thread_traced(ps);
}

TEST_P(thread_exit, asynchronous_cancellation_while_running_probed_code)
{
    probe_set ps(GetParam(),
                 {{"thr_spin", (void *)thr_spin}, {"thr_spin_leaf", (void *)thr_spin_leaf}});
    ASSERT_EQ(0, ps.attach());
    for (int i = 0; i < 20; ++i) {
        ps.reset_counts();
        pthread_t th;
        ASSERT_EQ(0, pthread_create(
                         &th, nullptr,
                         [](void *) -> void * {
                             pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, nullptr);
                             for (unsigned long x = 0;; ++x)
                                 spin(x);
                         },
                         nullptr));
        while (ps.entries("thr_spin") < 2000 + 100 * i)
            sched_yield();
        ASSERT_EQ(0, pthread_cancel(th));
        EXPECT_EQ(PTHREAD_CANCELED, join(th));
    }
    ps.detach();
    static const unsigned long want = spin(1);
    ASSERT_EQ(0, ps.attach());
    ps.reset_counts();
    std::thread([] { EXPECT_EQ(want, spin(1)); }).join();
    EXPECT_EQ(1, ps.exits("thr_spin"));
    EXPECT_EQ(2, ps.exits("thr_spin_leaf"));
}

// Threads run probed functions and end (returning, or by pthread_exit inside them) while the
// probe is unregistered and registered again.
TEST_P(thread_exit, threads_end_while_the_probe_is_removed)
{
    probe_set ps(GetParam(), exit_funcs());
    for (int round = 0; round < 20; ++round) {
        ASSERT_EQ(0, ps.attach());
        std::vector<pthread_t> threads(4);
        for (size_t i = 0; i < threads.size(); ++i)
            ASSERT_EQ(0, pthread_create(
                             &threads[i], nullptr,
                             [](void *arg) -> void * {
                                 for (int n = 0; n < 200; ++n)
                                     if (exit_outer(0) != 5) return nullptr;
                                 return run_exit_outer(arg);
                             },
                             reinterpret_cast<void *>(static_cast<long>(i & 1) * 4)));
        ps.detach();
        for (size_t i = 0; i < threads.size(); ++i)
            EXPECT_EQ(reinterpret_cast<void *>(i & 1 ? 4 : 5), join(threads[i]));
    }
    ASSERT_EQ(0, ps.attach());
    expect_next_thread_traced(ps);
    EXPECT_EQ(0u, shadow_depth());
}

INSTANTIATE_TEST_SUITE_P(kinds, thread_exit,
                         ::testing::Values(probe_kind::fprobe, probe_kind::kretprobe),
                         [](const auto &info) { return std::string(rel::kind_name(info.param)); });

} // namespace
