// Event probes (e:) in-process: an event made of an fprobe event's records, fetching its
// fields ($field, through pointers, as strings), with an "if" filter on the attached
// records; the attached event in soft mode (armed for the event probe, its own records not
// written unless enabled); listing, format, deletion rules; and the kernel's errors
// (eprobes_syntax_errors.tc, adapted to dprobe's events).
#include "tracefs/tracefs_tree.h"

#include "tracefs/trace_events.h"

#include "tests/tracefs/ftrace_test_util.h"
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

struct ep_req {
    int code;
    const char *path;
};

TARGET int ep_handle(int code, const char *path, const ep_req *req)
{
    asm volatile("" ::: "memory");
    return code + (path ? 1 : 0) + (req ? req->code : 0);
}

using namespace dprobe;

namespace
{

using ftt::has;
using ftt::rd;
using ftt::T;
using ftt::wr;

// Payloads ("ev: (...) a=1") of the buffered events, consumed.
std::vector<std::string> payloads()
{
    std::vector<std::string> v;
    std::string s = rd("trace_pipe");
    size_t i = 0;
    while (i < s.size()) {
        size_t nl = s.find('\n', i);
        std::string line = s.substr(i, nl - i);
        size_t colon = line.find(": ", line.find("] "));
        v.push_back(line.substr(colon + 2));
        i = nl == std::string::npos ? s.size() : nl + 1;
    }
    return v;
}

class Eprobe : public ::testing::Test
{
  protected:
    void SetUp() override
    {
        reset();
        ASSERT_EQ(wr("dynamic_events", "f:fp/handle ep_handle code=$arg1:s32 path=+0($arg2):string "
                                       "req=$arg3:x64\n"),
                  0)
            << rd("error_log");
    }
    void TearDown() override { reset(); }
    static void reset()
    {
        trace_events::instance().set_group_enabled("", false);
        EXPECT_EQ(wr("dynamic_events", "", true), 0);
        EXPECT_EQ(wr("error_log", "", true), 0);
        EXPECT_EQ(wr("trace", "", true), 0);
    }
    void refuse(std::string cmd, const std::string &msg, int err = 0)
    {
        SCOPED_TRACE(cmd);
        size_t caret = cmd.find('^');
        ASSERT_NE(caret, std::string::npos);
        cmd.erase(caret, 1);
        EXPECT_EQ(wr("error_log", "", true), 0);
        int r = wr("dynamic_events", cmd + "\n");
        EXPECT_LT(r, 0);
        if (err) {
            EXPECT_EQ(r, -err);
        }
        while (!cmd.empty() && cmd.back() == ' ')
            cmd.pop_back(); // the log shows the words joined
        std::string expect = "event_probe: error: " + msg + "\n  Command: " + cmd + "\n" +
                             std::string(11 + caret, ' ') + "^\n";
        EXPECT_TRUE(has(rd("error_log"), expect)) << rd("error_log") << "\nwanted:\n" << expect;
    }
};

TEST_F(Eprobe, FieldsOfTheAttachedRecordsInSoftMode)
{
    ASSERT_EQ(wr("dynamic_events", "e:ep/big fp.handle c=$code p=$path:string c2=$code:s32 "
                                   "inner=+0($req):s32 if code > 10\n"
                                   "e fp/handle $comm\n"),
              0)
        << rd("error_log");
    EXPECT_EQ(rd("dynamic_events"),
              "f:fp/handle ep_handle code=$arg1:s32 path=+0($arg2):string req=$arg3:x64\n"
              "e:ep/big fp.handle c=$code p=$path:string c2=$code:s32 inner=+0($req):s32\n"
              "e:eprobes/handle fp.handle arg1=$comm\n");
    std::string fmt = rd("events/ep/big/format");
    EXPECT_TRUE(has(fmt, "\tfield:u64 c;\toffset:8;\tsize:8;\tsigned:0;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:__data_loc char[] p;\toffset:16;\tsize:4;\tsigned:1;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "print fmt: \" c=0x%Lx p=\\\"%s\\\" c2=%d inner=%d\", REC->c, "
                         "__get_str(p), REC->c2, REC->inner\n"))
        << fmt;
    EXPECT_FALSE(has(fmt, "__probe_ip")) << fmt;

    // Only the event probes enabled: the fprobe fires for them, its own records are not
    // written (soft mode). They run in the order they were enabled.
    ASSERT_EQ(wr("events/ep/big/enable", "1"), 0);
    ASSERT_EQ(wr("events/eprobes/enable", "1"), 0);
    EXPECT_EQ(rd("events/fp/handle/enable"), "0\n");
    ep_req r{-7, nullptr};
    EXPECT_EQ(ep_handle(12, "/tmp/a", &r), 12 + 1 - 7);
    EXPECT_EQ(ep_handle(5, "/tmp/b", &r), 5 + 1 - 7); // filtered out of ep/big
    auto p = payloads();
    ASSERT_EQ(p.size(), 3u) << testing::PrintToString(p);
    EXPECT_EQ(p[0], "big: (fp.handle) c=0xc p=\"/tmp/a\" c2=12 inner=-7");
    // $comm: the thread's name (gtest's main thread keeps the program's).
    EXPECT_EQ(p[1], "handle: (fp.handle) arg1=\"eprobe_test\"");
    EXPECT_EQ(p[2], "handle: (fp.handle) arg1=\"eprobe_test\"");

    // The attached event enabled too: its records come first, each followed by the event
    // probes' records it made.
    ASSERT_EQ(wr("events/fp/handle/enable", "1"), 0);
    EXPECT_EQ(ep_handle(20, "/x", &r), 20 + 1 - 7);
    p = payloads();
    ASSERT_EQ(p.size(), 3u) << testing::PrintToString(p);
    EXPECT_TRUE(p[0].starts_with("handle: (ep_handle+0x")) << p[0];
    EXPECT_EQ(p[2], "handle: (fp.handle) arg1=\"eprobe_test\"");
    EXPECT_TRUE(p[0].ends_with(" code=20 path=\"/x\" req=" + std::string("0x") +
                               [&] {
                                   char b[32];
                                   std::snprintf(b, sizeof b, "%lx",
                                                 reinterpret_cast<unsigned long>(&r));
                                   return std::string(b);
                               }()))
        << p[0];
    EXPECT_EQ(p[1], "big: (fp.handle) c=0x14 p=\"/x\" c2=20 inner=-7");

    // Busy rules: an enabled event probe stays; an event read by an event probe stays.
    EXPECT_EQ(wr("dynamic_events", "-:ep/big\n"), -EBUSY);
    ASSERT_EQ(wr("events/enable", "0"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:fp/handle\n"), -EBUSY);
    EXPECT_EQ(wr("dynamic_events", "-:ep/big fp.handle\n"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:eprobes/handle fp/handle\n"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:fp/handle\n"), 0);
    EXPECT_EQ(rd("dynamic_events"), "");
    // Nothing fires any more.
    EXPECT_EQ(ep_handle(30, "/y", &r), 30 + 1 - 7);
    EXPECT_TRUE(payloads().empty());
}

TEST_F(Eprobe, KernelErrorsWithCarets)
{
    refuse("e ^a.", "This requires both group and event name to attach");
    refuse("e ^.b", "This requires both group and event name to attach");
    refuse("e ^a.b", "Attached event does not exist", ENODEV);
    refuse("e fp/handle ^foo", "Attached event does not have this field");
    refuse("e:^/bar fp/handle", "Group name is not specified");
    refuse("e:^foo.1/bar fp/handle", "Group name must follow the same rules as C identifiers");
    refuse("e:foo/^bar.1 fp/handle", "Event name must follow the same rules as C identifiers");
    refuse("e:foo/bar fp/handle arg=^code", "Invalid fetch argument");
    refuse("e:foo/bar fp/handle ^arg=$foo", "Attached event does not have this field");
    refuse("e:foo/bar fp/handle if ^", "No filter rule after 'if'");
    refuse("e:foo/bar fp/handle ^%ax", "Invalid $-valiable specified");
    refuse("e:foo/bar fp/handle ^$stack", "Attached event does not have this field");
    // No event probe on an event probe.
    ASSERT_EQ(wr("dynamic_events", "e:foo/bar fp/handle\n"), 0);
    refuse("e:foo/baz ^foo.bar", "Attached event does not exist", ENODEV);
    // One probe per event probe: a second definition of the name is another event.
    refuse("^e:foo/bar fp/handle", "Given group/event name is already used by another event",
           EEXIST);
    // A bad filter on the attached event's fields.
    EXPECT_EQ(wr("dynamic_events", "e:foo/flt fp/handle if nosuch == 1\n"), -EINVAL);
    EXPECT_TRUE(has(rd("error_log"), "Field not found")) << rd("error_log");
}

} // namespace
