// Argument names from DWARF in dynamic_events (the kernel's BTF arguments): parameters by
// name, $arg* and $argN renamed, members through pointers, bitfields, strings and arrays,
// typed $retval, entry arguments at exit; the kernel's errors with their carets; and the
// fetch programs, which must be those of the equivalent explicit fetch args (same cost).
// The targets below are this test binary's own functions, built with -g like every test.
#include "tracefs/tracefs_tree.h"

#include "tracefs/btf_lookup.h"
#include "tracefs/trace_events.h"

#include "tests/tracefs/ftrace_test_util.h"
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

enum bt_color { BT_RED = -1, BT_GREEN = 2 };

struct bt_point {
    int x;
    int y;
};

struct bt_item {
    long id;
    struct bt_point pos;
    unsigned flags : 3;
    unsigned level : 5;
    const char *name;
    char tag[8];
    int hist[4];
    struct bt_item *next;
    enum bt_color color;
    double weight;
};

TARGET long bt_score(struct bt_item *it, int scale, const char *label, unsigned char small,
                     double w, long after_float)
{
    asm volatile("" ::: "memory");
    return it->id * scale + small + after_float + (label ? 1 : 0) + static_cast<long>(w);
}

TARGET struct bt_item *bt_next(struct bt_item *it)
{
    asm volatile("" ::: "memory");
    return it->next;
}

TARGET void bt_void(int x)
{
    asm volatile("" : : "r"(x) : "memory");
}

TARGET double bt_half(double d)
{
    asm volatile("" ::: "memory");
    return d / 2;
}

TARGET long bt_byval(struct bt_point p, long k)
{
    asm volatile("" ::: "memory");
    return p.x + k;
}

using namespace dprobe;

namespace
{

using ftt::has;
using ftt::pipe_lines;
using ftt::rd;
using ftt::T;
using ftt::wr;

bt_item g_b = {2, {5, 6}, 1, 9, "beta", "tb", {10, 11, 12, 13}, nullptr, BT_GREEN, 0.5};
bt_item g_a = {1, {3, -4}, 5, 17, "alpha", "ta", {20, 21, 22, 23}, &g_b, BT_RED, 2.5};

class BtfArgs : public ::testing::Test
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
    // Writes LINE, expects it accepted and listed as LISTING.
    void accept(const std::string &line, const std::string &listing)
    {
        SCOPED_TRACE(line);
        ASSERT_EQ(wr("dynamic_events", line + "\n"), 0) << rd("error_log");
        EXPECT_EQ(rd("dynamic_events"), listing + "\n");
        EXPECT_EQ(wr("dynamic_events", "", true), 0);
    }
    // CMD, with '^' where the caret must be, is refused with error NAME (message MSG).
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
        std::string expect =
            "error: " + msg + "\n  Command: " + cmd + "\n" + std::string(11 + caret, ' ') + "^\n";
        EXPECT_TRUE(has(rd("error_log"), expect)) << rd("error_log") << "\nwanted:\n" << expect;
        EXPECT_EQ(rd("dynamic_events"), "");
    }
};

TEST_F(BtfArgs, ParametersByNameAndMetaArgs)
{
    accept("f:bt/e bt_score it scale label small after_float",
           "f:bt/e bt_score it=it scale=scale label=label small=small after_float=after_float");
    // $arg* names every parameter a register holds: not w, a double in xmm0.
    accept("f:bt/e bt_score $arg*",
           "f:bt/e bt_score it=it scale=scale label=label small=small after_float=after_float");
    // $argN is renamed to the parameter in that register (the 5th integer slot is
    // after_float, the 6th parameter), with its type suffix kept.
    accept("f:bt/e bt_score $arg2:x32 $arg5",
           "f:bt/e bt_score scale=scale:x32 after_float=after_float");
    accept("p:bt/k bt_score $arg*",
           "p:bt/k bt_score it=it scale=scale label=label small=small after_float=after_float");
    // name=$argN is a plain register read, as in the kernel.
    accept("f:bt/e bt_score s=$arg2", "f:bt/e bt_score s=$arg2");
    accept("f:bt/x bt_score%return $arg* $retval",
           "f:bt/x bt_score%return it=it scale=scale label=label small=small "
           "after_float=after_float arg6=$retval");
}

TEST_F(BtfArgs, FormatHasNamesAndTypes)
{
    ASSERT_EQ(wr("dynamic_events", "f:bt/e bt_score it scale label small it->flags it->hist "
                                   "it->color\n"),
              0)
        << rd("error_log");
    std::string fmt = rd("events/bt/e/format");
    EXPECT_TRUE(has(fmt, "\tfield:u64 it;\toffset:16;\tsize:8;\tsigned:0;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:s32 scale;\toffset:24;\tsize:4;\tsigned:1;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:__data_loc char[] label;\toffset:28;\tsize:4;\tsigned:1;\n"))
        << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:u8 small;\toffset:32;\tsize:1;\tsigned:0;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:u32 arg5;\toffset:33;\tsize:4;\tsigned:0;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:s32 arg6[4];\toffset:37;\tsize:16;\tsigned:1;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "\tfield:s32 arg7;\toffset:53;\tsize:4;\tsigned:1;\n")) << fmt;
    EXPECT_TRUE(has(fmt, "print fmt: \"(%lx) it=0x%Lx scale=%d label=\\\"%s\\\" small=%u "
                         "arg5=%u arg6={%d,%d,%d,%d} arg7=%d\""))
        << fmt;
}

TEST_F(BtfArgs, ValuesAtEntryAndExit)
{
    ASSERT_EQ(wr("dynamic_events",
                 "f:bt/e bt_score it scale label small after_float it->id it->pos.x it->pos.y "
                 "it->flags it->level it->name it->tag it->hist it->next->name it->color\n"
                 "f:bt/x bt_score%return $retval it->next->pos.y scale\n"
                 "f bt_next%return $retval->name $retval->hist\n"
                 "p:bt/k bt_score it->pos.y y=+12($arg1):s32\n"),
              0)
        << rd("error_log");
    ASSERT_EQ(wr("events/enable", "1"), 0);
    EXPECT_EQ(bt_score(&g_a, 3, "lbl", 7, 1.5, 40), 1 * 3 + 7 + 40 + 1 + 1);
    EXPECT_EQ(bt_next(&g_a), &g_b);
    ASSERT_EQ(wr("events/enable", "0"), 0);
    auto lines = pipe_lines();
    ASSERT_EQ(lines.size(), 4u);
    auto line_of = [&](const std::string &event) {
        for (const std::string &l : lines)
            if (has(l, " " + event + ": ")) return l;
        ADD_FAILURE() << "no " << event << " line";
        return std::string();
    };
    char it[32];
    std::snprintf(it, sizeof it, "0x%lx", reinterpret_cast<unsigned long>(&g_a));
    EXPECT_TRUE(has(line_of("e"), std::string(") it=") + it +
                                      " scale=3 label=\"lbl\" small=7 after_float=40 arg6=1 arg7=3 "
                                      "arg8=-4 arg9=5 arg10=17 arg11=\"alpha\" arg12=\"ta\" "
                                      "arg13={20,21,22,23} arg14=\"beta\" arg15=-1"))
        << line_of("e");
    EXPECT_TRUE(has(line_of("k"), ") arg1=-4 y=-4")) << line_of("k");
    EXPECT_TRUE(has(line_of("x"), "<- bt_score) arg1=52 arg2=6 scale=3")) << line_of("x");
    EXPECT_TRUE(has(line_of("bt_next__exit"), "<- bt_next) arg1=\"beta\" arg2={10,11,12,13}"))
        << line_of("bt_next__exit");
}

TEST_F(BtfArgs, KernelErrorsWithCarets)
{
    refuse("f bt_score ^nosuch", "This variable is not found at this probe point", ENOENT);
    refuse("f bt_score it->^nosuch", "This field is not found.", ENOENT);
    refuse("f bt_score it^-.x", "Failed to parse single hyphen. Forgot '>'?");
    refuse("f bt_score scale->^x", "This is not a pointer to union/structure.");
    refuse("f bt_score it->pos->^x", "This is not a pointer to union/structure.");
    refuse("f bt_score it.^id", "Non pointer structure/union argument is not supported.",
           EOPNOTSUPP);
    refuse("f bt_score ^scale:string", "This type does not fit for string.");
    refuse("f bt_void%return ^$retval", "This function returns 'void' type", ENOENT);
    refuse("f bt_score%return $retval->^x", "This is not a pointer to union/structure.");
    refuse("f bt_score ^$arg9", "This variable is not found at this probe point", ENOENT);
    refuse("f bt_score args=^$arg*", "$arg* must be an independent parameter without name etc.");
    refuse("f bt_score +0(^$arg*)", "$arg* must be an independent parameter without name etc.");
    refuse("f bt_score $arg* ^$arg*", "$arg* can be used only once in the parameters");
    // What no register holds: a double (xmm0), a struct by value and what follows it.
    refuse("f bt_score ^w", "BTF is not available or not supported", EOPNOTSUPP);
    refuse("f bt_byval ^p", "Non pointer structure/union argument is not supported.", EOPNOTSUPP);
    refuse("f bt_byval ^k", "BTF is not available or not supported", EOPNOTSUPP);
    refuse("f bt_half%return ^$retval", "BTF is not available or not supported", EOPNOTSUPP);
    // Names only at an entry or exit: not mid-function, not on uprobe-style places.
    refuse("p bt_score+5 ^it", "BTF is not available or not supported");
}

TEST_F(BtfArgs, NoDebugInfoKeepsTheKernelBehaviour)
{
    // bt_byval's struct hides the slot of k: $arg2 stays a register read.
    accept("f:bt/e bt_byval $arg2", "f:bt/e bt_byval arg1=$arg2");
    // A function with a glob has no single prototype: $argN stays, $arg* is refused.
    accept("f:bt/g bt_sc* $arg1", "f:bt/g bt_sc* arg1=$arg1");
    refuse("f:bt/g bt_sc* ^$arg*", "BTF is not available or not supported", EOPNOTSUPP);
    refuse("f:bt/g bt_sc* ^it", "No BTF entry for this probe point", ENOENT);
    // An object without debug info anywhere (libstdc++: no debug package on the system):
    // operator new(unsigned long) has a parameter, but nothing names or types it.
    accept("p:bt/n libstdc++.so.6:_Znwm $arg1", "p:bt/n libstdc++.so.6:_Znwm arg1=$arg1");
    refuse("p:bt/n libstdc++.so.6:_Znwm ^size", "No BTF entry for this probe point", ENOENT);
    refuse("p:bt/n libstdc++.so.6:_Znwm ^$arg*", "BTF is not available or not supported",
           EOPNOTSUPP);
}

TEST_F(BtfArgs, SeparateDebugFileByBuildId)
{
    // libc is stripped; libc6-dbg (scripts/setup) installs its DWARF as
    // /usr/lib/debug/.build-id/NN/REST.debug, where perf probe and gdb find it.
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void *>(&getenv), &info), 0);
    auto di = debuginfo_of_file(info.dli_fname);
    ASSERT_TRUE(di) << info.dli_fname << ": no debug info (is libc6-dbg installed?)";
    EXPECT_TRUE(di->debug_path().starts_with("/usr/lib/debug/.build-id/")) << di->debug_path();
    ASSERT_EQ(wr("dynamic_events", "p:bt/ge libc.so.6:getenv name\n"), 0) << rd("error_log");
    EXPECT_EQ(rd("dynamic_events"), "p:bt/ge libc.so.6:getenv name=name\n");
    EXPECT_TRUE(has(rd("events/bt/ge/format"), "\tfield:__data_loc char[] name;"))
        << rd("events/bt/ge/format");
    ASSERT_EQ(wr("events/bt/ge/enable", "1"), 0);
    EXPECT_EQ(getenv("DPROBE_BT_NO_SUCH_VARIABLE"), nullptr);
    ASSERT_EQ(wr("events/bt/ge/enable", "0"), 0);
    EXPECT_TRUE(has(rd("trace"), ") name=\"DPROBE_BT_NO_SUCH_VARIABLE\"\n")) << rd("trace");
}

TEST_F(BtfArgs, ReadmeAdvertisesTheSyntaxAsTheKernels)
{
    // The kernel's selftests pick their cases by these README lines (check_requires).
    const std::string readme = rd("README");
    for (const char *line :
         {"\t           <argname>[->field[->field|.field...]],\n",
          "\t           $stack<index>, $stack, $retval, $comm, $arg<N>,\n",
          "\t     kernel return probes support: $retval, $arg<N>, $comm\n",
          "\t fetcharg: (%<register>|$<efield>), @<address>, @<symbol>[+|-<offset>],\n",
          "\t           e[:[<group>/][<event>]] <attached-group>.<attached-event> [<args>] "
          "[if <filter>]\n",
          "   place (uprobe): <path>:<offset>[%return][(ref_ctr_offset)]\n"})
        EXPECT_TRUE(has(readme, line)) << line;
}

// A parse with FUNC as the function's prototype.
probe_definition parse_with(const std::string &line, const func_proto_ptr &func)
{
    parse_options po;
    po.func_info = [func](const probe_definition &) { return std::optional<func_proto_ptr>(func); };
    dynevent_command cmd;
    auto argv = argv_split(line);
    probe_error e = parse_dynevent(argv, po, cmd);
    EXPECT_TRUE(e.ok()) << line << ": " << probe_err_name(e.err);
    return cmd.def;
}

bool same_prog(const probe_arg &a, const probe_arg &b)
{
    if (a.type != b.type || a.count != b.count || a.prog.field_size != b.prog.field_size)
        return false;
    for (size_t i = 0; i < a.prog.code.size(); i++) {
        const fetch_insn &x = a.prog.code[i], &y = b.prog.code[i];
        if (x.op != y.op || x.size != y.size || x.param != y.param || x.offset != y.offset ||
            x.basesize != y.basesize || x.lshift != y.lshift || x.rshift != y.rshift)
            return false;
        if (x.op == fetch_op::END) break;
    }
    return true;
}

TEST(BtfArgsCompile, SameProgramAsTheExplicitFetchArg)
{
    probe_definition place;
    place.kind = probe_kind::fprobe;
    place.place.symbol = "bt_score";
    auto f = func_proto_of_place(place);
    ASSERT_TRUE(f && *f) << "no debug info for bt_score in this test binary";
    auto check = [&](const std::string &named, const std::string &explicit_) {
        SCOPED_TRACE(named + " vs " + explicit_);
        probe_definition a = parse_with("f bt_score " + named, *f);
        probe_definition b = parse_with("f bt_score " + explicit_, *f);
        ASSERT_EQ(a.args.size(), 1u);
        ASSERT_EQ(b.args.size(), 1u);
        EXPECT_TRUE(same_prog(a.args[0], b.args[0]));
    };
    const size_t pos = offsetof(bt_item, pos), name = offsetof(bt_item, name),
                 next = offsetof(bt_item, next), tag = offsetof(bt_item, tag),
                 hist = offsetof(bt_item, hist);
    auto off = [](size_t o) { return "+" + std::to_string(o); };
    check("scale", "$arg2:s32");
    check("small", "$arg4:u8");
    check("it", "$arg1:x64");
    check("label", "+0($arg3):string");
    check("it->pos.y", off(pos + 4) + "($arg1):s32");
    check("it->name", "+0(" + off(name) + "($arg1)):string");
    check("it->tag", off(tag) + "($arg1):string");
    check("it->hist", off(hist) + "($arg1):s32[4]");
    check("it->next->id", "+0(" + off(next) + "($arg1)):s64");
    check("it->level", off(pos + 8) + "($arg1):b5@3/32");
    check("it->name:x64", off(name) + "($arg1):x64");
    // At exit the parameter is the one saved at entry.
    probe_definition a = parse_with("f bt_score%return scale", *f);
    probe_definition b = parse_with("f bt_score%return $arg2:s32", *f);
    EXPECT_TRUE(same_prog(a.args[0], b.args[0]));
    EXPECT_EQ(a.entry_args.size(), b.entry_args.size());
}

TEST(BtfArgsCompile, UncheckedOfflineParse)
{
    // What a reader that cannot see the process does: accept names, keep the text.
    parse_options po;
    po.btf_unchecked = true;
    dynevent_command cmd;
    auto argv = argv_split("f:bt/e some_func count p->a.b $arg* $retval->len");
    ASSERT_TRUE(parse_dynevent(argv, po, cmd).ok());
    EXPECT_EQ(cmd.def.listing(),
              "f:bt/e some_func%return count=count arg2=p->a.b arg3=$retval->len");
    // Syntax is still checked.
    argv = argv_split("f some_func p-.x");
    probe_error e = parse_dynevent(argv, po, cmd);
    EXPECT_EQ(e.err, probe_err::BAD_HYPHEN);
    EXPECT_EQ(e.offset, 1);
}

} // namespace
