// Signals while probed code runs: a storm of signals (one every few microseconds) whose
// handler calls probed functions while the interrupted code is itself in probed functions,
// in their trampolines or in dprobe's handlers; on the thread's stack and on a sigaltstack
// below or above it; handlers that leave with siglongjmp; and the program's own SIGTRAP
// handler while int3 probes are armed. Every call computes what it computes without
// probes, each reported exit has the value its argument predicts, every hit is either
// reported or counted as missed, and the probes can be removed afterwards.
#include "probe_set.h"
#include "signal_targets.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdlib>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ctime>
#include <thread>
#include <unistd.h>

#include <dprobe/kprobes.h>

namespace
{

using rel::probe_kind;
using rel::probe_set;
using rel::shadow_depth;

class signals : public ::testing::TestWithParam<probe_kind>
{
};

long (*volatile middle)(long) = sig_middle;
long (*volatile own_int3)(long) = sig_own_int3;

long model_middle(long x)
{
    return 3 * x + 3;
}
long model_leaf(long x)
{
    return 3 * x + 1;
}

std::atomic<long> handler_calls, handler_bad;

void on_signal(int)
{
    const long k = handler_calls.fetch_add(1);
    if (middle(k) != 3 * k + 3) handler_bad.fetch_add(1);
}

// A timer that sends SIG to the calling thread every 20 microseconds until destroyed: the
// kernel delivers it wherever the thread is, however busy the machine.
class signal_storm
{
  public:
    explicit signal_storm(int sig)
    {
        struct sigevent ev = {};
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = sig;
        ev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
        EXPECT_EQ(0, timer_create(CLOCK_MONOTONIC, &ev, &timer_));
        struct itimerspec its = {};
        its.it_value.tv_nsec = 20000;
        its.it_interval.tv_nsec = 20000;
        EXPECT_EQ(0, timer_settime(timer_, 0, &its, nullptr));
    }
    ~signal_storm() { timer_delete(timer_); }

  private:
    timer_t timer_{};
};

// Aborts the test program if the scope lasts longer than a minute (a hang is a failure).
class watchdog
{
  public:
    explicit watchdog(const char *what)
        : th_([this, what] {
              for (int i = 0; i < 600 && !done_.load(); ++i)
                  usleep(100000);
              if (!done_.load()) {
                  fprintf(stderr, "watchdog: %s hangs\n", what);
                  abort();
              }
          })
    {
    }
    ~watchdog()
    {
        done_ = true;
        th_.join();
    }

  private:
    std::atomic<bool> done_{false};
    std::thread th_;
};

struct storm_result {
    long bad = 0, calls = 0;
};

// On the calling thread: at least N probed calls, and as many as it takes for the handler
// (as installed for SIGUSR1) to run 500 times, under a storm of SIGUSR1.
storm_result run_storm(long n)
{
    storm_result r;
    signal_storm storm(SIGUSR1);
    long i = 0;
    for (; i < n || handler_calls.load(std::memory_order_relaxed) < 500; ++i)
        if (middle(i) != 3 * i + 3) ++r.bad;
    r.calls = i;
    return r;
}

void install(void (*fn)(int), int flags)
{
    struct sigaction sa = {};
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(0, sigaction(SIGUSR1, &sa, nullptr));
}

// Probe handlers that call a probed function themselves (not handled: recursion).
std::atomic<long> hook_calls;
void hook_calls_probed(bool)
{
    hook_calls.fetch_add(1);
    sig_leaf(1);
}

void storm_on_this_thread(probe_kind kind, int flags, bool recursing_handlers = false)
{
    probe_set ps(kind, {{"sig_middle", (void *)sig_middle}, {"sig_leaf", (void *)sig_leaf}});
    ps.expect_values("sig_middle", model_middle);
    ps.expect_values("sig_leaf", model_leaf);
    install(on_signal, SA_RESTART | flags);
    ASSERT_EQ(0, ps.attach());
    // (The thread's first hit sets its dprobe context up; a signal meanwhile finds none and
    // its hits are dropped uncounted. Count from a thread that has one.)
    middle(0);
    ps.reset_counts();
    handler_calls = handler_bad = hook_calls = 0;
    if (recursing_handlers) probe_set::set_handler_hook(hook_calls_probed);
    storm_result r;
    {
        watchdog w("signal storm");
        r = run_storm(100000);
    }
    probe_set::set_handler_hook(nullptr);
    ps.detach();
    install(SIG_IGN, 0);
    EXPECT_EQ(0, r.bad);
    EXPECT_EQ(0, handler_bad.load());
    EXPECT_GE(handler_calls.load(), 500);
    // Each middle() call makes two probed calls; a call hit while the thread was in dprobe
    // code (the signal came in a handler) is counted as missed instead.
    const long calls = 2 * (r.calls + handler_calls.load()) + hook_calls.load();
    EXPECT_EQ(calls, ps.total_entries() + static_cast<long>(ps.missed()));
    EXPECT_EQ(ps.total_entries(), ps.total_exits());
    EXPECT_EQ(0, ps.bad_values());
    EXPECT_EQ(0, ps.bad_ret_ips());
    EXPECT_EQ(0u, shadow_depth());
}

TEST_P(signals, handler_calls_probed_functions_on_the_same_stack)
{
    storm_on_this_thread(GetParam(), 0);
}

TEST_P(signals, probe_handlers_calling_probed_functions_under_signals)
{
    storm_on_this_thread(GetParam(), 0, true);
}

// The sigaltstack below the thread's stack (static memory; the thread's stack is mmap'd).
alignas(64) char low_altstack[256 * 1024];

TEST_P(signals, handler_on_a_sigaltstack_below_the_thread_stack)
{
    static probe_kind kind;
    kind = GetParam();
    std::thread([] {
        stack_t ss = {};
        ss.ss_sp = low_altstack;
        ss.ss_size = sizeof low_altstack;
        ASSERT_EQ(0, sigaltstack(&ss, nullptr));
        storm_on_this_thread(kind, SA_ONSTACK);
        ss.ss_flags = SS_DISABLE;
        sigaltstack(&ss, nullptr);
    }).join();
}

// The thread's stack below its sigaltstack (static stack memory, mmap'd sigaltstack).
alignas(64) char low_thread_stack[1 << 20];

TEST_P(signals, handler_on_a_sigaltstack_above_the_thread_stack)
{
    static probe_kind kind;
    kind = GetParam();
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    ASSERT_EQ(0, pthread_attr_setstack(&attr, low_thread_stack, sizeof low_thread_stack));
    pthread_t th;
    ASSERT_EQ(0, pthread_create(
                     &th, &attr,
                     [](void *) -> void * {
                         const size_t size = 256 * 1024;
                         void *alt = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                         EXPECT_NE(MAP_FAILED, alt);
                         EXPECT_GT(reinterpret_cast<uintptr_t>(alt),
                                   reinterpret_cast<uintptr_t>(low_thread_stack));
                         stack_t ss = {};
                         ss.ss_sp = alt;
                         ss.ss_size = size;
                         EXPECT_EQ(0, sigaltstack(&ss, nullptr));
                         storm_on_this_thread(kind, SA_ONSTACK);
                         ss.ss_flags = SS_DISABLE;
                         sigaltstack(&ss, nullptr);
                         munmap(alt, size);
                         return nullptr;
                     },
                     nullptr));
    pthread_join(th, nullptr);
    pthread_attr_destroy(&attr);
}

// Handlers that leave with siglongjmp, abandoning whatever they interrupted: probed
// functions, their trampolines, dprobe's own code. The thread keeps being traced exactly,
// and the probe can be removed.
sigjmp_buf storm_env;
std::atomic<long> jumps;
void on_signal_jump(int)
{
    on_signal(0);
    if (handler_calls.load() % 8 == 0) {
        jumps.fetch_add(1);
        siglongjmp(storm_env, 1);
    }
}

__attribute__((noinline)) long storm_with_jumps(long n)
{
    static long i;
    static long bad;
    i = 0;
    bad = 0;
    // The jump buffer is set up before any signal can use it, and no signal comes once
    // this frame is gone.
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    {
        signal_storm storm(SIGUSR1);
        sigsetjmp(storm_env, 0);
        // (After a jump out of the handler SIGUSR1 is still blocked, as in the handler.)
        pthread_sigmask(SIG_UNBLOCK, &usr1, nullptr);
        for (; i < n || jumps.load(std::memory_order_relaxed) < 100; ++i)
            if (middle(i) != 3 * i + 3) ++bad;
        pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    }
    install(SIG_IGN, 0); // a signal still pending is discarded
    pthread_sigmask(SIG_UNBLOCK, &usr1, nullptr);
    return bad;
}

TEST_P(signals, handlers_leaving_with_siglongjmp)
{
    for (int altstack = 0; altstack < 2; ++altstack) {
        SCOPED_TRACE(altstack ? "on a sigaltstack" : "on the thread's stack");
        probe_set ps(GetParam(),
                     {{"sig_middle", (void *)sig_middle}, {"sig_leaf", (void *)sig_leaf}});
        ps.expect_values("sig_middle", model_middle);
        ps.expect_values("sig_leaf", model_leaf);
        stack_t ss = {};
        if (altstack) {
            ss.ss_sp = low_altstack;
            ss.ss_size = sizeof low_altstack;
            ASSERT_EQ(0, sigaltstack(&ss, nullptr));
        }
        install(on_signal_jump, altstack ? SA_ONSTACK : 0);
        handler_calls = handler_bad = jumps = 0;
        ASSERT_EQ(0, ps.attach());
        {
            watchdog w("signal storm with siglongjmp");
            EXPECT_EQ(0, storm_with_jumps(50000));
        }
        EXPECT_GE(jumps.load(), 100);
        EXPECT_EQ(0, handler_bad.load());
        EXPECT_EQ(0, ps.bad_values());
        // Whatever was abandoned, the thread is traced exactly afterwards.
        ps.reset_counts();
        for (long i = 0; i < 1000; ++i)
            EXPECT_EQ(3 * i + 3, middle(i));
        EXPECT_EQ(2000, ps.total_entries());
        EXPECT_EQ(2000, ps.total_exits());
        EXPECT_EQ(0u, shadow_depth());
        {
            watchdog w("unregistering after siglongjmps");
            ps.detach();
        }
        if (altstack) {
            ss.ss_flags = SS_DISABLE;
            sigaltstack(&ss, nullptr);
        }
    }
}

// --- The program's own SIGTRAP handler -----------------------------------------------------

std::atomic<int> own_traps, own_trap_kernel;
void on_own_trap(int, siginfo_t *info, void *)
{
    own_traps.fetch_add(1);
    if (info->si_code == SI_KERNEL) own_trap_kernel.fetch_add(1);
}

std::atomic<int> kprobe_hits;
int count_pre(struct kprobe *, struct pt_regs *)
{
    kprobe_hits.fetch_add(1);
    return 0;
}
void count_post(struct kprobe *, struct pt_regs *, unsigned long) {}

TEST_P(signals, program_sigtrap_handler_with_int3_probes_armed)
{
    struct sigaction mine = {}, old = {};
    mine.sa_sigaction = on_own_trap;
    mine.sa_flags = SA_SIGINFO;
    sigemptyset(&mine.sa_mask);
    // Installed before dprobe takes SIGTRAP over.
    ASSERT_EQ(0, sigaction(SIGTRAP, &mine, nullptr));
    const pid_t ppid = getppid();
    probe_set ps(GetParam(), {{"sig_middle", (void *)sig_middle}});
    ASSERT_EQ(0, ps.attach());
    // An int3 kprobe (a post handler keeps it from being optimized into a jump).
    struct kprobe kp = {};
    kp.symbol_name = "getppid";
    kp.pre_handler = count_pre;
    kp.post_handler = count_post;
    ASSERT_EQ(0, register_kprobe(&kp));
    ASSERT_FALSE(kprobe_optimized(&kp));
    for (int round = 0; round < 2; ++round) {
        own_traps = own_trap_kernel = kprobe_hits = 0;
        EXPECT_EQ(0, raise(SIGTRAP));
        EXPECT_EQ(8, own_int3(7)); // the program's int3, in a probed-file function
        EXPECT_EQ(ppid, getppid());
        EXPECT_EQ(12, middle(3));
        EXPECT_EQ(2, own_traps.load());
        EXPECT_EQ(1, own_trap_kernel.load());
        EXPECT_EQ(1, kprobe_hits.load());
        // Installed while dprobe owns SIGTRAP: replaces the program's, not dprobe's, and
        // sigaction reports the program's previous handler.
        ASSERT_EQ(0, sigaction(SIGTRAP, &mine, &old));
        EXPECT_EQ(reinterpret_cast<void *>(on_own_trap),
                  reinterpret_cast<void *>(old.sa_sigaction));
    }
    unregister_kprobe(&kp);
    ps.detach();
    EXPECT_EQ(2, ps.exits("sig_middle"));
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTRAP, &dfl, nullptr);
}

INSTANTIATE_TEST_SUITE_P(kinds, signals,
                         ::testing::Values(probe_kind::fprobe, probe_kind::kretprobe),
                         [](const auto &info) { return std::string(rel::kind_name(info.param)); });

} // namespace
