// libtraceevent round trip: every kind of probe event (f entry, f exit with entry args,
// kprobe, kretprobe, path:offset) with every argument type fires for real; each binary record
// of the ring buffer is decoded by libtraceevent from the event's `format` file, and must read
// like the `trace` file's line for it.
//
// Known differences the comparison allows for (each also holds for the kernel's own probe
// events decoded by libtraceevent 1.7):
//  - the probe address: `trace` symbolizes it ("(do_work+0x4/0x20)"), `print fmt` prints it
//    raw ("(%lx)", return probes "(%lx <- %lx)" as func, ret_ip); the raw values are checked
//    to be the addresses the `trace` text names;
//  - `symbol` arguments: libtraceevent's %pS prints "sym+0xoff", the kernel's
//    "sym+0xoff/0xsize";
//  - s8/s16 with "%d": libtraceevent does not sign-extend fields narrower than an int, so a
//    negative value prints as its unsigned bit pattern; compared modulo 2^bits;
//  - `char` ('%c') is left out: libtraceevent 1.7 prints ">c<" for %c without consuming its
//    argument, which shifts every later argument.
#include "core/ring_buffer.h"
#include "core/symbols.h"
#include "tracefs/event_format.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_tree.h"

#include <gtest/gtest.h>

#include <traceevent/event-parse.h>

#include <sys/prctl.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

struct rt_obj {
    uint32_t a;
    uint16_t pair[2];
    uint8_t flags;
    const char *name;
};

TARGET long rt_work(const rt_obj *o, long x, int y)
{
    asm volatile("" ::: "memory");
    return o->a + x + y;
}

TARGET long rt_other(long x)
{
    asm volatile("" ::: "memory");
    return x * 2;
}

using namespace dprobe;

namespace
{

tracefs_tree &T = tracefs_tree::instance();

uint64_t exe_file_offset(uintptr_t addr)
{
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long start, end, off;
        if (std::sscanf(line.c_str(), "%lx-%lx %*s %lx", &start, &end, &off) == 3 &&
            addr >= start && addr < end)
            return addr - start + off;
    }
    return 0;
}

std::string sym_of(uintptr_t addr, bool with_offset)
{
    char buf[256];
    sprint_symbol(buf, sizeof buf, addr, false);
    std::string s = buf;
    if (!with_offset && s.find('+') != std::string::npos) s.resize(s.find('+'));
    return s;
}

std::string hex(uint64_t v)
{
    char b[32];
    std::snprintf(b, sizeof b, "%" PRIx64, v);
    return b;
}

class TraceeventRoundTrip : public ::testing::Test
{
  protected:
    void SetUp() override { reset(); }
    void TearDown() override { reset(); }
    static void reset()
    {
        trace_events::instance().set_group_enabled("", false);
        EXPECT_EQ(T.write_file("dynamic_events", "", true), 0);
        ring_buffer_reset();
    }
};

TEST_F(TraceeventRoundTrip, EveryEventKindAndType)
{
    prctl(PR_SET_NAME, "rt-thread");
    const std::string all_types =
        " u8=+8($argX):u8 u16=+4($argX):u16 u32=+0($argX):u32 u64=$argY:u64"
        " s8=+8($argX):s8 s16=+4($argX):s16 s32=$argZ:s32 s64=$argY:s64"
        " x8=+8($argX):x8 x16=+6($argX):x16 x32=+0($argX):x32 x64=$argY:x64"
        " str=+0(+16($argX)):string ustr=+0(+16($argX)):ustring"
        " arr=+4($argX):u16[2] bf=+8($argX):b3@2/8 cm=$comm sym=$argQ:symbol"
        " sst=$argQ:symstr imm=\\123 istr=\\\"text\"";
    auto args = [&](const char *x, const char *y, const char *z, const char *q) {
        std::string s = all_types;
        for (auto [from, to] : {std::pair{"$argX", x}, {"$argY", y}, {"$argZ", z}, {"$argQ", q}})
            for (size_t p; (p = s.find(from)) != std::string::npos;)
                s.replace(p, std::strlen(from), to);
        return s;
    };
    uint64_t off = exe_file_offset(reinterpret_cast<uintptr_t>(&rt_other));
    ASSERT_NE(off, 0u);
    char uprobe[256];
    std::snprintf(uprobe, sizeof uprobe,
                  "p:uprobes/rt_u /proc/self/exe:0x%" PRIx64 " v=%%di:s64 sp=$stack0:x64", off);
    const std::vector<std::string> lines = {
        "f:rt/fentry rt_work" + args("$arg1", "$arg2", "$arg3", "$arg2"),
        "f:rt/fexit rt_work%return ret=$retval:s64" + args("$arg1", "$arg2", "$arg3", "$arg2"),
        "p:rt/kentry rt_work" + args("%di", "%si", "%dx", "%si"),
        "r:rt/kret rt_work ret=$retval:s64 rx=$retval:x16",
        std::string(uprobe),
    };
    for (const auto &l : lines)
        ASSERT_EQ(T.write_file("dynamic_events", l), 0) << l << "\n"
                                                        << [] {
                                                               std::string s;
                                                               T.read_file("error_log", s);
                                                               return s;
                                                           }();
    ASSERT_EQ(T.write_file("events/enable", "1"), 0);

    static char text[] = "hello";
    rt_obj o{0x11223344, {0xaabb, 0xccdd}, 'Z', text};
    const long sym_arg = reinterpret_cast<long>(&rt_other) + 1;
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(rt_work(&o, sym_arg, -7 - i), long(o.a) + sym_arg - 7 - i);
        EXPECT_EQ(rt_other(40 + i), 80 + 2 * i);
    }
    ASSERT_EQ(T.write_file("events/enable", "0"), 0);

    // libtraceevent with every event's format file.
    tep_handle *tep = tep_alloc();
    ASSERT_NE(tep, nullptr);
    tep_set_long_size(tep, 8);
    tep_set_page_size(tep, 4096);
    tep_set_file_bigendian(tep, TEP_LITTLE_ENDIAN);
    tep_set_local_bigendian(tep, TEP_LITTLE_ENDIAN);
    // The functions %pS may name, as trace-cmd loads them from kallsyms.
    auto objs = kallsyms::instance().objects();
    for (const auto &obj : *objs)
        if (obj->is_main)
            for (const auto &f : obj->funcs)
                tep_register_function(tep, const_cast<char *>(f.name.c_str()), f.addr, nullptr);
    std::map<int, std::string> names;
    for (const auto &grp : trace_events::instance().groups())
        for (const auto &ev : trace_events::instance().events(grp)) {
            std::string fmt;
            ASSERT_EQ(T.read_file("events/" + grp + "/" + ev + "/format", fmt), 0);
            ASSERT_EQ(tep_parse_event(tep, fmt.c_str(), fmt.size(), grp.c_str()),
                      TEP_ERRNO__SUCCESS)
                << fmt;
            names[trace_events::instance().event_id(grp, ev)] = ev;
        }
    ASSERT_EQ(names.size(), 5u);

    // The trace file's event lines, in the order the reader yields records.
    std::string trace;
    ASSERT_EQ(T.read_file("trace", trace), 0);
    std::vector<std::string> trace_lines;
    for (size_t i = 0, nl; i < trace.size(); i = nl + 1) {
        nl = trace.find('\n', i);
        std::string l = trace.substr(i, nl - i);
        if (!l.empty() && l[0] != '#') trace_lines.push_back(l);
    }

    std::map<std::string, int> seen;
    ring_buffer_reader rd(ring_buffer_reader::PEEK);
    rb_record rec;
    size_t n = 0;
    while (rd.next(rec)) {
        ASSERT_LT(n, trace_lines.size());
        const std::string &line = trace_lines[n++];
        std::string ours = trace_events::instance().format_record(rec.payload, rec.len);
        ASSERT_TRUE(line.ends_with(": " + ours)) << line << "\n" << ours;

        tep_record r{};
        r.data = const_cast<void *>(rec.payload);
        r.size = static_cast<int>(rec.len);
        r.ts = rec.ts;
        tep_event *ev = tep_find_event_by_record(tep, &r);
        ASSERT_NE(ev, nullptr);
        trace_seq s;
        trace_seq_init(&s);
        tep_print_event(tep, &s, &r, "%s", TEP_PRINT_INFO);
        trace_seq_terminate(&s);
        std::string decoded(s.buffer, s.len);
        trace_seq_destroy(&s);
        seen[ev->name]++;

        // "name: (ip part) args" / "(raw ip part) args".
        std::string name = std::string(ev->name) + ": ";
        ASSERT_EQ(ours.rfind(name, 0), 0u) << ours;
        std::string body = ours.substr(name.size());
        size_t oc = body.find(") "), dc = decoded.find(") ");
        if (oc == std::string::npos) oc = body.size() - 1;
        if (dc == std::string::npos) dc = decoded.size() - 1;
        std::string our_ip = body.substr(1, oc - 1), dec_ip = decoded.substr(1, dc - 1);
        std::string our_args = oc + 2 <= body.size() ? body.substr(oc + 2) : "";
        std::string dec_args = dc + 2 <= decoded.size() ? decoded.substr(dc + 2) : "";

        // Addresses: the raw values libtraceevent prints are what `trace` symbolized.
        auto is_hex = [](const std::string &h) {
            return !h.empty() && h.find_first_not_of("0123456789abcdef") == std::string::npos;
        };
        if (size_t arrow = dec_ip.find(" <- "); arrow != std::string::npos) {
            std::string f = dec_ip.substr(0, arrow), r = dec_ip.substr(arrow + 4);
            ASSERT_TRUE(is_hex(f) && is_hex(r)) << decoded;
            uint64_t func = std::stoull(f, nullptr, 16), ret = std::stoull(r, nullptr, 16);
            EXPECT_EQ(our_ip, sym_of(ret, true) + " <- " + sym_of(func, false)) << decoded;
        } else {
            ASSERT_TRUE(is_hex(dec_ip)) << decoded;
            uint64_t ip = std::stoull(dec_ip, nullptr, 16);
            if (std::string(ev->system) == "uprobes")
                EXPECT_EQ(our_ip, "0x" + hex(ip));
            else
                EXPECT_EQ(our_ip, sym_of(ip, true)) << decoded;
        }
        // Arguments, one by one.
        auto split = [](const std::string &a) {
            std::vector<std::pair<std::string, std::string>> v;
            for (size_t i = 0; i < a.size();) {
                size_t sp = a.find(' ', i);
                std::string tok = a.substr(i, sp == std::string::npos ? std::string::npos : sp - i);
                size_t eq = tok.find('=');
                v.emplace_back(tok.substr(0, eq),
                               eq == std::string::npos ? "" : tok.substr(eq + 1));
                i = sp == std::string::npos ? a.size() : sp + 1;
            }
            return v;
        };
        auto ov = split(our_args), dv = split(dec_args);
        ASSERT_EQ(ov.size(), dv.size()) << ours << "\n" << decoded;
        for (size_t i = 0; i < ov.size(); i++) {
            const auto &[name_o, val_o] = ov[i];
            const auto &[name_d, val_d] = dv[i];
            EXPECT_EQ(name_o, name_d);
            if (name_o == "s8" || name_o == "s16") {
                unsigned bits = name_o == "s8" ? 8 : 16;
                uint64_t mask = (uint64_t{1} << bits) - 1;
                EXPECT_EQ(uint64_t(std::stoll(val_o)) & mask, uint64_t(std::stoll(val_d)) & mask)
                    << name_o << ": " << val_o << " vs " << val_d;
            } else if (name_o == "sym") {
                EXPECT_EQ(val_o.substr(0, val_o.rfind('/')), val_d) << decoded;
            } else {
                EXPECT_EQ(val_o, val_d) << name_o << " of " << ev->name << "\n ours:    " << ours
                                        << "\n decoded: " << decoded;
            }
        }
    }
    EXPECT_EQ(n, trace_lines.size());
    EXPECT_EQ(seen["fentry"], 3);
    EXPECT_EQ(seen["fexit"], 3);
    EXPECT_EQ(seen["kentry"], 3);
    EXPECT_EQ(seen["kret"], 3);
    EXPECT_EQ(seen["rt_u"], 3);
    tep_free(tep);
}

} // namespace
