// The process's USDT probes as static events (tracefs/trace_usdt.cpp) and `t:` events on
// them (tracefs/trace_eprobe.cpp, probe_parse.cpp's parse_tprobe), through the tracefs model
// in-process: this binary's notes and those of a library loaded later become
// events/PROVIDER/NAME, enabling one counts its semaphore and records the note's arguments,
// and t lines attach to them with the kernel's syntax and errors.
#define _SDT_HAS_SEMAPHORES 1
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include "tests/tracefs/ftrace_test_util.h"
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/sdt.h>

#include <cerrno>
#include <string>

extern "C" {
unsigned short usdtt_usdtt_step_semaphore __attribute__((section(".probes"), used));
unsigned short usdtt_usdtt_send_semaphore __attribute__((section(".probes"), used));
}

extern "C" __attribute__((noinline, used)) int usdtt_step(int k, long v)
{
    int r = k * 3;
    if (__builtin_expect(usdtt_usdtt_step_semaphore, 0)) STAP_PROBE3(usdtt, usdtt_step, k, v, r);
    return r + 1;
}

extern "C" __attribute__((noinline, used)) void usdtt_send(const char *msg, unsigned long len)
{
    STAP_PROBE2(usdtt, usdtt_send, msg, len);
    __asm__ volatile("" ::: "memory");
}

using namespace dprobe;

namespace
{

using ftt::has;
using ftt::rd;
using ftt::T;
using ftt::wr;

void reset()
{
    trace_events::instance().usdt_start();
    trace_events::instance().set_group_enabled("", false);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    ASSERT_EQ(wr("error_log", "", true), 0);
}

TEST(UsdtEvents, NotesAreStaticEvents)
{
    reset();
    std::string avail = rd("available_events");
    EXPECT_TRUE(has(avail, "usdtt:usdtt_step\n")) << avail;
    EXPECT_TRUE(has(avail, "usdtt:usdtt_send\n")) << avail;
    for (const char *f : {"enable", "filter", "format", "id", "trigger", "hist"}) {
        std::string s;
        EXPECT_EQ(T.read_file(std::string("events/usdtt/usdtt_step/") + f, s), 0) << f;
    }
    // The note's sizes: -4@ (int) is s32, -8@ (long) s64.
    std::string fmt = rd("events/usdtt/usdtt_step/format");
    EXPECT_TRUE(has(fmt, "field:s32 arg1;")) << fmt;
    EXPECT_TRUE(has(fmt, "field:s64 arg2;")) << fmt;
    EXPECT_TRUE(has(fmt, "field:s32 arg3;")) << fmt;
    // Not a dynamic event: not listed, not deleted.
    EXPECT_FALSE(has(rd("dynamic_events"), "usdtt")) << rd("dynamic_events");
    EXPECT_EQ(wr("dynamic_events", "-:usdtt/usdtt_step\n"), -ENOENT);
    EXPECT_TRUE(trace_events::instance().has_event("usdtt", "usdtt_step"));
}

TEST(UsdtEvents, EnableCountsTheSemaphoreAndRecordsTheArguments)
{
    reset();
    EXPECT_EQ(usdtt_usdtt_step_semaphore, 0);
    EXPECT_EQ(rd("kprobes/list").find("usdtt_step"), std::string::npos); // nothing until enabled
    ASSERT_EQ(wr("events/usdtt/usdtt_step/enable", "1"), 0) << rd("error_log");
    EXPECT_EQ(usdtt_usdtt_step_semaphore, 1);
    EXPECT_EQ(usdtt_step(4, -9), 13);
    ASSERT_EQ(wr("events/usdtt/usdtt_step/filter", "arg1 == 5"), 0);
    EXPECT_EQ(usdtt_step(5, 7), 16);
    EXPECT_EQ(usdtt_step(6, 7), 19);
    std::string trace = rd("trace");
    EXPECT_TRUE(has(trace, " usdtt_step: (0x")) << trace;
    EXPECT_TRUE(has(trace, ") arg1=4 arg2=-9 arg3=12\n")) << trace;
    EXPECT_TRUE(has(trace, ") arg1=5 arg2=7 arg3=15\n")) << trace;
    EXPECT_FALSE(has(trace, "arg1=6")) << trace;
    ASSERT_EQ(wr("events/usdtt/usdtt_step/filter", "0"), 0);
    ASSERT_EQ(wr("events/usdtt/usdtt_step/enable", "0"), 0);
    EXPECT_EQ(usdtt_usdtt_step_semaphore, 0);
    EXPECT_EQ(rd("kprobes/list").find("usdtt_step"), std::string::npos); // unregistered
}

TEST(UsdtEvents, HistTriggerOnATracepoint)
{
    reset();
    ASSERT_EQ(wr("events/usdtt/usdtt_step/trigger", "hist:keys=arg1:vals=arg2"), 0)
        << rd("error_log");
    EXPECT_EQ(usdtt_usdtt_step_semaphore, 1); // a trigger arms the event (soft mode)
    for (int i = 0; i < 3; i++)
        usdtt_step(2, 10);
    usdtt_step(3, 1);
    std::string hist = rd("events/usdtt/usdtt_step/hist");
    EXPECT_TRUE(has(hist, "{ arg1:          2 } hitcount:          3  arg2:         30")) << hist;
    EXPECT_TRUE(has(hist, "{ arg1:          3 } hitcount:          1  arg2:          1")) << hist;
    ASSERT_EQ(wr("events/usdtt/usdtt_step/trigger", "!hist:keys=arg1:vals=arg2"), 0);
    EXPECT_EQ(usdtt_usdtt_step_semaphore, 0);
}

TEST(UsdtEvents, TprobeOnATracepoint)
{
    reset();
    ASSERT_EQ(wr("dynamic_events", "t:tp/step usdtt_step k=arg1 $arg2 twice=arg3:u64\n"), 0)
        << rd("error_log");
    ASSERT_EQ(wr("dynamic_events", "t usdtt_send $arg* msg=+0(arg1):string\n"), 0)
        << rd("error_log");
    // $arg* is every field by name, as the kernel expands it to the parameters' names.
    EXPECT_EQ(rd("dynamic_events"), "t:tp/step usdtt_step k=arg1 arg2=$arg2 twice=arg3:u64\n"
                                    "t:tracepoints/usdtt_send usdtt_send arg1=arg1 arg2=arg2 "
                                    "msg=+0(arg1):string\n");
    std::string fmt = rd("events/tp/step/format");
    EXPECT_TRUE(has(fmt, "field:unsigned long __probe_ip;")) << fmt;
    EXPECT_TRUE(has(fmt, "field:s32 k;")) << fmt;
    EXPECT_TRUE(has(fmt, "field:s64 arg2;")) << fmt;
    EXPECT_TRUE(has(fmt, "field:u64 twice;")) << fmt;
    ASSERT_EQ(wr("events/tp/step/enable", "1"), 0);
    ASSERT_EQ(wr("events/tracepoints/usdtt_send/enable", "1"), 0);
    EXPECT_EQ(usdtt_usdtt_step_semaphore, 1); // the tracepoint is armed for it
    EXPECT_EQ(rd("events/usdtt/usdtt_step/enable"), "0\n");
    usdtt_step(7, -1);
    usdtt_send("hello", 5);
    std::string trace = rd("trace");
    EXPECT_TRUE(has(trace, " step: (usdtt_step+0x")) << trace;
    EXPECT_TRUE(has(trace, ") k=7 arg2=-1 twice=21\n")) << trace;
    EXPECT_TRUE(has(trace, " usdtt_send: (usdtt_send+0x")) << trace;
    EXPECT_TRUE(has(trace, " arg2=5 msg=\"hello\"\n")) << trace;
    // The tracepoint's own records are not written: it is not enabled itself.
    EXPECT_FALSE(has(trace, " usdtt_step: (0x")) << trace;
    ASSERT_EQ(wr("events/tp/step/enable", "0"), 0);
    EXPECT_EQ(usdtt_usdtt_step_semaphore, 0);
    EXPECT_EQ(wr("dynamic_events", "-:tp/step\n"), 0);
    ASSERT_EQ(wr("events/tracepoints/usdtt_send/enable", "0"), 0);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
}

TEST(UsdtEvents, TprobeErrors)
{
    reset();
    auto err = [](const std::string &line) {
        wr("error_log", "", true);
        int r = wr("dynamic_events", line + "\n");
        return std::to_string(r) + " " + rd("error_log");
    };
    // The caret line under column COL of the command.
    auto caret = [](size_t col) { return "\n" + std::string(11 + col, ' ') + "^\n"; };
    std::string e = err("t no_such_tracepoint");
    EXPECT_TRUE(has(e, "-22 ")) << e;
    EXPECT_TRUE(has(e, "trace_fprobe: error: Tracepoint is not found")) << e;
    e = err("t usdtt.step");
    EXPECT_TRUE(has(e, "Invalid character in tracepoint name")) << e;
    EXPECT_TRUE(has(e, "  Command: t usdtt.step" + caret(7))) << e;
    e = err("t usdtt_step $arg4");
    EXPECT_TRUE(has(e, "-2 ")) << e;
    EXPECT_TRUE(has(e, "This variable is not found at this probe point")) << e;
    e = err("t usdtt_step %di");
    EXPECT_TRUE(has(e, "Invalid $-valiable specified")) << e;
    e = err("t usdtt_step $retval");
    EXPECT_TRUE(has(e, "$retval is not available on probe")) << e;
    e = err("t usdtt_step +0(arg1):x"); // the caret in the text as written
    EXPECT_TRUE(has(e, "Unknown type is specified")) << e;
    EXPECT_TRUE(has(e, "  Command: t usdtt_step +0(arg1):x" + caret(22))) << e;
    ASSERT_EQ(wr("dynamic_events", "t:x/y usdtt_step\n"), 0);
    e = err("f:x/y usdtt_step");
    EXPECT_TRUE(has(e, "Probe type is different from existing probe")) << e;
    EXPECT_EQ(rd("dynamic_events"), "t:x/y usdtt_step\n");
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
}

TEST(UsdtEvents, NotesOfALibraryLoadedLater)
{
    reset();
    ASSERT_EQ(dlopen(SDT_LIB, RTLD_NOW | RTLD_NOLOAD), nullptr) << "libsdtlib.so already loaded";
    EXPECT_FALSE(trace_events::instance().has_event("sdtl", "fire"));
    void *h = dlopen(SDT_LIB, RTLD_NOW);
    ASSERT_NE(h, nullptr) << dlerror();
    EXPECT_TRUE(has(rd("available_events"), "sdtl:fire\n")) << rd("available_events");
    auto *sem = static_cast<unsigned short *>(dlsym(h, "sdtl_fire_semaphore"));
    auto fire = reinterpret_cast<int (*)(int)>(dlsym(h, "sdtl_fire"));
    ASSERT_TRUE(sem && fire);
    ASSERT_EQ(wr("events/sdtl/fire/enable", "1"), 0) << rd("error_log");
    EXPECT_EQ(*sem, 1);
    EXPECT_EQ(fire(41), 42);
    ASSERT_EQ(wr("events/sdtl/fire/enable", "0"), 0);
    EXPECT_EQ(*sem, 0);
    EXPECT_TRUE(has(rd("trace"), ") arg1=41 arg2=42\n")) << rd("trace");
    dlclose(h);
}

} // namespace
