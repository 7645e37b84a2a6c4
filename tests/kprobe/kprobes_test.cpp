// The kernel's kprobes_test KUnit suite (lib/tests/test_kprobes.c), case by case. The targets
// are built plain (int3 probes) and with -pg -mfentry (probes ride on the patch sites), and
// each flavour runs every case. Handlers run in signal context or inside dispatch: they only
// record what they saw; the test body checks it afterwards.
#include "targets.h"

#include "kprobe/kprobe_internal.h"

#include <dprobe/kprobes.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <execinfo.h>

namespace
{

using target_fn = unsigned (*)(unsigned);
volatile target_fn target = kprobe_target;
volatile target_fn target2 = kprobe_target2;
volatile target_fn recursed_target = kprobe_recursed_target;
unsigned long (*volatile stacktrace_driver)(void) = kprobe_stacktrace_driver;

unsigned rand1;
unsigned preh_val, posth_val;
bool handler_not_running; // a handler found kprobe_running() != its probe

#define KP_CLEAR(p)                                                                                \
    do {                                                                                           \
        (p).addr = nullptr;                                                                        \
        (p).flags = 0;                                                                             \
    } while (0)

int kp_pre_handler(struct kprobe *p, struct pt_regs *regs)
{
    if (kprobe_running() != p) handler_not_running = true;
    preh_val = recursed_target(rand1);
    (void)regs;
    return 0;
}

void kp_post_handler(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
    if (kprobe_running() != p) handler_not_running = true;
    unsigned expval = recursed_target(rand1);
    if (preh_val != expval) handler_not_running = true;
    posth_val = preh_val + DIV_FACTOR;
    (void)regs;
    (void)flags;
}

struct kprobe kp = {
    .symbol_name = "kprobe_target", .pre_handler = kp_pre_handler, .post_handler = kp_post_handler};

int kp_pre_handler2(struct kprobe *p, struct pt_regs *regs)
{
    if (kprobe_running() != p) handler_not_running = true;
    preh_val = (rand1 / DIV_FACTOR) + 1;
    (void)regs;
    return 0;
}

void kp_post_handler2(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
    if (kprobe_running() != p) handler_not_running = true;
    if (preh_val != (rand1 / DIV_FACTOR) + 1) handler_not_running = true;
    posth_val = preh_val + DIV_FACTOR;
    (void)regs;
    (void)flags;
}

struct kprobe kp2 = {.symbol_name = "kprobe_target2",
                     .pre_handler = kp_pre_handler2,
                     .post_handler = kp_post_handler2};

int kprobe_missed_handler(struct kprobe *p, struct pt_regs *regs)
{
    if (kprobe_running() != p) handler_not_running = true;
    preh_val = recursed_target(rand1);
    (void)regs;
    return 0;
}

void kprobe_missed_post_handler(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
    if (kprobe_running() != p) handler_not_running = true;
    posth_val = recursed_target(rand1);
    (void)regs;
    (void)flags;
}

struct kprobe kp_missed = {.symbol_name = "kprobe_recursed_target",
                           .pre_handler = kprobe_missed_handler,
                           .post_handler = kprobe_missed_post_handler};

// kretprobes
unsigned krph_val;
bool bad_retval, entry_not_first;

int entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    if (kprobe_running() != &get_kretprobe(ri)->kp) handler_not_running = true;
    krph_val = rand1 / DIV_FACTOR;
    (void)regs;
    return 0;
}

int return_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    unsigned long ret = regs_return_value(regs);
    if (kprobe_running() != &get_kretprobe(ri)->kp) handler_not_running = true;
    if (ret != rand1 / DIV_FACTOR) bad_retval = true;
    if (krph_val == 0) entry_not_first = true;
    krph_val = rand1;
    return 0;
}

struct kretprobe rp = {.kp = {.symbol_name = "kprobe_target"},
                       .handler = return_handler,
                       .entry_handler = entry_handler};

int return_handler2(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    unsigned long ret = regs_return_value(regs);
    if (kprobe_running() != &get_kretprobe(ri)->kp) handler_not_running = true;
    if (ret != (rand1 / DIV_FACTOR) + 1) bad_retval = true;
    if (krph_val == 0) entry_not_first = true;
    krph_val = rand1;
    return 0;
}

struct kretprobe rp2 = {.kp = {.symbol_name = "kprobe_target2"},
                        .handler = return_handler2,
                        .entry_handler = entry_handler};

// Stack traces from return handlers.
constexpr int max_stack = 64;
void *stack_buf[max_stack];
int stack_n;
bool stacktrace_handler_ran, stacktrace_bad_ret, stacktrace_bad_ip, stacktrace_no_retaddr;

bool trace_contains(void *const *buf, int n, unsigned long addr)
{
    for (int i = 0; i < n; ++i)
        if (reinterpret_cast<unsigned long>(buf[i]) == addr) return true;
    return false;
}

int stacktrace_return_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    unsigned long retval = regs_return_value(regs);
    stacktrace_handler_ran = true;
    // The target returns its recorded return address.
    if (retval != target_return_address[1]) stacktrace_bad_ret = true;
    if (regs->ip != target_return_address[1] || get_kretprobe_retaddr(ri) != regs->ip)
        stacktrace_bad_ip = true;
    stack_n = backtrace(stack_buf, max_stack);
    if (!trace_contains(stack_buf, stack_n, target_return_address[1])) stacktrace_no_retaddr = true;
    return 0;
}

struct kretprobe rp3 = {.kp = {.symbol_name = "kprobe_stacktrace_target"},
                        .handler = stacktrace_return_handler};

bool nested_ran, nested_bad_order, nested_bad_ip;

int stacktrace_internal_return_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    unsigned long retval = regs_return_value(regs);
    nested_ran = true;
    if (retval != target_return_address[0] || regs->ip != target_return_address[0] ||
        get_kretprobe_retaddr(ri) != target_return_address[0])
        nested_bad_ip = true;
    stack_n = backtrace(stack_buf, max_stack);
    // The inner target's return address, immediately followed by the outer target's.
    int i;
    for (i = 0; i < stack_n; ++i)
        if (reinterpret_cast<unsigned long>(stack_buf[i]) == target_return_address[0]) break;
    if (i + 1 >= stack_n ||
        reinterpret_cast<unsigned long>(stack_buf[i + 1]) != target_return_address[1])
        nested_bad_order = true;
    return 0;
}

struct kretprobe rp4 = {.kp = {.symbol_name = "kprobe_stacktrace_internal_target"},
                        .handler = stacktrace_internal_return_handler};

class kprobes_test : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        KP_CLEAR(kp);
        KP_CLEAR(kp2);
        KP_CLEAR(kp_missed);
        KP_CLEAR(rp.kp);
        KP_CLEAR(rp2.kp);
        KP_CLEAR(rp3.kp);
        KP_CLEAR(rp4.kp);
        static bool seeded = [] {
            std::srand(static_cast<unsigned>(std::time(nullptr)));
            return true;
        }();
        (void)seeded;
        do
            rand1 = static_cast<unsigned>(std::rand());
        while (rand1 <= DIV_FACTOR);
        preh_val = posth_val = krph_val = 0;
        handler_not_running = bad_retval = entry_not_first = false;
    }
    void TearDown() override
    {
        EXPECT_FALSE(handler_not_running) << "a handler ran without being the running kprobe";
        EXPECT_EQ(nullptr, kprobe_running());
    }
};

TEST_F(kprobes_test, test_kprobe)
{
    ASSERT_EQ(0, register_kprobe(&kp));
    EXPECT_EQ(reinterpret_cast<kprobe_opcode_t *>(kprobe_target) +
                  (kp.flags & KPROBE_FLAG_ON_FUNC_ENTRY && *(unsigned char *)kprobe_target == 0xf3
                       ? 4
                       : 0),
              kp.addr);
    EXPECT_EQ(rand1 / DIV_FACTOR, target(rand1));
    EXPECT_NE(0u, preh_val);
    EXPECT_NE(0u, posth_val);
    EXPECT_EQ(rand1 / DIV_FACTOR + DIV_FACTOR, posth_val);
    unregister_kprobe(&kp);
    preh_val = posth_val = 0;
    target(rand1);
    EXPECT_EQ(0u, preh_val) << "handler ran after unregister";
}

TEST_F(kprobes_test, test_kprobes)
{
    struct kprobe *kps[2] = {&kp, &kp2};
    ASSERT_EQ(0, register_kprobes(kps, 2));

    EXPECT_EQ(rand1 / DIV_FACTOR, target(rand1));
    EXPECT_NE(0u, preh_val);
    EXPECT_NE(0u, posth_val);

    preh_val = posth_val = 0;
    EXPECT_EQ(rand1 / DIV_FACTOR + 1, target2(rand1));
    EXPECT_NE(0u, preh_val);
    EXPECT_NE(0u, posth_val);
    EXPECT_EQ(rand1 / DIV_FACTOR + 1 + DIV_FACTOR, posth_val);
    unregister_kprobes(kps, 2);
}

TEST_F(kprobes_test, test_kprobe_missed)
{
    ASSERT_EQ(0, register_kprobe(&kp_missed));
    recursed_target(rand1);
    EXPECT_EQ(2u, kp_missed.nmissed);
    EXPECT_NE(0u, preh_val);
    EXPECT_NE(0u, posth_val);
    unregister_kprobe(&kp_missed);
}

TEST_F(kprobes_test, test_kretprobe)
{
    ASSERT_EQ(0, register_kretprobe(&rp));
    EXPECT_EQ(rand1 / DIV_FACTOR, target(rand1));
    unregister_kretprobe(&rp);
    EXPECT_EQ(rand1, krph_val);
    EXPECT_FALSE(bad_retval);
    EXPECT_FALSE(entry_not_first);
}

TEST_F(kprobes_test, test_kretprobes)
{
    struct kretprobe *rps[2] = {&rp, &rp2};
    ASSERT_EQ(0, register_kretprobes(rps, 2));

    krph_val = 0;
    EXPECT_EQ(rand1 / DIV_FACTOR, target(rand1));
    EXPECT_EQ(rand1, krph_val);

    krph_val = 0;
    EXPECT_EQ(rand1 / DIV_FACTOR + 1, target2(rand1));
    EXPECT_EQ(rand1, krph_val);
    unregister_kretprobes(rps, 2);
    EXPECT_FALSE(bad_retval);
    EXPECT_FALSE(entry_not_first);
}

TEST_F(kprobes_test, test_stacktrace_on_kretprobe)
{
    // Run unprobed first: the target records its real return address (inside the driver).
    target_return_address[0] = target_return_address[1] = 0;
    internal_target = nullptr;
    unsigned long myretaddr = stacktrace_driver();
    ASSERT_EQ(myretaddr, target_return_address[1]);
    ASSERT_GT(myretaddr, reinterpret_cast<unsigned long>(kprobe_stacktrace_driver));

    stacktrace_handler_ran = stacktrace_bad_ret = stacktrace_bad_ip = stacktrace_no_retaddr = false;
    ASSERT_EQ(0, register_kretprobe(&rp3));
    EXPECT_EQ(myretaddr, stacktrace_driver());
    unregister_kretprobe(&rp3);
    EXPECT_TRUE(stacktrace_handler_ran);
    EXPECT_FALSE(stacktrace_bad_ret);
    EXPECT_FALSE(stacktrace_bad_ip);
    EXPECT_FALSE(stacktrace_no_retaddr)
        << "backtrace() from the handler lacks the real return address";
}

TEST_F(kprobes_test, test_stacktrace_on_nested_kretprobe)
{
    target_return_address[0] = target_return_address[1] = 0;
    internal_target = kprobe_stacktrace_internal_target;
    unsigned long myretaddr = stacktrace_driver();
    ASSERT_EQ(myretaddr, target_return_address[1]);
    ASSERT_NE(0u, target_return_address[0]);

    struct kretprobe *rps[2] = {&rp3, &rp4};
    stacktrace_handler_ran = stacktrace_bad_ret = stacktrace_bad_ip = stacktrace_no_retaddr = false;
    nested_ran = nested_bad_order = nested_bad_ip = false;
    ASSERT_EQ(0, register_kretprobes(rps, 2));
    EXPECT_EQ(myretaddr, stacktrace_driver());
    unregister_kretprobes(rps, 2);
    internal_target = nullptr;
    EXPECT_TRUE(nested_ran);
    EXPECT_TRUE(stacktrace_handler_ran);
    EXPECT_FALSE(nested_bad_ip);
    EXPECT_FALSE(nested_bad_order)
        << "backtrace() from the inner handler: inner return address not followed by the outer one";
    EXPECT_FALSE(stacktrace_no_retaddr);
}

// --- user-space specifics of the same fixtures ------------------------------------------------

#ifdef KPROBES_TEST_SITES
constexpr bool with_sites = true;
#else
constexpr bool with_sites = false;
#endif

int count_pre(struct kprobe *, struct pt_regs *)
{
    ++preh_val;
    return 0;
}

TEST_F(kprobes_test, entry_probe_mechanism_matches_the_flavour)
{
    struct kprobe p = {};
    p.symbol_name = "kprobe_target";
    p.pre_handler = count_pre;
    ASSERT_EQ(0, register_kprobe(&p));
    EXPECT_TRUE(p.flags & KPROBE_FLAG_ON_FUNC_ENTRY);
    const unsigned long traps = dprobe::kp::stats().int3_hits.load();
    for (int i = 0; i < 10; ++i)
        EXPECT_EQ(rand1 / DIV_FACTOR, target(rand1));
    EXPECT_EQ(10u, preh_val);
    if (with_sites) {
        EXPECT_TRUE(p.flags & KPROBE_FLAG_FTRACE);
        EXPECT_EQ(traps, dprobe::kp::stats().int3_hits.load()) << "a probe on a site trapped";
    } else {
        EXPECT_FALSE(p.flags & KPROBE_FLAG_FTRACE);
        // Jump-optimized (the default when the entry region allows it): no trap at all.
        EXPECT_EQ(traps + (kprobe_optimized(&p) ? 0 : 10), dprobe::kp::stats().int3_hits.load());
    }
    unregister_kprobe(&p);
}

struct kretprobe rp_max;
std::atomic<int> max_entries, max_returns;
int skip_entries_below; // entry handler discards activations with depth < this

int max_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    ++max_entries;
    *reinterpret_cast<unsigned long *>(ri->data) = regs->di; // the depth argument
    return regs->di < static_cast<unsigned long>(skip_entries_below) ? 1 : 0;
}

int max_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    // Each activation returns its depth and sees the data its entry stored.
    if (*reinterpret_cast<unsigned long *>(ri->data) != regs_return_value(regs)) bad_retval = true;
    ++max_returns;
    return 0;
}

unsigned long (*volatile recurse)(unsigned long) = kprobe_recursive_target;

// kretprobe_example: activations beyond maxactive in flight count in nmissed; an entry
// handler's discard does not.
TEST_F(kprobes_test, kretprobe_maxactive_counts_missed)
{
    rp_max = {};
    rp_max.kp.symbol_name = "kprobe_recursive_target";
    rp_max.entry_handler = max_entry;
    rp_max.handler = max_return;
    rp_max.maxactive = 3;
    rp_max.data_size = sizeof(unsigned long);
    max_entries = max_returns = 0;
    skip_entries_below = 0;
    ASSERT_EQ(0, register_kretprobe(&rp_max));
    EXPECT_EQ(7u, recurse(7)); // 8 activations (7..0), 3 at most in flight
    EXPECT_EQ(5, rp_max.nmissed);
    EXPECT_EQ(3, max_entries.load());
    EXPECT_EQ(3, max_returns.load());
    // Sequential calls never exceed maxactive.
    for (int i = 0; i < 4; ++i)
        recurse(1);
    EXPECT_EQ(5, rp_max.nmissed);
    EXPECT_EQ(3 + 8, max_returns.load());
    // Discarded activations (the deepest 6) free their instance and are not missed.
    skip_entries_below = 6;
    max_entries = max_returns = 0;
    recurse(7);
    EXPECT_EQ(5, rp_max.nmissed);
    EXPECT_EQ(8, max_entries.load());
    EXPECT_EQ(2, max_returns.load());
    unregister_kretprobe(&rp_max);
    EXPECT_FALSE(bad_retval);
}

TEST_F(kprobes_test, kretprobe_data_size_limit)
{
    struct kretprobe big = {};
    big.kp.symbol_name = "kprobe_recursive_target";
    big.handler = max_return;
    big.data_size = KRETPROBE_MAX_DATA_SIZE + 1;
    EXPECT_EQ(-E2BIG, register_kretprobe(&big));
    big.data_size = KRETPROBE_MAX_DATA_SIZE;
    big.kp.addr = nullptr;
    big.entry_handler = max_entry;
    max_returns = 0;
    skip_entries_below = 0;
    ASSERT_EQ(0, register_kretprobe(&big));
    EXPECT_EQ(3u, recurse(3));
    EXPECT_EQ(4, max_returns.load());
    unregister_kretprobe(&big);
    // Not at a function entry.
    struct kretprobe mid = {};
    mid.kp.symbol_name = "kprobe_target";
    mid.kp.offset = 1;
    mid.handler = max_return;
    EXPECT_EQ(-EINVAL, register_kretprobe(&mid));
}

} // namespace
