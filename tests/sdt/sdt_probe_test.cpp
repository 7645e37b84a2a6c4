// A USDT probe of this test binary, through the tracefs model in-process: its note read and
// turned into the uprobe-style line `dprobe probe` writes, the event's arguments as the
// probe site passes them, its semaphore counted up while the event is enabled (by every
// event on it) and down after, and the probe on the NOP jump-optimized.
#define _SDT_HAS_SEMAPHORES 1
#include "tools/dprobe/resolve/sdt_notes.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include "tests/tracefs/ftrace_test_util.h"
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/sdt.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
unsigned short sdtt_hit_semaphore __attribute__((section(".probes"), used));
unsigned short sdtt_tail_semaphore __attribute__((section(".probes"), used));
}

extern "C" __attribute__((noinline, used)) int sdtt_work(int k, long v)
{
    int r = k * 3;
    if (__builtin_expect(sdtt_hit_semaphore, 0)) STAP_PROBE3(sdtt, hit, k, v, r);
    return r + 1;
}

// A probe on the last instruction but one: the NOP is followed by the ret alone, so no
// 5-byte jump fits inside the function and the probe stays an int3.
extern "C" __attribute__((noinline, used)) void sdtt_tail(long v)
{
    STAP_PROBE1(sdtt, tail, v);
}

using namespace dprobe;

namespace
{

using ftt::has;
using ftt::rd;
using ftt::T;
using ftt::wr;

// The line of probe NAME (sdt_PROVIDER:NAME) in the file PATH, its event named EVENT.
std::string sdt_line(const std::string &path, const std::string &name, const std::string &event)
{
    std::vector<tools::sdt_probe> probes;
    std::string err;
    EXPECT_TRUE(tools::read_sdt_probes(path, probes, &err)) << err;
    for (const auto &p : probes) {
        if (p.full_name() != name) continue;
        std::vector<std::string> notes;
        std::string line = tools::sdt_probe_line(p, path, {}, notes);
        EXPECT_TRUE(notes.empty());
        return line.replace(line.find("/" + p.name + " ") + 1, p.name.size(), event);
    }
    ADD_FAILURE() << "no " << name << " note in " << path;
    return "";
}

// The line of sdt_sdtt:hit in this binary, named EVENT.
std::string hit_line(const std::string &event)
{
    return sdt_line("/proc/self/exe", "sdt_sdtt:hit", event);
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
    // The same instruction with another semaphore, or none: the kernel's "Reference counter
    // offset mismatch" (EINVAL, a warning only: nothing in error_log).
    ASSERT_EQ(wr("error_log", "", true), 0);
    const std::string place = a.substr(0, a.find("(0x"));
    const std::string c = "p:sdt_sdtt/c " + place.substr(place.find(' ') + 1);
    EXPECT_EQ(wr("dynamic_events", c + "(0x10)\n"), -EINVAL);
    EXPECT_EQ(wr("dynamic_events", c + "\n"), -EINVAL);
    EXPECT_EQ(rd("error_log"), "");
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
    EXPECT_TRUE(has(list, "sdtt_work+0x")) << list;
#ifndef __SANITIZE_ADDRESS__ // instrumented code after the NOP: the region may not allow it
    EXPECT_TRUE(has(list, "[OPTIMIZED]")) << list;
#endif

    EXPECT_EQ(sdtt_work(4, -9), 13);
    std::string trace = rd("trace");
    EXPECT_TRUE(has(trace, " a: (0x")) << trace;
    EXPECT_TRUE(has(trace, ") arg1=4 arg2=-9 arg3=12\n")) << trace;
    EXPECT_TRUE(has(trace, " b: (0x")) << trace;

    ASSERT_EQ(wr("events/sdt_sdtt/a/enable", "0"), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 1);
    ASSERT_EQ(wr("events/sdt_sdtt/enable", "0"), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 0);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
    EXPECT_EQ(sdtt_hit_semaphore, 0);
}

TEST(SdtProbe, NoRoomForAJumpStaysInt3)
{
    trace_events::instance().set_group_enabled("", false);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    const std::string line = sdt_line("/proc/self/exe", "sdt_sdtt:tail", "tail");
    ASSERT_EQ(wr("dynamic_events", line + "\n"), 0) << rd("error_log");
    ASSERT_EQ(wr("events/sdt_sdtt/tail/enable", "1"), 0);
    std::string list = rd("kprobes/list");
    size_t at = list.find("sdtt_tail+0x");
    ASSERT_NE(at, std::string::npos) << list;
    std::string entry = list.substr(at, list.find('\n', at) - at);
    EXPECT_FALSE(has(entry, "[OPTIMIZED]")) << entry;
    sdtt_tail(-77);
    sdtt_tail(5);
    ASSERT_EQ(wr("events/sdt_sdtt/tail/enable", "0"), 0);
    std::string trace = rd("trace");
    EXPECT_TRUE(has(trace, ") arg1=-77\n")) << trace;
    EXPECT_TRUE(has(trace, ") arg1=5\n")) << trace;
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
}

TEST(SdtProbe, SemaphoreOfALibraryLoadedLater)
{
    trace_events::instance().set_group_enabled("", false);
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    ASSERT_EQ(dlopen(SDT_LIB, RTLD_NOW | RTLD_NOLOAD), nullptr) << "libsdtlib.so already loaded";
    const std::string line = sdt_line(SDT_LIB, "sdt_sdtl:fire", "fire");
    ASSERT_NE(line.find("(0x"), std::string::npos) << line;
    // Not mapped: accepted, pending, and enabled before the library is there.
    ASSERT_EQ(wr("dynamic_events", line + "\n"), 0) << rd("error_log");
    EXPECT_EQ(rd("uprobe_events"), line + "\n"); // the kernel's line: no state
    EXPECT_TRUE(has(rd("kprobes/list"), "[GONE]")) << rd("kprobes/list");
    ASSERT_EQ(wr("events/sdt_sdtl/fire/enable", "1"), 0);
    for (int round = 1; round <= 2; round++) {
        SCOPED_TRACE("load " + std::to_string(round));
        void *h = dlopen(SDT_LIB, RTLD_NOW);
        ASSERT_NE(h, nullptr) << dlerror();
        auto *sem = static_cast<unsigned short *>(dlsym(h, "sdtl_fire_semaphore"));
        auto fire = reinterpret_cast<int (*)(int)>(dlsym(h, "sdtl_fire"));
        ASSERT_TRUE(sem && fire);
        EXPECT_EQ(*sem, 1); // counted up at the load, the event being enabled
        EXPECT_EQ(rd("uprobe_events"), line + "\n");
        EXPECT_EQ(fire(10 * round), 10 * round + 1);
        if (round == 2) {
            // Disabled: counted down, and the probe's arguments are no longer evaluated.
            ASSERT_EQ(wr("events/sdt_sdtl/fire/enable", "0"), 0);
            EXPECT_EQ(*sem, 0);
            EXPECT_EQ(fire(99), 100);
        }
        dlclose(h);
        ASSERT_EQ(dlopen(SDT_LIB, RTLD_NOW | RTLD_NOLOAD), nullptr);
    }
    std::string trace = rd("trace");
    EXPECT_TRUE(has(trace, ") arg1=10 arg2=11\n")) << trace;
    EXPECT_TRUE(has(trace, ") arg1=20 arg2=21\n")) << trace;
    EXPECT_FALSE(has(trace, "arg1=99")) << trace;
    ASSERT_EQ(wr("dynamic_events", "", true), 0);
}

// Prelink moves a file by some delta after the link: the notes keep the link-time addresses,
// .stapsdt.base its new one. A copy of this binary whose notes are DELTA lower (as if it had
// been prelinked DELTA higher) must give the same probes.
TEST(SdtProbe, PrelinkAdjustmentByStapsdtBase)
{
    constexpr uint64_t DELTA = 0x200000;
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string bytes;
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
        bytes.append(buf, static_cast<size_t>(n));
    elf_version(EV_CURRENT);
    Elf *e = elf_memory(bytes.data(), bytes.size());
    ASSERT_NE(e, nullptr);
    size_t shstrndx = 0, moved = 0;
    bool have_base = false;
    elf_getshdrstrndx(e, &shstrndx);
    std::vector<size_t> words; // file offsets of the notes' address words to move
    for (Elf_Scn *scn = nullptr; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        gelf_getshdr(scn, &sh);
        const std::string name = elf_strptr(e, shstrndx, sh.sh_name);
        have_base |= name == ".stapsdt.base";
        if (name != ".note.stapsdt") continue;
        Elf_Data *d = elf_rawdata(scn, nullptr);
        size_t off = 0, name_off, desc_off;
        GElf_Nhdr nh;
        while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
            for (int w = 0; w < 3; w++)
                words.push_back(sh.sh_offset + desc_off + 8 * w);
            moved++;
        }
    }
    elf_end(e);
    close(fd);
    ASSERT_TRUE(have_base);
    ASSERT_GE(moved, 2u);
    for (size_t at : words) {
        uint64_t v;
        std::memcpy(&v, &bytes[at], 8);
        if (v) v -= DELTA; // pc, base, semaphore (0: none)
        std::memcpy(&bytes[at], &v, 8);
    }
    char path[] = "/tmp/sdt-prelinked-XXXXXX";
    int out = mkstemp(path);
    ASSERT_GE(out, 0);
    ASSERT_EQ(write(out, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    close(out);

    std::vector<tools::sdt_probe> orig, moved_probes;
    std::string err;
    ASSERT_TRUE(tools::read_sdt_probes("/proc/self/exe", orig, &err)) << err;
    ASSERT_TRUE(tools::read_sdt_probes(path, moved_probes, &err)) << err;
    unlink(path);
    ASSERT_EQ(orig.size(), moved);
    ASSERT_EQ(moved_probes.size(), orig.size());
    for (size_t i = 0; i < orig.size(); i++) {
        SCOPED_TRACE(orig[i].full_name());
        EXPECT_EQ(moved_probes[i].full_name(), orig[i].full_name());
        EXPECT_EQ(moved_probes[i].pc, orig[i].pc);
        EXPECT_EQ(moved_probes[i].pc_offset, orig[i].pc_offset);
        EXPECT_EQ(moved_probes[i].semaphore, orig[i].semaphore);
        EXPECT_EQ(moved_probes[i].sem_offset, orig[i].sem_offset);
    }
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
    EXPECT_TRUE(has(why, "general registers")) << why;
    EXPECT_EQ(fetch("-4@(%rdx,%rsi,4)"), "");
    EXPECT_TRUE(has(why, "base+index")) << why;
    EXPECT_EQ(fetch("-4@%ah"), "");
    EXPECT_EQ(fetch("3@%eax"), "");
    EXPECT_EQ(fetch("8@nosuch_symbol(%rip)"), "");
}

} // namespace
