// Synthetic events through the tree: the synthetic_events file and `s:` lines of
// dynamic_events (creation, listings, '!' and '-:' removal, O_TRUNC), the
// events/synthetic/NAME/ directory and its format file (parsed by libtraceevent, a record
// decoded by it), the kernel's errors with their carets in error_log (nothing created),
// and EBUSY while a hist action references the event.
#include "ftrace_test_util.h"

#include "tracefs/event_trigger.h"
#include "tracefs/trace_synth_format.h"

#include <traceevent/event-parse.h>

#include <cerrno>
#include <cstring>

using namespace ftt;

namespace
{

void clear_triggers()
{
    std::lock_guard<std::mutex> g(dprobe::trace_types_lock());
    dprobe::clear_event_triggers(0);
}

class synth_event : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        clear_triggers();
        reset_ftrace();
        ASSERT_EQ(wr("synthetic_events", "", true), 0);
        ASSERT_EQ(wr("error_log", "", true), 0);
    }
    void TearDown() override
    {
        clear_triggers();
        reset_ftrace();
        wr("synthetic_events", "", true);
    }
};

// The last error_log entry's three lines.
std::string last_error()
{
    std::vector<std::string> l = lines(rd("error_log"));
    while (!l.empty() && l.back().empty())
        l.pop_back();
    if (l.size() < 3) return "";
    return l[l.size() - 3] + "\n" + l[l.size() - 2] + "\n" + l[l.size() - 1] + "\n";
}

std::string error_entry(const std::string &msg, const std::string &cmd, size_t caret)
{
    // "[   12.345678] synthetic_events: error: MSG" (the stamp is masked by the caller).
    return "synthetic_events: error: " + msg + "\n  Command: " + cmd + "\n" +
           std::string(11 + caret, ' ') + "^\n";
}

std::string masked(const std::string &entry)
{
    size_t b = entry.find("] ");
    return b == std::string::npos ? entry : entry.substr(b + 2);
}

} // namespace

TEST_F(synth_event, create_list_format_and_remove)
{
    ASSERT_EQ(wr("synthetic_events", "wakeup_latency u64 lat; pid_t pid; char comm[16]"), 0)
        << rd("error_log");
    ASSERT_EQ(wr("synthetic_events", "dynstr u64 n; char name[]"), 0) << rd("error_log");
    EXPECT_EQ(rd("synthetic_events"),
              "wakeup_latency\tu64 lat; pid_t pid; char[16] comm\ndynstr\tu64 n; char[] name\n");
    EXPECT_TRUE(has(rd("dynamic_events"),
                    "s:synthetic/wakeup_latency\tu64 lat; pid_t pid; char[16] comm\n"))
        << rd("dynamic_events");
    EXPECT_TRUE(has(rd("available_events"), "synthetic:wakeup_latency\n"));
    for (const char *f : {"enable", "filter", "format", "id", "trigger"}) {
        std::string text;
        EXPECT_EQ(T.read_file(std::string("events/synthetic/wakeup_latency/") + f, text), 0) << f;
    }
    const std::string fmt = rd("events/synthetic/wakeup_latency/format");
    const std::string id = rd("events/synthetic/wakeup_latency/id");
    EXPECT_EQ(fmt,
              "name: wakeup_latency\nID: " + id.substr(0, id.size() - 1) +
                  "\nformat:\n"
                  "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
                  "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
                  "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
                  "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
                  "\n"
                  "\tfield:u64 lat;\toffset:8;\tsize:8;\tsigned:0;\n"
                  "\tfield:pid_t pid;\toffset:16;\tsize:4;\tsigned:1;\n"
                  "\tfield:char comm[16];\toffset:24;\tsize:16;\tsigned:1;\n"
                  "\n"
                  "print fmt: \"lat=%llu, pid=%d, comm=%.*s\", REC->lat, REC->pid, "
                  "REC->comm\n");

    // Removal: '!' on synthetic_events, '-:' on dynamic_events.
    ASSERT_EQ(wr("synthetic_events", "!wakeup_latency"), 0);
    EXPECT_EQ(rd("synthetic_events"), "dynstr\tu64 n; char[] name\n");
    EXPECT_EQ(wr("synthetic_events", "!wakeup_latency"), -ENOENT);
    ASSERT_EQ(wr("dynamic_events", "-:synthetic/dynstr"), 0);
    EXPECT_EQ(rd("synthetic_events"), "");

    // s: lines, with or without the group; O_TRUNC of synthetic_events removes them.
    ASSERT_EQ(wr("dynamic_events", "s:synthetic/s1 u64 a; s64 b"), 0) << rd("error_log");
    ASSERT_EQ(wr("dynamic_events", "s:s2 unsigned int x"), 0) << rd("error_log");
    EXPECT_EQ(rd("synthetic_events"), "s1\tu64 a; s64 b\ns2\tunsigned int x\n");
    ASSERT_EQ(wr("synthetic_events", "", true), 0);
    EXPECT_EQ(rd("synthetic_events"), "");
    EXPECT_FALSE(has(rd("available_events"), "synthetic:"));
}

TEST_F(synth_event, format_parses_with_libtraceevent)
{
    ASSERT_EQ(wr("synthetic_events", "lat_ev u64 lat; pid_t pid; s16 d; char name[]"), 0)
        << rd("error_log");
    const std::string fmt = rd("events/synthetic/lat_ev/format");
    tep_handle *tep = tep_alloc();
    ASSERT_NE(tep, nullptr);
    tep_set_long_size(tep, 8);
    tep_set_file_bigendian(tep, TEP_LITTLE_ENDIAN);
    tep_set_local_bigendian(tep, TEP_LITTLE_ENDIAN);
    ASSERT_EQ(tep_parse_event(tep, fmt.c_str(), fmt.size(), "synthetic"), TEP_ERRNO__SUCCESS);
    tep_event *ev = tep_find_event_by_name(tep, "synthetic", "lat_ev");
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(std::to_string(ev->id) + "\n", rd("events/synthetic/lat_ev/id"));

    // A record laid out as the writer lays it out: u64 slots, the string after them.
    std::vector<uint8_t> rec(8 + 4 * 8 + 6, 0);
    uint16_t type = static_cast<uint16_t>(ev->id);
    int32_t pid = 77;
    uint64_t lat = 1234;
    int32_t p = 4242;
    int16_t d = -3;
    uint32_t dl = (8 + 32) | (6u << 16);
    std::memcpy(rec.data(), &type, 2);
    std::memcpy(rec.data() + 4, &pid, 4);
    std::memcpy(rec.data() + 8, &lat, 8);
    std::memcpy(rec.data() + 16, &p, 4);
    std::memcpy(rec.data() + 24, &d, 2);
    std::memcpy(rec.data() + 32, &dl, 4);
    std::memcpy(rec.data() + 40, "hello", 6);
    unsigned long long v = 0;
    tep_format_field *f = tep_find_field(ev, "lat");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(tep_read_number_field(f, rec.data(), &v), 0);
    EXPECT_EQ(v, 1234u);
    f = tep_find_field(ev, "d");
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->flags & TEP_FIELD_IS_SIGNED);
    f = tep_find_field(ev, "name");
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->flags & TEP_FIELD_IS_DYNAMIC);
    tep_record r{};
    r.size = static_cast<int>(rec.size());
    r.data = rec.data();
    trace_seq s;
    trace_seq_init(&s);
    tep_print_event(tep, &s, &r, "%s", TEP_PRINT_INFO);
    trace_seq_terminate(&s);
    std::string decoded(s.buffer, s.len);
    trace_seq_destroy(&s);
    tep_free(tep);
    // The kernel's print fmt gives a string "%.*s" and one argument (no precision), which
    // libtraceevent cannot print: it falls back to the fields, which read right.
    EXPECT_EQ(decoded, "[FAILED TO PARSE] lat=1234 pid=4242 d=-3 name=hello");
    // The trace file's text of the same record (print_synth_event).
    EXPECT_EQ(dprobe::trace_events::instance().format_record(rec.data(), rec.size()),
              "lat_ev: lat=1234 pid=4242 d=-3 name=hello");
}

TEST_F(synth_event, numeric_record_decoded_by_libtraceevent)
{
    ASSERT_EQ(wr("dynamic_events", "s:synthetic/num_ev u64 lat; pid_t pid; s16 d; u8 f"), 0)
        << rd("error_log");
    const std::string fmt = rd("events/synthetic/num_ev/format");
    tep_handle *tep = tep_alloc();
    ASSERT_NE(tep, nullptr);
    tep_set_long_size(tep, 8);
    tep_set_file_bigendian(tep, TEP_LITTLE_ENDIAN);
    tep_set_local_bigendian(tep, TEP_LITTLE_ENDIAN);
    ASSERT_EQ(tep_parse_event(tep, fmt.c_str(), fmt.size(), "synthetic"), TEP_ERRNO__SUCCESS);
    tep_event *ev = tep_find_event_by_name(tep, "synthetic", "num_ev");
    ASSERT_NE(ev, nullptr);
    std::vector<uint8_t> rec(8 + 4 * 8, 0);
    uint16_t type = static_cast<uint16_t>(ev->id);
    uint64_t lat = 987654321;
    int32_t p = -1;
    int16_t d = 300;
    uint8_t f = 255;
    std::memcpy(rec.data(), &type, 2);
    std::memcpy(rec.data() + 8, &lat, 8);
    std::memcpy(rec.data() + 16, &p, 4);
    std::memcpy(rec.data() + 24, &d, 2);
    std::memcpy(rec.data() + 32, &f, 1);
    tep_record r{};
    r.size = static_cast<int>(rec.size());
    r.data = rec.data();
    trace_seq s;
    trace_seq_init(&s);
    tep_print_event(tep, &s, &r, "%s", TEP_PRINT_INFO);
    trace_seq_terminate(&s);
    std::string decoded(s.buffer, s.len);
    trace_seq_destroy(&s);
    tep_free(tep);
    EXPECT_EQ(decoded, "lat=987654321, pid=-1, d=300, f=255");
    EXPECT_EQ(dprobe::trace_events::instance().format_record(rec.data(), rec.size()),
              "num_ev: lat=987654321 pid=-1 d=300 f=255");
}

TEST_F(synth_event, errors_are_the_kernels_with_their_caret)
{
    struct bad {
        const char *file, *cmd, *msg;
        size_t caret;
        int err;
    } cases[] = {
        {"synthetic_events", "9lat u64 lat", "Illegal name", 0, -EINVAL},
        {"synthetic_events", "lat u64 9x", "Illegal name", 8, -EINVAL},
        {"synthetic_events", "lat u65 x", "Invalid type", 4, -EINVAL},
        {"synthetic_events", "lat u64 arr[4]", "Invalid type", 4, -EINVAL},
        {"synthetic_events", "lat char s[1000]", "Invalid array specification", 9, -EINVAL},
        {"synthetic_events", "lat unsigned x", "Incomplete type", 4, -EINVAL},
        {"synthetic_events", "lat u64 a; unsigned b", "Incomplete type", 11, -EINVAL},
        {"synthetic_events", "lat", "Command must be of the form: <name> field[;field] ...", 0,
         -EINVAL},
        {"dynamic_events", "s:other/lat u64 x",
         "Command must be of the form: s or -:[synthetic/]<name> field[;field] ...", 0, -EINVAL},
    };
    for (const bad &b : cases) {
        SCOPED_TRACE(b.cmd);
        EXPECT_EQ(wr(b.file, b.cmd), b.err);
        EXPECT_EQ(masked(last_error()), error_entry(b.msg, b.cmd, b.caret)) << rd("error_log");
    }
    EXPECT_EQ(rd("synthetic_events"), "");
    // 32 fields at most.
    std::string many = "many";
    for (int i = 0; i < 33; i++)
        many += " u64 f" + std::to_string(i) + ";";
    EXPECT_EQ(wr("synthetic_events", many), -EINVAL);
    EXPECT_TRUE(has(last_error(), "error: Too many fields\n"));
    // An existing name.
    ASSERT_EQ(wr("synthetic_events", "dup u64 a"), 0);
    EXPECT_EQ(wr("synthetic_events", "dup u64 b"), -EEXIST);
    EXPECT_EQ(masked(last_error()), error_entry("Event already exists", "dup u64 b", 0));
    EXPECT_EQ(rd("synthetic_events"), "dup\tu64 a\n");
}

TEST_F(synth_event, busy_while_enabled)
{
    ASSERT_EQ(wr("synthetic_events", "busy u64 a"), 0);
    ASSERT_EQ(wr("events/synthetic/busy/enable", "1"), 0);
    EXPECT_EQ(wr("synthetic_events", "!busy"), -EBUSY);
    ASSERT_EQ(wr("events/synthetic/busy/enable", "0"), 0);
    EXPECT_EQ(wr("synthetic_events", "!busy"), 0);
}
