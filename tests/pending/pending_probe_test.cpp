// Probes on an object the process has not mapped: a lib:sym kprobe event and a path:offset
// (uprobe-style) event on libpend.so written before it is loaded are accepted and listed
// as gone, armed at its dlopen before its constructor runs, gone again after dlclose, and
// armed anew at the next dlopen (the kernel's pending module probes and its uprobes on any
// file). And SYM+OFFSET past a symbol's end, resolved to the function it lands in
// (probepoint.tc).
#include "tracefs/tracefs_tree.h"

#include "tracefs/trace_events.h"

#include "tests/tracefs/ftrace_test_util.h"
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

using namespace dprobe;

namespace
{

using ftt::count;
using ftt::has;
using ftt::pipe_lines;
using ftt::rd;
using ftt::T;
using ftt::wr;

// What follows ") " in the trace lines of EVENT, in order.
std::vector<std::string> args_of(const std::vector<std::string> &lines, const std::string &event)
{
    std::vector<std::string> out;
    for (const std::string &l : lines)
        if (has(l, " " + event + ": ")) out.push_back(l.substr(l.rfind(") ") + 2));
    return out;
}

// The file offset of function NAME in the ELF file PATH.
uint64_t file_offset_of(const char *path, const char *name)
{
    elf_version(EV_CURRENT);
    int fd = open(path, O_RDONLY);
    Elf *e = elf_begin(fd, ELF_C_READ, nullptr);
    uint64_t vaddr = 0, off = 0;
    Elf_Scn *scn = nullptr;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        gelf_getshdr(scn, &sh);
        if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
        Elf_Data *d = elf_getdata(scn, nullptr);
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym s;
            gelf_getsym(d, static_cast<int>(i), &s);
            const char *n = elf_strptr(e, sh.sh_link, s.st_name);
            if (n && std::string(n) == name && s.st_value) vaddr = s.st_value;
        }
    }
    size_t nph = 0;
    elf_getphdrnum(e, &nph);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        gelf_getphdr(e, static_cast<int>(i), &ph);
        if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
            off = vaddr - ph.p_vaddr + ph.p_offset;
    }
    elf_end(e);
    close(fd);
    return off;
}

std::string hex(uint64_t v)
{
    char b[32];
    std::snprintf(b, sizeof b, "0x%" PRIx64, v);
    return b;
}

class Pending : public ::testing::Test
{
  protected:
    void SetUp() override { reset(); }
    void TearDown() override { reset(); }
    static void reset()
    {
        trace_events::instance().set_group_enabled("", false);
        EXPECT_EQ(wr("dynamic_events", "", true), 0);
        EXPECT_EQ(wr("error_log", "", true), 0);
        EXPECT_EQ(wr("trace", "", true), 0);
    }
};

TEST_F(Pending, ArmedAtEachLoadBeforeTheConstructor)
{
    ASSERT_EQ(dlopen(PEND_LIB, RTLD_NOW | RTLD_NOLOAD), nullptr) << "libpend.so already loaded";
    const uint64_t foff = file_offset_of(PEND_LIB, "pend_work");
    ASSERT_NE(foff, 0u);
    const std::string lines = "p:pend/k libpend.so:pend_work x=%di:s32\n"
                              "r:pend/r libpend.so:pend_work ret=$retval:s32\n"
                              "p:pend/u " PEND_LIB ":" +
                              hex(foff) + " x=%di:s32\n";
    ASSERT_EQ(wr("dynamic_events", lines), 0) << rd("error_log");
    char padded[32];
    std::snprintf(padded, sizeof padded, "0x%016" PRIx64, foff);
    const std::string listing = "p:pend/k libpend.so:pend_work x=%di:s32\n"
                                "r:pend/r libpend.so:pend_work ret=$retval:s32\n"
                                "p:pend/u " PEND_LIB ":" +
                                std::string(padded) + " x=%di:s32\n";
    // Pending: listed as defined, the kernel's lines (perf probe -l splits them into words);
    // the state is in kprobes/list.
    EXPECT_EQ(rd("dynamic_events"), listing);
    EXPECT_EQ(rd("uprobe_events"), "p:pend/u " PEND_LIB ":" + std::string(padded) + " x=%di:s32\n");
    EXPECT_EQ(rd("kprobe_events"), "p:pend/k libpend.so:pend_work x=%di:s32\n"
                                   "r:pend/r libpend.so:pend_work ret=$retval:s32\n");
    std::string list = rd("kprobes/list");
    EXPECT_TRUE(has(list, "0000000000000000  k  pend_work+0x0  libpend.so [GONE]\n")) << list;
    EXPECT_TRUE(has(list, "0000000000000000  r  pend_work+0x0  libpend.so [GONE]\n")) << list;
    EXPECT_TRUE(has(list, "0000000000000000  k  " + hex(foff) + "  " PEND_LIB " [GONE]\n")) << list;
    // Enabled while pending: armed at the load.
    ASSERT_EQ(wr("events/pend/enable", "1"), 0);
    EXPECT_EQ(rd("events/pend/enable"), "1\n");

    for (int round = 1; round <= 2; round++) {
        SCOPED_TRACE("load " + std::to_string(round));
        void *h = dlopen(PEND_LIB, RTLD_NOW);
        ASSERT_NE(h, nullptr) << dlerror();
        EXPECT_EQ(rd("dynamic_events"), listing);
        list = rd("kprobes/list");
        EXPECT_FALSE(has(list, "[GONE]")) << list;
        EXPECT_EQ(count(list, "pend_work+0x0"), 3u) << list;
        auto work = reinterpret_cast<int (*)(int)>(dlsym(h, "pend_work"));
        ASSERT_NE(work, nullptr);
        EXPECT_EQ(work(round), 2 * round + 1);
        dlclose(h);
        ASSERT_EQ(dlopen(PEND_LIB, RTLD_NOW | RTLD_NOLOAD), nullptr);
        EXPECT_EQ(rd("dynamic_events"), listing);
        EXPECT_TRUE(has(rd("kprobes/list"), "[GONE]")) << rd("kprobes/list");

        auto ev = pipe_lines();
        // The constructor's call (pend_work(20)) first: the probes were armed before it ran.
        const std::string x = "x=" + std::to_string(round);
        EXPECT_EQ(args_of(ev, "k"), (std::vector<std::string>{"x=20", x}));
        EXPECT_EQ(args_of(ev, "u"), (std::vector<std::string>{"x=20", x}));
        EXPECT_EQ(args_of(ev, "r"),
                  (std::vector<std::string>{"ret=41", "ret=" + std::to_string(2 * round + 1)}));
    }
    EXPECT_EQ(rd("error_log"), "");
    ASSERT_EQ(wr("events/pend/enable", "0"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:pend/k\n-:pend/r\n-:pend/u\n"), 0);
    EXPECT_FALSE(has(rd("kprobes/list"), "pend_work")) << rd("kprobes/list");
}

TEST_F(Pending, NotPendingWhenTheLibraryIsThere)
{
    void *h = dlopen(PEND_LIB, RTLD_NOW);
    ASSERT_NE(h, nullptr);
    // A loaded library without that symbol: BAD_PROBE_ADDR, as for any unknown symbol.
    EXPECT_EQ(wr("dynamic_events", "p:pend/x libpend.so:nosuch\n"), -ENOENT);
    EXPECT_TRUE(has(rd("error_log"), "Invalid probed address or symbol\n"
                                     "  Command: p:pend/x libpend.so:nosuch\n"
                                     "                    ^\n"))
        << rd("error_log");
    // A mapped file, but not at that offset.
    EXPECT_LT(wr("dynamic_events", "p:pend/y " PEND_LIB ":0x7fffff0\n"), 0);
    EXPECT_TRUE(has(rd("error_log"), "Failed to register probe event")) << rd("error_log");
    EXPECT_EQ(rd("dynamic_events"), "");
    dlclose(h);
}

TEST_F(Pending, SymbolOffsetPastItsEnd)
{
    void *h = dlopen(PEND_LIB, RTLD_NOW);
    ASSERT_NE(h, nullptr);
    auto first = reinterpret_cast<uintptr_t>(dlsym(h, "pend_first"));
    auto second = reinterpret_cast<uintptr_t>(dlsym(h, "pend_second"));
    ASSERT_GT(second, first) << "the compiler reordered pend_first and pend_second";
    const std::string next = std::to_string(second - first);
    // pend_first+<distance> is pend_second's entry: accepted, probing pend_second.
    ASSERT_EQ(wr("dynamic_events", "p:pend/next libpend.so:pend_first+" + next + " a=%di:s64\n"), 0)
        << rd("error_log");
    EXPECT_EQ(rd("dynamic_events"), "p:pend/next libpend.so:pend_first+" + next + " a=%di:s64\n");
    EXPECT_TRUE(has(rd("kprobes/list"), "  k  pend_second+0x0  libpend.so ")) << rd("kprobes/list");
    ASSERT_EQ(wr("events/pend/next/enable", "1"), 0);
    EXPECT_EQ(reinterpret_cast<long (*)(long)>(first)(4), 104);
    EXPECT_EQ(reinterpret_cast<long (*)(long)>(second)(3), 203);
    ASSERT_EQ(wr("events/pend/next/enable", "0"), 0);
    auto ev = pipe_lines();
    EXPECT_EQ(args_of(ev, "next"), (std::vector<std::string>{"a=3"}));
    // An offset before the symbol is refused at parse time.
    EXPECT_EQ(wr("dynamic_events", "p:pend/prev libpend.so:pend_second-" + next + "\n"), -EINVAL);
    EXPECT_TRUE(has(rd("error_log"), "Invalid probed address or symbol")) << rd("error_log");
    EXPECT_EQ(wr("dynamic_events", "", true), 0);
    dlclose(h);
}

TEST_F(Pending, SymbolOffsetPastItsEndMustBeAnInstructionBoundary)
{
    void *h = dlopen(PEND_LIB, RTLD_NOW);
    ASSERT_NE(h, nullptr);
    auto a = reinterpret_cast<uintptr_t>(dlsym(h, "pend_asm_a"));
    auto b = reinterpret_cast<uintptr_t>(dlsym(h, "pend_asm_b"));
    ASSERT_EQ(b - a, 4u) << "pend_asm_a is movq (3 bytes) and ret";
    // Inside pend_asm_b's 10-byte movabs: the kernel's BAD_INSN_BNDRY, caret on the place.
    const std::string bad = "p:pend/mid libpend.so:pend_asm_a+5";
    EXPECT_EQ(wr("dynamic_events", bad + "\n"), -EILSEQ);
    EXPECT_TRUE(has(rd("error_log"), "Probe point is not an instruction boundary\n"
                                     "  Command: " +
                                         bad + "\n" + std::string(11 + bad.find(' ') + 1, ' ') +
                                         "^\n"))
        << rd("error_log");
    // Inside the same instruction through its own symbol: the same error.
    EXPECT_EQ(wr("error_log", "", true), 0);
    EXPECT_EQ(wr("dynamic_events", "p:pend/mid libpend.so:pend_asm_b+1\n"), -EILSEQ);
    EXPECT_TRUE(has(rd("error_log"), "Probe point is not an instruction boundary\n"))
        << rd("error_log");
    EXPECT_EQ(rd("dynamic_events"), "");
    EXPECT_FALSE(has(rd("kprobes/list"), "pend_asm_b")) << rd("kprobes/list");
    // On pend_asm_b's ret, 14 bytes past pend_asm_a: a probe at pend_asm_b+0xa.
    ASSERT_EQ(wr("dynamic_events", "p:pend/ret libpend.so:pend_asm_a+14 v=%ax:x64\n"), 0)
        << rd("error_log");
    EXPECT_TRUE(has(rd("kprobes/list"), "  k  pend_asm_b+0xa  libpend.so ")) << rd("kprobes/list");
    ASSERT_EQ(wr("events/pend/ret/enable", "1"), 0);
    EXPECT_EQ(reinterpret_cast<long (*)(long)>(b)(0), 0x1122334455667788L);
    EXPECT_EQ(reinterpret_cast<long (*)(long)>(a)(7), 7);
    ASSERT_EQ(wr("events/pend/ret/enable", "0"), 0);
    EXPECT_EQ(args_of(pipe_lines(), "ret"), (std::vector<std::string>{"v=0x1122334455667788"}));
    EXPECT_EQ(wr("dynamic_events", "", true), 0);
    dlclose(h);
}

} // namespace
