// hist triggers through the tree (events/GROUP/EVENT/trigger and hist), on fprobe events
// of this program's functions hit by real calls: the trigger listing and the hist file as
// the kernel prints them, several hist triggers on one event, "if" filters, name= sharing
// a table between events, :pause / :cont / :clear, '!' removal, enable_hist and
// disable_hist, a stacktrace key, the size= bound and its drops, exact counts from several
// threads, and the kernel's errors in error_log with their caret (nothing changed).
#include "ftrace_test_util.h"

#include "tracefs/event_trigger.h"

#include <cerrno>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET long hist_work(unsigned a, long b)
{
    asm volatile("" ::: "memory");
    return a + b;
}
TARGET long hist_other(unsigned a)
{
    asm volatile("" ::: "memory");
    return a;
}
TARGET long hist_caller(unsigned a)
{
    long r = hist_work(a, 1);
    asm volatile("" ::: "memory"); // not a tail call
    return r + 1;
}

using namespace ftt;

namespace
{

const std::string trig = "events/hg/work/trigger";
const std::string hist = "events/hg/work/hist";

void clear_triggers()
{
    std::lock_guard<std::mutex> g(dprobe::trace_types_lock());
    dprobe::clear_event_triggers(0);
}

std::string header(const std::string &info)
{
    return "# event histogram\n#\n# trigger info: " + info + "\n#\n\n";
}

std::string totals(unsigned long hits, unsigned entries, unsigned long dropped)
{
    return "\nTotals:\n    Hits: " + std::to_string(hits) +
           "\n    Entries: " + std::to_string(entries) +
           "\n    Dropped: " + std::to_string(dropped) + "\n";
}

class hist_trigger : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        clear_triggers();
        reset_ftrace();
        ASSERT_EQ(wr("dynamic_events", "f:hg/work hist_work a=$arg1:u32 b=$arg2:s64"), 0);
        ASSERT_EQ(wr("dynamic_events", "f:hg/other hist_other a=$arg1:u32"), 0);
        ASSERT_EQ(wr("error_log", "", true), 0);
    }
    void TearDown() override
    {
        clear_triggers();
        reset_ftrace();
    }
};

} // namespace

TEST_F(hist_trigger, keys_values_listing_and_hist_text)
{
    ASSERT_EQ(wr(trig, "hist:keys=a:vals=hitcount,b"), 0) << rd("error_log");
    const std::string info = "hist:keys=a:vals=hitcount,b:sort=hitcount:size=2048 [active]";
    EXPECT_EQ(rd(trig), info + "\n");
    // The trigger holds the event in soft mode: its probe is armed, nothing is recorded.
    EXPECT_EQ(rd("events/hg/work/enable"), "0*\n");
    for (int i = 0; i < 3; i++)
        hist_work(1, 10);
    hist_work(2, 5);
    EXPECT_EQ(rd(hist), header(info) +
                            "{ a:          2 } hitcount:          1  b:          5\n"
                            "{ a:          1 } hitcount:          3  b:         30\n" +
                            totals(4, 2, 0));
    EXPECT_TRUE(body(rd("trace")).empty());
    EXPECT_TRUE(has(rd("events/hg/work/hist_debug"), "  n_vals: 2\n  n_keys: 1\n"));

    // Removal: '!' and the same keys and values.
    ASSERT_EQ(wr(trig, "!hist:keys=a:vals=hitcount,b"), 0);
    EXPECT_EQ(rd(hist), "");
    EXPECT_EQ(rd("events/hg/work/enable"), "0\n");
}

TEST_F(hist_trigger, execname_sort_filter_and_two_histograms)
{
    ASSERT_EQ(wr(trig, "hist:keys=common_pid.execname,a:sort=a.descending if b > 6"), 0)
        << rd("error_log");
    ASSERT_EQ(wr(trig, "hist:keys=b.log2"), 0) << rd("error_log");
    const std::string i1 =
        "hist:keys=common_pid.execname,a:vals=hitcount:sort=a.descending:size=2048 if b > 6 "
        "[active]";
    const std::string i2 = "hist:keys=b.log2:vals=hitcount:sort=hitcount:size=2048 [active]";
    long tid = 0;
    std::thread([&] {
        prctl(PR_SET_NAME, "hist-thread", 0, 0, 0);
        tid = gettid();
        hist_work(1, 7);
        hist_work(2, 7);
        hist_work(2, 1000);
        hist_work(3, 5); // filtered out of the first
    }).join();
    char pid[16];
    std::snprintf(pid, sizeof(pid), "%10ld", tid);
    // Hist triggers are listed oldest first, separated by a blank line pair.
    EXPECT_EQ(rd(hist), header(i1) + "{ common_pid: hist-thread     [" + pid +
                            "], a:          2 } hitcount:          2\n" +
                            "{ common_pid: hist-thread     [" + pid +
                            "], a:          1 } hitcount:          1\n" + totals(3, 2, 0) + "\n\n" +
                            header(i2) + "{ b: ~ 2^10 } hitcount:          1\n" +
                            "{ b: ~ 2^3  } hitcount:          3\n" + totals(4, 2, 0));
}

TEST_F(hist_trigger, pause_cont_clear)
{
    ASSERT_EQ(wr(trig, "hist:keys=a:pause"), 0);
    const std::string spec = "hist:keys=a:vals=hitcount:sort=hitcount:size=2048";
    EXPECT_EQ(rd(trig), spec + " [paused]\n");
    hist_work(1, 1);
    EXPECT_EQ(rd(hist), header(spec + " [paused]") + totals(0, 0, 0));
    ASSERT_EQ(wr(trig, "hist:keys=a:cont"), 0);
    EXPECT_EQ(rd(trig), spec + " [active]\n");
    hist_work(1, 1);
    hist_work(1, 1);
    EXPECT_EQ(rd(hist), header(spec + " [active]") + "{ a:          1 } hitcount:          2\n" +
                            totals(2, 1, 0));
    ASSERT_EQ(wr(trig, "hist:keys=a:clear"), 0);
    EXPECT_EQ(rd(hist), header(spec + " [active]") + totals(0, 0, 0));
    hist_work(7, 1);
    EXPECT_TRUE(has(rd(hist), "{ a:          7 } hitcount:          1\n")) << rd(hist);
    // Still one trigger: :clear did not add one.
    EXPECT_EQ(rd(trig), spec + " [active]\n");
}

TEST_F(hist_trigger, named_table_shared_between_events)
{
    ASSERT_EQ(wr(trig, "hist:name=shared:keys=a"), 0) << rd("error_log");
    ASSERT_EQ(wr("events/hg/other/trigger", "hist:name=shared:keys=a"), 0) << rd("error_log");
    const std::string info =
        "hist:name=shared:keys=a:vals=hitcount:sort=hitcount:size=2048 [active]";
    EXPECT_EQ(rd(trig), info + "\n");
    hist_work(5, 0);
    hist_other(5);
    hist_other(6);
    const std::string expect = header(info) + "{ a:          6 } hitcount:          1\n" +
                               "{ a:          5 } hitcount:          2\n" + totals(3, 2, 0);
    EXPECT_EQ(rd(hist), expect);
    EXPECT_EQ(rd("events/hg/other/hist"), expect);
    // A different layout under the same name is refused, the caret under the name.
    EXPECT_EQ(wr("events/hg/other/trigger", "hist:name=shared:keys=a.hex"), -EINVAL);
    EXPECT_TRUE(has(rd("error_log"),
                    "hist:hg:other: error: Named hist trigger doesn't match existing named "
                    "trigger (includes variables)\n  Command: hist:name=shared:keys=a.hex\n"
                    "                ^\n"))
        << rd("error_log");
    // A third user of the name, then the first removed: the table lives on with the other
    // two, and each of them can still be removed by its own '!'.
    ASSERT_EQ(wr("dynamic_events", "f:hg/third hist_caller a=$arg1:u32"), 0);
    ASSERT_EQ(wr("events/hg/third/trigger", "hist:name=shared:keys=a"), 0) << rd("error_log");
    ASSERT_EQ(wr(trig, "!hist:name=shared:keys=a"), 0);
    EXPECT_EQ(rd(hist), "");
    hist_other(6);
    hist_caller(6); // hg/third (hist_work's event no longer has a trigger)
    EXPECT_TRUE(has(rd("events/hg/other/hist"), "{ a:          6 } hitcount:          3\n"))
        << rd("events/hg/other/hist");
    EXPECT_EQ(rd("events/hg/third/hist"), rd("events/hg/other/hist"));
    ASSERT_EQ(wr("events/hg/third/trigger", "!hist:name=shared:keys=a"), 0);
    EXPECT_EQ(rd("events/hg/third/hist"), "");
    ASSERT_EQ(wr("events/hg/other/trigger", "!hist:name=shared:keys=a"), 0);
    EXPECT_EQ(rd("events/hg/other/hist"), "");
    ASSERT_EQ(wr("dynamic_events", "-:hg/third"), 0);
}

TEST_F(hist_trigger, enable_hist_and_disable_hist)
{
    ASSERT_EQ(wr(trig, "hist:keys=a"), 0);
    ASSERT_EQ(wr("events/hg/other/trigger", "disable_hist:hg:work if a == 1"), 0)
        << rd("error_log");
    // enable_hist and disable_hist share a type: one of them per target (the kernel's EEXIST).
    EXPECT_EQ(wr("events/hg/other/trigger", "enable_hist:hg:work if a == 2"), -EEXIST);
    EXPECT_EQ(rd("events/hg/other/trigger"), "disable_hist:hg:work:unlimited if a == 1\n");
    hist_work(1, 0);
    hist_other(2); // filtered out
    hist_work(1, 0);
    hist_other(1); // pauses hg/work's hist
    hist_work(1, 0);
    EXPECT_TRUE(has(rd(trig), "[paused]")) << rd(trig);
    ASSERT_EQ(wr("events/hg/other/trigger", "!disable_hist:hg:work if a == 1"), 0);
    ASSERT_EQ(wr("events/hg/other/trigger", "enable_hist:hg:work:1"), 0) << rd("error_log");
    hist_other(9); // lets it run again, once
    hist_work(1, 0);
    EXPECT_TRUE(has(rd(hist), "{ a:          1 } hitcount:          3\n")) << rd(hist);
    EXPECT_EQ(rd("events/hg/other/trigger"), "enable_hist:hg:work:count=0\n");
}

TEST_F(hist_trigger, stacktrace_key)
{
    ASSERT_EQ(wr(trig, "hist:keys=common_stacktrace"), 0) << rd("error_log");
    EXPECT_EQ(rd(trig),
              "hist:keys=common_stacktrace:vals=hitcount:sort=hitcount:size=2048 [active]\n");
    static volatile int twice = 2; // a count the compiler cannot unroll: one call site
    for (int i = 0; i < twice; i++)
        hist_caller(1);
    const std::string h = rd(hist);
    EXPECT_TRUE(has(h, "{ common_stacktrace:\n         hist_work+0x")) << h;
    EXPECT_TRUE(has(h, "\n         hist_caller+0x")) << h;
    EXPECT_TRUE(has(h, "\n} hitcount:          2\n")) << h;
}

TEST_F(hist_trigger, size_bound_drops_and_threads)
{
    ASSERT_EQ(wr(trig, "hist:keys=a:vals=b:size=128"), 0);
    for (unsigned a = 0; a < 200; a++)
        hist_work(a, 1);
    EXPECT_TRUE(has(rd(hist), totals(128, 128, 72))) << rd(hist);
    ASSERT_EQ(wr(trig, "!hist:keys=a:vals=b:size=128"), 0);

    ASSERT_EQ(wr(trig, "hist:keys=a:vals=b"), 0);
    constexpr unsigned threads = 4, per = 50000;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; t++)
        ts.emplace_back([t] {
            for (unsigned i = 0; i < per; i++)
                hist_work(t, 2);
        });
    for (auto &t : ts)
        t.join();
    const std::string h = rd(hist);
    for (unsigned t = 0; t < threads; t++)
        EXPECT_TRUE(has(h, "{ a:          " + std::to_string(t) +
                               " } hitcount:      50000  b:     100000\n"))
            << h;
    EXPECT_TRUE(has(h, totals(threads * per, threads, 0))) << h;
}

TEST_F(hist_trigger, errors_in_error_log_change_nothing)
{
    ASSERT_EQ(wr(trig, "hist:keys=a"), 0);
    const std::string before = rd(trig);
    struct {
        const char *cmd, *msg;
        int err;
        unsigned caret; // column in "hist:..."
    } cases[] = {
        {"hist:keys=nofield", "Couldn't find field", EINVAL, 10},
        {"hist:keys=a.bogus", "Invalid field modifier", EINVAL, 12},
        {"hist:keys=a:vals=b.sym", "Invalid field modifier", EINVAL, 17},
        {"hist:keys=a:sort=junk", "Sort field must be a key or a val", EINVAL, 17},
        {"hist:keys=a", "Hist trigger already exists", EEXIST, 0},
        {"hist:keys=b:cont", "Can't clear or continue a nonexistent hist trigger", ENOENT, 0},
    };
    for (const auto &c : cases) {
        ASSERT_EQ(wr("error_log", "", true), 0);
        EXPECT_EQ(wr(trig, c.cmd), -c.err) << c.cmd;
        const std::string want = std::string("hist:hg:work: error: ") + c.msg +
                                 "\n  Command: " + c.cmd + "\n" + std::string(11 + c.caret, ' ') +
                                 "^\n";
        EXPECT_TRUE(has(rd("error_log"), want)) << c.cmd << "\n" << rd("error_log");
        EXPECT_EQ(rd(trig), before) << c.cmd;
    }
    // Refused without a log entry, like the kernel: no keys, 4 keys, a bad size.
    for (const char *c :
         {"hist:vals=a", "hist:keys=a,b,common_pid,common_cpu", "hist:keys=a:size=9"}) {
        ASSERT_EQ(wr("error_log", "", true), 0);
        EXPECT_EQ(wr(trig, c), -EINVAL) << c;
        EXPECT_EQ(rd("error_log"), "") << c;
    }
    EXPECT_EQ(rd(trig), before);
}

TEST_F(hist_trigger, instances_have_their_own_and_rmdir_or_reset_removes_them)
{
    ASSERT_EQ(T.mkdir("instances/hi"), 0);
    const std::string itrig = "instances/hi/events/hg/work/trigger";
    const std::string ihist = "instances/hi/events/hg/work/hist";
    ASSERT_EQ(wr(itrig, "hist:keys=a"), 0) << rd("error_log");
    ASSERT_EQ(wr(trig, "hist:keys=b"), 0);
    // enable_hist in the instance sees only the instance's hist triggers.
    ASSERT_EQ(wr("instances/hi/events/hg/other/trigger", "disable_hist:hg:work"), 0);
    hist_work(3, 4);
    EXPECT_TRUE(has(rd(ihist), "{ a:          3 } hitcount:          1\n")) << rd(ihist);
    EXPECT_TRUE(has(rd(hist), "{ b:          4 } hitcount:          1\n")) << rd(hist);
    EXPECT_FALSE(has(rd(hist), "{ a:")) << rd(hist);
    hist_other(0);
    EXPECT_TRUE(has(rd(itrig), "[paused]")) << rd(itrig);
    EXPECT_TRUE(has(rd(trig), "[active]")) << rd(trig);
    ASSERT_EQ(T.rmdir("instances/hi"), 0);
    // The disable_hist of a new instance finds no hist trigger of the old one.
    ASSERT_EQ(T.mkdir("instances/hi"), 0);
    ASSERT_EQ(wr("instances/hi/events/hg/other/trigger", "disable_hist:hg:work"), 0);
    hist_other(0);
    EXPECT_EQ(rd(ihist), "");
    EXPECT_TRUE(has(rd(trig), "[active]")) << rd(trig);
    ASSERT_EQ(T.rmdir("instances/hi"), 0);
}
