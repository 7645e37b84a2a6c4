// The kernel's fprobe_test KUnit suite (lib/tests/test_fprobe.c), case by case, plus
// user-space specifics. Targets are built with patch sites in every flavour.
#include "targets.h"

#include "core/ftrace.h"
#include "core/task_ctx.h"

#include <dprobe/fprobe.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

namespace
{

using target_fn = unsigned (*)(unsigned);
volatile target_fn target = fprobe_selftest_target;
volatile target_fn target2 = fprobe_selftest_target2;
volatile target_fn recursed = fprobe_recursed_target;

unsigned long target_ip, target2_ip;
unsigned rand1;
unsigned long entry_val, exit_val;
int entry_return_value;
bool bad_ip, bad_data, bad_retval;

unsigned long site_ip(void *fn)
{
    dprobe::ftrace_update_objects();
    dprobe::ftrace_site *s = dprobe::ftrace_location(reinterpret_cast<uintptr_t>(fn));
    return s ? s->ip : 0;
}

int fp_entry_handler(struct fprobe *fp, unsigned long ip, unsigned long, struct ftrace_regs *,
                     void *data)
{
    if (ip != target_ip && ip != target2_ip) bad_ip = true;
    entry_val = rand1 / DIV_FACTOR;
    if (fp->entry_data_size) {
        if (!data)
            bad_data = true;
        else if (entry_return_value == 0)
            *static_cast<unsigned *>(data) = static_cast<unsigned>(entry_val);
    } else if (data) {
        bad_data = true;
    }
    return entry_return_value;
}

void fp_exit_handler(struct fprobe *fp, unsigned long ip, unsigned long, struct ftrace_regs *fregs,
                     void *data)
{
    unsigned long ret = ftrace_regs_get_return_value(fregs);
    if (ip != target_ip && ip != target2_ip) bad_ip = true;
    if (ip == target_ip && ret != rand1 / DIV_FACTOR) bad_retval = true;
    if (ip == target2_ip && ret != rand1 / DIV_FACTOR + 1) bad_retval = true;
    if (entry_val != rand1 / DIV_FACTOR) bad_retval = true;
    exit_val = entry_val + 3;
    if (fp->entry_data_size) {
        if (!data || *static_cast<unsigned *>(data) != rand1 / DIV_FACTOR) bad_data = true;
    } else if (data) {
        bad_data = true;
    }
}

class fprobe_test : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        target_ip = site_ip(reinterpret_cast<void *>(fprobe_selftest_target));
        target2_ip = site_ip(reinterpret_cast<void *>(fprobe_selftest_target2));
        ASSERT_NE(target_ip, 0UL) << "no patch site found in fprobe_selftest_target";
        ASSERT_NE(target2_ip, 0UL);
        std::srand(static_cast<unsigned>(std::time(nullptr)));
        rand1 = 3 + static_cast<unsigned>(std::rand() % 100000);
        entry_val = exit_val = 0;
        entry_return_value = 0;
        bad_ip = bad_data = bad_retval = false;
    }
    void TearDown() override
    {
        EXPECT_FALSE(bad_ip);
        EXPECT_FALSE(bad_data);
        EXPECT_FALSE(bad_retval);
    }
};

TEST_F(fprobe_test, test_fprobe_entry)
{
    struct fprobe fp_entry = {};
    fp_entry.entry_handler = fp_entry_handler;
    // Before registration, unregister fails.
    EXPECT_NE(0, unregister_fprobe(&fp_entry));
    ASSERT_EQ(0, register_fprobe(&fp_entry, "fprobe_selftest_target*", nullptr));

    entry_val = 0;
    exit_val = 0;
    target(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(0UL, exit_val);

    entry_val = 0;
    exit_val = 0;
    target2(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(0UL, exit_val);

    EXPECT_EQ(0, unregister_fprobe(&fp_entry));
}

TEST_F(fprobe_test, test_fprobe)
{
    struct fprobe fp = {};
    fp.entry_handler = fp_entry_handler;
    fp.exit_handler = fp_exit_handler;
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_selftest_target*", nullptr));

    target(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(entry_val + 3, exit_val);

    entry_val = exit_val = 0;
    target2(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(entry_val + 3, exit_val);

    EXPECT_EQ(0, unregister_fprobe(&fp));
    EXPECT_EQ(0UL, fp.nmissed);
}

TEST_F(fprobe_test, test_fprobe_syms)
{
    const char *syms[] = {"fprobe_selftest_target2", "fprobe_selftest_target"};
    struct fprobe fp = {};
    fp.entry_handler = fp_entry_handler;
    fp.exit_handler = fp_exit_handler;
    ASSERT_EQ(0, register_fprobe_syms(&fp, syms, 2));
    // The kernel sorts the caller's array in place.
    EXPECT_STREQ("fprobe_selftest_target", syms[0]);

    target(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(entry_val + 3, exit_val);
    entry_val = exit_val = 0;
    target2(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(entry_val + 3, exit_val);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

TEST_F(fprobe_test, test_fprobe_data)
{
    struct fprobe fp = {};
    fp.entry_handler = fp_entry_handler;
    fp.exit_handler = fp_exit_handler;
    fp.entry_data_size = sizeof(unsigned);
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_selftest_target", nullptr));
    EXPECT_EQ(sizeof(long), fp.entry_data_size) << "rounded up to a multiple of long";

    target(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(entry_val + 3, exit_val);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

TEST_F(fprobe_test, test_fprobe_skip)
{
    struct fprobe fp = {};
    fp.entry_handler = fp_entry_handler;
    fp.exit_handler = fp_exit_handler;
    entry_return_value = 1;
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_selftest_target", nullptr));

    target(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(0UL, exit_val);
    EXPECT_EQ(0UL, fp.nmissed) << "a skipped exit is not a miss";
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

int entry_only_count, entry_count, exit_count;

int multi_entry(struct fprobe *fp, unsigned long ip, unsigned long pip, struct ftrace_regs *r,
                void *d)
{
    ++entry_count;
    return fp_entry_handler(fp, ip, pip, r, d);
}
int multi_entry_only(struct fprobe *, unsigned long ip, unsigned long, struct ftrace_regs *, void *)
{
    if (ip != target_ip) bad_ip = true;
    ++entry_only_count;
    return 0;
}
void multi_exit(struct fprobe *fp, unsigned long ip, unsigned long rip, struct ftrace_regs *r,
                void *d)
{
    ++exit_count;
    fp_exit_handler(fp, ip, rip, r, d);
}

void run_multi(bool fp1_first)
{
    struct fprobe fp1 = {}, fp2 = {};
    fp1.entry_handler = multi_entry;
    fp1.exit_handler = multi_exit;
    fp2.entry_handler = multi_entry_only;
    entry_only_count = entry_count = exit_count = 0;
    if (fp1_first) {
        ASSERT_EQ(0, register_fprobe(&fp1, "fprobe_selftest_target", nullptr));
        ASSERT_EQ(0, register_fprobe(&fp2, "fprobe_selftest_target", nullptr));
    } else {
        ASSERT_EQ(0, register_fprobe(&fp2, "fprobe_selftest_target", nullptr));
        ASSERT_EQ(0, register_fprobe(&fp1, "fprobe_selftest_target", nullptr));
    }
    target(rand1);
    EXPECT_EQ(1, entry_only_count);
    EXPECT_EQ(1, entry_count);
    EXPECT_EQ(1, exit_count);
    EXPECT_EQ(entry_val + 3, exit_val);
    EXPECT_EQ(0, unregister_fprobe(&fp1));
    EXPECT_EQ(0, unregister_fprobe(&fp2));
}

TEST_F(fprobe_test, test_fprobe_multi)
{
    run_multi(true);
    run_multi(false);
}

// --- beyond the KUnit suite: the API's error results ---

TEST_F(fprobe_test, errors_match_the_kernel)
{
    struct fprobe fp = {};
    fp.entry_handler = fp_entry_handler;
    EXPECT_EQ(-EINVAL, register_fprobe(nullptr, "x", nullptr));
    EXPECT_EQ(-EINVAL, register_fprobe(&fp, nullptr, nullptr));
    EXPECT_EQ(-ENOENT, register_fprobe(&fp, "no_such_function_anywhere_*", nullptr));
    EXPECT_EQ(-ENOENT, register_fprobe(&fp, "fprobe_selftest_target*", "fprobe_selftest*"));
    unsigned long bogus = 1;
    EXPECT_EQ(-ENOENT, register_fprobe_ips(&fp, &bogus, 1));
    EXPECT_EQ(-EINVAL, register_fprobe_ips(&fp, &bogus, 0));
    const char *missing[] = {"fprobe_selftest_target", "not_a_symbol_at_all"};
    EXPECT_EQ(-ENOENT, register_fprobe_syms(&fp, missing, 2));
    fp.entry_data_size = MAX_FPROBE_DATA_SIZE + 1;
    fp.exit_handler = fp_exit_handler;
    EXPECT_EQ(-E2BIG, register_fprobe(&fp, "fprobe_selftest_target", nullptr));
    fp.entry_data_size = MAX_FPROBE_DATA_SIZE;
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_selftest_target", nullptr));
    EXPECT_TRUE(fprobe_is_registered(&fp));
    EXPECT_EQ(-EEXIST, register_fprobe(&fp, "fprobe_selftest_target", nullptr));
    EXPECT_EQ(0, unregister_fprobe(&fp));
    EXPECT_FALSE(fprobe_is_registered(&fp));
    EXPECT_EQ(-EINVAL, unregister_fprobe(&fp));
    EXPECT_EQ(2, fprobe_count_ips_from_filter("fprobe_selftest_target*", nullptr));
}

TEST_F(fprobe_test, disabled_fprobe_skips_handlers_and_exit)
{
    struct fprobe fp = {};
    fp.entry_handler = fp_entry_handler;
    fp.exit_handler = fp_exit_handler;
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_selftest_target", nullptr));
    disable_fprobe(&fp);
    EXPECT_TRUE(fprobe_disabled(&fp));
    target(rand1);
    EXPECT_EQ(0UL, entry_val);
    EXPECT_EQ(0UL, exit_val);
    enable_fprobe(&fp);
    target(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(entry_val + 3, exit_val);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// An fprobe disabled between the entry and the return of a call gets no exit call.
struct fprobe *disable_me;
int disabling_entry(struct fprobe *fp, unsigned long ip, unsigned long pip, struct ftrace_regs *r,
                    void *d)
{
    int ret = fp_entry_handler(fp, ip, pip, r, d);
    disable_fprobe(disable_me);
    return ret;
}

TEST_F(fprobe_test, no_exit_after_disable_during_call)
{
    struct fprobe fp = {};
    fp.entry_handler = disabling_entry;
    fp.exit_handler = fp_exit_handler;
    disable_me = &fp;
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_selftest_target", nullptr));
    target(rand1);
    EXPECT_NE(0UL, entry_val);
    EXPECT_EQ(0UL, exit_val);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// A handler that calls a probed function does not recurse: the nested hit is a miss.
int recursing_calls;
int recursing_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++recursing_calls;
    recursed(rand1); // probed by the same fprobe
    return 0;
}
void recursing_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    recursed(rand1);
}

TEST_F(fprobe_test, recursion_counts_nmissed)
{
    struct fprobe fp = {};
    fp.entry_handler = recursing_entry;
    fp.exit_handler = recursing_exit;
    recursing_calls = 0;
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_recursed_target", nullptr));
    EXPECT_EQ(rand1 / DIV_FACTOR, recursed(rand1));
    EXPECT_EQ(1, recursing_calls);
    EXPECT_EQ(2UL, fp.nmissed); // one from the entry handler, one from the exit handler
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

// The shadow stack overflows into nmissed, never into a crash.
unsigned long deep_exits;
int deep_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    return 0;
}
void deep_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    ++deep_exits;
}

TEST_F(fprobe_test, shadow_stack_overflow_is_a_miss)
{
    struct fprobe fp = {};
    fp.entry_handler = deep_entry;
    fp.exit_handler = deep_exit;
    fp.entry_data_size = MAX_FPROBE_DATA_SIZE;
    ASSERT_EQ(0, register_fprobe(&fp, "fprobe_selftest_target", nullptr));
    // Fill this thread's shadow stack with frames of a fake deeper caller, then call.
    dprobe::task_ctx *t = dprobe::current_task_ctx();
    ASSERT_NE(nullptr, t);
    uint32_t saved = t->shadow_top;
    t->shadow_top = dprobe::shadow_stack_words - 4;
    // The fake top frame must not look stale: give it a retp far up the stack.
    t->shadow[t->shadow_top - 1] = 4;
    t->shadow[t->shadow_top - 4 + dprobe::sf_retp] = ~0UL;
    deep_exits = 0;
    EXPECT_EQ(rand1 / DIV_FACTOR, target(rand1));
    t->shadow_top = saved;
    EXPECT_EQ(0UL, deep_exits);
    EXPECT_EQ(1UL, fp.nmissed);
    EXPECT_EQ(0, unregister_fprobe(&fp));
}

} // namespace
