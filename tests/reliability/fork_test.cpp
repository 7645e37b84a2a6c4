// Processes: fork inside probed functions (the child returns through the hooked frames it
// inherited and keeps tracing with its own shadow stack, also when other threads were inside
// probed code), vfork + exec (the child shares the parent's memory and stack: a child that
// calls a probed function, or _exits inside one, must not corrupt the parent), posix_spawn
// (whose child runs on its own stack but with the parent's memory, here with a probe on
// execve that the child hits), and exec of another program.
#include "fork_targets.h"
#include "probe_set.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <execinfo.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace
{

using rel::probe_kind;
using rel::probe_set;
using rel::shadow_depth;

class processes : public ::testing::TestWithParam<probe_kind>
{
};

long (*volatile fork_outer)(long) = fk_fork_outer;
long (*volatile leaf)(long) = fk_leaf;
long (*volatile vfork_exec)(const char *, int) = fk_vfork_exec;
long (*volatile vfork_exit_inside)(long) = fk_vfork_exit_inside;
long (*volatile spawn_outer)(const char *) = fk_spawn_outer;

long model_leaf(long x)
{
    return 5 * x + 2;
}

// In a child: checks that must hold, as an exit code (0: all held; else the first failed).
int child_checks(std::initializer_list<bool> checks)
{
    int i = 1;
    for (bool ok : checks) {
        if (!ok) return i;
        ++i;
    }
    return 0;
}

int wait_child(pid_t pid)
{
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<rel::probed_func> fork_funcs()
{
    return {{"fk_fork_outer", (void *)fk_fork_outer},
            {"fk_fork", (void *)fk_fork},
            {"fk_leaf", (void *)fk_leaf}};
}

TEST_P(processes, fork_inside_probed_functions)
{
    const pid_t parent = getpid();
    probe_set ps(GetParam(), fork_funcs());
    ps.expect_values("fk_leaf", model_leaf);
    ASSERT_EQ(0, ps.attach());
    for (int round = 0; round < 10; ++round) {
        ps.reset_counts();
        const long r = fork_outer(3);
        if (getpid() != parent) {
            // The child returned from fk_fork and fk_fork_outer through the hooked frames
            // it inherited; its probes go on with its own counters and shadow stack.
            alarm(20);
            const bool inherited = ps.exits("fk_fork_outer") == 1 &&
                                   ps.last_ret("fk_fork_outer") == 18 && ps.exits("fk_fork") == 1 &&
                                   ps.last_ret("fk_fork") == 17;
            for (long i = 0; i < 100; ++i)
                leaf(i);
            const bool traced = ps.exits("fk_leaf") == 101 && ps.bad_values() == 0;
            const bool depth = shadow_depth() == 0;
            // Unregistering and registering again in the child does not wait for the
            // parent's threads.
            ps.detach();
            const bool again = ps.attach() == 0;
            leaf(1);
            _exit(child_checks(
                {r == 18, inherited, traced, depth, again, ps.exits("fk_leaf") == 102}));
        }
        const pid_t child = static_cast<pid_t>(1 - r);
        EXPECT_EQ(0, wait_child(child));
        EXPECT_EQ(1, ps.exits("fk_fork_outer"));
        EXPECT_EQ(static_cast<unsigned long>(r), ps.last_ret("fk_fork_outer"));
        EXPECT_EQ(static_cast<unsigned long>(-child), ps.last_ret("fk_fork"));
        EXPECT_EQ(0, ps.exits("fk_leaf"));
        EXPECT_EQ(0u, shadow_depth());
    }
}

// fork while two other threads run probed code (possibly inside dprobe's code at that
// moment): the child's only thread is traced, and unregistering does not wait for threads
// that do not exist in it.
TEST_P(processes, fork_while_other_threads_run_probed_code)
{
    const pid_t parent = getpid();
    probe_set ps(GetParam(), fork_funcs());
    ps.expect_values("fk_leaf", model_leaf);
    ASSERT_EQ(0, ps.attach());
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i)
        threads.emplace_back([&] {
            while (!stop.load(std::memory_order_relaxed))
                leaf(7);
        });
    for (int round = 0; round < 20; ++round) {
        const long r = fork_outer(1);
        if (getpid() != parent) {
            alarm(20);
            const long before = ps.exits("fk_leaf");
            for (long i = 0; i < 1000; ++i)
                leaf(i);
            const bool traced = ps.exits("fk_leaf") == before + 1000;
            ps.detach();
            _exit(child_checks({r == 8, traced, shadow_depth() == 0, ps.bad_values() == 0}));
        }
        EXPECT_EQ(0, wait_child(static_cast<pid_t>(1 - r)));
    }
    stop = true;
    for (auto &t : threads)
        t.join();
    EXPECT_EQ(0, ps.bad_values());
}

TEST_P(processes, vfork_and_exec)
{
    probe_set ps(GetParam(),
                 {{"fk_vfork_exec", (void *)fk_vfork_exec}, {"fk_leaf", (void *)fk_leaf}});
    ps.expect_values("fk_leaf", model_leaf);
    ASSERT_EQ(0, ps.attach());
    for (int round = 0; round < 10; ++round) {
        EXPECT_EQ(0, vfork_exec("/bin/true", 0));
        EXPECT_EQ(1, vfork_exec("/bin/false", 0));
        // The child calls a probed function first: in the parent's memory, on its stack.
        EXPECT_EQ(0, vfork_exec("/bin/true", 1));
        EXPECT_EQ(127, vfork_exec("/nonexistent", 1));
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(40, ps.exits("fk_vfork_exec"));
    EXPECT_EQ(static_cast<unsigned long>(10 * (0 + 1 + 0 + 127)), ps.ret_sum("fk_vfork_exec"));
    // The children's calls, counted in the memory they shared with the parent.
    EXPECT_EQ(20, ps.exits("fk_leaf"));
    EXPECT_EQ(0, ps.bad_values());
    EXPECT_EQ(0, ps.bad_ret_ips());
}

// The vfork child _exits from inside a probed function: its hooked frame is left on the
// shadow stack it shares with the parent, below the parent's frames.
TEST_P(processes, vfork_child_exits_inside_a_probed_function)
{
    probe_set ps(GetParam(), {{"fk_vfork_exit_inside", (void *)fk_vfork_exit_inside},
                              {"fk_vfork_child", (void *)fk_vfork_child},
                              {"fk_leaf", (void *)fk_leaf}});
    ASSERT_EQ(0, ps.attach());
    for (long code = 0; code < 10; ++code) {
        EXPECT_EQ(code, vfork_exit_inside(code));
        EXPECT_EQ(5 * code + 2, leaf(code));
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(10, ps.exits("fk_vfork_exit_inside"));
    EXPECT_EQ(45UL, ps.ret_sum("fk_vfork_exit_inside"));
    EXPECT_EQ(10, ps.entries("fk_vfork_child"));
    EXPECT_EQ(0, ps.exits("fk_vfork_child"));
    EXPECT_EQ(10, ps.exits("fk_leaf"));
}

// posix_spawn's child runs on a stack of its own but in the parent's memory, with the
// parent's thread pointer; here it also hits a probe (on execve) on its way to exec.
TEST_P(processes, posix_spawn_with_a_probe_the_child_hits)
{
    probe_set ps(GetParam(), {{"fk_spawn_outer", (void *)fk_spawn_outer},
                              {"fk_spawn", (void *)fk_spawn},
                              {"execve", (void *)execve}});
    ASSERT_EQ(0, ps.attach());
    for (int round = 0; round < 10; ++round) {
        EXPECT_EQ(10, spawn_outer("/bin/true"));
        // Stack walks and probed calls right after: nothing the child left behind is
        // touched.
        void *frames[32];
        EXPECT_GT(backtrace(frames, 32), 2);
        EXPECT_EQ(11, spawn_outer("/bin/false"));
        EXPECT_EQ(0u, shadow_depth());
    }
    ps.detach();
    EXPECT_EQ(20, ps.exits("fk_spawn_outer"));
    EXPECT_EQ(static_cast<unsigned long>(10 * (10 + 11)), ps.ret_sum("fk_spawn_outer"));
    EXPECT_EQ(20, ps.exits("fk_spawn"));
    EXPECT_EQ(0, ps.bad_ret_ips());
}

// exec of another program from a process with probes armed (and threads running probed
// code): the new program starts clean.
TEST_P(processes, exec_from_a_traced_process)
{
    probe_set ps(GetParam(), fork_funcs());
    ASSERT_EQ(0, ps.attach());
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        std::thread([] {
            for (;;)
                leaf(1);
        }).detach();
        leaf(2);
        execl("/bin/sh", "sh", "-c", "exit 42", static_cast<char *>(nullptr));
        _exit(127);
    }
    ASSERT_GT(pid, 0);
    EXPECT_EQ(42, wait_child(pid));
}

INSTANTIATE_TEST_SUITE_P(kinds, processes,
                         ::testing::Values(probe_kind::fprobe, probe_kind::kretprobe),
                         [](const auto &info) { return std::string(rel::kind_name(info.param)); });

} // namespace
