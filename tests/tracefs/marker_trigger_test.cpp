// Triggers on ftrace/print, the kernel's trace_marker_file (tracefs/trace_marker.h): a
// trace_marker write, and the program's dprobe_trace_marker(), fire the triggers of
// events/ftrace/print/trigger in their array, on the record as written (before its newline
// is added), as the kernel's tracing_mark_write does: hist by common_pid and by the text
// (`buf`), filters on buf, the latency recipe between two markers, snapshot (the kernel's
// alternation of records between the trace and the snapshot), traceoff, stacktrace,
// enable_event, in instances too, and the errors of bad commands.
#include "ftrace_test_util.h"

#include "tracefs/event_trigger.h"
#include "tracefs/trace_marker.h"

#include <dprobe/tracefs.h>

#include <cerrno>
#include <ctime>
#include <unistd.h>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int mk_leaf(int a)
{
    asm volatile("" ::: "memory");
    return a + 1;
}

// Writes TEXT with the program's own call (not inlined: the stack shows it).
TARGET int mk_caller(const char *text)
{
    int r = dprobe_trace_marker(text);
    asm volatile("" ::: "memory"); // not a tail call
    return r;
}

using namespace ftt;

namespace
{

const std::string k_trig = "events/ftrace/print/trigger";
const std::string k_hist = "events/ftrace/print/hist";

void clear_triggers()
{
    std::lock_guard<std::mutex> g(dprobe::trace_types_lock());
    dprobe::clear_event_triggers(0);
}

// A write of trace_marker as `echo -n TEXT > trace_marker` (no newline added): 0 or -errno.
int mark(const std::string &text, const std::string &file = "trace_marker")
{
    return T.write_file(file, text, false);
}

class marker_trigger : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        clear_triggers();
        reset_ftrace();
        ASSERT_EQ(wr("synthetic_events", "", true), 0);
    }
    void TearDown() override
    {
        clear_triggers();
        reset_ftrace();
        wr("synthetic_events", "", true);
    }
    static std::vector<std::string> records(const std::string &f = "trace") { return body(rd(f)); }
};

} // namespace

TEST_F(marker_trigger, print_alone_has_trigger_files_and_is_no_event_to_enable)
{
    std::vector<std::string> files;
    ASSERT_EQ(T.list("events/ftrace/print", files), 0);
    for (const char *f : {"trigger", "hist", "hist_debug", "format", "id"})
        EXPECT_NE(std::find(files.begin(), files.end(), f), files.end()) << f;
    ASSERT_EQ(T.list("events/ftrace/function", files), 0);
    EXPECT_EQ(std::find(files.begin(), files.end(), "trigger"), files.end());
    EXPECT_TRUE(rd(k_trig).starts_with("# Available triggers:\n# traceon traceoff snapshot"));
    EXPECT_FALSE(has(rd("available_events"), "ftrace:print"));
    EXPECT_EQ(wr("set_event", "ftrace:print"), -EINVAL);
    // A dynamic event cannot take the name (the kernel's EEXIST for an existing event call).
    EXPECT_EQ(wr("dynamic_events", "f:ftrace/print mk_leaf"), -EEXIST);
}

TEST_F(marker_trigger, hist_counts_the_writes_by_pid_and_by_text)
{
    ASSERT_EQ(wr(k_trig, "hist:keys=common_pid"), 0);
    ASSERT_EQ(wr(k_trig, "hist:keys=buf:sort=buf"), 0);
    for (int i = 0; i < 10; i++)
        ASSERT_EQ(mark(i % 3 ? "hello" : "bye"), 0);
    const std::string h = rd(k_hist);
    EXPECT_TRUE(matches(h, "\\{ common_pid: +" + std::to_string(gettid()) + " \\} hitcount: +10\n"))
        << h;
    EXPECT_TRUE(matches(h, "\\{ buf: bye +\\} hitcount: +4\n")) << h;
    EXPECT_TRUE(matches(h, "\\{ buf: hello +\\} hitcount: +6\n")) << h;
    // The records themselves end with the newline the write lacked.
    EXPECT_EQ(body(rd("trace")).size(), 10u);
    EXPECT_TRUE(has(rd("trace"), "tracing_mark_write: hello\n"));
}

TEST_F(marker_trigger, a_filter_reads_the_text_as_written_before_its_newline)
{
    ASSERT_EQ(wr(k_trig, "hist:keys=common_pid if buf == \"start\""), 0);
    ASSERT_EQ(wr(k_trig, "hist:keys=buf:vals=hitcount if buf ~ \"sta*\""), 0);
    ASSERT_EQ(mark("start"), 0);
    ASSERT_EQ(mark("start\n"), 0); // echo's newline is part of the text: no match
    ASSERT_EQ(mark("stop"), 0);
    const std::string h = rd(k_hist);
    EXPECT_TRUE(matches(h, "\\} hitcount: +1\n\nTotals:\n    Hits: 1\n")) << h;
    EXPECT_TRUE(matches(h, "\\{ buf: start +\\} hitcount: +1\n")) << h;
    EXPECT_TRUE(matches(h, "Hits: 2\n    Entries: 2\n")) << h; // "start" and "start\n"
}

TEST_F(marker_trigger, latency_between_two_markers_as_a_synthetic_event)
{
    // trigger-trace-marker-synthetic.tc: start and end markers of one writer.
    ASSERT_EQ(wr("synthetic_events", "latency u64 lat"), 0);
    ASSERT_EQ(wr(k_trig, "hist:keys=common_pid:ts0=common_timestamp.usecs if buf == \"start\""), 0);
    ASSERT_EQ(wr(k_trig, "hist:keys=common_pid:lat=common_timestamp.usecs-$ts0:"
                         "onmatch(ftrace.print).latency($lat) if buf == \"end\""),
              0);
    ASSERT_EQ(wr("events/synthetic/latency/trigger", "hist:keys=common_pid,lat:sort=lat"), 0);
    ASSERT_EQ(mark("start"), 0);
    struct timespec ts = {0, 3 * 1000 * 1000};
    nanosleep(&ts, nullptr);
    ASSERT_EQ(mark("end"), 0);
    ASSERT_EQ(mark("end"), 0); // ts0 read once: no second latency
    const std::string h = rd("events/synthetic/latency/hist");
    std::vector<std::string> g;
    ASSERT_TRUE(matches(h, "lat: +([0-9]+) \\} hitcount: +1\n", &g)) << h;
    EXPECT_GE(std::stoul(g[1]), 3000u); // microseconds, bounded from below only
    EXPECT_TRUE(has(h, "Hits: 1\n")) << h;
    // On print: one start and one end counted (the second end found no ts0: no hit at all).
    const std::string p = rd(k_hist);
    size_t ones = 0;
    for (const std::string &l : lines(p))
        ones += matches(l, "hitcount: +1$");
    EXPECT_EQ(ones, 2u) << p;
}

TEST_F(marker_trigger, snapshot_alternates_the_records_as_the_kernels_does)
{
    // trigger-trace-marker-snapshot.tc: each write's record is reserved, the snapshot swaps
    // the buffers, and the record lands in the one it was reserved in, now the snapshot.
    ASSERT_EQ(wr(k_trig, "snapshot"), 0);
    EXPECT_TRUE(has(rd("snapshot"), "Snapshot is allocated"));
    for (int i = 1; i <= 6; i++)
        ASSERT_EQ(mark("hello >" + std::to_string(i) + "<\n"), 0);
    auto t = records("trace"), s = records("snapshot");
    ASSERT_EQ(t.size(), 3u);
    ASSERT_EQ(s.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_TRUE(has(t[i], ">" + std::to_string(2 * i + 1) + "<")) << t[i];
        EXPECT_TRUE(has(s[i], ">" + std::to_string(2 * i + 2) + "<")) << s[i];
    }
}

TEST_F(marker_trigger, traceoff_keeps_its_marker_and_a_refused_write_fires_nothing)
{
    ASSERT_EQ(wr(k_trig, "traceoff:1 if buf == \"stop\""), 0);
    ASSERT_EQ(mark("one"), 0);
    ASSERT_EQ(mark("stop"), 0);
    EXPECT_EQ(rd("tracing_on"), "0\n");
    // The kernel's -EBADF: nothing reserved, no trigger runs (the count stays used up).
    EXPECT_EQ(mark("two"), -EBADF);
    auto r = records();
    ASSERT_EQ(r.size(), 2u);
    EXPECT_TRUE(has(r[1], "tracing_mark_write: stop")) << r[1];
    EXPECT_EQ(rd(k_trig), "traceoff:count=0 if buf == \"stop\"\n");
}

TEST_F(marker_trigger, stacktrace_is_the_callers_or_the_served_writers_one_frame)
{
    ASSERT_EQ(wr(k_trig, "stacktrace"), 0);
    ASSERT_EQ(mk_caller("from the program"), 0);
    std::string t = rd("trace");
    EXPECT_TRUE(matches(t, ": mk_caller: from the program\n[^\n]*<stack trace>\n => "
                           "dprobe_trace_marker\n => mk_caller\n"))
        << t;
    // A write served for another process: its pid, its name, the one frame dprobe knows.
    ASSERT_EQ(wr("trace", "", true), 0);
    ASSERT_EQ(wr(k_trig, "hist:keys=common_pid.execname"), 0);
    const pid_t parent = getppid();
    ASSERT_GT(dprobe::trace_marker_write(dprobe::trace_array_top(), "served", parent), 0);
    t = rd("trace");
    EXPECT_TRUE(matches(t, "-" + std::to_string(parent) +
                               " +\\[[0-9]+\\] [^\n]*<stack trace>\n => tracing_mark_write\n"))
        << t;
    std::string comm;
    {
        FILE *f = fopen(("/proc/" + std::to_string(parent) + "/comm").c_str(), "r");
        ASSERT_NE(f, nullptr);
        char buf[64] = {};
        ASSERT_NE(fgets(buf, sizeof buf, f), nullptr);
        fclose(f);
        comm = buf;
        comm.pop_back();
    }
    EXPECT_TRUE(matches(rd(k_hist),
                        "\\{ common_pid: " + comm + " +\\[ *" + std::to_string(parent) + "\\] \\}"))
        << rd(k_hist);
}

TEST_F(marker_trigger, enable_event_on_a_marker_in_an_instance_only)
{
    ASSERT_EQ(wr("dynamic_events", "f:mk/leaf mk_leaf a=$arg1:s32"), 0);
    ASSERT_EQ(T.mkdir("instances/m"), 0);
    const std::string it = "instances/m/" + k_trig;
    ASSERT_EQ(wr(it, "enable_event:mk:leaf if buf == \"go\""), 0);
    ASSERT_EQ(wr(it, "hist:keys=buf"), 0);
    EXPECT_EQ(rd("instances/m/events/mk/leaf/enable"), "0*\n");
    mk_leaf(1);
    ASSERT_EQ(mark("go"), 0); // the top level's marker: not the instance's trigger
    mk_leaf(2);
    ASSERT_EQ(mark("go", "instances/m/trace_marker"), 0);
    mk_leaf(3);
    auto r = records("instances/m/trace");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_TRUE(has(r[0], "tracing_mark_write: go")) << r[0];
    EXPECT_TRUE(has(r[1], "leaf: (mk_leaf") && has(r[1], "a=3")) << r[1];
    EXPECT_TRUE(has(rd("instances/m/" + k_hist), "{ buf: go"));
    EXPECT_FALSE(has(rd(k_hist), "{"));
    EXPECT_EQ(T.rmdir("instances/m"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:mk/leaf"), 0);
}

TEST_F(marker_trigger, bad_commands_are_the_kernels_errors_and_change_nothing)
{
    ASSERT_EQ(wr("error_log", "", true), 0);
    EXPECT_EQ(wr(k_trig, "hist:keys=nosuch"), -EINVAL);
    EXPECT_TRUE(has(rd("error_log"), "hist:ftrace:print: error: Couldn't find field\n"))
        << rd("error_log");
    EXPECT_EQ(wr(k_trig, "traceoff if nosuch == 1"), -EINVAL);
    EXPECT_TRUE(has(rd("error_log"), "event filter parse error: error: Field not found\n"));
    EXPECT_EQ(wr(k_trig, "hist:keys=buf:vals=buf"), -EINVAL); // a string is no value
    EXPECT_TRUE(rd(k_trig).starts_with("# Available triggers:"));
    ASSERT_EQ(mark("x"), 0);
    EXPECT_EQ(rd(k_hist), "");
}
