// The grammar of ftrace's control files in the tracefs tree: current_tracer,
// set_ftrace_filter / set_ftrace_notrace (globs, line numbers, lib:glob, :mod:, '!',
// appends, O_TRUNC, the function commands and how they read back), set_graph_function,
// the pid files, trace_options and options/, max_graph_depth, tracing_thresh,
// saved_cmdlines_size: accepted and rejected writes (with the kernel's errno), and the
// read-back text.
#include "ftrace_test_util.h"

#include "tracefs/ftrace_filter.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int ff_alpha(int a)
{
    return a + 1;
}
TARGET int ff_beta(int a)
{
    return a + 2;
}
TARGET int ff_beta_two(int a)
{
    return a + 3;
}
TARGET int ff_gamma(int a)
{
    return ff_alpha(a) + ff_beta(a);
}
TARGET int ff_delta(int a)
{
    return a + 4;
}
// One function, two names (as glibc's fileno and fileno_unlocked): ff_delta is the one name.
extern "C" int ff_delta_alias(int) noexcept __attribute__((alias("ff_delta")));

using namespace ftt;

namespace
{

class ftrace_filter : public ::testing::Test
{
  protected:
    void SetUp() override { reset_ftrace(); }
    void TearDown() override { reset_ftrace(); }
};

} // namespace

TEST_F(ftrace_filter, tracers_listed_and_switched)
{
    EXPECT_EQ(rd("available_tracers"), "function_graph function nop\n");
    EXPECT_EQ(rd("current_tracer"), "nop\n");
    EXPECT_EQ(wr("current_tracer", "function"), 0);
    EXPECT_EQ(rd("current_tracer"), "function\n");
    EXPECT_EQ(wr("current_tracer", "function_graph\n"), 0);
    EXPECT_EQ(rd("current_tracer"), "function_graph\n");
    EXPECT_EQ(wr("current_tracer", "blk"), -EINVAL);
    EXPECT_EQ(rd("current_tracer"), "function_graph\n"); // a bad write changes nothing
    EXPECT_EQ(wr("current_tracer", "nop"), 0);
    EXPECT_EQ(rd("current_tracer"), "nop\n");
}

TEST_F(ftrace_filter, globs_append_remove_and_truncate)
{
    EXPECT_EQ(rd("set_ftrace_filter"), "#### all functions enabled ####\n");
    EXPECT_EQ(rd("set_ftrace_notrace"), "#### no functions disabled ####\n");
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta*", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_beta\nff_beta_two\n");
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha"), 0); // >> appends
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_alpha\nff_beta\nff_beta_two\n");
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_beta_two"), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_alpha\nff_beta\n");
    // Several tokens in one write, and a '?' and a class.
    EXPECT_EQ(wr("set_ftrace_filter", "ff_gamm? ff_[b]eta_two", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_beta_two\nff_gamma\n");
    // A glob that matches nothing: EINVAL, as the kernel (what came before it stays).
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha ff_nosuch*"), -EINVAL);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_alpha\nff_beta_two\nff_gamma\n");
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_nosuch"), -EINVAL);
    // echo > set_ftrace_filter: O_TRUNC empties it.
    EXPECT_EQ(wr("set_ftrace_filter", "", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "#### all functions enabled ####\n");
    EXPECT_EQ(wr("set_ftrace_notrace", "ff_alpha", true), 0);
    EXPECT_EQ(rd("set_ftrace_notrace"), "ff_alpha\n");
}

TEST_F(ftrace_filter, line_numbers_of_available_filter_functions)
{
    auto avail = lines(rd("available_filter_functions"));
    size_t n = 0;
    for (size_t i = 0; i < avail.size(); i++)
        if (avail[i] == "ff_gamma") n = i + 1;
    ASSERT_NE(n, 0u);
    EXPECT_EQ(wr("set_ftrace_filter", std::to_string(n) + " ", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_gamma\n");
    EXPECT_EQ(wr("set_ftrace_filter", "0"), -EINVAL); // lines count from 1
    EXPECT_EQ(wr("set_ftrace_filter", std::to_string(avail.size() + 1)), -EINVAL);
}

TEST_F(ftrace_filter, available_lists_what_a_glob_selects)
{
    // The kernel's contract (selftests ftrace/func-filter-glob.tc, func_set_ftrace_file.tc):
    // a glob selects exactly the lines of available_filter_functions it matches, library
    // functions without a compiled-in site included, before anything selected them.
    std::string want;
    for (const std::string &l : lines(rd("available_filter_functions")))
        if (l.starts_with("pthread_spin_")) want += l + "\n";
    ASSERT_TRUE(has(want, "pthread_spin_lock [libc.so.6]\n")) << want;
    EXPECT_EQ(wr("set_ftrace_filter", "pthread_spin_*", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), want);
    // A command on the same glob covers the same functions.
    EXPECT_EQ(wr("set_ftrace_filter", "pthread_spin_*:traceoff", true), 0);
    std::string cmds;
    for (const std::string &l : lines(rd("set_ftrace_filter")))
        if (has(l, ":traceoff:unlimited")) cmds += l.substr(0, l.find(':')) + "\n";
    std::string names;
    for (const std::string &l : lines(want))
        names += l.substr(0, l.find(' ')) + "\n";
    EXPECT_EQ(cmds, names);
    EXPECT_EQ(wr("set_ftrace_filter", "!pthread_spin_*:traceoff"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "", true), 0);
}

TEST_F(ftrace_filter, tokens_split_across_writes)
{
    // `cat list > set_ftrace_filter` may cut a name between two write() calls: the kernel's
    // parser keeps the piece until the next write (or the close).
    std::unique_ptr<dprobe::tracefs_file> f;
    ASSERT_EQ(T.open("set_ftrace_filter", O_WRONLY | O_TRUNC, f), 0);
    EXPECT_EQ(f->write("ff_al", 5, 0), 5);
    EXPECT_EQ(f->write("pha ff_be", 9, 0), 9);
    EXPECT_EQ(f->write("ta", 2, 0), 2);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_alpha\n"); // ff_beta still pending
    f.reset();                                        // the close applies it
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_alpha\nff_beta\n");
}

TEST_F(ftrace_filter, mod_and_lib_prefix)
{
    // The main program is an object too: both spellings select in it.
    std::string self = rd("available_filter_functions");
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ASSERT_GT(n, 0);
    exe[n] = 0;
    std::string base = std::string(exe).substr(std::string(exe).rfind('/') + 1);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta*:mod:" + base, true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_beta\nff_beta_two\n");
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_beta_two:mod:" + base), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_beta\n");
    EXPECT_EQ(wr("set_ftrace_filter", base + ":ff_alpha"), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_alpha\nff_beta\n");
    // A library not loaded (yet): kept, read back as written, applied when it loads.
    EXPECT_EQ(wr("set_ftrace_filter", "z*:mod:libdprobe_notloaded.so", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "z*:mod:libdprobe_notloaded.so\n");
    EXPECT_EQ(wr("set_ftrace_filter", "!z*:mod:libdprobe_notloaded.so"), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "#### all functions enabled ####\n");
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:mod:"), -EINVAL);
}

TEST_F(ftrace_filter, commands_read_back_as_the_kernel_prints_them)
{
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:traceoff"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta:traceon:5"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_gamma:stacktrace:2"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_gamma:dump"), 0);
    // The filter itself stays empty: commands are not functions to trace.
    EXPECT_EQ(rd("set_ftrace_filter"), "#### all functions enabled ####\n"
                                       "ff_alpha:traceoff:unlimited\n"
                                       "ff_beta:traceon:count=5\n"
                                       "ff_gamma:stacktrace:count=2\n"
                                       "ff_gamma:dump\n");
    // O_TRUNC clears the functions, not the commands.
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta_two", true), 0);
    EXPECT_TRUE(has(rd("set_ftrace_filter"), "ff_beta_two\nff_alpha:traceoff:unlimited\n"));
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_alpha:traceoff"), 0);
    // A counted command is a probe of its own (the kernel's *_count_probe_ops): removed with
    // a parameter, whatever it says (reset_ftrace_filter writes the "count=5" it read).
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_beta:traceon"), -ENODEV);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_beta:traceon:count=5"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_gamma:stacktrace:0"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_gamma:dump"), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_beta_two\n");
    // Rejected: unknown command, bad count, nothing matching, commands in notrace.
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:nosuchcmd"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:traceon:x"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_nosuch:traceon"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:dump:3"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_notrace", "ff_alpha:traceon"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_alpha:traceon"), -ENODEV); // no such command
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_beta_two\n");
}

TEST_F(ftrace_filter, removal_globs_match_the_names_of_the_commands_functions)
{
    // The kernel's unregister_ftrace_function_probe_func(): "!GLOB:CMD" matches GLOB against
    // the functions the command holds, "*" takes them all (func_set_ftrace_file.tc ends with
    // echo '!*:traceoff'), counted and uncounted commands apart.
    ASSERT_EQ(wr("dynamic_events", "f:ffr/eva ff_beta"), 0);
    ASSERT_EQ(wr("dynamic_events", "f:ffr/evb ff_beta"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:traceoff"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta*:traceoff"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_gamma:traceoff:3"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:traceon"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta:stacktrace"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_gamma:snapshot"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:dump"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta:cpudump"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:enable_event:ffr:eva"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_gamma:enable_event:ffr:evb"), 0);
    EXPECT_EQ(rd("events/ffr/eva/enable"), "0*\n");

    EXPECT_EQ(wr("set_ftrace_filter", "!*:traceoff"), 0);
    std::string s = rd("set_ftrace_filter");
    EXPECT_FALSE(has(s, ":traceoff:unlimited")) << s;
    EXPECT_TRUE(has(s, "ff_gamma:traceoff:count=3\n")) << s; // counted: another probe
    EXPECT_TRUE(has(s, "ff_alpha:traceon:unlimited\n")) << s;
    EXPECT_EQ(wr("set_ftrace_filter", "!*:traceoff"), -ENODEV); // none left
    // A glob that matches none of the command's functions: EINVAL, the command stays.
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_beta*:traceoff:0"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_g?mma:traceoff:0"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_nosuch:traceon"), -EINVAL);
    EXPECT_TRUE(has(rd("set_ftrace_filter"), "ff_alpha:traceon:unlimited\n"));
    EXPECT_EQ(wr("set_ftrace_filter", "!*:traceon"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "!*:stacktrace"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "!*:snapshot"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "!*:dump"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "!*:cpudump"), 0);
    // The event commands: the event must exist, but the kernel's probe_ops are one for every
    // event, so the removal takes the command off whichever event it switches.
    EXPECT_EQ(wr("set_ftrace_filter", "!*:enable_event:ffr:nosuch"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_*:enable_event:ffr:eva"), 0);
    EXPECT_EQ(rd("events/ffr/eva/enable"), "0\n");
    EXPECT_EQ(rd("events/ffr/evb/enable"), "0\n");
    EXPECT_EQ(rd("set_ftrace_filter"), "#### all functions enabled ####\n");
    ff_alpha(1); // nothing left to run: tracing stays on
    ff_gamma(1);
    EXPECT_EQ(rd("tracing_on"), "1\n");
}

TEST_F(ftrace_filter, one_name_per_function_in_every_file)
{
    // An address has one name (the kernel's kallsyms gives one): the one
    // available_filter_functions lists, the one a glob is matched against, the one
    // set_ftrace_filter, enabled_functions and the trace print.
    auto avail = lines(rd("available_filter_functions"));
    auto listed = [&](const std::string &n) {
        return std::find(avail.begin(), avail.end(), n) != avail.end();
    };
    EXPECT_TRUE(listed("ff_delta"));
    EXPECT_FALSE(listed("ff_delta_alias"));
    EXPECT_TRUE(listed("fileno [libc.so.6]"));
    EXPECT_FALSE(listed("fileno_unlocked [libc.so.6]"));
    EXPECT_EQ(wr("set_ftrace_filter", "ff_delta_al*", true), -EINVAL); // not its name
    EXPECT_EQ(wr("set_ftrace_filter", "ff_*delta*", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_delta\n");
    // A plain name selects the function it names, listed under its one name.
    EXPECT_EQ(wr("set_ftrace_filter", "ff_delta_alias", true), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "ff_delta\n");
    EXPECT_EQ(wr("set_ftrace_filter", "ff_delta_alias", true), 0);
    EXPECT_EQ(wr("current_tracer", "function"), 0);
    int (*volatile call)(int) = ff_delta_alias; // a call through the alias is not elided
    EXPECT_EQ(call(1), 5);
    std::string en = rd("enabled_functions");
    auto b = body(rd("trace"));
    EXPECT_EQ(wr("current_tracer", "nop"), 0);
    EXPECT_TRUE(en.starts_with("ff_delta ") && !has(en, "alias")) << en;
    ASSERT_EQ(b.size(), 1u) << rd("trace");
    EXPECT_TRUE(has(b[0], ": ff_delta <-")) << b[0];

    // func_set_ftrace_file.tc: a command on *unlock* covers exactly the functions whose
    // available_filter_functions name holds "unlock" (not fileno, whose alias does).
    EXPECT_EQ(wr("set_ftrace_filter", "", true), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "*unlock*:traceoff"), 0);
    std::set<std::string> want, got;
    for (const std::string &l : lines(rd("available_filter_functions")))
        if (has(l.substr(0, l.find(' ')), "unlock")) want.insert(l.substr(0, l.find(' ')));
    for (const std::string &l : lines(rd("set_ftrace_filter")))
        if (has(l, ":traceoff:")) got.insert(l.substr(0, l.find(':')));
    EXPECT_FALSE(got.count("fileno"));
    EXPECT_FALSE(want.empty());
    EXPECT_EQ(got, want);
    EXPECT_EQ(wr("set_ftrace_filter", "!*:traceoff"), 0);
    EXPECT_EQ(rd("set_ftrace_filter"), "#### all functions enabled ####\n");
}

TEST_F(ftrace_filter, traceoff_and_traceon_commands_count_state_changes)
{
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:traceoff:2"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_beta:traceon"), 0);
    EXPECT_EQ(rd("tracing_on"), "1\n");
    ff_alpha(1);
    EXPECT_EQ(rd("tracing_on"), "0\n");
    ff_alpha(1); // already off: not counted
    EXPECT_TRUE(has(rd("set_ftrace_filter"), "ff_alpha:traceoff:count=1\n"));
    ff_beta(1);
    EXPECT_EQ(rd("tracing_on"), "1\n");
    ff_alpha(1);
    EXPECT_EQ(rd("tracing_on"), "0\n");
    EXPECT_TRUE(has(rd("set_ftrace_filter"), "ff_alpha:traceoff:count=0\n"));
    ff_beta(1);
    ff_alpha(1); // used up
    EXPECT_EQ(rd("tracing_on"), "1\n");
}

TEST_F(ftrace_filter, event_commands_hold_the_event_in_soft_mode)
{
    ASSERT_EQ(wr("dynamic_events", "f:ffg/evb ff_beta a=$arg1:s32"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:enable_event:ffg:evb:1"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_gamma:disable_event:ffg:evb"), 0);
    EXPECT_EQ(rd("events/ffg/evb/enable"), "0*\n");
    EXPECT_TRUE(has(rd("set_ftrace_filter"), "ff_alpha:enable_event:ffg:evb:count=1\n"
                                             "ff_gamma:disable_event:ffg:evb:unlimited\n"));
    ff_beta(10); // not recorded: soft-disabled
    ff_alpha(0); // switches it on
    EXPECT_EQ(rd("events/ffg/evb/enable"), "1*\n");
    ff_beta(11);
    ff_gamma(12); // its own ff_beta(12) runs after the disable_event command: not recorded
    EXPECT_EQ(rd("events/ffg/evb/enable"), "0*\n");
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 1u) << rd("trace");
    EXPECT_TRUE(has(b[0], " evb: (ff_beta+0x0/") && has(b[0], ") a=11")) << b[0];
    // In soft mode the event cannot be deleted (it is in use).
    EXPECT_EQ(wr("dynamic_events", "-:ffg/evb"), -EBUSY);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_alpha:enable_event:ffg:evb:0"), 0); // counted
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_gamma:disable_event:ffg:evb"), 0);
    EXPECT_EQ(rd("events/ffg/evb/enable"), "0\n");
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:enable_event:ffg:nosuch"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:enable_event:ffg"), -EINVAL);
}

// func_event_triggers.tc: in soft mode a write of the enable file switches recording (the
// kernel's SOFT_DISABLED bit), whether or not the event's own enable already says so; a
// counted command then switches it back only as often as its count allows.
TEST_F(ftrace_filter, enable_file_switches_an_event_in_soft_mode)
{
    ASSERT_EQ(wr("dynamic_events", "f:ffg/evc ff_beta a=$arg1:s32"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:enable_event:ffg:evc:2"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "0*\n");
    for (int i = 0; i < 3; i++) {
        ff_alpha(0);
        EXPECT_EQ(rd("events/ffg/evc/enable"), i < 2 ? "1*\n" : "0*\n") << i;
        EXPECT_EQ(wr("events/ffg/evc/enable", "0"), 0);
        EXPECT_EQ(rd("events/ffg/evc/enable"), "0*\n") << i;
    }
    EXPECT_TRUE(has(rd("set_ftrace_filter"), "ff_alpha:enable_event:ffg:evc:count=0\n"));
    ff_beta(20); // soft-disabled: not recorded
    EXPECT_EQ(wr("events/ffg/evc/enable", "1"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "1*\n");
    ff_beta(21);
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 1u) << rd("trace");
    EXPECT_TRUE(has(b[0], ") a=21")) << b[0];
    // A disable_event command on an enabled event: "1" turns it back on after it fired.
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_alpha:enable_event:ffg:evc:0"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:disable_event:ffg:evc"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "1*\n");
    ff_alpha(0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "0*\n");
    EXPECT_EQ(wr("events/ffg/evc/enable", "1"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "1*\n");
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_alpha:disable_event:ffg:evc"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "1\n");
    // The last command gone, the event stays as it was switched: disabled after a
    // disable_event fired, enabled after an enable_event fired (the kernel's sm_ref at 0).
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:disable_event:ffg:evc"), 0);
    ff_alpha(0);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_alpha:disable_event:ffg:evc"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "0\n");
    EXPECT_EQ(wr("events/ffg/evc/enable", "1"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "1\n");
    EXPECT_EQ(wr("events/ffg/evc/enable", "0"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "ff_alpha:enable_event:ffg:evc"), 0);
    ff_alpha(0);
    EXPECT_EQ(wr("set_ftrace_filter", "!ff_alpha:enable_event:ffg:evc"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "1\n");
    EXPECT_EQ(wr("events/ffg/evc/enable", "0"), 0);
    EXPECT_EQ(rd("events/ffg/evc/enable"), "0\n");
    EXPECT_EQ(wr("dynamic_events", "-:ffg/evc"), 0);
}

TEST_F(ftrace_filter, graph_function_files)
{
    EXPECT_EQ(rd("set_graph_function"), "#### all functions enabled ####\n");
    EXPECT_EQ(rd("set_graph_notrace"), "#### no functions disabled ####\n");
    EXPECT_EQ(wr("set_graph_function", "ff_gamma"), 0);
    EXPECT_EQ(wr("set_graph_notrace", "ff_beta"), 0);
    EXPECT_EQ(rd("set_graph_function"), "ff_gamma\n");
    EXPECT_EQ(rd("set_graph_notrace"), "ff_beta\n");
    EXPECT_EQ(wr("set_graph_function", "ff_gamma:traceon"), -EINVAL); // no commands here
    EXPECT_EQ(wr("set_graph_function", "ff_nosuch"), -EINVAL);
    EXPECT_EQ(rd("max_graph_depth"), "0\n");
    EXPECT_EQ(wr("max_graph_depth", "3"), 0);
    EXPECT_EQ(rd("max_graph_depth"), "3\n");
    EXPECT_EQ(wr("max_graph_depth", "-1"), -EINVAL);
    EXPECT_EQ(wr("tracing_thresh", "100"), 0); // microseconds
    EXPECT_EQ(rd("tracing_thresh"), "100\n");
    EXPECT_EQ(wr("tracing_thresh", "abc"), -EINVAL);
}

TEST_F(ftrace_filter, pid_files)
{
    EXPECT_EQ(rd("set_ftrace_pid"), "no pid\n");
    EXPECT_EQ(rd("set_ftrace_notrace_pid"), "no pid\n");
    EXPECT_EQ(rd("set_event_pid"), "");
    EXPECT_EQ(wr("set_ftrace_pid", "30 10 20", true), 0);
    EXPECT_EQ(wr("set_ftrace_pid", "20 40"), 0); // appends, no duplicates
    EXPECT_EQ(rd("set_ftrace_pid"), "10\n20\n30\n40\n");
    EXPECT_EQ(wr("set_ftrace_pid", "50 abc"), -EINVAL); // all or nothing
    EXPECT_EQ(wr("set_ftrace_pid", "0"), -EINVAL);
    EXPECT_EQ(wr("set_ftrace_pid", "99999999"), -EINVAL);
    EXPECT_EQ(rd("set_ftrace_pid"), "10\n20\n30\n40\n");
    EXPECT_EQ(wr("set_ftrace_pid", "", true), 0);
    EXPECT_EQ(rd("set_ftrace_pid"), "no pid\n");
    EXPECT_EQ(wr("set_event_pid", "7"), 0);
    EXPECT_EQ(rd("set_event_pid"), "7\n");
}

TEST_F(ftrace_filter, options_and_trace_options)
{
    std::vector<std::string> names;
    ASSERT_EQ(T.list("options", names), 0);
    for (const char *o :
         {"print-parent", "sym-offset", "sym-addr", "overwrite", "markers", "func_stack_trace",
          "funcgraph-proc", "funcgraph-tail", "funcgraph-retval", "graph-time"})
        EXPECT_NE(std::find(names.begin(), names.end(), o), names.end()) << o;
    EXPECT_EQ(rd("options/sym-offset"), "0\n");
    EXPECT_EQ(wr("options/sym-offset", "1"), 0);
    EXPECT_EQ(rd("options/sym-offset"), "1\n");
    EXPECT_EQ(wr("options/sym-offset", "2"), -EINVAL);
    EXPECT_TRUE(has(rd("trace_options"), "print-parent\nsym-offset\nnosym-addr\n"));
    EXPECT_EQ(wr("trace_options", "nosym-offset"), 0);
    EXPECT_EQ(rd("options/sym-offset"), "0\n");
    EXPECT_EQ(wr("trace_options", "nosuchoption"), -EINVAL);
    // The tracer's own options are listed while it is the current one.
    EXPECT_FALSE(has(rd("trace_options"), "funcgraph-proc"));
    EXPECT_EQ(wr("current_tracer", "function_graph"), 0);
    EXPECT_TRUE(has(rd("trace_options"), "nofuncgraph-proc\n"));
    EXPECT_EQ(wr("trace_options", "funcgraph-proc"), 0);
    EXPECT_EQ(rd("options/funcgraph-proc"), "1\n");
    // overwrite reaches the ring buffer.
    EXPECT_EQ(wr("options/overwrite", "0"), 0);
    EXPECT_FALSE(dprobe::ring_buffer_overwrite());
    EXPECT_EQ(wr("options/overwrite", "1"), 0);
    EXPECT_TRUE(dprobe::ring_buffer_overwrite());
}

TEST_F(ftrace_filter, saved_cmdlines_size)
{
    EXPECT_EQ(rd("saved_cmdlines_size"), "128\n");
    EXPECT_EQ(wr("saved_cmdlines_size", "0"), -EINVAL);
    EXPECT_EQ(wr("saved_cmdlines_size", "256"), 0);
    EXPECT_EQ(rd("saved_cmdlines_size"), "256\n");
    EXPECT_EQ(wr("saved_cmdlines_size", "128"), 0);
}
