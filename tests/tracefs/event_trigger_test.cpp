// Event triggers (tracefs/event_trigger.h, the kernel's trace_events_trigger.c) through the
// tree's events/GROUP/EVENT/trigger files: the listing and its "# Available triggers"
// header, each simple command's effect when the event fires (traceon, traceoff, snapshot,
// stacktrace, enable_event, disable_event), counts, "if" filters, '!' removal, the kernel's
// one-trigger-per-type rule, errors in error_log with their caret, soft mode ("0*") and
// busy events, triggers in instances and their removal by rmdir and by tracefs_reset().
#include "ftrace_test_util.h"

#include "tracefs/event_trigger.h"
#include "tracefs/tracefs_reset.h"

#include <cerrno>
#include <cstring>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int tg_leaf(int a)
{
    asm volatile("" ::: "memory");
    return a + 1;
}
TARGET int tg_other(int a)
{
    asm volatile("" ::: "memory");
    return a + 2;
}
TARGET int tg_caller(int a)
{
    int r = tg_leaf(a);
    asm volatile("" ::: "memory"); // not a tail call: tg_caller stays on the stack
    return r + 1;
}

using namespace ftt;

// A command of another file, registered as hist's are (a static initializer): it needs the
// record (NEEDS_REC) and adds up one of its fields, the way a hist trigger reads its keys.
namespace
{

struct sum_state {
    dprobe::filter_field field;
    std::atomic<long> sum{0};
};

void sum_trigger(dprobe::event_trigger_data &d, const dprobe::event_trigger_hit &hit) noexcept
{
    auto *st = static_cast<sum_state *>(d.private_data);
    if (!hit.rec || hit.len < size_t(st->field.offset) + 4) return;
    int32_t v;
    std::memcpy(&v, hit.rec + st->field.offset, sizeof v);
    st->sum.fetch_add(v, std::memory_order_relaxed);
}

void sum_print(std::string &out, const dprobe::event_trigger_data &d)
{
    auto *st = static_cast<const sum_state *>(d.private_data);
    out += "test_sum:" + st->field.name + "=" + std::to_string(st->sum.load()) + "\n";
}

void sum_free(dprobe::event_trigger_data &d)
{
    delete static_cast<sum_state *>(d.private_data);
}

int sum_parse(const dprobe::event_command &cmd, const dprobe::trace_event_file &file,
              std::string_view glob, std::string_view, std::optional<std::string_view> param)
{
    if (glob[0] == '!') {
        for (auto *t : dprobe::event_triggers_of(file))
            if (t->cmd == &cmd) dprobe::event_trigger_del(t);
        return 0;
    }
    if (!param) return -EINVAL;
    auto st = std::make_unique<sum_state>();
    for (const auto &f : file.fields())
        if (f.name == *param) st->field = f;
    if (st->field.name.empty()) return -EINVAL;
    auto data = dprobe::event_trigger_alloc(cmd, file, st.get());
    if (int r = dprobe::event_trigger_add(std::move(data))) return r;
    st.release();
    return 0;
}

const dprobe::event_command sum_cmd = {
    .name = "test_sum",
    .trigger_type = dprobe::ETT_EVENT_HIST,
    .flags = dprobe::EVENT_CMD_FL_NEEDS_REC,
    .parse = sum_parse,
    .trigger = sum_trigger,
    .count_func = nullptr,
    .print = sum_print,
    .free = sum_free,
    .unreg_all = nullptr,
};

const int sum_registered = dprobe::register_event_command(sum_cmd);

} // namespace

namespace
{

// The built-ins first, in the kernel's order, then the commands other files registered, in
// the order their files were initialized: this test's (its object comes first on the link
// line) before hist's (trigger_hist.cpp, in the library).
const std::string k_available =
    "# Available triggers:\n"
    "# traceon traceoff snapshot stacktrace enable_event disable_event test_sum enable_hist "
    "disable_hist hist\n";

void clear_triggers()
{
    std::lock_guard<std::mutex> g(dprobe::trace_types_lock());
    dprobe::clear_event_triggers(0);
}

class event_trigger : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        clear_triggers();
        reset_ftrace();
        ASSERT_EQ(wr("dynamic_events", "f:tg/leaf tg_leaf a=$arg1:s32"), 0);
        ASSERT_EQ(wr("dynamic_events", "f:tg/other tg_other b=$arg1:s32"), 0);
    }
    void TearDown() override
    {
        clear_triggers();
        reset_ftrace();
    }
    // The records of the trace, without the header.
    static std::vector<std::string> records() { return body(rd("trace")); }
    static size_t count_of(const std::vector<std::string> &v, const std::string &what)
    {
        size_t n = 0;
        for (auto &l : v)
            n += has(l, what);
        return n;
    }
};

} // namespace

TEST_F(event_trigger, listing_soft_mode_and_removal)
{
    const std::string f = "events/tg/leaf/trigger";
    std::vector<std::string> files;
    ASSERT_EQ(T.list("events/tg/leaf", files), 0);
    EXPECT_NE(std::find(files.begin(), files.end(), "trigger"), files.end());
    // Empty: the available commands, in the kernel's registration order.
    EXPECT_EQ(rd(f), k_available);
    EXPECT_EQ(rd("events/tg/leaf/enable"), "0\n");

    ASSERT_EQ(wr(f, "traceoff"), 0);
    EXPECT_EQ(rd(f), "traceoff:unlimited\n");
    // A trigger holds its event in soft mode: armed, not recording, not deletable.
    EXPECT_EQ(rd("events/tg/leaf/enable"), "0*\n");
    EXPECT_EQ(wr("dynamic_events", "-:tg/leaf"), -EBUSY);

    // Newest first, with counts and filters as the kernel prints them.
    ASSERT_EQ(wr(f, "snapshot:3 if a > 10"), 0);
    ASSERT_EQ(wr(f, "stacktrace:0x10"), 0);
    EXPECT_EQ(rd(f), "stacktrace:count=16\nsnapshot:count=3 if a > 10\ntraceoff:unlimited\n");

    // '!' removes by the command's type, whatever the parameters; removing what is not
    // there succeeds and changes nothing (the kernel's unregister_trigger).
    EXPECT_EQ(wr(f, "!snapshot"), 0);
    EXPECT_EQ(wr(f, "!snapshot"), 0);
    EXPECT_EQ(wr(f, "!stacktrace:5 if a == 1"), 0);
    EXPECT_EQ(rd(f), "traceoff:unlimited\n");
    EXPECT_EQ(wr(f, "!traceoff"), 0);
    EXPECT_TRUE(rd(f).starts_with(k_available));
    EXPECT_EQ(rd("events/tg/leaf/enable"), "0\n");
    EXPECT_EQ(wr("dynamic_events", "-:tg/leaf"), 0);
}

TEST_F(event_trigger, one_trigger_per_type_and_bad_input_changes_nothing)
{
    const std::string f = "events/tg/leaf/trigger";
    ASSERT_EQ(wr(f, "traceon"), 0);
    // traceon and traceoff share the kernel's ETT_TRACE_ONOFF: one of them per event.
    EXPECT_EQ(wr(f, "traceoff"), -EEXIST);
    EXPECT_EQ(wr(f, "traceon:5"), -EEXIST);
    EXPECT_EQ(wr(f, "nosuch"), -EINVAL);
    EXPECT_EQ(wr(f, "!"), -EINVAL);
    EXPECT_EQ(wr(f, "snapshot:x"), -EINVAL);
    EXPECT_EQ(wr(f, "stacktrace:-1"), -EINVAL);
    EXPECT_EQ(wr(f, "stacktrace iff a == 1"), -EINVAL);
    EXPECT_EQ(wr(f, "stacktrace if"), -EINVAL);
    EXPECT_EQ(wr(f, "enable_event"), -EINVAL);
    EXPECT_EQ(wr(f, "enable_event:tg"), -EINVAL);
    EXPECT_EQ(wr(f, "enable_event:tg:nosuch"), -EINVAL);
    EXPECT_EQ(wr(f, std::string(5000, 'x')), -EINVAL);
    EXPECT_EQ(rd(f), "traceon:unlimited\n");
    EXPECT_EQ(rd("error_log"), ""); // none of those is logged by the kernel

    // A bad filter is logged with the kernel's message and a caret under its column.
    EXPECT_EQ(wr(f, "stacktrace if nosuch == 1"), -EINVAL);
    std::string expect_log = "event filter parse error: error: Field not found\n"
                             "  Command: nosuch == 1\n" +
                             std::string(11 + 7, ' ') + "^\n";
    EXPECT_TRUE(has(rd("error_log"), expect_log)) << rd("error_log");
    EXPECT_EQ(wr(f, "stacktrace if (a == 1"), -EINVAL);
    EXPECT_EQ(lines(rd("error_log")).size(), 6u) << rd("error_log"); // 2 entries, 3 lines each
    EXPECT_EQ(rd(f), "traceon:unlimited\n");
    // The event's own filter file is untouched.
    EXPECT_EQ(rd("events/tg/leaf/filter"), "none\n");
}

TEST_F(event_trigger, traceoff_writes_its_event_then_stops_with_counts)
{
    ASSERT_EQ(wr("events/tg/leaf/enable", "1"), 0);
    ASSERT_EQ(wr("events/tg/leaf/trigger", "traceoff:2"), 0);
    tg_leaf(1);
    // POST_TRIGGER: the record that turned tracing off is in the trace.
    EXPECT_EQ(rd("tracing_on"), "0\n");
    EXPECT_EQ(count_of(records(), "leaf:"), 1u);
    tg_leaf(2); // tracing off: nothing recorded, and the count is not taken
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "traceoff:count=1\n");
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    tg_leaf(3);
    EXPECT_EQ(rd("tracing_on"), "0\n");
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "traceoff:count=0\n");
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    tg_leaf(4); // count used up: recorded, tracing stays on
    EXPECT_EQ(rd("tracing_on"), "1\n");
    auto r = records();
    EXPECT_EQ(count_of(r, "leaf:"), 3u);
    EXPECT_EQ(count_of(r, "a=2"), 0u);
}

TEST_F(event_trigger, traceon_with_a_filter_reads_the_record_while_tracing_is_off)
{
    // The event is not enabled and tracing is off: the record is built for the filter only.
    ASSERT_EQ(wr("events/tg/leaf/trigger", "traceon if a == 5"), 0);
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "traceon:unlimited if a == 5\n");
    ASSERT_EQ(wr("events/tg/other/enable", "1"), 0);
    ASSERT_EQ(wr("tracing_on", "0"), 0);
    tg_leaf(4);
    tg_other(1);
    EXPECT_EQ(rd("tracing_on"), "0\n");
    tg_leaf(5);
    EXPECT_EQ(rd("tracing_on"), "1\n");
    tg_other(2);
    auto r = records();
    EXPECT_EQ(count_of(r, "leaf:"), 0u); // soft mode: the triggering event records nothing
    ASSERT_EQ(count_of(r, "other:"), 1u);
    EXPECT_EQ(count_of(r, "b=2"), 1u);
}

TEST_F(event_trigger, enable_event_and_disable_event_switch_soft_mode)
{
    ASSERT_EQ(wr("events/tg/leaf/trigger", "enable_event:tg:other:1"), 0);
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "enable_event:tg:other:count=1\n");
    // The target is held in soft mode, not recording until switched on.
    EXPECT_EQ(rd("events/tg/other/enable"), "0*\n");
    EXPECT_EQ(wr("dynamic_events", "-:tg/other"), -EBUSY);
    tg_other(1);
    EXPECT_EQ(count_of(records(), "other:"), 0u);
    tg_leaf(1);
    EXPECT_EQ(rd("events/tg/other/enable"), "1*\n");
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "enable_event:tg:other:count=0\n");
    tg_other(2);
    EXPECT_EQ(count_of(records(), "b=2"), 1u);

    // One per type and target; disable_event shares enable_event's type.
    EXPECT_EQ(wr("events/tg/leaf/trigger", "enable_event:tg:other"), -EEXIST);
    EXPECT_EQ(wr("events/tg/leaf/trigger", "disable_event:tg:other"), -EEXIST);
    ASSERT_EQ(wr("events/tg/leaf/trigger", "!enable_event:tg:other"), 0);
    // Out of soft mode the event stays as the command switched it: on (the kernel's
    // __ftrace_event_enable_disable() disables it only if SOFT_DISABLED).
    EXPECT_EQ(rd("events/tg/other/enable"), "1\n");
    ASSERT_EQ(wr("events/tg/other/enable", "1"), 0);
    ASSERT_EQ(wr("events/tg/leaf/trigger", "disable_event:tg:other if a == 7"), 0);
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "disable_event:tg:other:unlimited if a == 7\n");
    EXPECT_EQ(rd("events/tg/other/enable"), "1*\n");
    tg_leaf(6);
    tg_other(3);
    tg_leaf(7);
    tg_other(4);
    auto r = records();
    EXPECT_EQ(count_of(r, "b=3"), 1u);
    EXPECT_EQ(count_of(r, "b=4"), 0u);
    EXPECT_EQ(rd("events/tg/other/enable"), "0*\n");
}

TEST_F(event_trigger, stacktrace_follows_its_event)
{
    ASSERT_EQ(wr("events/tg/leaf/enable", "1"), 0);
    ASSERT_EQ(wr("events/tg/leaf/trigger", "stacktrace:1 if a == 9"), 0);
    tg_caller(8);
    tg_caller(9);
    tg_caller(9);
    auto r = records();
    ASSERT_GE(r.size(), 4u) << rd("trace");
    EXPECT_TRUE(has(r[0], "a=8")) << r[0];
    EXPECT_TRUE(has(r[1], "a=9")) << r[1];
    EXPECT_TRUE(has(r[2], "<stack trace>")) << r[2];
    EXPECT_EQ(r[3], " => tg_leaf") << rd("trace");
    EXPECT_EQ(r[4], " => tg_caller") << rd("trace");
    EXPECT_EQ(count_of(r, "<stack trace>"), 1u) << rd("trace");
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "stacktrace:count=0 if a == 9\n");
}

TEST_F(event_trigger, snapshot_takes_one_per_count)
{
    ASSERT_EQ(wr("events/tg/leaf/enable", "1"), 0);
    tg_leaf(0);
    ASSERT_EQ(wr("events/tg/leaf/trigger", "snapshot:1"), 0);
    // Not a POST_TRIGGER: the swap comes before the event's record, which starts the new
    // live buffer (as in the kernel).
    tg_leaf(1);
    tg_leaf(2);
    EXPECT_EQ(rd("events/tg/leaf/trigger"), "snapshot:count=0\n");
    auto snap = body(rd("snapshot"));
    ASSERT_EQ(snap.size(), 1u) << rd("snapshot");
    EXPECT_TRUE(has(snap[0], "a=0")) << snap[0];
    auto live = records();
    ASSERT_EQ(live.size(), 2u) << rd("trace");
    EXPECT_TRUE(has(live[0], "a=1")) << live[0];
    EXPECT_TRUE(has(live[1], "a=2")) << live[1];
}

TEST_F(event_trigger, kprobe_event_triggers)
{
    ASSERT_EQ(wr("dynamic_events", "p:tg/kp tg_other x=%di:s32"), 0);
    ASSERT_EQ(wr("events/tg/kp/trigger", "traceoff if x == 3"), 0);
    EXPECT_EQ(rd("events/tg/kp/enable"), "0*\n");
    tg_other(2);
    EXPECT_EQ(rd("tracing_on"), "1\n");
    tg_other(3);
    EXPECT_EQ(rd("tracing_on"), "0\n");
}

TEST_F(event_trigger, instance_triggers_act_on_their_array_and_go_with_rmdir)
{
    ASSERT_EQ(T.mkdir("instances/ti"), 0);
    const std::string f = "instances/ti/events/tg/leaf/trigger";
    EXPECT_TRUE(rd(f).starts_with(k_available));
    ASSERT_EQ(wr(f, "traceoff"), 0);
    ASSERT_EQ(wr(f, "enable_event:tg:other"), 0);
    EXPECT_EQ(rd(f), "enable_event:tg:other:unlimited\ntraceoff:unlimited\n");
    EXPECT_EQ(rd("instances/ti/events/tg/other/enable"), "0*\n");
    EXPECT_EQ(rd("events/tg/other/enable"), "0\n");
    EXPECT_TRUE(rd("events/tg/leaf/trigger").starts_with(k_available));
    EXPECT_EQ(rd("instances/ti/events/tg/leaf/enable"), "0*\n");
    EXPECT_EQ(rd("events/tg/leaf/enable"), "0\n");
    tg_leaf(1);
    EXPECT_EQ(rd("instances/ti/tracing_on"), "0\n");
    EXPECT_EQ(rd("tracing_on"), "1\n");
    EXPECT_EQ(rd("instances/ti/events/tg/other/enable"), "1*\n");
    ASSERT_EQ(T.rmdir("instances/ti"), 0);
    EXPECT_EQ(dprobe::event_triggers_count(), 0u);
    EXPECT_EQ(wr("dynamic_events", "-:tg/leaf"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:tg/other"), 0);
}

TEST_F(event_trigger, reset_removes_every_trigger)
{
    ASSERT_EQ(wr("events/tg/leaf/trigger", "traceoff:5 if a > 10"), 0);
    ASSERT_EQ(wr("events/tg/leaf/trigger", "enable_event:tg:other:2"), 0);
    ASSERT_EQ(wr("events/tg/other/trigger", "stacktrace"), 0);
    ASSERT_EQ(T.mkdir("instances/tr"), 0);
    ASSERT_EQ(wr("instances/tr/events/tg/other/trigger", "snapshot"), 0);
    EXPECT_EQ(dprobe::event_triggers_count(), 4u);
    auto failed = dprobe::tracefs_reset();
    EXPECT_TRUE(failed.empty()) << failed.front();
    EXPECT_EQ(dprobe::event_triggers_count(), 0u);
    EXPECT_EQ(rd("dynamic_events"), "");
}

// A hist that reads another event's variable keeps that event's hist from being removed
// (EBUSY) until it goes itself: the reset goes round again rather than give up (found by the
// randomized lifecycle test: detach failed with "could not undo ... Device or resource busy").
TEST_F(event_trigger, reset_removes_triggers_that_use_another_events_variables)
{
    ASSERT_EQ(wr("events/tg/leaf/trigger", "hist:keys=common_pid:ts0=common_timestamp.usecs"), 0);
    ASSERT_EQ(wr("events/tg/other/trigger", "hist:keys=common_pid:lat=common_timestamp.usecs-$ts0"),
              0);
    EXPECT_EQ(wr("events/tg/leaf/trigger", "!hist:keys=common_pid:ts0=common_timestamp.usecs"),
              -EBUSY);
    auto failed = dprobe::tracefs_reset();
    EXPECT_TRUE(failed.empty()) << failed.front();
    EXPECT_EQ(dprobe::event_triggers_count(), 0u);
    EXPECT_EQ(rd("dynamic_events"), "");
}

TEST_F(event_trigger, event_probe_triggers_run_on_its_records)
{
    // An event probe's event, not enabled, with a trigger: armed through its attached event,
    // its trigger filtered on the event probe's own fields; a stack from the source's hit.
    ASSERT_EQ(wr("dynamic_events", "e:tg/neg tg.leaf v=$a:s32 if a < 0"), 0);
    ASSERT_EQ(wr("events/tg/neg/trigger", "traceoff if v == -3"), 0);
    ASSERT_EQ(wr("events/tg/neg/trigger", "stacktrace:1"), 0);
    EXPECT_EQ(rd("events/tg/neg/enable"), "0*\n");
    EXPECT_EQ(rd("events/tg/leaf/enable"), "0\n");
    tg_leaf(3);
    EXPECT_EQ(rd("tracing_on"), "1\n");
    EXPECT_EQ(count_of(records(), "<stack trace>"), 0u) << rd("trace");
    tg_caller(-1);
    EXPECT_EQ(rd("tracing_on"), "1\n");
    auto r = records();
    ASSERT_GE(r.size(), 3u) << rd("trace");
    EXPECT_EQ(count_of(r, "<stack trace>"), 1u) << rd("trace");
    EXPECT_EQ(count_of(r, "neg:"), 0u) << rd("trace"); // not enabled: no record of its own
    EXPECT_TRUE(has(r[0], "<stack trace>")) << r[0];
    EXPECT_EQ(r[1], " => tg_leaf") << rd("trace");
    EXPECT_EQ(r[2], " => tg_caller") << rd("trace");
    tg_leaf(-3);
    EXPECT_EQ(rd("tracing_on"), "0\n");
    EXPECT_EQ(rd("events/tg/neg/trigger"), "stacktrace:count=0\ntraceoff:unlimited if v == -3\n");
    EXPECT_EQ(wr("dynamic_events", "-:tg/neg"), -EBUSY);
    clear_triggers();
    EXPECT_EQ(wr("dynamic_events", "-:tg/neg"), 0);
}

TEST_F(event_trigger, another_files_command_reads_the_record)
{
    ASSERT_EQ(sum_registered, 0);
    EXPECT_EQ(dprobe::register_event_command(sum_cmd), -EBUSY);
    const std::string f = "events/tg/leaf/trigger";
    EXPECT_EQ(rd(f), k_available);
    EXPECT_EQ(wr(f, "test_sum:nosuch"), -EINVAL);
    ASSERT_EQ(wr(f, "test_sum:a"), 0);
    EXPECT_EQ(rd("events/tg/leaf/enable"), "0*\n");
    ASSERT_EQ(wr("tracing_on", "0"), 0); // the record is built for it all the same
    tg_leaf(2);
    tg_leaf(5);
    EXPECT_EQ(rd(f), "test_sum:a=7\n");
    ASSERT_EQ(wr(f, "!test_sum"), 0);
    EXPECT_EQ(rd(f), k_available);
    EXPECT_EQ(rd("events/tg/leaf/enable"), "0\n");
}
