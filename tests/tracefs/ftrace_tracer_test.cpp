// The function and function_graph tracers end to end in one process: real calls of
// functions with patch sites, read back from `trace` in the kernel's layouts, with the
// options that shape them (print-parent, sym-offset, sym-addr, irq-info, context-info,
// funcgraph-*), set_ftrace_pid, set_graph_function / set_graph_notrace, max_graph_depth,
// tracing_thresh, func_stack_trace, and tracers switched while threads keep calling.
#include "ftrace_test_util.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int tt_leaf(int a)
{
    asm volatile("" ::: "memory");
    return a + 1;
}
TARGET int tt_mid(int a)
{
    return tt_leaf(a) + tt_leaf(a + 1);
}
TARGET int tt_top(int a)
{
    return tt_mid(a) * 2;
}
TARGET int tt_slow(int us)
{
    usleep(useconds_t(us));
    return us;
}
TARGET int tt_outer(int us)
{
    return tt_slow(us) + tt_leaf(0);
}
// Error returns, as fgraph-retval.tc's proc_reg_write (-EIO as a long) and an int one.
TARGET long tt_err_leaf(int a)
{
    asm volatile("" ::: "memory");
    return a - 6;
}
TARGET int tt_err_mid(int a)
{
    return int(tt_err_leaf(a)) * 4 - 2;
}

using namespace ftt;

namespace
{

class ftrace_tracer : public ::testing::Test
{
  protected:
    void SetUp() override { reset_ftrace(); }
    void TearDown() override { reset_ftrace(); }
};

int gettid_()
{
    return int(syscall(SYS_gettid));
}

// The graph part of a function_graph line: what follows the duration column's "|".
std::string call_of(const std::string &line)
{
    size_t bar = line.find('|');
    return bar == std::string::npos ? "" : line.substr(bar + 1);
}

} // namespace

TEST_F(ftrace_tracer, function_lines_and_symbol_options)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_leaf tt_mid", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    tt_top(1);
    std::string t = rd("trace");
    EXPECT_TRUE(has(t, "# tracer: function\n#\n# entries-in-buffer/entries-written: 3/3   #P:"))
        << t;
    auto b = body(t);
    ASSERT_EQ(b.size(), 3u) << t;
    const std::string pre = "^ +[^ ]+-" + std::to_string(gettid_()) +
                            " +\\[[0-9]{3}\\] \\.\\.\\.\\.\\. +[0-9]+\\.[0-9]{6}: ";
    EXPECT_TRUE(matches(b[0], pre + "tt_mid <-tt_top$")) << b[0];
    EXPECT_TRUE(matches(b[1], pre + "tt_leaf <-tt_mid$")) << b[1];
    EXPECT_TRUE(matches(b[2], pre + "tt_leaf <-tt_mid$")) << b[2];

    ASSERT_EQ(wr("options/sym-offset", "1"), 0);
    EXPECT_TRUE(matches(body(rd("trace"))[1],
                        "tt_leaf\\+0x0/0x[0-9a-f]+ <-tt_mid\\+0x[0-9a-f]+/0x[0-9a-f]+$"));
    ASSERT_EQ(wr("options/sym-offset", "0"), 0);
    ASSERT_EQ(wr("options/sym-addr", "1"), 0);
    EXPECT_TRUE(matches(body(rd("trace"))[1], "tt_leaf <[0-9a-f]{16}> <-tt_mid <[0-9a-f]{16}>$"));
    ASSERT_EQ(wr("options/sym-addr", "0"), 0);
    ASSERT_EQ(wr("options/print-parent", "0"), 0);
    EXPECT_TRUE(matches(body(rd("trace"))[1], ": tt_leaf$"));
    ASSERT_EQ(wr("options/irq-info", "0"), 0);
    t = rd("trace");
    EXPECT_TRUE(has(t, "#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n"
                       "#              | |         |         |         |\n"))
        << t;
    EXPECT_TRUE(
        matches(body(t)[1], "^ +[^ ]+-[0-9]+ +\\[[0-9]{3}\\]  +[0-9]+\\.[0-9]{6}: tt_leaf$"));
    ASSERT_EQ(wr("options/context-info", "0"), 0);
    EXPECT_EQ(body(rd("trace"))[1], "tt_leaf");
}

TEST_F(ftrace_tracer, function_follows_filter_changes_while_running)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_mid", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    tt_top(1);
    ASSERT_EQ(wr("set_ftrace_filter", "tt_leaf", true), 0); // now only tt_leaf
    tt_top(1);
    ASSERT_EQ(wr("set_ftrace_notrace", "tt_leaf"), 0); // and nothing at all
    tt_top(1);
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 3u);
    EXPECT_TRUE(has(b[0], ": tt_mid <-tt_top"));
    EXPECT_TRUE(has(b[1], ": tt_leaf <-tt_mid"));
    EXPECT_TRUE(has(b[2], ": tt_leaf <-tt_mid"));
}

TEST_F(ftrace_tracer, function_pid_filters)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_leaf", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    int other = 0;
    std::thread t([&] {
        other = gettid_();
        tt_leaf(0);
    });
    t.join();
    tt_leaf(0);
    EXPECT_EQ(body(rd("trace")).size(), 2u);
    ASSERT_EQ(wr("trace", "", true), 0);
    ASSERT_EQ(wr("set_ftrace_pid", std::to_string(gettid_())), 0);
    std::thread t2([] { tt_leaf(0); });
    t2.join();
    tt_leaf(0);
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 1u);
    EXPECT_TRUE(has(b[0], "-" + std::to_string(gettid_()) + " "));
    ASSERT_EQ(wr("set_ftrace_pid", "", true), 0);
    ASSERT_EQ(wr("set_ftrace_notrace_pid", std::to_string(gettid_())), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    tt_leaf(0);
    EXPECT_TRUE(body(rd("trace")).empty());
}

TEST_F(ftrace_tracer, graph_layout_leaves_nesting_and_columns)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_*", true), 0);
    ASSERT_EQ(wr("current_tracer", "function_graph"), 0);
    tt_top(3);
    std::string t = rd("trace");
    EXPECT_TRUE(has(t, "# tracer: function_graph\n#\n"
                       "# CPU  DURATION                  FUNCTION CALLS\n"
                       "# |     |   |                     |   |   |   |\n"))
        << t;
    auto b = body(t);
    ASSERT_EQ(b.size(), 6u) << t;
    const std::string cpu = "^ [0-9]+\\) ";
    EXPECT_TRUE(matches(b[0], cpu + "              \\|  tt_top\\(\\) \\{$")) << b[0];
    EXPECT_TRUE(matches(b[1], cpu + "              \\|    tt_mid\\(\\) \\{$")) << b[1];
    EXPECT_TRUE(matches(b[2], cpu + "[ +!#*@$] +[0-9]+\\.[0-9]+ us +\\|      tt_leaf\\(\\);$"))
        << b[2];
    EXPECT_TRUE(matches(b[3], cpu + "[ +!#*@$] +[0-9.]+ us +\\|      tt_leaf\\(\\);$")) << b[3];
    EXPECT_TRUE(matches(b[4], cpu + "[ +!#*@$] +[0-9.]+ us +\\|    \\}$")) << b[4];
    EXPECT_TRUE(matches(b[5], cpu + "[ +!#*@$] +[0-9.]+ us +\\|  \\}$")) << b[5];
    // The duration column is 14 wide before its '|', as the kernel's: "  0.123 us    |".
    EXPECT_EQ(b[2].find('|'), b[0].find('|'));
    // funcgraph-tail names the function at its closing brace; -retval shows return values.
    ASSERT_EQ(wr("options/funcgraph-tail", "1"), 0);
    EXPECT_TRUE(has(body(rd("trace"))[4], "|    } /* tt_mid */"));
    ASSERT_EQ(wr("options/funcgraph-retval", "1"), 0);
    b = body(rd("trace"));
    EXPECT_TRUE(has(b[2], "tt_leaf(); /* ret=0x4 */")) << b[2];
    EXPECT_TRUE(has(b[4], "} /* tt_mid ret=0x9 */")) << b[4];
    ASSERT_EQ(wr("options/funcgraph-proc", "1"), 0);
    ASSERT_EQ(wr("options/funcgraph-abstime", "1"), 0);
    t = rd("trace");
    EXPECT_TRUE(has(t, "#     TIME        CPU  TASK/PID         DURATION "));
    EXPECT_TRUE(
        matches(body(t)[0], "^ *[0-9]+\\.[0-9]{6} \\|   [0-9]+\\) .*-[0-9]+ +\\| +\\|  tt_top"))
        << body(t)[0];
    ASSERT_EQ(wr("options/funcgraph-duration", "0"), 0);
    ASSERT_EQ(wr("options/funcgraph-cpu", "0"), 0);
    ASSERT_EQ(wr("options/funcgraph-proc", "0"), 0);
    ASSERT_EQ(wr("options/funcgraph-abstime", "0"), 0);
    b = body(rd("trace"));
    EXPECT_EQ(b[0], "tt_top() {");
    EXPECT_EQ(b[2], "    tt_leaf(); /* ret=0x4 */");
}

TEST_F(ftrace_tracer, graph_retval_error_values_as_the_kernel_prints_them)
{
    // The kernel's print_graph_retval() (v6.13 on, the form fgraph-retval.tc greps: '=-5',
    // 'fffffffb'): " ret=" after the call, an error value (IS_ERR_VALUE, an int's sign taken
    // from bit 31) in decimal unless funcgraph-retval-hex, anything else in hex.
    ASSERT_EQ(wr("set_ftrace_filter", "tt_err_*", true), 0);
    ASSERT_EQ(wr("current_tracer", "function_graph"), 0);
    ASSERT_EQ(wr("options/funcgraph-retval", "1"), 0);
    EXPECT_EQ(tt_err_mid(1), -22); // tt_err_leaf(1) == -5
    EXPECT_EQ(tt_err_leaf(7), 1);
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 4u) << rd("trace");
    EXPECT_EQ(call_of(b[0]), "  tt_err_mid() {") << b[0];
    EXPECT_EQ(call_of(b[1]), "    tt_err_leaf(); /* ret=-5 */") << b[1];
    EXPECT_EQ(call_of(b[2]), "  } /* tt_err_mid ret=-22 */") << b[2];
    EXPECT_EQ(call_of(b[3]), "  tt_err_leaf(); /* ret=0x1 */") << b[3];
    ASSERT_EQ(wr("options/funcgraph-retval-hex", "1"), 0);
    b = body(rd("trace"));
    ASSERT_EQ(b.size(), 4u);
    EXPECT_EQ(call_of(b[1]), "    tt_err_leaf(); /* ret=0xfffffffffffffffb */") << b[1];
    // An int leaves the upper half of %rax as it was: -22 as 32 bits, maybe extended.
    EXPECT_TRUE(matches(call_of(b[2]), "^  \\} /\\* tt_err_mid ret=0x(ffffffff)?ffffffea \\*/$"))
        << b[2];
    EXPECT_EQ(call_of(b[3]), "  tt_err_leaf(); /* ret=0x1 */") << b[3];
}

TEST_F(ftrace_tracer, graph_overhead_markers_and_comments)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_outer tt_slow tt_leaf", true), 0);
    // The event first: its record comes before the tracer's at tt_slow's entry.
    ASSERT_EQ(wr("dynamic_events", "f:ttg/slow tt_slow us=$arg1:s32"), 0);
    ASSERT_EQ(wr("events/ttg/slow/enable", "1"), 0);
    ASSERT_EQ(wr("current_tracer", "function_graph"), 0);
    tt_outer(1500); // > 1 ms: '#'
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 5u) << rd("trace");
    EXPECT_TRUE(has(b[0], "|  tt_outer() {"));
    // The event between the entry and the return prints as a comment at its depth.
    EXPECT_TRUE(matches(b[1], "\\|  /\\* slow: \\(tt_slow\\+0x0/0x[0-9a-f]+\\) us=1500 \\*/$"))
        << b[1];
    EXPECT_TRUE(matches(b[2], "\\) [#*@$] +[0-9]+\\.[0-9]+ us +\\|    tt_slow\\(\\);$")) << b[2];
    EXPECT_TRUE(matches(b[4], "\\) [#*@$] +[0-9]+\\.[0-9]+ us +\\|  \\}$")) << b[4];
    ASSERT_EQ(wr("options/funcgraph-overhead", "0"), 0);
    EXPECT_TRUE(matches(body(rd("trace"))[2], "\\)   +[0-9]+\\.[0-9]+ us +\\|    tt_slow"));
}

TEST_F(ftrace_tracer, graph_function_notrace_depth_and_thresh)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_*", true), 0);
    ASSERT_EQ(wr("set_graph_function", "tt_mid", true), 0);
    ASSERT_EQ(wr("current_tracer", "function_graph"), 0);
    tt_top(1);
    tt_leaf(9); // outside tt_mid: not traced
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 4u) << rd("trace");
    EXPECT_TRUE(has(b[0], "|  tt_mid() {")); // depth 0: its caller is not traced
    EXPECT_TRUE(has(b[1], "|    tt_leaf();"));

    ASSERT_EQ(wr("set_graph_function", "", true), 0);
    ASSERT_EQ(wr("set_graph_notrace", "tt_mid", true), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    tt_top(1);
    b = body(rd("trace"));
    ASSERT_EQ(b.size(), 1u) << rd("trace"); // tt_mid and its callees are left out
    EXPECT_TRUE(has(b[0], "|  tt_top();"));

    ASSERT_EQ(wr("set_graph_notrace", "", true), 0);
    ASSERT_EQ(wr("max_graph_depth", "2"), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    tt_top(1);
    b = body(rd("trace"));
    ASSERT_EQ(b.size(), 3u) << rd("trace");
    EXPECT_TRUE(has(b[1], "|    tt_mid();"));

    ASSERT_EQ(wr("max_graph_depth", "0"), 0);
    ASSERT_EQ(wr("tracing_thresh", "1000"), 0); // 1 ms: only the slow call
    ASSERT_EQ(wr("trace", "", true), 0);
    tt_outer(1500);
    tt_top(1);
    b = body(rd("trace"));
    ASSERT_EQ(b.size(), 2u) << rd("trace");
    // Returns alone: the kernel names the function, as no entry was recorded.
    EXPECT_TRUE(matches(b[0], "\\) [#*@$] +[0-9.]+ us +\\|    \\} /\\* tt_slow \\*/$")) << b[0];
    EXPECT_TRUE(matches(b[1], "\\) [#*@$] +[0-9.]+ us +\\|  \\} /\\* tt_outer \\*/$")) << b[1];
}

TEST_F(ftrace_tracer, thread_switches_per_cpu)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_leaf", true), 0);
    ASSERT_EQ(wr("current_tracer", "function_graph"), 0);
    // Two threads pinned to the same CPU, one after the other: the kernel's "=>" block.
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    for (int i = 0; i < 2; i++) {
        std::thread t([&] {
            sched_setaffinity(0, sizeof one, &one);
            tt_leaf(i);
        });
        t.join();
    }
    std::string t = rd("trace");
    EXPECT_TRUE(matches(t, "\n ------------------------------------------\n 0\\) +[^ ]+-[0-9]+ +=> "
                           "+[^ ]+-[0-9]+ *\n ------------------------------------------\n\n"))
        << t;
}

TEST_F(ftrace_tracer, func_stack_trace)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_leaf", true), 0);
    ASSERT_EQ(wr("options/func_stack_trace", "1"), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    tt_top(1);
    std::string t = rd("trace");
    auto b = body(t);
    ASSERT_GE(b.size(), 4u) << t;
    EXPECT_TRUE(has(b[0], ": tt_leaf <-tt_mid"));
    EXPECT_TRUE(has(b[1], ": <stack trace>")) << b[1];
    EXPECT_EQ(b[2], " => tt_mid") << t;
    EXPECT_EQ(b[3], " => tt_top") << t;
}

TEST_F(ftrace_tracer, switching_tracers_while_threads_call)
{
    ASSERT_EQ(wr("set_ftrace_filter", "tt_leaf tt_mid", true), 0);
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int i = 0; i < 2; i++)
        ts.emplace_back([&] {
            while (!stop.load())
                tt_mid(1);
        });
    // Tracers switched back and forth while the threads call: each switch stops one
    // tracer, empties the buffer and starts the other.
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(wr("current_tracer", i % 2 ? "function" : "function_graph"), 0);
    stop = true;
    for (auto &t : ts)
        t.join();
    // Then a known amount of calls under function_graph: every one recorded once, entries
    // and returns paired, nothing lost.
    ASSERT_EQ(wr("current_tracer", "function_graph"), 0);
    const int per_thread = 500;
    ts.clear();
    for (int i = 0; i < 2; i++)
        ts.emplace_back([&] {
            for (int k = 0; k < per_thread; k++)
                tt_mid(k);
        });
    for (auto &t : ts)
        t.join();
    ASSERT_EQ(wr("tracing_on", "0"), 0);
    std::string t = rd("trace");
    EXPECT_FALSE(has(t, "LOST")) << "lost events";
    dprobe::rb_stats st = dprobe::ring_buffer_stats();
    EXPECT_EQ(st.overrun, 0u);
    EXPECT_EQ(st.dropped, 0u);
    size_t mids = 0, leaves = 0, closes = 0;
    for (auto &l : body(t)) {
        std::string c = call_of(l);
        if (c == "  tt_mid() {")
            mids++;
        else if (c == "    tt_leaf();")
            leaves++;
        else if (c == "  }")
            closes++;
        else
            EXPECT_TRUE(has(l, "=>") || has(l, "----") || l.empty()) << l;
    }
    EXPECT_EQ(mids, 2u * per_thread);
    EXPECT_EQ(leaves, 4u * per_thread);
    EXPECT_EQ(closes, 2u * per_thread);
}
