// A USDT probe of this test binary, through the tracefs model in-process: its note read and
// turned into the uprobe-style line `dprobe probe` writes, the event's arguments as the
// probe site passes them, its semaphore counted up while the event is enabled (by every
// event on it) and down after, and the probe on the NOP jump-optimized.
#define _SDT_HAS_SEMAPHORES 1
#include "tools/dprobe/resolve/sdt_notes.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include <gtest/gtest.h>

#include <sys/sdt.h>

#include <string>
#include <vector>

extern "C" {
unsigned short sdtt_hit_semaphore __attribute__((section(".probes"), used));
}

extern "C" __attribute__((noinline, used)) int sdtt_work(int k, long v)
{
    int r = k * 3;
    if (__builtin_expect(sdtt_hit_semaphore, 0)) STAP_PROBE3(sdtt, hit, k, v, r);
    return r + 1;
}

using namespace dprobe;

namespace
{

tracefs_tree &T = tracefs_tree::instance();

std::string rd(const std::string &path)
{
    std::string s;
    EXPECT_EQ(T.read_file(path, s), 0) << path;
    return s;
}

int wr(const std::string &path, const std::string &data, bool trunc = false)
{
    return T.write_file(path, data, trunc);
}

bool contains(const std::string &hay, const std::string &needle)
{
    return hay.find(needle) != std::string::npos;
}

// The line of sdt_sdtt:hit in this binary, named EVENT.
std::string hit_line(const std::string &event)
{
    std::vector<tools::sdt_probe> probes;
    std::string err;
    EXPECT_TRUE(tools::read_sdt_probes("/proc/self/exe", probes, &err)) << err;
    for (const auto &p : probes) {
        if (p.full_name() != "sdt_sdtt:hit") continue;
        EXPECT_NE(p.semaphore, 0u);
        std::vector<std::string> notes;
        std::string line = tools::sdt_probe_line(p, "/proc/self/exe", {}, notes);
        EXPECT_TRUE(notes.empty());
        return line.replace(line.find("/hit ") + 1, 3, event);
    }
    ADD_FAILURE() << "no sdt_sdtt:hit note in /proc/self/exe";
    return "";
}

TEST(SdtProbe, SemaphoreArgumentsAndJumpOptimization)
{
    trace_events::instance().set_group_enabled("", false);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    const std::string a = hit_line("a"), b = hit_line("b");
    ASSERT_NE(a.find("(0x"), std::string::npos) << a; // the semaphore's file offset
    ASSERT_EQ(wr("dynamic_events", a + "\n" + b + "\n"), 0) << rd("error_log");
    EXPECT_EQ(rd("uprobe_events"), a + "\n" + b + "\n");
    EXPECT_EQ(sdtt_hit_semaphore, 0);
    EXPECT_EQ(sdtt_work(1, 1), 4); // the probe's arguments are not evaluated

    ASSERT_EQ(wr("events/sdt_sdtt/a/enable", "1"), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 1);
    ASSERT_EQ(wr("events/sdt_sdtt/b/enable", "1"), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 2); // one count per enabled event, as per uprobe
    // The NOP the compiler placed is replaced by a jump where the code after it allows;
    // this one is followed by ordinary instructions of sdtt_work.
    std::string list = rd("kprobes/list");
    EXPECT_TRUE(contains(list, "sdtt_work+0x")) << list;
#ifndef __SANITIZE_ADDRESS__ // instrumented code after the NOP: the region may not allow it
    EXPECT_TRUE(contains(list, "[OPTIMIZED]")) << list;
#endif

    EXPECT_EQ(sdtt_work(4, -9), 13);
    std::string trace = rd("trace");
    EXPECT_TRUE(contains(trace, " a: (0x")) << trace;
    EXPECT_TRUE(contains(trace, ") arg1=4 arg2=-9 arg3=12\n")) << trace;
    EXPECT_TRUE(contains(trace, " b: (0x")) << trace;

    ASSERT_EQ(wr("events/sdt_sdtt/a/enable", "0"), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 1);
    ASSERT_EQ(wr("events/sdt_sdtt/enable", "0"), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 0);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 0);
}

TEST(SdtProbe, ArgumentForms)
{
    tools::sdt_probe p;
    p.provider = "x";
    p.name = "y";
    p.pc = 0x1000;
    std::string why;
    auto fetch = [&](const std::string &spec) {
        why.clear();
        return tools::sdt_arg_fetch(spec, 1, p, "/proc/self/exe", &why);
    };
    EXPECT_EQ(fetch("-4@%edi"), "arg1=%di:s32");
    EXPECT_EQ(fetch("8@%rax"), "arg1=%ax:u64");
    EXPECT_EQ(fetch("1@%r9b"), "arg1=%r9:u8");
    EXPECT_EQ(fetch("-2@%si"), "arg1=%si:s16");
    EXPECT_EQ(fetch("-8@-16(%rbp)"), "arg1=-16(%bp):s64");
    EXPECT_EQ(fetch("-8@(%rdi)"), "arg1=+0(%di):s64");
    EXPECT_EQ(fetch("4@0x10(%rsp)"), "arg1=+16(%sp):u32");
    EXPECT_EQ(fetch("-4@$-42"), "arg1=\\-42:s32");
    EXPECT_EQ(fetch("8f@%rbx"), "arg1=%bx:x64");
    EXPECT_EQ(fetch("4f@-8(%rbp)"), "arg1=-8(%bp):x32");
    // sdtt_hit_semaphore is a symbol of this binary: a rip-relative operand is read at its
    // distance from the probe (%ip is the probe's address + 1).
    std::string s = fetch("2@sdtt_hit_semaphore(%rip)");
    EXPECT_TRUE(s.starts_with("arg1=+") && s.ends_with("(%ip):u16")) << s << " " << why;
    EXPECT_EQ(fetch("8f@%xmm0"), "");
    EXPECT_TRUE(contains(why, "general registers")) << why;
    EXPECT_EQ(fetch("-4@(%rdx,%rsi,4)"), "");
    EXPECT_TRUE(contains(why, "base+index")) << why;
    EXPECT_EQ(fetch("-4@%ah"), "");
    EXPECT_EQ(fetch("3@%eax"), "");
    EXPECT_EQ(fetch("8@nosuch_symbol(%rip)"), "");
}

} // namespace
