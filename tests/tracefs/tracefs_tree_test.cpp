// The tracefs tree model end to end inside one process: events defined by writing
// dynamic_events, enabled through events/, fired by real calls of functions with patch sites
// (patchable_function_entry) or kprobes, and read back from trace / trace_pipe.
#include "tracefs/tracefs_tree.h"

#include "core/ring_buffer.h"
#include "tracefs/trace_events.h"

#include "tests/tracefs/ftrace_test_util.h"
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <regex.h>
#include <sys/prctl.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int tfs_add(int a, int b)
{
    asm volatile("" ::: "memory");
    return a + b;
}

TARGET int tfs_mul(int a, int b)
{
    asm volatile("" ::: "memory");
    return a * b;
}

TARGET long tfs_mix(long a, const int *p, long c, long d, long e, long f)
{
    asm volatile("" ::: "memory");
    return a + c + d + e + f + (p ? 1 : 0);
}

TARGET long tfs_str(const char *s, long n)
{
    asm volatile("" ::: "memory");
    return s[0] + n;
}

using namespace dprobe;

namespace
{

using ftt::has;
using ftt::matches;
using ftt::pipe_lines;
using ftt::rd;
using ftt::T;
using ftt::wr;

class TraceFsTree : public ::testing::Test
{
  protected:
    void SetUp() override { reset(); }
    void TearDown() override { reset(); }
    static void reset()
    {
        trace_events::instance().set_group_enabled("", false);
        EXPECT_EQ(wr("dynamic_events", "", true), 0);
        EXPECT_EQ(wr("error_log", "", true), 0);
        EXPECT_EQ(wr("tracing_on", "1"), 0);
        ring_buffer_reset();
    }
};

TEST_F(TraceFsTree, RootListingModesAndReadme)
{
    std::vector<std::string> names;
    ASSERT_EQ(T.list("/", names), 0);
    for (const char *want :
         {"README", "dynamic_events", "kprobe_events", "error_log", "trace", "trace_pipe",
          "tracing_on", "buffer_size_kb", "trace_clock", "available_filter_functions",
          "enabled_functions", "kprobe_profile", "events", "kprobes"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    tracefs_stat st;
    ASSERT_EQ(T.stat("trace_pipe", st), 0);
    EXPECT_FALSE(st.is_dir);
    EXPECT_EQ(st.mode, 0400u);
    ASSERT_EQ(T.stat("/dynamic_events", st), 0);
    EXPECT_EQ(st.mode, 0600u);
    ASSERT_EQ(T.stat("events/", st), 0);
    EXPECT_TRUE(st.is_dir);
    EXPECT_EQ(T.stat("nonexistent", st), -ENOENT);
    EXPECT_EQ(T.stat("events/nogroup/x/enable", st), -ENOENT);
    ASSERT_EQ(T.list("kprobes", names), 0);
    for (const char *want : {"blacklist", "enabled", "list"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    std::string readme = rd("README");
    EXPECT_TRUE(has(readme, "Create/append/remove/show the generic dynamic events"));
    EXPECT_TRUE(has(readme, "kernel return probes support: $retval, $arg<N>, $comm"));
    std::unique_ptr<tracefs_file> f;
    EXPECT_EQ(T.open("README", O_WRONLY, f), -EACCES);
    EXPECT_EQ(T.open("events", O_RDONLY, f), -EISDIR);
    EXPECT_EQ(T.list("README", names), -ENOTDIR);
}

TEST_F(TraceFsTree, FprobeEventLifecycle)
{
    ASSERT_EQ(wr("dynamic_events", "f:mygrp/add tfs_add a=$arg1:s32 b=$arg2:u32\n"), 0);
    EXPECT_EQ(rd("dynamic_events"), "f:mygrp/add tfs_add a=$arg1:s32 b=$arg2:u32\n");
    EXPECT_EQ(rd("kprobe_events"), ""); // not a kprobe
    int id = std::stoi(rd("events/mygrp/add/id"));
    EXPECT_GE(id, TRACE_EVENT_FIRST_ID);
    std::string fmt = rd("events/mygrp/add/format");
    EXPECT_TRUE(has(fmt, "name: add\nID: " + std::to_string(id) + "\n")) << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:s32 a;\toffset:16;\tsize:4;\tsigned:1;\n")) << fmt;
    EXPECT_EQ(rd("events/mygrp/add/enable"), "0\n");
    EXPECT_EQ(rd("events/mygrp/add/filter"), "none\n");
    std::vector<std::string> names;
    ASSERT_EQ(T.list("events/mygrp/add", names), 0);
    EXPECT_EQ(names, (std::vector<std::string>{"enable", "filter", "format", "hist", "hist_debug",
                                               "id", "trigger"}));

    // Nothing is registered until the event is enabled.
    EXPECT_FALSE(has(rd("enabled_functions"), "tfs_add ("));
    tfs_add(1, 1);
    EXPECT_TRUE(pipe_lines().empty());

    ASSERT_EQ(wr("events/mygrp/add/enable", "1\n"), 0);
    EXPECT_EQ(rd("events/mygrp/add/enable"), "1\n");
    EXPECT_TRUE(matches(rd("enabled_functions"), "(^|\n)tfs_add \\(1\\)"));
    EXPECT_EQ(tfs_add(-3, 7), 4);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(matches(lines[0],
                        "^ +[^ ]+-[0-9]+ +\\[[0-9]{3}\\] \\.\\.\\.\\.\\. +[0-9]+\\.[0-9]{6}: "
                        "add: \\(tfs_add\\+0x[04]/0x[0-9a-f]+\\) a=-3 b=7$"))
        << lines[0];

    // An enabled event cannot be deleted.
    EXPECT_EQ(wr("dynamic_events", "-:mygrp/add"), -EBUSY);
    ASSERT_EQ(wr("events/mygrp/add/enable", "0"), 0);
    EXPECT_FALSE(has(rd("enabled_functions"), "tfs_add ("));
    tfs_add(5, 5);
    EXPECT_TRUE(pipe_lines().empty());

    ASSERT_EQ(wr("dynamic_events", "-:mygrp/add"), 0);
    EXPECT_EQ(rd("dynamic_events"), "");
    tracefs_stat st;
    EXPECT_EQ(T.stat("events/mygrp", st), -ENOENT);
    EXPECT_EQ(wr("dynamic_events", "-:mygrp/add"), -ENOENT);
    EXPECT_EQ(wr("events/mygrp/add/enable", "1"), -ENOENT);
}

TEST_F(TraceFsTree, ExitEventsAndEntryArgs)
{
    ASSERT_EQ(wr("dynamic_events", "f:fprobes/addret tfs_add%return r=$retval:s32 a=$arg1:s32\n"
                                   "f tfs_mul $retval\n"),
              0);
    EXPECT_EQ(rd("dynamic_events"), "f:fprobes/addret tfs_add%return r=$retval:s32 a=$arg1:s32\n"
                                    "f:fprobes/tfs_mul__exit tfs_mul%return arg1=$retval\n");
    ASSERT_EQ(wr("events/fprobes/enable", "1"), 0);
    EXPECT_EQ(rd("events/fprobes/enable"), "1\n");
    EXPECT_EQ(tfs_add(-3, 7), 4);
    EXPECT_EQ(tfs_mul(6, 7), 42);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_TRUE(matches(lines[0], ": addret: \\([^ ]+\\+0x[0-9a-f]+/0x[0-9a-f]+ <- tfs_add\\) "
                                  "r=4 a=-3$"))
        << lines[0];
    // tfs_mul returns int: its debug info types $retval s32 (the kernel's BTF typing).
    EXPECT_TRUE(matches(lines[1], ": tfs_mul__exit: \\(.* <- tfs_mul\\) arg1=42$")) << lines[1];
    std::string fmt = rd("events/fprobes/addret/format");
    EXPECT_TRUE(has(fmt, "field:unsigned long __probe_func;\toffset:8;")) << fmt;
    EXPECT_TRUE(has(fmt, "field:unsigned long __probe_ret_ip;\toffset:16;")) << fmt;
}

TEST_F(TraceFsTree, KprobeAndKretprobeEvents)
{
    ASSERT_EQ(wr("kprobe_events", "p:kp/padd tfs_add a=%di:s32 b=%si:s32\n"
                                  "r:kp/radd tfs_add ret=$retval:s32\n"),
              0);
    EXPECT_EQ(rd("kprobe_events"), "p:kp/padd tfs_add a=%di:s32 b=%si:s32\n"
                                   "r:kp/radd tfs_add ret=$retval:s32\n");
    EXPECT_EQ(rd("dynamic_events"), rd("kprobe_events"));
    // Registered at creation, disarmed until enabled.
    std::string list = rd("kprobes/list");
    EXPECT_TRUE(has(list, "tfs_add+0x0")) << list;
    EXPECT_TRUE(has(list, "[DISABLED]")) << list;
    EXPECT_TRUE(matches(rd("kprobe_profile"), "^  padd {40} +0 +0\n  radd {40} +0 +0\n$"))
        << rd("kprobe_profile");

    tfs_add(1, 2);
    EXPECT_TRUE(pipe_lines().empty());
    ASSERT_EQ(wr("events/kp/enable", "1"), 0);
    EXPECT_EQ(tfs_add(2, 3), 5);
    EXPECT_EQ(tfs_add(4, 4), 8);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_TRUE(matches(lines[0], ": padd: \\(tfs_add\\+0x0/0x[0-9a-f]+\\) a=2 b=3$")) << lines[0];
    EXPECT_TRUE(matches(lines[1], ": radd: \\(.+ <- tfs_add\\) ret=5$")) << lines[1];
    EXPECT_TRUE(matches(lines[2], ": padd: .* a=4 b=4$")) << lines[2];
    EXPECT_TRUE(matches(lines[3], ": radd: .* ret=8$")) << lines[3];
    std::string prof = rd("kprobe_profile");
    EXPECT_TRUE(matches(prof, "^  padd +2 +0\n  radd +2 +0\n$")) << prof;
    char expect[128];
    std::snprintf(expect, sizeof expect, "  %-44s %15lu %15lu\n", "padd", 2ul, 0ul);
    EXPECT_EQ(prof.substr(0, std::strlen(expect)), expect);

    // kprobe_events O_TRUNC: busy while enabled, then deletes the kprobes only.
    ASSERT_EQ(wr("dynamic_events", "f:fp/other tfs_mul"), 0);
    EXPECT_EQ(wr("kprobe_events", "", true), -EBUSY);
    ASSERT_EQ(wr("events/kp/enable", "0"), 0);
    ASSERT_EQ(wr("kprobe_events", "", true), 0);
    EXPECT_EQ(rd("dynamic_events"), "f:fp/other tfs_mul\n");
    EXPECT_FALSE(has(rd("kprobes/list"), "tfs_add")) << rd("kprobes/list");
    // kprobe_events takes kprobe lines only.
    EXPECT_EQ(wr("kprobe_events", "f:fp/x tfs_add"), -EINVAL);
    EXPECT_EQ(rd("error_log"), "");
}

TEST_F(TraceFsTree, MultiLineWriteStopsAtFirstBadLine)
{
    EXPECT_EQ(
        wr("dynamic_events", "f:g1/e1 tfs_add\nf:g1/e2 tfs_no_such_function\nf:g1/e3 tfs_add\n"),
        -ENOENT);
    EXPECT_EQ(rd("dynamic_events"), "f:g1/e1 tfs_add\n");
    std::string log = rd("error_log");
    EXPECT_TRUE(matches(log,
                        "^\\[ *[0-9]+\\.[0-9]{6}\\] trace_fprobe: error: Invalid probed "
                        "address or symbol\n  Command: f:g1/e2 tfs_no_such_function\n {19}\\^\n$"))
        << log;

    // A parse error: name and caret of the kernel, nothing else changes.
    EXPECT_EQ(wr("dynamic_events", "p:kp/x tfs_add a=%zz"), -EINVAL);
    EXPECT_EQ(wr("dynamic_events", "f:g1/bad! tfs_add"), -EINVAL);
    log = rd("error_log");
    EXPECT_TRUE(has(log, "trace_kprobe: error: Invalid register name\n"
                         "  Command: p:kp/x tfs_add a=%zz\n" +
                             std::string(11 + 17, ' ') + "^\n"))
        << log;
    EXPECT_TRUE(has(log, "trace_fprobe: error: Event name must follow the same rules as C "
                         "identifiers\n  Command: f:g1/bad! tfs_add\n" +
                             std::string(11 + 5, ' ') + "^\n"))
        << log;
    EXPECT_EQ(rd("dynamic_events"), "f:g1/e1 tfs_add\n");
    // Comments and blank lines; an unknown command is EINVAL without a log entry.
    EXPECT_EQ(wr("dynamic_events", "# nothing\n\n   \nf:g1/e4 tfs_mul # trailing comment\n"), 0);
    EXPECT_EQ(wr("dynamic_events", "x:g1/e5 tfs_mul"), -EINVAL);
    EXPECT_EQ(std::count(log.begin(), log.end(), '^'), 3);
    EXPECT_EQ(rd("dynamic_events"), "f:g1/e1 tfs_add\nf:g1/e4 tfs_mul\n");
    // error_log: writes are ignored, O_TRUNC clears.
    EXPECT_EQ(wr("error_log", "junk"), 0);
    log = rd("error_log");
    EXPECT_EQ(std::count(log.begin(), log.end(), '^'), 3);
    EXPECT_EQ(wr("error_log", "", true), 0);
    EXPECT_EQ(rd("error_log"), "");
}

TEST_F(TraceFsTree, TruncateDeletesAllUnlessBusy)
{
    ASSERT_EQ(wr("dynamic_events", "f:g/a tfs_add\nf:g/b tfs_mul\n"), 0);
    ASSERT_EQ(wr("events/g/b/enable", "1"), 0);
    std::unique_ptr<tracefs_file> f;
    EXPECT_EQ(T.open("dynamic_events", O_WRONLY | O_TRUNC, f), -EBUSY);
    EXPECT_EQ(T.truncate("dynamic_events"), -EBUSY);
    EXPECT_EQ(rd("dynamic_events"), "f:g/a tfs_add\nf:g/b tfs_mul\n");
    ASSERT_EQ(wr("events/g/b/enable", "0"), 0);
    EXPECT_EQ(T.truncate("dynamic_events"), 0);
    EXPECT_EQ(rd("dynamic_events"), "");
    EXPECT_EQ(trace_events::instance().nr_events(), 0u);
}

TEST_F(TraceFsTree, MultiProbeEvents)
{
    ASSERT_EQ(
        wr("dynamic_events", "f:g/multi tfs_add x=$arg1:s32\nf:g/multi tfs_mul x=$arg1:s32\n"), 0);
    EXPECT_EQ(rd("dynamic_events"),
              "f:g/multi tfs_add x=$arg1:s32\nf:g/multi tfs_mul x=$arg1:s32\n");
    EXPECT_EQ(wr("dynamic_events", "f:g/multi tfs_str x=$arg2:u32"), -EEXIST);
    EXPECT_EQ(wr("dynamic_events", "f:g/multi tfs_add x=$arg1:s32"), -EEXIST);
    EXPECT_EQ(wr("dynamic_events", "f:g/multi tfs_str%return x=$arg1:s32"), -EEXIST);
    std::string log = rd("error_log");
    EXPECT_TRUE(has(log, "Argument type or name is different from existing probe\n"
                         "  Command: f:g/multi tfs_str x=$arg2:u32\n" +
                             std::string(11 + 18, ' ') + "^\n"))
        << log;
    EXPECT_TRUE(has(log, "There is already the exact same probe event\n")) << log;
    EXPECT_TRUE(has(log, "Probe type is different from existing probe\n")) << log;

    ASSERT_EQ(wr("events/g/multi/enable", "1"), 0);
    tfs_add(11, 0);
    tfs_mul(12, 1);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_TRUE(matches(lines[0], "multi: \\(tfs_add\\+.*\\) x=11$")) << lines[0];
    EXPECT_TRUE(matches(lines[1], "multi: \\(tfs_mul\\+.*\\) x=12$")) << lines[1];
    ASSERT_EQ(wr("events/g/multi/enable", "0"), 0);
    // Remove just one probe of the event.
    ASSERT_EQ(wr("dynamic_events", "-:g/multi tfs_mul"), 0);
    EXPECT_EQ(rd("dynamic_events"), "f:g/multi tfs_add x=$arg1:s32\n");
    EXPECT_EQ(wr("dynamic_events", "-:g/multi tfs_add x=$arg1:u8"), -ENOENT);
    ASSERT_EQ(wr("dynamic_events", "!f:g/multi"), 0);
    EXPECT_EQ(rd("dynamic_events"), "");
}

TEST_F(TraceFsTree, EventFilterFile)
{
    ASSERT_EQ(wr("dynamic_events", "f:g/add tfs_add a=$arg1:s32 b=$arg2:s32"), 0);
    ASSERT_EQ(wr("events/g/add/filter", "a > 10 && b != 0\n"), 0);
    EXPECT_EQ(rd("events/g/add/filter"), "a > 10 && b != 0\n");
    ASSERT_EQ(wr("events/g/add/enable", "1"), 0);
    for (int i = 0; i < 20; i++)
        tfs_add(i, i & 1);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 5u); // a > 10 && b odd: 11 13 15 17 19
    EXPECT_TRUE(matches(lines[0], "a=11 b=1$")) << lines[0];

    // A bad filter: EINVAL, the file shows the error, the event is no longer filtered.
    EXPECT_EQ(wr("events/g/add/filter", "nosuch == 1"), -EINVAL);
    EXPECT_EQ(rd("events/g/add/filter"), "nosuch == 1\n       ^\nparse_error: Field not found\n");
    EXPECT_TRUE(has(rd("error_log"), "event filter parse error: error: Field not found\n"
                                     "  Command: nosuch == 1\n" +
                                         std::string(11 + 7, ' ') + "^\n"))
        << rd("error_log");
    tfs_add(1, 0);
    EXPECT_EQ(pipe_lines().size(), 1u);
    ASSERT_EQ(wr("events/g/add/filter", "a == 5"), 0);
    tfs_add(5, 0);
    tfs_add(6, 0);
    lines = pipe_lines();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(matches(lines[0], "a=5 b=0$")) << lines[0];
    ASSERT_EQ(wr("events/g/add/filter", "0"), 0);
    EXPECT_EQ(rd("events/g/add/filter"), "none\n");

    // Group filters.
    EXPECT_TRUE(has(rd("events/g/filter"), "### global filter ###"));
    ASSERT_EQ(wr("events/g/filter", "b == 3"), 0);
    EXPECT_EQ(rd("events/g/add/filter"), "b == 3\n");
    EXPECT_EQ(wr("events/g/filter", "zz == 3"), -EINVAL);
    EXPECT_TRUE(has(rd("events/g/filter"),
                    "parse_error: Couldn't find or set field in one of a subsystem's events"));
    ASSERT_EQ(wr("events/g/filter", "0"), 0);
    EXPECT_EQ(rd("events/g/add/filter"), "none\n");
}

TEST_F(TraceFsTree, EnableFilesAggregate)
{
    EXPECT_EQ(rd("events/enable"), "?\n");
    ASSERT_EQ(wr("dynamic_events", "f:g/a tfs_add\nf:g/b tfs_mul\nf:h/c tfs_str\n"), 0);
    EXPECT_EQ(rd("events/enable"), "0\n");
    ASSERT_EQ(wr("events/g/a/enable", "1"), 0);
    EXPECT_EQ(rd("events/g/enable"), "X\n");
    EXPECT_EQ(rd("events/h/enable"), "0\n");
    EXPECT_EQ(rd("events/enable"), "X\n");
    ASSERT_EQ(wr("events/enable", "1"), 0);
    EXPECT_EQ(rd("events/enable"), "1\n");
    EXPECT_EQ(rd("events/h/c/enable"), "1\n");
    EXPECT_EQ(wr("events/enable", "2"), -EINVAL);
    EXPECT_EQ(wr("events/g/a/enable", "yes"), -EINVAL);
    ASSERT_EQ(wr("events/g/enable", "0"), 0);
    EXPECT_EQ(rd("events/enable"), "X\n");
    ASSERT_EQ(wr("events/enable", "0"), 0);
    EXPECT_EQ(rd("events/enable"), "0\n");
}

// Many kprobe events enabled by one write of events/<group>/enable, or by
// trace_events::set_enabled() of a list (what `dprobe record -e` does): armed in one batch,
// all or nothing.
TEST_F(TraceFsTree, ManyKprobeEventsEnableTogether)
{
    std::string lines;
    for (int i = 0; i < 30; ++i)
        lines += (i % 3 == 2 ? "r:many/e" : "p:many/e") + std::to_string(i) +
                 (i % 2 ? " tfs_mul" : " tfs_add") + "\n";
    ASSERT_EQ(wr("dynamic_events", lines), 0);
    std::string list = rd("kprobes/list");
    EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 30) << list;
    tfs_add(1, 1);
    EXPECT_TRUE(pipe_lines().empty());
    ASSERT_EQ(wr("events/many/enable", "1"), 0);
    EXPECT_FALSE(has(rd("kprobes/list"), "[DISABLED]")) << rd("kprobes/list");
    tfs_add(1, 2);
    tfs_mul(3, 4);
    EXPECT_EQ(pipe_lines().size(), 30u);
    ASSERT_EQ(wr("events/many/enable", "0"), 0);
    list = rd("kprobes/list");
    size_t disabled = 0;
    for (size_t at = list.find("[DISABLED]"); at != std::string::npos;
         at = list.find("[DISABLED]", at + 1))
        ++disabled;
    EXPECT_EQ(disabled, 30u) << list;
    tfs_add(1, 2);
    EXPECT_TRUE(pipe_lines().empty());

    // A list naming an unknown event enables none of them and says which.
    auto &te = trace_events::instance();
    std::vector<trace_events::event_ref> refs;
    for (int i = 0; i < 10; ++i)
        refs.push_back({"many", "e" + std::to_string(i)});
    refs.insert(refs.begin() + 4, {"many", "no_such_event"});
    size_t failed = 99;
    EXPECT_EQ(te.set_enabled(refs, true, &failed), -ENOENT);
    EXPECT_EQ(failed, 4u);
    EXPECT_EQ(rd("events/many/enable"), "0\n");
    refs.erase(refs.begin() + 4);
    ASSERT_EQ(te.set_enabled(refs, true, &failed), 0);
    EXPECT_EQ(rd("events/many/enable"), "X\n");
    tfs_add(5, 6);
    EXPECT_EQ(pipe_lines().size(), 5u); // e0 e2 (a return) e4 e6 e8
    ASSERT_EQ(te.set_enabled(refs, false), 0);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
    EXPECT_FALSE(has(rd("kprobes/list"), "tfs_")) << rd("kprobes/list");
}

TEST_F(TraceFsTree, TracingOnBufferSizeClockOptions)
{
    ASSERT_EQ(wr("dynamic_events", "f:g/add tfs_add a=$arg1:s32"), 0);
    ASSERT_EQ(wr("events/g/add/enable", "1"), 0);
    ASSERT_EQ(wr("tracing_on", "0\n"), 0);
    EXPECT_EQ(rd("tracing_on"), "0\n");
    tfs_add(1, 2);
    EXPECT_TRUE(pipe_lines().empty());
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    EXPECT_EQ(wr("tracing_on", "x"), -EINVAL);
    tfs_add(1, 2);
    EXPECT_EQ(pipe_lines().size(), 1u);

    std::string old = rd("buffer_size_kb");
    ASSERT_EQ(wr("buffer_size_kb", "64\n"), 0);
    EXPECT_EQ(rd("buffer_size_kb"), "64\n");
    EXPECT_EQ(wr("buffer_size_kb", "0"), -EINVAL);
    // Buffers are per thread: per_cpu/cpuN/buffer_size_kb is the same size (the kernel's
    // selftest 00basic/ringbuffer_size.tc resizes them CPU by CPU).
    EXPECT_EQ(rd("per_cpu/cpu0/buffer_size_kb"), "64\n");
    ASSERT_EQ(wr("per_cpu/cpu0/buffer_size_kb", "32"), 0);
    EXPECT_EQ(rd("buffer_size_kb"), "32\n");
    EXPECT_EQ(wr("per_cpu/cpu0/buffer_size_kb", "0"), -EINVAL);
    ASSERT_EQ(wr("buffer_size_kb", old), 0);

    EXPECT_TRUE(has(rd("trace_clock"), "[local]"));
    ASSERT_EQ(wr("trace_clock", "mono\n"), 0);
    EXPECT_TRUE(has(rd("trace_clock"), "[mono]"));
    EXPECT_EQ(wr("trace_clock", "nosuchclock"), -EINVAL);
    ASSERT_EQ(wr("trace_clock", "local"), 0);

    EXPECT_EQ(rd("options/overwrite"), "1\n");
    ASSERT_EQ(wr("options/overwrite", "0"), 0);
    EXPECT_EQ(rd("options/overwrite"), "0\n");
    ASSERT_EQ(wr("options/overwrite", "1"), 0);
}

TEST_F(TraceFsTree, TraceFileAndTruncate)
{
    ASSERT_EQ(wr("dynamic_events", "f:g/add tfs_add a=$arg1:s32"), 0);
    ASSERT_EQ(wr("events/g/add/enable", "1"), 0);
    tfs_add(42, 0);
    std::string t = rd("trace");
    EXPECT_EQ(t.rfind("# tracer: nop\n#\n# entries-in-buffer/entries-written: 1/1   #P:", 0), 0u)
        << t;
    EXPECT_TRUE(matches(t, "\n +[^ ]+-[0-9]+ +\\[[0-9]{3}\\] \\.\\.\\.\\.\\. +[0-9.]+: add: "
                           "\\(tfs_add\\+0x[04]/0x[0-9a-f]+\\) a=42\n$"))
        << t;
    EXPECT_EQ(rd("trace"), t); // not consumed
    ASSERT_EQ(wr("trace", "", true), 0);
    t = rd("trace");
    EXPECT_TRUE(has(t, "entries-in-buffer/entries-written: 0/0")) << t;
    EXPECT_FALSE(has(t, "add:")) << t;
}

TEST_F(TraceFsTree, TracePipeBlocksAndPolls)
{
    ASSERT_EQ(wr("dynamic_events", "f:g/add tfs_add a=$arg1:s32"), 0);
    ASSERT_EQ(wr("events/g/add/enable", "1"), 0);
    std::unique_ptr<tracefs_file> f;
    ASSERT_EQ(T.open("trace_pipe", O_RDONLY, f), 0);
    EXPECT_TRUE(f->is_stream());
    EXPECT_EQ(f->poll() & POLLIN, 0u);
    char buf[4096];
    tracefs_read_opts nb;
    nb.nonblock = true;
    EXPECT_EQ(f->read(buf, sizeof buf, 0, nb), -EAGAIN);

    auto t0 = std::chrono::steady_clock::now();
    std::thread writer([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        tfs_add(99, 1);
    });
    ssize_t n = f->read(buf, sizeof buf, 0, {});
    auto waited = std::chrono::steady_clock::now() - t0;
    writer.join();
    ASSERT_GT(n, 0);
    std::string s(buf, size_t(n));
    EXPECT_TRUE(matches(s, "add: \\(tfs_add\\+.*\\) a=99\n$")) << s;
    EXPECT_GE(waited, std::chrono::milliseconds(100));

    // Small reads hand the text out piece by piece.
    tfs_add(7, 0);
    EXPECT_NE(f->poll() & POLLIN, 0u);
    std::string got;
    while (true) {
        ssize_t k = f->read(buf, 5, 0, nb);
        if (k == -EAGAIN) break;
        ASSERT_GT(k, 0);
        got.append(buf, size_t(k));
    }
    EXPECT_TRUE(matches(got, "^ +[^ ]+-[0-9]+ .* add: .* a=7\n$")) << got;

    // An interrupted blocking read.
    tracefs_read_opts intr;
    int calls = 0;
    intr.interrupted = [&calls] { return ++calls > 2; };
    EXPECT_EQ(f->read(buf, sizeof buf, 0, intr), -EINTR);
}

TEST_F(TraceFsTree, StringArgsAndComm)
{
    prctl(PR_SET_NAME, "tfs-worker");
    ASSERT_EQ(wr("dynamic_events", "f:g/s tfs_str s=+0($arg1):string n=$arg2:s64 c=$comm "
                                   "bad=+0($arg2):string"),
              0);
    ASSERT_EQ(wr("events/g/s/enable", "1"), 0);
    tfs_str("hello", 16);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(matches(lines[0], "^ *tfs-worker-[0-9]+ .* s: \\(tfs_str\\+.*\\) s=\"hello\" "
                                  "n=16 c=\"tfs-worker\" bad=\\(fault\\)$"))
        << lines[0];
    ASSERT_EQ(wr("events/g/s/filter", "s ~ \"hel*\" && c == \"tfs-worker\""), 0);
    tfs_str("help", 1);
    tfs_str("nope", 1);
    lines = pipe_lines();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(has(lines[0], "s=\"help\"")) << lines[0];
}

// The file offset of a function in the running executable, as an uprobe place names it.
uint64_t exe_file_offset(uintptr_t addr)
{
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long start, end, off;
        if (std::sscanf(line.c_str(), "%lx-%lx %*s %lx", &start, &end, &off) == 3 &&
            addr >= start && addr < end)
            return addr - start + off;
    }
    return 0;
}

TEST_F(TraceFsTree, UprobeStylePlace)
{
    auto fn = reinterpret_cast<uintptr_t>(&tfs_mul);
    uint64_t off = exe_file_offset(fn);
    ASSERT_NE(off, 0u);
    char cmd[256];
    std::snprintf(cmd, sizeof cmd, "p:uprobes/um /proc/self/exe:0x%" PRIx64 " a=%%di:s32", off);
    ASSERT_EQ(wr("uprobe_events", cmd), 0) << rd("error_log");
    char listing[256];
    std::snprintf(listing, sizeof listing,
                  "p:uprobes/um /proc/self/exe:0x%016" PRIx64 " a=%%di:s32\n", off);
    EXPECT_EQ(rd("uprobe_events"), listing);
    ASSERT_EQ(wr("events/uprobes/um/enable", "1"), 0);
    tfs_mul(21, 2);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 1u);
    char want[64];
    std::snprintf(want, sizeof want, "um: (0x%" PRIxPTR ") a=21", fn);
    EXPECT_TRUE(has(lines[0], want)) << lines[0];
    EXPECT_TRUE(matches(rd("uprobe_profile"), "^  /proc/self/exe um +1\n$"))
        << rd("uprobe_profile");
    ASSERT_EQ(wr("events/uprobes/um/enable", "0"), 0);
    ASSERT_EQ(wr("uprobe_events", "", true), 0);
    EXPECT_EQ(rd("dynamic_events"), "");
}

// The record writer runs the compiled form of simple arguments' fetch programs
// (fetch_fast.h) and leaves the rest to the fetch-arg interpreter; both must write the same
// records. use_fast_stores(false) at creation forces the interpreter.
TEST_F(TraceFsTree, FastArgWriterMatchesInterpreter)
{
    const std::string fargs = " a=$arg1:s8 b=$arg1:u64 c=$arg2:x16 d=+0($arg2):u32"
                              " e=+4($arg2):s16 f=+0($arg4):u64 g=\\123 h=$arg6:x32 i=$arg5:s32"
                              " j=$stack:x64 k=+8($arg2):u8";
    const std::string kargs = " a=%di:s8 b=%di:u64 c=%si:x16 d=+0(%si):u32 e=+4(%si):s16"
                              " f=+0(%cx):u64 g=\\123 h=%r9:x32 i=%r8:s32 j=$stack:x64 k=+8(%si):u8"
                              " l=%ip:x64 m=$stack0:x64 n=$arg3";
    const std::string ret_args = " r=$retval:s64 a=$arg1:s16 p=+0($arg2):x32 x=$arg6";
    for (const char *grp : {"slow", "fast"}) {
        std::string g = grp;
        dprobe::trace_events::use_fast_stores(g != "slow");
        ASSERT_EQ(wr("dynamic_events", "f:" + g + "/mix tfs_mix" + fargs +
                                           "\n"
                                           "f:" +
                                           g + "/mixret tfs_mix%return" + ret_args +
                                           "\n"
                                           "p:" +
                                           g + "/kmix tfs_mix" + kargs),
                  0)
            << rd("error_log");
        dprobe::trace_events::use_fast_stores(true);
    }
    ASSERT_EQ(wr("events/enable", "1"), 0);
    int vals[4] = {-123456, 0x7f01, 0x11, 0x22};
    tfs_mix(-2, vals, 3, 16 /* unmapped */, -77, 0x123456789);
    tfs_mix(0x1ff, vals + 1, 4, reinterpret_cast<long>(vals), 5, -1);
    ASSERT_EQ(wr("events/enable", "0"), 0);
    std::map<std::string, std::vector<std::string>> by_event;
    for (const auto &l : pipe_lines()) {
        std::vector<std::string> m;
        ASSERT_TRUE(matches(l, ": (k?mix(ret)?): \\((.*)\\) (.*)$", &m)) << l;
        by_event[m[1]].push_back(m[3] + " | " + m[4]);
    }
    // Each event name appears twice (slow and fast group), in hit order: slow/fast pairs of
    // the same hit have identical text.
    for (const char *ev : {"mix", "mixret", "kmix"}) {
        auto &v = by_event[ev];
        ASSERT_EQ(v.size(), 4u) << ev;
        std::sort(v.begin(), v.end());
        EXPECT_EQ(v[0], v[1]) << ev;
        EXPECT_EQ(v[2], v[3]) << ev;
        EXPECT_NE(v[0], v[2]) << ev;
    }
    EXPECT_TRUE(has(by_event["mix"][0] + by_event["mix"][2], " f=0 ")) // the faulting read
        << by_event["mix"][0] << "\n"
        << by_event["mix"][2];
}

TEST_F(TraceFsTree, KprobesEnabledAndOptimizationKnobs)
{
    EXPECT_EQ(rd("kprobes/enabled"), "1\n");
    ASSERT_EQ(wr("dynamic_events", "p:kp/pm tfs_mul a=%di:s32"), 0);
    ASSERT_EQ(wr("events/kp/pm/enable", "1"), 0);
    ASSERT_EQ(wr("kprobes/enabled", "0"), 0);
    EXPECT_EQ(rd("kprobes/enabled"), "0\n");
    tfs_mul(3, 3);
    EXPECT_TRUE(pipe_lines().empty());
    EXPECT_EQ(wr("kprobes/enabled", "maybe"), -EINVAL);
    ASSERT_EQ(wr("kprobes/enabled", "1"), 0);
    tfs_mul(4, 3);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_TRUE(has(lines[0], "pm: (tfs_mul+0x")) << lines[0];
    ASSERT_EQ(wr("events/kp/pm/enable", "0"), 0);

    tracefs_stat st;
    ASSERT_EQ(T.stat("kprobes/optimization", st), 0);
    EXPECT_EQ(st.mode, 0600u);
    ASSERT_EQ(wr("kprobes/optimization", "0"), 0);
    EXPECT_EQ(rd("kprobes/optimization"), "0\n");
    EXPECT_EQ(wr("kprobes/optimization", "2"), -EINVAL);
    ASSERT_EQ(wr("kprobes/optimization", "1"), 0);
    EXPECT_EQ(rd("kprobes/optimization"), "1\n");
}

TEST_F(TraceFsTree, AvailableFilterFunctions)
{
    std::string a = rd("available_filter_functions");
    EXPECT_TRUE(matches(a, "(^|\n)tfs_add\n")) << a.substr(0, 200);
    EXPECT_TRUE(matches(a, "(^|\n)tfs_mul\n"));
    char want[64];
    std::string addrs = rd("available_filter_functions_addrs");
    // The site is the function entry, or 4 bytes in after an endbr64.
    std::snprintf(want, sizeof want, "%" PRIxPTR " tfs_add\n",
                  reinterpret_cast<uintptr_t>(&tfs_add));
    char want4[64];
    std::snprintf(want4, sizeof want4, "%" PRIxPTR " tfs_add\n",
                  reinterpret_cast<uintptr_t>(&tfs_add) + 4);
    EXPECT_TRUE(has(addrs, want) || has(addrs, want4));
}

TEST_F(TraceFsTree, SymbolArgumentsResolve)
{
    ASSERT_EQ(wr("dynamic_events", "f:g/sym tfs_add v=@tfs_no_such_symbol"), -ENOENT);
    EXPECT_TRUE(has(rd("error_log"), "Invalid probed address or symbol")) << rd("error_log");
    ASSERT_EQ(wr("dynamic_events", "f:g/sym tfs_add fn=$arg1:u32 p=@tfs_mul:x64"), 0);
}

} // namespace
