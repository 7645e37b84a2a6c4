// hist variables, expressions, inter-event references and actions through the tree, on
// fprobe entry and exit events of this program's functions hit by real calls: a value saved
// at entry and read at exit by key (common_pid), onmatch() writing a synthetic event whose
// own hist counts exact buckets, onmax()/onchange() with save() and snapshot(), the trigger
// listing and hist text as the kernel prints them, hist_debug's variable sections, string
// params copied into static and dynamic synthetic fields, EBUSY
// for a referenced variable, and the kernel's errors with their carets (nothing changed).
#include "ftrace_test_util.h"

#include "tracefs/event_trigger.h"

#include <cerrno>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

// Returns b + a: at exit, r - b is a (what the inter-event expression computes).
TARGET long hv_func(unsigned a, long b)
{
    asm volatile("" ::: "memory");
    return static_cast<long>(a) + b;
}
TARGET long hv_stack_caller(unsigned a)
{
    long r = hv_func(a, 1);
    asm volatile("" ::: "memory"); // not a tail call: on the stack hv_func's entry sees
    return r;
}
TARGET long hv_sleep(unsigned ms)
{
    usleep(ms * 1000);
    return ms;
}

using namespace ftt;

namespace
{

const std::string enter = "events/hv/enter/trigger";
const std::string leave = "events/hv/leave/trigger";
const std::string in = "events/hv/in/trigger";

void clear_triggers()
{
    std::lock_guard<std::mutex> g(dprobe::trace_types_lock());
    dprobe::clear_event_triggers(0);
}

std::string header(const std::string &info)
{
    return "# event histogram\n#\n# trigger info: " + info + "\n#\n\n";
}

std::string totals(unsigned long hits, unsigned entries)
{
    return "\nTotals:\n    Hits: " + std::to_string(hits) +
           "\n    Entries: " + std::to_string(entries) + "\n    Dropped: 0\n";
}

// The error_log entries without their time stamps.
std::vector<std::string> errors()
{
    std::vector<std::string> v;
    for (const std::string &l : lines(rd("error_log")))
        if (l.starts_with("["))
            v.push_back(l.substr(l.find("] ") + 2));
        else if (!l.empty())
            v.back() += "\n" + l;
    return v;
}

class hist_vars : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        clear_triggers();
        reset_ftrace();
        wr("synthetic_events", "", true);
        ASSERT_EQ(wr("dynamic_events", "f:hv/enter hv_func a=$arg1:u32 b=$arg2:u64"), 0);
        ASSERT_EQ(wr("dynamic_events", "f:hv/leave hv_func%return ret=$retval:u64"), 0);
        ASSERT_EQ(wr("synthetic_events", "diff u64 d; pid_t pid"), 0) << rd("error_log");
        ASSERT_EQ(wr("error_log", "", true), 0);
    }
    void TearDown() override
    {
        clear_triggers();
        reset_ftrace();
        wr("synthetic_events", "", true);
    }
};

} // namespace

TEST_F(hist_vars, onmatch_trace_synthetic_event_and_its_hist)
{
    ASSERT_EQ(wr(enter, "hist:keys=common_pid:t0=b"), 0) << rd("error_log");
    ASSERT_EQ(
        wr(leave, "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).trace(diff,$d,common_pid)"), 0)
        << rd("error_log");
    ASSERT_EQ(wr("events/synthetic/diff/trigger", "hist:keys=d:sort=d"), 0) << rd("error_log");
    ASSERT_EQ(wr("events/synthetic/diff/enable", "1"), 0);
    EXPECT_EQ(rd(enter),
              "hist:keys=common_pid:vals=hitcount:t0=b:sort=hitcount:size=2048 [active]\n");
    EXPECT_EQ(rd(leave), "hist:keys=common_pid:vals=hitcount:d=ret-$t0:sort=hitcount:size=2048:"
                         "onmatch(hv.enter).trace(diff,$d,common_pid) [active]\n");
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    for (int i = 0; i < 3; i++)
        hv_func(5, 1000);
    hv_func(7, 20);
    ASSERT_EQ(wr("tracing_on", "0"), 0);
    const std::string info = "hist:keys=d:vals=hitcount:sort=d:size=2048 [active]";
    EXPECT_EQ(rd("events/synthetic/diff/hist"),
              header(info) + "{ d:          5 } hitcount:          3\n" +
                  "{ d:          7 } hitcount:          1\n" + totals(4, 2));
    // The synthetic event's own records, as print_synth_event prints them.
    std::vector<std::string> b = body(rd("trace"));
    ASSERT_EQ(b.size(), 4u) << rd("trace");
    const std::string pid = std::to_string(gettid());
    EXPECT_TRUE(has(b[0], ": diff: d=5 pid=" + pid)) << b[0];
    EXPECT_TRUE(has(b[3], ": diff: d=7 pid=" + pid)) << b[3];
    // An exit without its entry (the variable was read once) writes nothing.
    EXPECT_TRUE(has(rd("events/hv/leave/hist"), "hitcount:          4\n"));
    const std::string debug = rd("events/hv/leave/hist_debug");
    EXPECT_TRUE(has(debug, "        HIST_FIELD_FL_VAR\n      var.name: d\n")) << debug;
    EXPECT_TRUE(has(debug, "\n  variable reference fields:\n")) << debug;
    EXPECT_TRUE(has(debug, "      name: t0\n")) << debug;
    EXPECT_TRUE(has(debug, "    hist_data->actions[0].match_data.event_system: hv\n")) << debug;

    // The entry's hist cannot go while the exit's references its variable; the synthetic
    // event cannot go while an action uses it.
    EXPECT_EQ(wr(enter, "!hist:keys=common_pid:t0=b"), -EBUSY);
    EXPECT_EQ(wr("synthetic_events", "!diff"), -EBUSY);
    ASSERT_EQ(
        wr(leave, "!hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).trace(diff,$d,common_pid)"),
        0);
    EXPECT_EQ(wr(enter, "!hist:keys=common_pid:t0=b"), 0);
    EXPECT_FALSE(has(rd(enter), "hist:"));
}

TEST_F(hist_vars, shorthand_action_threads_and_timestamps)
{
    ASSERT_EQ(wr("synthetic_events", "lat_us u64 lat"), 0);
    ASSERT_EQ(wr("dynamic_events", "f:hv/sin hv_sleep"), 0);
    ASSERT_EQ(wr("dynamic_events", "f:hv/sout hv_sleep%return"), 0);
    ASSERT_EQ(wr("events/hv/sin/trigger", "hist:keys=common_pid:ts0=common_timestamp.usecs"), 0)
        << rd("error_log");
    ASSERT_EQ(
        wr("events/hv/sout/trigger",
           "hist:keys=common_pid:lat=common_timestamp.usecs-$ts0:onmatch(hv.sin).lat_us($lat)"),
        0)
        << rd("error_log");
    EXPECT_EQ(rd("events/hv/sout/trigger"),
              "hist:keys=common_pid:vals=hitcount:lat=common_timestamp.usecs-$ts0:sort=hitcount:"
              "size=2048:clock=global:onmatch(hv.sin).lat_us($lat) [active]\n");
    ASSERT_EQ(wr("events/synthetic/lat_us/trigger", "hist:keys=lat.buckets=1000"), 0)
        << rd("error_log");
    // Two threads interleave: each exit pairs with its own thread's entry.
    std::thread t([] {
        for (int i = 0; i < 3; i++)
            hv_sleep(12);
    });
    for (int i = 0; i < 3; i++)
        hv_sleep(3);
    t.join();
    const std::string h = rd("events/synthetic/lat_us/hist");
    ASSERT_TRUE(matches(h, "Hits: 6\n")) << h;
    // Each call lasts its sleep or longer (scheduling only adds, and on a loaded machine a
    // 3 ms call may outlast 12 ms): none below 3 ms, at least the three long ones at 12 ms
    // or more.
    unsigned below = 0, long_calls = 0, all = 0;
    for (const std::string &l : lines(h)) {
        unsigned long lo = 0, n = 0;
        if (std::sscanf(l.c_str(), "{ lat: ~ %lu-%*u } hitcount: %lu", &lo, &n) != 2) continue;
        all += n;
        if (lo < 3000) below += n;
        if (lo >= 12000) long_calls += n;
    }
    EXPECT_EQ(all, 6u) << h;
    EXPECT_EQ(below, 0u) << h;
    EXPECT_GE(long_calls, 3u) << h;
}

TEST_F(hist_vars, onmax_save_onchange_and_snapshot)
{
    ASSERT_EQ(wr(enter, "hist:keys=common_pid:t0=b"), 0);
    ASSERT_EQ(wr(leave, "hist:keys=common_pid:d=ret-$t0:onmax($d).save(ret)"), 0)
        << rd("error_log");
    hv_func(3, 100);
    hv_func(9, 100);
    hv_func(4, 100);
    const std::string pid = std::to_string(gettid());
    const std::string h = rd("events/hv/leave/hist");
    EXPECT_TRUE(matches(h, "\\{ common_pid: +" + pid + " \\} hitcount: +3\n\tmax: +9  ret: +109\n"))
        << h;
    ASSERT_EQ(wr(leave, "!hist:keys=common_pid:d=ret-$t0:onmax($d).save(ret)"), 0);

    ASSERT_EQ(wr(leave, "hist:keys=common_pid:d=ret-$t0:onchange($d).save(ret)"), 0)
        << rd("error_log");
    EXPECT_EQ(rd(leave), "hist:keys=common_pid:vals=hitcount:d=ret-$t0:sort=hitcount:size=2048:"
                         "onchange($d).save(ret) [active]\n");
    hv_func(6, 10);
    hv_func(2, 10);
    EXPECT_TRUE(has(rd("events/hv/leave/hist"), "\tchanged:          2  ret:         12\n"))
        << rd("events/hv/leave/hist");
    ASSERT_EQ(wr(leave, "!hist:keys=common_pid:d=ret-$t0:onchange($d).save(ret)"), 0);

    ASSERT_EQ(wr(leave, "hist:keys=common_pid:d=ret-$t0:onmax($d).snapshot()"), 0)
        << rd("error_log");
    ASSERT_EQ(wr("events/hv/enter/enable", "1"), 0);
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    hv_func(11, 0);
    hv_func(5, 0);
    const std::string s = rd("events/hv/leave/hist");
    EXPECT_TRUE(matches(s, "\nSnapshot taken \\(see tracing/snapshot\\)\\.  Details:\n"
                           "\ttriggering value \\{ onmax\\(\\$d\\) \\}: +11\ttriggered by event "
                           "with key: \\{ common_pid: +" +
                               pid + " \\}\n"))
        << s;
    EXPECT_TRUE(has(rd("snapshot"), "enter: (hv_func")) << rd("snapshot");
}

TEST_F(hist_vars, expressions_constants_and_key_expressions)
{
    ASSERT_EQ(wr(enter, "hist:keys=a*2+1:x=2*3,y=-(b),z=b/4"), 0) << rd("error_log");
    EXPECT_EQ(rd(enter), "hist:keys=a*2+1:vals=hitcount:x=6,y=-(b),z=b/4:sort=hitcount:"
                         "size=2048 [active]\n");
    hv_func(1, 8);
    hv_func(1, 8);
    hv_func(4, 8);
    EXPECT_TRUE(has(rd("events/hv/enter/hist"), "{ a*2+1:          3 } hitcount:          2\n"))
        << rd("events/hv/enter/hist");
    EXPECT_TRUE(has(rd("events/hv/enter/hist"), "{ a*2+1:          9 } hitcount:          1\n"));
    // Left to right: 64/8/4/2 is 1 (both constants, folded).
    ASSERT_EQ(wr(leave, "hist:keys=ret:c=64/8/4/2"), 0) << rd("error_log");
    EXPECT_TRUE(has(rd(leave), ":c=1:")) << rd(leave);
}

TEST_F(hist_vars, errors_are_the_kernels_with_their_caret)
{
    ASSERT_EQ(wr(enter, "hist:keys=common_pid:t0=b:ts=common_timestamp"), 0);
    struct bad {
        std::string file, cmd;
        std::vector<std::pair<std::string, std::string>> entries; // message, caret under
        int err;
    } cases[] = {
        {leave,
         "hist:keys=common_pid:d=ret-$nosuch",
         {{"Couldn't find variable", "nosuch"}, {"Couldn't find field", "$nosuch"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).trace(nosynth,$d)",
         {{"Couldn't find synthetic event", "nosynth"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).trace(diff,$d)",
         {{"Param count doesn't match synthetic event field count", "diff"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).trace(diff,$d,ret)",
         {{"Param type doesn't match synthetic event field type", "ret"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hv.nosuch).trace(diff,$d,common_pid)",
         {{"Invalid subsystem or event name", "nosuch"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hventer).trace(diff,$d,common_pid)",
         {{"Missing subsystem", "hventer"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter.trace(diff,$d,common_pid)",
         {{"Invalid subsystem or event name", "enter.trace"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter",
         {{"No closing paren found", "hv.enter"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmax(d).save(ret)",
         {{"For onmax(x) or onchange(x), x must be a variable", "d"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmax($e).save(ret)",
         {{"Couldn't find onmax or onchange variable", "e"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).save(ret)",
         {{"Handler doesn't support action", "save"}},
         -EINVAL},
        {leave,
         "hist:keys=common_pid:d=common_timestamp.usecs-$ts",
         {{"Timestamp units in expression don't match", ""}},
         -EINVAL},
        {leave, "hist:keys=common_pid:d=nofield", {{"Couldn't find field", "nofield"}}, -EINVAL},
        {leave, "hist:keys=ret.bogus", {{"Invalid field modifier", "bogus"}}, -EINVAL},
        {leave, "hist:keys=common_pid:d=ret/0", {{"Division by zero", "0"}}, -EDOM},
        {leave,
         "hist:keys=$t0",
         {{"Using variable references in keys not supported", "$t0"}},
         -EINVAL},
        {leave, "hist:keys=common_pid:d=ret:d=ret", {{"Variable already defined", "d"}}, -EINVAL},
    };
    for (const bad &b : cases) {
        SCOPED_TRACE(b.cmd);
        ASSERT_EQ(wr("error_log", "", true), 0);
        EXPECT_EQ(wr(b.file, b.cmd), b.err);
        std::vector<std::string> e = errors();
        ASSERT_EQ(e.size(), b.entries.size()) << rd("error_log");
        const std::string cmd = b.cmd;
        for (size_t i = 0; i < e.size(); i++) {
            const auto &[msg, at] = b.entries[i];
            size_t pos = at.empty() ? 0 : cmd.find(at);
            ASSERT_NE(pos, std::string::npos);
            EXPECT_EQ(e[i], "hist:hv:leave: error: " + msg + "\n  Command: " + cmd + "\n" +
                                std::string(11 + pos, ' ') + "^")
                << rd("error_log");
        }
        EXPECT_FALSE(has(rd(leave), "hist:")) << rd(leave);
    }
    // Too many keys and vars (the kernel's limits).
    EXPECT_EQ(wr(leave, "hist:keys=ret,common_pid,common_cpu,ret.hex"), -EINVAL);
    EXPECT_FALSE(has(rd(leave), "hist:")) << rd(leave);
}

TEST_F(hist_vars, string_params_static_and_dynamic)
{
    // A field param that is a string (the thread's comm) is copied into the entry and then
    // into the synthetic event's char[16] and its dynamic char[].
    ASSERT_EQ(wr("synthetic_events", "names u64 d; char c[16]; char n[]"), 0) << rd("error_log");
    ASSERT_EQ(wr(enter, "hist:keys=common_pid:t0=b"), 0);
    ASSERT_EQ(wr(leave, "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).names($d,comm,comm)"), 0)
        << rd("error_log");
    ASSERT_EQ(wr("events/synthetic/names/enable", "1"), 0);
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    std::thread([] {
        prctl(PR_SET_NAME, "hv-names", 0, 0, 0);
        hv_func(6, 1);
    }).join();
    ASSERT_EQ(wr("tracing_on", "0"), 0);
    std::vector<std::string> b = body(rd("trace"));
    ASSERT_EQ(b.size(), 1u) << rd("trace");
    EXPECT_TRUE(has(b[0], ": names: d=6 c=hv-names n=hv-names")) << b[0];
    // A string cannot go where a number is expected.
    ASSERT_EQ(wr(leave, "!hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).names($d,comm,comm)"),
              0);
    EXPECT_EQ(wr(leave, "hist:keys=common_pid:d=ret-$t0:onmatch(hv.enter).names(comm,comm,comm)"),
              -EINVAL);
    EXPECT_TRUE(has(rd("error_log"), "error: Param type doesn't match synthetic event field type"))
        << rd("error_log");
}

TEST_F(hist_vars, a_field_of_the_onmatch_event_gets_a_hist_trigger_there)
{
    // `a` is a field of hv/in, not of hv/leave (the kernel's create_field_var_hist): a
    // hist trigger with the keys (and filter) of enter's compatible one holds it.
    ASSERT_EQ(wr("dynamic_events", "f:hv/in hv_func num=$arg1:u32 base=$arg2:u64"), 0);
    ASSERT_EQ(wr("synthetic_events", "pair u64 d; unsigned int num"), 0);
    ASSERT_EQ(wr(in, "hist:keys=common_pid:t0=base if num < 100"), 0);
    const std::string cmd = "hist:keys=common_pid:d=ret-$t0:onmatch(hv.in).pair($d,num)";
    ASSERT_EQ(wr(leave, cmd), 0) << rd("error_log");
    EXPECT_EQ(rd(in), "hist:keys=common_pid:vals=hitcount:synthetic_num=num:sort=hitcount:"
                      "size=2048 if num < 100 [active]\n"
                      "hist:keys=common_pid:vals=hitcount:t0=base:sort=hitcount:size=2048 "
                      "if num < 100 [active]\n");
    // The attempt on leave's own fields is logged on the way, as the kernel's is (the caret
    // under the first "num" of the command).
    std::vector<std::string> e = errors();
    ASSERT_EQ(e.size(), 2u) << rd("error_log");
    const std::string caret = std::string(11 + cmd.find("num"), ' ') + "^";
    EXPECT_EQ(e[0], "hist:hv:leave: error: Couldn't find field\n  Command: " + cmd + "\n" + caret);
    EXPECT_EQ(e[1], "hist:hv:leave: error: Couldn't parse field variable\n  Command: " + cmd +
                        "\n" + caret);
    // A qualified param names the event: found there at once, the same variable reused.
    ASSERT_EQ(wr("synthetic_events", "pair2 unsigned int num"), 0);
    ASSERT_EQ(wr("error_log", "", true), 0);
    ASSERT_EQ(wr(leave, "hist:keys=common_pid:e=ret:onchange($e).pair2(hv.in.num)"), 0)
        << rd("error_log");
    EXPECT_EQ(rd("error_log"), "");
    EXPECT_EQ(lines(rd(in)).size(), 2u) << rd(in);
    ASSERT_EQ(wr("events/synthetic/pair/enable", "1"), 0);
    ASSERT_EQ(wr("events/synthetic/pair2/enable", "1"), 0);
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    hv_func(5, 1000);
    hv_func(7, 20);
    hv_func(200, 1); // filtered out on in: no t0, no num, no pair
    ASSERT_EQ(wr("tracing_on", "0"), 0);
    const std::vector<std::string> b = body(rd("trace"));
    std::vector<std::string> pairs, pairs2;
    for (const std::string &l : b) {
        if (has(l, ": pair: ")) pairs.push_back(l.substr(l.find(": pair: ")));
        if (has(l, ": pair2: ")) pairs2.push_back(l.substr(l.find(": pair2: ")));
    }
    EXPECT_EQ(pairs, (std::vector<std::string>{": pair: d=5 num=5", ": pair: d=7 num=7"}))
        << rd("trace");
    // onchange(ret) fires for the third call too, with the hidden variable's last value (an
    // action's param is not read once).
    EXPECT_EQ(pairs2,
              (std::vector<std::string>{": pair2: num=5", ": pair2: num=7", ": pair2: num=7"}))
        << rd("trace");
    // Removing the trigger that made it removes it too (once nothing else reads it).
    ASSERT_EQ(wr(leave, "!" + cmd), 0);
    EXPECT_EQ(lines(rd(in)).size(), 2u) << rd(in); // pair2's trigger still reads it
    ASSERT_EQ(wr(leave, "!hist:keys=common_pid:e=ret:onchange($e).pair2(hv.in.num)"), 0);
    EXPECT_EQ(lines(rd(in)).size(), 2u) << rd(in); // made by the first: stays
}

TEST_F(hist_vars, a_field_var_hist_goes_with_its_trigger_and_needs_compatible_keys)
{
    ASSERT_EQ(wr("dynamic_events", "f:hv/in hv_func num=$arg1:u32 base=$arg2:u64"), 0);
    ASSERT_EQ(wr("synthetic_events", "pair u64 d; unsigned int num"), 0);
    ASSERT_EQ(wr(in, "hist:keys=common_pid:t0=base"), 0);
    const std::string info = "hist:keys=common_pid:vals=hitcount:t0=base:sort=hitcount:size=2048 "
                             "[active]\n";
    // Keyed on ret (u64), leave has nothing compatible on in (keyed on an int): the
    // kernel's "Matching event histogram not found" after the attempt on leave's fields.
    ASSERT_EQ(wr("error_log", "", true), 0);
    const std::string bad = "hist:keys=ret:d=ret-$t0:onmatch(hv.in).pair($d,num)";
    EXPECT_EQ(wr(leave, bad), -EINVAL);
    std::vector<std::string> e = errors();
    ASSERT_EQ(e.size(), 3u) << rd("error_log");
    EXPECT_TRUE(e[2].starts_with("hist:hv:leave: error: Matching event histogram not found\n"))
        << e[2];
    EXPECT_EQ(rd(in), info);
    EXPECT_FALSE(has(rd(leave), "hist:"));
    // A trigger that fails after making it (a type mismatch on a later param) takes it back.
    ASSERT_EQ(wr("synthetic_events", "pair3 unsigned int num; u64 d"), 0);
    EXPECT_EQ(wr(leave, "hist:keys=common_pid:d=ret-$t0:onmatch(hv.in).pair3(num,comm)"), -EINVAL);
    EXPECT_EQ(rd(in), info);
    // An unqualified field of neither event, with onmax (no onmatch() event to look in): the
    // attempt's two entries, then EINVAL, as the kernel's.
    ASSERT_EQ(wr("error_log", "", true), 0);
    EXPECT_EQ(wr(leave, "hist:keys=common_pid:e=ret:onmax($e).trace(pair,$e,nosuch)"), -EINVAL);
    EXPECT_EQ(errors().size(), 2u) << rd("error_log");
    // Made, then removed with the trigger that made it.
    const std::string cmd = "hist:keys=common_pid:d=ret-$t0:onmatch(hv.in).pair($d,num)";
    ASSERT_EQ(wr(leave, cmd), 0) << rd("error_log");
    EXPECT_TRUE(has(rd(in), "synthetic_num=num")) << rd(in);
    EXPECT_EQ(wr(in, "!hist:keys=common_pid:synthetic_num=num"), -EBUSY); // read by leave's
    ASSERT_EQ(wr(leave, "!" + cmd), 0);
    EXPECT_EQ(rd(in), info);
    EXPECT_EQ(wr(in, "!hist:keys=common_pid:t0=base"), 0);
}

TEST_F(hist_vars, a_stack_variable_into_a_synthetic_stack_field)
{
    // trigger-synthetic-event-stack.tc's recipe on the entry and exit of a function: the
    // entry's stack saved in a variable, passed by onmax() to an `unsigned long[]` field.
    for (const char *st : {"common_stacktrace", "stacktrace"}) {
        SCOPED_TRACE(st);
        ASSERT_EQ(wr("dynamic_events", "s:wake_lat pid_t pid; u64 delta; unsigned long[] stack;"),
                  0)
            << rd("error_log");
        const std::string fmt = rd("events/synthetic/wake_lat/format");
        EXPECT_TRUE(has(fmt, "\tfield:__data_loc unsigned long[] stack;\toffset:24;\tsize:8;"))
            << fmt;
        EXPECT_TRUE(has(fmt, "print fmt: \"pid=%d, delta=%llu, stack=%s\", REC->pid, REC->delta, "
                             "__get_stacktrace(stack)\n"))
            << fmt;
        ASSERT_EQ(wr(enter, std::string("hist:keys=common_pid:ts=common_timestamp,st=") + st), 0)
            << rd("error_log");
        const std::string lat = "hist:keys=common_pid:delta=common_timestamp-$ts,s=$st:"
                                "onmax($delta).trace(wake_lat,common_pid,$delta,$s)";
        ASSERT_EQ(wr(leave, lat), 0) << rd("error_log");
        EXPECT_TRUE(has(rd(enter), std::string(",st=common_stacktrace:sort")) ||
                    has(rd(enter), std::string(":st=common_stacktrace:sort")))
            << rd(enter);
        ASSERT_EQ(wr("events/synthetic/wake_lat/enable", "1"), 0);
        ASSERT_EQ(wr("tracing_on", "1"), 0);
        hv_stack_caller(3);
        ASSERT_EQ(wr("tracing_on", "0"), 0);
        const std::string t = rd("trace");
        EXPECT_TRUE(
            matches(t, ": wake_lat: pid=" + std::to_string(gettid()) +
                           " delta=[0-9]+ stack=STACK:\n=> hv_func\\+0x[0-9a-f]+/0x[0-9a-f]+\n"
                           "=> hv_stack_caller\\+0x[0-9a-f]+/0x[0-9a-f]+\n"))
            << t;
        ASSERT_EQ(wr(leave, "!" + lat), 0);
        ASSERT_EQ(wr(enter, std::string("!hist:keys=common_pid:ts=common_timestamp,st=") + st), 0);
        ASSERT_EQ(wr("events/synthetic/wake_lat/enable", "0"), 0);
        ASSERT_EQ(wr("dynamic_events", "-:synthetic/wake_lat"), 0) << rd("error_log");
        ASSERT_EQ(wr("trace", "", true), 0);
    }
    // A stack goes only into a stack field; other arrays stay refused.
    ASSERT_EQ(wr("synthetic_events", "nostack u64 s"), 0);
    ASSERT_EQ(wr(enter, "hist:keys=common_pid:st=common_stacktrace"), 0);
    EXPECT_EQ(wr(leave, "hist:keys=common_pid:e=ret:onmax($e).trace(nostack,$st)"), -EINVAL);
    EXPECT_TRUE(has(rd("error_log"), "Param type doesn't match synthetic event field type"));
    EXPECT_EQ(wr("synthetic_events", "arr u64 a[4]"), -EINVAL);
}
