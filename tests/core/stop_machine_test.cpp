// stop_machine: every other thread is stopped while the function runs, sees consistent
// registers, and a register change made by the function takes effect.
#include "core/stop_machine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

void main_marker_fn() {}

namespace
{

std::atomic<unsigned long> counters[4];
std::atomic<bool> stop_flag{false};
std::atomic<pid_t> tids[4];

struct snapshot {
    unsigned long before[4], after[4];
    size_t n;
    bool saw[4];
};

void observe(dprobe::stopped_thread *threads, size_t n, void *arg)
{
    auto *s = static_cast<snapshot *>(arg);
    s->n = n;
    for (int i = 0; i < 4; ++i)
        s->before[i] = counters[i].load();
    // Busy-wait a little: no stopped thread may make progress meanwhile.
    for (int spin = 0; spin < 2000000; ++spin)
        __asm__ volatile("" ::: "memory");
    for (int i = 0; i < 4; ++i) {
        s->after[i] = counters[i].load();
        s->saw[i] = false;
        for (size_t j = 0; j < n; ++j)
            if (threads[j].tid == tids[i].load()) s->saw[i] = true;
    }
}

TEST(stop_machine, stops_every_other_thread)
{
    std::vector<std::thread> ts;
    for (int i = 0; i < 4; ++i)
        ts.emplace_back([i] {
            tids[i] = static_cast<pid_t>(syscall(SYS_gettid));
            while (!stop_flag.load(std::memory_order_relaxed))
                counters[i].fetch_add(1, std::memory_order_relaxed);
        });
    for (int i = 0; i < 4; ++i)
        while (counters[i].load() < 1000)
            std::this_thread::yield();
    snapshot s{};
    ASSERT_EQ(0, dprobe::stop_machine(observe, &s));
    EXPECT_GE(s.n, 4u);
    for (int i = 0; i < 4; ++i) {
        EXPECT_TRUE(s.saw[i]) << "thread " << i << " not stopped";
        EXPECT_EQ(s.before[i], s.after[i]) << "thread " << i << " ran while stopped";
    }
    // And they run again afterwards.
    unsigned long c0 = counters[0].load();
    while (counters[0].load() == c0)
        std::this_thread::yield();
    stop_flag = true;
    for (auto &t : ts)
        t.join();
}

std::atomic<int> sigchld_count{0};
void count_sigchld(int)
{
    sigchld_count.fetch_add(1);
}
void no_op_fn(dprobe::stopped_thread *, size_t, void *) {}

// The helper process is invisible to the program: no SIGCHLD when it ends, and nothing for
// the program's wait() to reap (a shell's SIGCHLD handler reaps whatever it is told about).
TEST(stop_machine, the_program_sees_no_child)
{
    struct sigaction sa {
    }, old{};
    sa.sa_handler = count_sigchld;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(0, sigaction(SIGCHLD, &sa, &old));
    std::atomic<bool> stop{false};
    std::thread other([&] {
        while (!stop.load())
            std::this_thread::yield();
    });
    for (int i = 0; i < 3; i++)
        ASSERT_EQ(0, dprobe::stop_machine(no_op_fn, nullptr));
    stop = true;
    other.join();
    EXPECT_EQ(0, sigchld_count.load());
    errno = 0;
    EXPECT_EQ(-1, waitpid(-1, nullptr, WNOHANG));
    EXPECT_EQ(ECHILD, errno);
    sigaction(SIGCHLD, &old, nullptr);
}

// A thread blocked in a system call keeps waiting, undisturbed (no EINTR).
TEST(stop_machine, blocked_system_call_is_not_interrupted)
{
    int fds[2];
    ASSERT_EQ(0, pipe(fds));
    std::atomic<long> result{-2};
    std::atomic<int> err{0};
    std::thread reader([&] {
        char c;
        long r = read(fds[0], &c, 1);
        err = errno;
        result = r;
    });
    usleep(20000);
    snapshot s{};
    ASSERT_EQ(0, dprobe::stop_machine(observe, &s));
    usleep(20000);
    EXPECT_EQ(-2, result.load()) << "read returned early, errno " << err.load();
    ASSERT_EQ(1, write(fds[1], "x", 1));
    reader.join();
    EXPECT_EQ(1, result.load());
    close(fds[0]);
    close(fds[1]);
}

// The function can move a stopped thread: here it changes the value in a register the
// thread is about to store.
std::atomic<unsigned long> parked_value{0};
std::atomic<bool> parked{false};

void redirect(dprobe::stopped_thread *threads, size_t n, void *arg)
{
    pid_t want = *static_cast<pid_t *>(arg);
    for (size_t i = 0; i < n; ++i)
        if (threads[i].tid == want) {
            threads[i].regs.rbx = 4242;
            threads[i].changed = true;
        }
}

TEST(stop_machine, register_changes_take_effect)
{
    std::atomic<pid_t> tid{0};
    std::thread t([&] {
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        unsigned long v = 1;
        // Spin with the value in rbx until it changes.
        __asm__ volatile("1: pause\n\t"
                         "cmp $1, %%rbx\n\t"
                         "je 1b"
                         : "+b"(v));
        parked_value = v;
    });
    while (!tid.load())
        std::this_thread::yield();
    usleep(10000);
    pid_t want = tid.load();
    ASSERT_EQ(0, dprobe::stop_machine(redirect, &want));
    t.join();
    EXPECT_EQ(4242UL, parked_value.load());
}

// A signal on its way to a thread while it is stopped is not lost: here a thread raises
// SIGUSR2 against itself in a loop and counts the deliveries.
std::atomic<unsigned long> usr2_seen{0};
void on_usr2(int)
{
    usr2_seen.fetch_add(1);
}
void nothing(dprobe::stopped_thread *, size_t, void *) {}

TEST(stop_machine, signals_in_flight_are_delivered)
{
    struct sigaction sa = {};
    sa.sa_handler = on_usr2;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(0, sigaction(SIGUSR2, &sa, nullptr));
    std::atomic<bool> done{false};
    std::atomic<unsigned long> raised{0};
    std::thread t([&] {
        while (!done.load()) {
            raise(SIGUSR2);
            raised.fetch_add(1);
        }
    });
    for (int i = 0; i < 400; ++i) // enough rounds to catch a thread mid-delivery
        ASSERT_EQ(0, dprobe::stop_machine(nothing, nullptr));
    done = true;
    t.join();
    // raise() returns after the handler ran: every raise was seen exactly once.
    EXPECT_EQ(raised.load(), usr2_seen.load());
    signal(SIGUSR2, SIG_DFL);
}

std::atomic<int> traps_seen{0};
void on_trap(int)
{
    traps_seen.fetch_add(1);
}

struct trap_report {
    pid_t trapped_tid, plain_tid;
    int trapped_in_trap = -1, plain_in_trap = -1;
};

void find_traps(dprobe::stopped_thread *threads, size_t n, void *arg)
{
    auto *r = static_cast<trap_report *>(arg);
    for (size_t i = 0; i < n; ++i) {
        if (threads[i].tid == r->trapped_tid) r->trapped_in_trap = threads[i].in_trap;
        if (threads[i].tid == r->plain_tid) r->plain_in_trap = threads[i].in_trap;
    }
}

// A thread that has executed an int3 but not yet handled its SIGTRAP must be reported as
// in a trap: its RIP is one past the int3, and text_poke must not move it as if it were
// about to run the instruction there (that made jump-site enabling crash threads which
// had hit the previous disable's temporary int3). The queued case is made deterministic
// with a blocked, thread-directed SIGTRAP.
TEST(stop_machine, thread_with_a_pending_sigtrap_is_in_a_trap)
{
    struct sigaction sa = {};
    sa.sa_handler = on_trap;
    sigemptyset(&sa.sa_mask);
    struct sigaction old = {};
    ASSERT_EQ(0, sigaction(SIGTRAP, &sa, &old));
    std::atomic<bool> queued{false}, done{false};
    std::atomic<pid_t> trapped{0}, plain{0};
    std::thread t1([&] {
        sigset_t trap;
        sigemptyset(&trap);
        sigaddset(&trap, SIGTRAP);
        pthread_sigmask(SIG_BLOCK, &trap, nullptr);
        trapped = static_cast<pid_t>(syscall(SYS_gettid));
        syscall(SYS_tgkill, getpid(), trapped.load(), SIGTRAP);
        queued = true;
        while (!done.load())
            std::this_thread::yield();
        pthread_sigmask(SIG_UNBLOCK, &trap, nullptr); // delivered here, once
    });
    std::thread t2([&] {
        plain = static_cast<pid_t>(syscall(SYS_gettid));
        while (!done.load())
            std::this_thread::yield();
    });
    while (!queued.load() || plain.load() == 0)
        std::this_thread::yield();
    trap_report r{trapped.load(), plain.load()};
    ASSERT_EQ(0, dprobe::stop_machine(find_traps, &r));
    done = true;
    t1.join();
    t2.join();
    EXPECT_EQ(1, r.trapped_in_trap);
    EXPECT_EQ(0, r.plain_in_trap);
    EXPECT_EQ(1, traps_seen.load()); // stop_machine neither lost nor duplicated it
    sigaction(SIGTRAP, &old, nullptr);
}

} // namespace

// (exec_mem) After fork, the child's executable memory is its own: code the child writes
// is not seen by the parent.
#include "core/exec_mem.h"
#include <sys/wait.h>

TEST(exec_mem, child_writes_stay_in_the_child)
{
    dprobe::exec_chunk c = dprobe::exec_alloc(reinterpret_cast<uintptr_t>(&main_marker_fn),
                                              reinterpret_cast<uintptr_t>(&main_marker_fn), 16);
    ASSERT_TRUE(c);
    c.rw[0] = 0xc3; // ret
    pid_t pid = fork();
    if (pid == 0) {
        c.rw[0] = 0x90;
        _exit(reinterpret_cast<volatile uint8_t *>(c.rx)[0] == 0x90 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child could not write";
    EXPECT_EQ(0xc3, reinterpret_cast<volatile uint8_t *>(c.rx)[0]) << "child's write leaked";
    dprobe::exec_free(c);
}
