// Unit tests of the DWARF side of `dprobe probe`: perf-probe syntax (probe_point.h), DWARF
// location expressions to fetch args (dwarf_fetch.h, on hand-made expressions), and the
// whole translation on dwvars.c built at -O0 and -O2 (perf_probe.h, probe_finder.h,
// probe_show.h). What depends on the compiler's register choices is matched by pattern;
// what the ABI fixes (member offsets, bitfield layout, types) exactly.
#include "arch/x86_64/reg_names.h"
#include "tracefs/dwarf/debuginfo.h"
#include "tracefs/dwarf/dwarf_fetch.h"
#include "tools/dprobe/resolve/elf_image.h"
#include "tools/dprobe/resolve/perf_probe.h"
#include "tools/dprobe/resolve/probe_point.h"
#include "tools/dprobe/resolve/probe_show.h"

#include <dwarf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

using namespace dprobe;
using namespace dprobe::tools;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// ---- perf-probe syntax ------------------------------------------------------------------

TEST(probe_point, forms)
{
    perf_probe_point pp;
    std::string err;
    ASSERT_TRUE(parse_perf_probe_point("score", pp, &err)) << err;
    EXPECT_EQ(pp.function, "score");
    EXPECT_FALSE(pp.needs_debuginfo());

    ASSERT_TRUE(parse_perf_probe_point("score:5", pp, &err)) << err;
    EXPECT_EQ(pp.function, "score");
    EXPECT_TRUE(pp.has_line);
    EXPECT_EQ(pp.line, 5);
    EXPECT_TRUE(pp.needs_debuginfo());

    ASSERT_TRUE(parse_perf_probe_point("score@dwvars.c:5", pp, &err)) << err;
    EXPECT_EQ(pp.function, "score");
    EXPECT_EQ(pp.file, "dwvars.c");
    EXPECT_EQ(pp.line, 5);

    ASSERT_TRUE(parse_perf_probe_point("dwvars.c:49", pp, &err)) << err;
    EXPECT_EQ(pp.function, "");
    EXPECT_EQ(pp.file, "dwvars.c");
    EXPECT_EQ(pp.line, 49);

    ASSERT_TRUE(parse_perf_probe_point("src/a.c:7", pp, &err)) << err;
    EXPECT_EQ(pp.file, "src/a.c");

    ASSERT_TRUE(parse_perf_probe_point("score+0x10", pp, &err)) << err;
    EXPECT_EQ(pp.offset, 16u);
    ASSERT_TRUE(parse_perf_probe_point("score%return", pp, &err)) << err;
    EXPECT_TRUE(pp.retprobe);
    ASSERT_TRUE(parse_perf_probe_point("score@dwvars.c", pp, &err)) << err;
    EXPECT_EQ(pp.file, "dwvars.c");
    EXPECT_FALSE(pp.has_line);
}

TEST(probe_point, refused)
{
    const std::pair<const char *, const char *> bad[] = {
        {"", "empty probe point"},
        {"score:5+4", "offset can't be used with a line"},
        {"score:5%return", "%return needs the function entry"},
        {"score+4%return", "%return needs the function entry"},
        {"score:x", "bad line number"},
        {"score+y", "bad offset"},
        {"score%entry", "unknown suffix"},
        {"dwvars.c", "is not a function name"},
        {"score@a.c@b.c", "SRC@SRC"},
        {"score;foo*", "lazy line patterns"},
        {"0x1234", "absolute address"},
        {"score:1:2", "bad line number"},
    };
    for (auto [text, why] : bad) {
        perf_probe_point pp;
        std::string err;
        EXPECT_FALSE(parse_perf_probe_point(text, pp, &err)) << text;
        EXPECT_THAT(err, HasSubstr(why)) << text;
    }
}

TEST(probe_point, arguments)
{
    perf_probe_arg a;
    std::string err;
    ASSERT_TRUE(parse_perf_probe_arg("it->pos.x", a, &err)) << err;
    EXPECT_TRUE(a.is_variable());
    EXPECT_EQ(a.var, "it");
    ASSERT_EQ(a.fields.size(), 2u);
    EXPECT_TRUE(a.fields[0].arrow);
    EXPECT_EQ(a.fields[0].name, "pos");
    EXPECT_FALSE(a.fields[1].arrow);
    EXPECT_EQ(a.fields[1].name, "x");
    EXPECT_EQ(a.default_name(), "x");

    ASSERT_TRUE(parse_perf_probe_arg("h=it->hist[2]:u8", a, &err)) << err;
    EXPECT_EQ(a.name, "h");
    EXPECT_EQ(a.type, "u8");
    ASSERT_EQ(a.fields.size(), 2u);
    EXPECT_TRUE(a.fields[1].is_index);
    EXPECT_EQ(a.fields[1].index, 2);
    EXPECT_EQ(a.default_name(), "hist");

    ASSERT_TRUE(parse_perf_probe_arg("arr[0x1]", a, &err)) << err;
    EXPECT_EQ(a.fields[0].index, 1);
    EXPECT_EQ(a.default_name(), "arr");

    // Fetch args pass through untouched.
    for (const char *raw : {"%di:u32", "+0($arg1):string", "$retval", "@sym+8", "\\5"}) {
        ASSERT_TRUE(parse_perf_probe_arg(raw, a, &err)) << raw << ": " << err;
        EXPECT_FALSE(a.is_variable()) << raw;
    }
    ASSERT_TRUE(parse_perf_probe_arg("$vars", a, &err));
    EXPECT_EQ(a.var, "$vars");

    for (const char *bad : {"a-b", "a.", "a[x]", "a[1", "1x=a", "a->", "x=", "a:"}) {
        EXPECT_FALSE(parse_perf_probe_arg(bad, a, &err)) << bad;
        EXPECT_FALSE(err.empty()) << bad;
    }
}

TEST(probe_point, line_ranges)
{
    line_range_spec lr;
    std::string err;
    ASSERT_TRUE(parse_line_range("score", lr, &err)) << err;
    EXPECT_EQ(lr.function, "score");
    EXPECT_EQ(lr.start, 0);
    EXPECT_EQ(lr.end, INT_MAX);
    ASSERT_TRUE(parse_line_range("score:3+2", lr, &err)) << err;
    EXPECT_EQ(lr.start, 3);
    EXPECT_EQ(lr.end, 4);
    ASSERT_TRUE(parse_line_range("score@dwvars.c:3-7", lr, &err)) << err;
    EXPECT_EQ(lr.file, "dwvars.c");
    EXPECT_EQ(lr.end, 7);
    ASSERT_TRUE(parse_line_range("dwvars.c:40", lr, &err)) << err;
    EXPECT_EQ(lr.function, "");
    EXPECT_EQ(lr.file, "dwvars.c");
    EXPECT_EQ(lr.start, 40);
    EXPECT_FALSE(parse_line_range("score:7-3", lr, &err));
    EXPECT_FALSE(parse_line_range("score:3+0", lr, &err));
    EXPECT_FALSE(parse_line_range("9lives", lr, &err));
}

TEST(debuginfo, file_matches)
{
    EXPECT_TRUE(file_matches("/src/dwvars.c", "dwvars.c"));
    EXPECT_TRUE(file_matches("/src/dwvars.c", "src/dwvars.c"));
    EXPECT_TRUE(file_matches("dwvars.c", "dwvars.c"));
    EXPECT_FALSE(file_matches("/src/mydwvars.c", "dwvars.c"));
    EXPECT_FALSE(file_matches("/src/dwvars.c", "/other/dwvars.c"));
}

// ---- location expressions -------------------------------------------------------------

namespace
{

Dwarf_Op op(uint8_t atom, Dwarf_Word n = 0, Dwarf_Word n2 = 0)
{
    Dwarf_Op o{};
    o.atom = atom;
    o.number = n;
    o.number2 = n2;
    return o;
}

Dwarf_Word neg(int64_t v)
{
    return static_cast<Dwarf_Word>(v);
}

struct loc_case {
    std::vector<Dwarf_Op> ops;
    std::string text; // "" = refused
    std::string why;  // part of the reason when refused
};

location_env test_env(std::vector<Dwarf_Op> &frame_base)
{
    location_env env;
    env.frame_base = frame_base;
    // The CFA is %sp + 16 at the "address".
    env.cfa = [](std::vector<Dwarf_Op> &v) {
        v = {op(DW_OP_bregx, 7, 16)};
        return true;
    };
    env.symbolize = [](uint64_t a) -> std::optional<std::pair<std::string, int64_t>> {
        if (a >= 0x4000 && a < 0x4100)
            return std::make_pair(std::string("table"), static_cast<int64_t>(a - 0x4000));
        return std::nullopt;
    };
    return env;
}

} // namespace

TEST(dwarf_fetch, locations)
{
    std::vector<Dwarf_Op> cfa_base = {op(DW_OP_call_frame_cfa)};
    const loc_case cases[] = {
        {{op(DW_OP_reg5)}, "%di", ""},
        {{op(DW_OP_reg0)}, "%ax", ""},
        {{op(DW_OP_regx, 12)}, "%r12", ""},
        {{op(DW_OP_breg6, neg(-20))}, "-20(%bp)", ""},
        {{op(DW_OP_bregx, 7, 8)}, "+8(%sp)", ""},
        // Frame base = CFA = %sp + 16.
        {{op(DW_OP_fbreg, neg(-28))}, "-12(%sp)", ""},
        {{op(DW_OP_call_frame_cfa)}, "+16(%sp)", ""},
        // A pointer stored at -8(%bp): the variable lives where it points (VLAs, references).
        {{op(DW_OP_breg6, neg(-8)), op(DW_OP_deref)}, "+0(-8(%bp))", ""},
        {{op(DW_OP_breg6, neg(-8)), op(DW_OP_deref), op(DW_OP_plus_uconst, 4)}, "+4(-8(%bp))", ""},
        {{op(DW_OP_addr, 0x4000)}, "@table", ""},
        {{op(DW_OP_addr, 0x4010)}, "@table+16", ""},
        {{op(DW_OP_addr, 0x4010), op(DW_OP_deref)}, "+0(@table+16)", ""},
        {{op(DW_OP_lit7), op(DW_OP_stack_value)}, "\\7", ""},
        {{op(DW_OP_consts, neg(-3)), op(DW_OP_stack_value)}, "\\-3", ""},
        {{op(DW_OP_reg3), op(DW_OP_piece, 8)}, "%bx", ""},
        {{}, "", "no location"},
        {{op(DW_OP_addr, 0x9000)}, "", "no data symbol"},
        {{op(DW_OP_reg17)}, "", "SSE or x87"},
        {{op(DW_OP_breg0, 1), op(DW_OP_stack_value)}, "", "DW_OP_stack_value"},
        {{op(DW_OP_entry_value, 1), op(DW_OP_stack_value)}, "", "DW_OP_entry_value"},
        {{op(DW_OP_GNU_entry_value, 1), op(DW_OP_stack_value)}, "", "DW_OP_entry_value"},
        {{op(DW_OP_reg0), op(DW_OP_piece, 4), op(DW_OP_reg1), op(DW_OP_piece, 4)}, "", "pieces"},
        {{op(DW_OP_implicit_pointer, 0x40, 0)}, "", "implicit_pointer"},
        {{op(DW_OP_implicit_value, 4)}, "", "implicit value"},
        {{op(DW_OP_breg6, 0), op(DW_OP_breg7, 0)}, "", "does not follow"},
        {{op(DW_OP_breg6, 0), op(DW_OP_plus)}, "", "DW_OP_plus"},
    };
    for (const auto &c : cases) {
        location_env env = test_env(cfa_base);
        fetch_loc loc;
        std::string why;
        bool ok = translate_location(c.ops, env, loc, &why);
        if (c.text.empty()) {
            EXPECT_FALSE(ok) << loc.text();
            EXPECT_THAT(why, HasSubstr(c.why)) << c.why;
        } else {
            ASSERT_TRUE(ok) << c.text << ": " << why;
            EXPECT_EQ(loc.text(), c.text);
        }
    }
}

TEST(dwarf_fetch, frame_bases)
{
    fetch_loc loc;
    std::string why;
    // clang's frame base: the value of %rbp.
    std::vector<Dwarf_Op> rbp = {op(DW_OP_reg6)};
    location_env env = test_env(rbp);
    std::vector<Dwarf_Op> var = {op(DW_OP_fbreg, neg(-4))};
    ASSERT_TRUE(translate_location(var, env, loc, &why)) << why;
    EXPECT_EQ(loc.text(), "-4(%bp)");
    // A frame base at an offset from a register.
    std::vector<Dwarf_Op> breg = {op(DW_OP_breg7, 32)};
    env = test_env(breg);
    ASSERT_TRUE(translate_location(var, env, loc, &why)) << why;
    EXPECT_EQ(loc.text(), "+28(%sp)");
    // No frame base, or no CFA where one is needed.
    std::vector<Dwarf_Op> none;
    env = test_env(none);
    EXPECT_FALSE(translate_location(var, env, loc, &why));
    EXPECT_THAT(why, HasSubstr("frame base"));
    std::vector<Dwarf_Op> cfa = {op(DW_OP_call_frame_cfa)};
    env = test_env(cfa);
    env.cfa = [](std::vector<Dwarf_Op> &) { return false; };
    EXPECT_FALSE(translate_location(var, env, loc, &why));
    EXPECT_THAT(why, HasSubstr("CFA"));
}

TEST(dwarf_fetch, text)
{
    fetch_loc l;
    l.kind = fetch_loc::base_kind::arg;
    l.name = "$arg1";
    EXPECT_EQ(l.text(), "$arg1");
    EXPECT_FALSE(l.in_memory());
    l.derefs = {24, 0};
    EXPECT_EQ(l.text(), "+0(+24($arg1))");
    l.last_offset() += 8;
    EXPECT_EQ(l.text(), "+8(+24($arg1))");
    fetch_loc s;
    s.kind = fetch_loc::base_kind::sym;
    s.name = "origin";
    EXPECT_TRUE(s.in_memory());
    s.last_offset() += 4;
    EXPECT_EQ(s.text(), "@origin+4");
    s.sym_off = -8;
    EXPECT_EQ(s.text(), "@origin-8");
    EXPECT_EQ(arch::dwarf_regstr(7), std::string("sp"));
    EXPECT_EQ(arch::dwarf_regstr(15), std::string("r15"));
    EXPECT_EQ(arch::dwarf_regstr(16), nullptr);
}

// ---- on the test program --------------------------------------------------------------

namespace
{

std::string bin(const char *opt, const char *name = "dwvars")
{
    return std::string(DWARF_TEST_DIR) + "/" + opt + "/" + name;
}

int line_of(const char *file, const std::string &mark)
{
    std::ifstream in(std::string(DWARF_TEST_SRC) + "/" + file);
    std::string text;
    for (int n = 1; std::getline(in, text); n++)
        if (text.find(mark) != std::string::npos) return n;
    ADD_FAILURE() << "no " << mark << " in " << file;
    return 0;
}

// FUNC:N for the line marked MARK, N counted from FUNC's definition line.
std::string rel(const char *func, const std::string &mark, const char *file = "dwvars.c")
{
    std::ifstream in(std::string(DWARF_TEST_SRC) + "/" + file);
    std::string text;
    std::regex def("^\\S.*\\b" + std::string(func) + "\\(.*\\)\\s*$");
    int decl = 0;
    for (int n = 1; std::getline(in, text); n++)
        if (!decl && std::regex_match(text, def)) decl = n;
    return std::string(func) + ":" + std::to_string(line_of(file, mark) - decl);
}

class on_prog : public ::testing::TestWithParam<const char *>
{
  protected:
    void SetUp() override
    {
        std::string err;
        img_ = elf_image::open(bin(GetParam()), &err);
        ASSERT_TRUE(img_) << err;
    }
    perf_probe_result probe(const std::string &spec)
    {
        return translate_perf_probe(argv_split(spec), *img_);
    }
    // The "NAME=FETCH:TYPE" words of a translated line, by name.
    std::map<std::string, std::string> args(const perf_probe_result &r)
    {
        std::map<std::string, std::string> m;
        auto words = argv_split(r.line);
        for (size_t i = 2; i < words.size(); i++) {
            auto eq = words[i].find('=');
            m[words[i].substr(0, eq)] = words[i].substr(eq + 1);
        }
        return m;
    }
    std::unique_ptr<elf_image> img_;
};

} // namespace

TEST_P(on_prog, line_probe_places_and_names)
{
    auto r = probe(rel("score", "probe:score") + " s");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_THAT(r.line,
                MatchesRegex("p:probe_dwvars/score_L[0-9]+ dwvars:score\\+[0-9]+ s=.*:s64"));
    // The same line by file and absolute number, and by FUNC@SRC.
    auto f = probe("dwvars.c:" + std::to_string(line_of("dwvars.c", "probe:score")) + " s");
    ASSERT_TRUE(f.ok) << f.message;
    EXPECT_EQ(argv_split(f.line)[1], argv_split(r.line)[1]);
    auto at = probe("score@dwvars.c:" + rel("score", "probe:score").substr(6) + " s");
    ASSERT_TRUE(at.ok) << at.message;
    EXPECT_EQ(argv_split(at.line)[1], argv_split(r.line)[1]);
    // An explicit event name and group.
    auto named = probe("grp:ev=" + rel("score", "probe:score"));
    ASSERT_TRUE(named.ok) << named.message;
    EXPECT_THAT(named.line, MatchesRegex("p:grp/ev dwvars:score\\+[0-9]+"));
}

TEST_P(on_prog, members_bitfields_strings_arrays)
{
    auto r = probe(rel("score", "probe:score") +
                   " x=it->pos.x y=it->pos.y it->flags it->level it->name:string it->hist[2] "
                   "nx=it->next->pos.y");
    ASSERT_TRUE(r.ok) << r.message;
    auto a = args(r);
    // Offsets and bitfield layout are the ABI's: struct item {long id; struct point pos;
    // unsigned flags:3, level:5; const char *name; int hist[4]; struct item *next;}.
    EXPECT_THAT(a["x"], MatchesRegex("\\+8\\(.*\\):s32"));
    EXPECT_THAT(a["y"], MatchesRegex("\\+12\\(.*\\):s32"));
    EXPECT_THAT(a["flags"], MatchesRegex("\\+16\\(.*\\):b3@0/32"));
    EXPECT_THAT(a["level"], MatchesRegex("\\+16\\(.*\\):b5@3/32"));
    EXPECT_THAT(a["name"], MatchesRegex("\\+0\\(\\+24\\(.*\\)\\):string"));
    EXPECT_THAT(a["hist"], MatchesRegex("\\+40\\(.*\\):s32"));
    EXPECT_THAT(a["nx"], MatchesRegex("\\+12\\(\\+48\\(.*\\)\\):s32"));

    r = probe(rel("locals", "probe:locals") + " pt.y arr arr[2] word counter calls origin.y");
    ASSERT_TRUE(r.ok) << r.message;
    a = args(r);
    EXPECT_THAT(a["y"], MatchesRegex(".*:s32"));
    EXPECT_THAT(a["arr"], MatchesRegex(".*:s32\\[3\\]"));
    EXPECT_THAT(a["arr_1"], MatchesRegex(".*:s32"));
    EXPECT_THAT(a["word"], MatchesRegex(".*:string"));
    // Globals by their symbols (the place's object is searched first at run time).
    EXPECT_EQ(a["counter"], "@counter:s64");
    EXPECT_EQ(a["calls"], "@calls:s32");
    EXPECT_EQ(a["y_1"], "@origin+4:s32");
}

TEST_P(on_prog, function_entry_uses_the_calling_convention)
{
    auto r = probe("score it->id scale it->name:string");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "p:probe_dwvars/score dwvars:score id=+0($arg1):s64 scale=$arg2:s32 "
                      "name=+0(+24($arg1)):string");
    // A char pointer is its text by default, the pointer with :x64.
    r = probe("score it->name p=it->name:x64");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "p:probe_dwvars/score dwvars:score name=+0(+24($arg1)):string "
                      "p=+24($arg1):x64");
    r = probe("score%return $params $retval");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "r:probe_dwvars/score__return dwvars:score it=$arg1:x64 scale=$arg2:s32 "
                      "arg3=$retval");
    r = probe("locals counter");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "p:probe_dwvars/locals dwvars:locals counter=@counter:s64");
    r = probe("locals word");
    EXPECT_FALSE(r.ok);
    EXPECT_THAT(r.message, HasSubstr("is a local variable of locals"));
    r = probe("half n");
    ASSERT_TRUE(r.ok) << r.message; // the int after a double still has its register
    EXPECT_EQ(r.line, "p:probe_dwvars/half dwvars:half n=$arg1:s32");
    r = probe("half d");
    EXPECT_FALSE(r.ok);
    EXPECT_THAT(r.message, HasSubstr("floating-point"));
}

TEST_P(on_prog, vars_and_params)
{
    auto r = probe(rel("locals", "probe:locals") + " $vars");
    ASSERT_TRUE(r.ok) << r.message;
    auto a = args(r);
    EXPECT_THAT(a["arr"], MatchesRegex(".*:s32\\[3\\]"));
    EXPECT_THAT(a["word"], MatchesRegex(".*:string"));
    EXPECT_EQ(a.count("pt"), 0u);
    ASSERT_FALSE(r.notes.empty());
    EXPECT_THAT(r.notes.front(), HasSubstr("left out 'pt'"));
    r = probe(rel("score", "probe:score") + " $params");
    ASSERT_TRUE(r.ok) << r.message;
    a = args(r);
    EXPECT_THAT(a["it"], MatchesRegex(".*:x64"));
    EXPECT_THAT(a["scale"], MatchesRegex(".*:s32"));
    EXPECT_EQ(a.count("s"), 0u);
}

TEST_P(on_prog, refusals)
{
    const std::pair<std::string, std::string> bad[] = {
        {rel("score", "probe:score") + " nosuch", "no variable 'nosuch' is visible"},
        {rel("locals", "probe:locals") + " pt", "is a struct point: name a member"},
        {rel("score", "probe:score") + " it.id", "is a pointer: use '->'"},
        {rel("locals", "probe:locals") + " pt->x", "is not a pointer: use '.'"},
        {rel("score", "probe:score") + " it->pos->x", "is not a pointer"},
        {rel("score", "probe:score") + " it->nosuch", "has no member 'nosuch'"},
        {rel("score", "probe:score") + " scale[1]", "neither an array nor a pointer"},
        {rel("score", "probe:score") + " it->flags.x", "is a bitfield"},
        {rel("score", "probe:score") + " scale:string", "can't be a string"},
        {rel("score", "probe:score") + " it:string", "does not point to chars"},
        {rel("half", "line:half") + " d", "floating-point"},
        {rel("locals", "probe:locals") + " $vars:u8", "takes no name, type or member"},
        {"score:1000", "has no code to probe"},
        {"dwvars.c:1", "has no code to probe"},
        {"nosuch.c:3", "no source file matching"},
        {"nosuch_func:3", "no function 'nosuch_func'"},
        {"score@other.c:3", "declared in a file matching 'other.c'"},
    };
    for (const auto &[spec, why] : bad) {
        auto r = probe(spec);
        EXPECT_FALSE(r.ok) << spec << " -> " << r.line;
        EXPECT_THAT(r.message, HasSubstr(why)) << spec;
    }
    // An explicit type is the user's: a double read as its bits.
    auto r = probe(rel("half", "line:half") + " d:x64");
    if (std::string(GetParam()) == "O0") {
        ASSERT_TRUE(r.ok) << r.message;
        EXPECT_THAT(r.line, HasSubstr(":x64"));
    } else {
        // At -O2 d lives in an SSE register.
        EXPECT_FALSE(r.ok);
        EXPECT_THAT(r.message, HasSubstr("SSE"));
    }
}

TEST_P(on_prog, inlined_function)
{
    auto r = probe(rel("twice", "line:twice") + " v");
    if (std::string(GetParam()) == "O0") {
        ASSERT_TRUE(r.ok) << r.message; // kept out of line
        EXPECT_THAT(r.line, MatchesRegex("p:probe_dwvars/twice_L2 dwvars:twice\\+[0-9]+ v=.*:s32"));
    } else {
        EXPECT_FALSE(r.ok); // inlined into score and sum_array
        EXPECT_THAT(r.message, HasSubstr("in 2 places"));
        EXPECT_THAT(r.message, HasSubstr("score+"));
        EXPECT_THAT(r.message, HasSubstr("sum_array+"));
    }
}

TEST_P(on_prog, aliases_and_separate_debug_files)
{
    // A symbol the DWARF does not name is the function at its address.
    auto r = probe("score_alias it->id");
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "p:probe_dwvars/score_alias dwvars:score_alias id=+0($arg1):s64");
    // The same line in a stripped copy, its DWARF found through .gnu_debuglink.
    std::string err;
    auto stripped = elf_image::open(bin(GetParam(), "stripped/dwvars"), &err);
    ASSERT_TRUE(stripped) << err;
    auto di = debuginfo::open(stripped->real_path(), &err);
    ASSERT_TRUE(di) << err;
    EXPECT_THAT(di->debug_path(), HasSubstr("stripped/dwvars.debug"));
    // A debug file of another build under the name the debuglink gives: not this file's
    // (its build id differs), so no debug info rather than wrong offsets.
    for (const char *f : {"stale/dwvars", "nobid_stale/dwvars"}) {
        SCOPED_TRACE(f);
        err.clear();
        auto stale = debuginfo::open(bin(GetParam(), f), &err);
        EXPECT_FALSE(stale) << stale->debug_path();
        EXPECT_THAT(err, HasSubstr("has no debug info"));
    }
    // Without a build id, the debuglink's CRC tells the right file.
    auto nobid = debuginfo::open(bin(GetParam(), "nobid/dwvars"), &err);
    ASSERT_TRUE(nobid) << err;
    EXPECT_THAT(nobid->debug_path(), HasSubstr("nobid/dwvars.debug"));
    std::string spec = rel("score", "probe:score") + " s it->pos.x";
    auto a = translate_perf_probe(argv_split(spec), *stripped);
    auto b = probe(spec);
    ASSERT_TRUE(a.ok) << a.message;
    ASSERT_TRUE(b.ok) << b.message;
    EXPECT_EQ(a.line, b.line);
}

TEST_P(on_prog, shared_library_statics)
{
    std::string err;
    auto lib = elf_image::open(bin(GetParam(), "libdwlib.so"), &err);
    ASSERT_TRUE(lib) << err;
    std::string spec = rel("lib_step", "probe:lib", "dwlib.c") + " counter";
    auto r = translate_perf_probe(argv_split(spec), *lib);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_THAT(r.line, MatchesRegex("p:probe_libdwlib/lib_step_L[0-9]+ "
                                     "libdwlib.so:lib_step\\+[0-9]+ counter=@counter:s32"));
}

TEST_P(on_prog, show_line_range)
{
    std::string err, out;
    auto di = debuginfo::open(bin(GetParam()), &err);
    ASSERT_TRUE(di) << err;
    ASSERT_TRUE(show_line_range(*di, *img_, "locals", out, &err)) << err;
    std::string src = std::string(DWARF_TEST_SRC) + "/dwvars.c";
    EXPECT_THAT(out, ::testing::StartsWith("<locals@" + src +
                                           ":0>\n         NOINLINE void locals(int seed)\n"));
    std::string n = rel("locals", "probe:locals").substr(7);
    char num[16];
    std::snprintf(num, sizeof num, "%7s  ", n.c_str());
    EXPECT_THAT(out, HasSubstr(std::string("\n") + num + "    printf(\"locals seed="));
    EXPECT_THAT(out, HasSubstr("\n             /* A line without code. */\n"));
    EXPECT_THAT(out, HasSubstr("\n         \n")); // the blank line
    // A sub-range: only lines 1..2 after the declaration, then nothing more.
    ASSERT_TRUE(show_line_range(*di, *img_, "locals:1+2", out, &err)) << err;
    EXPECT_THAT(out, ::testing::StartsWith("<locals@" + src + ":1>\n"));
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3);
    EXPECT_FALSE(show_line_range(*di, *img_, "nosuch", out, &err));
    EXPECT_THAT(err, HasSubstr("no function 'nosuch'"));
}

TEST_P(on_prog, show_available_vars)
{
    std::string err, out;
    auto di = debuginfo::open(bin(GetParam()), &err);
    ASSERT_TRUE(di) << err;
    std::string point = rel("score", "probe:score");
    ASSERT_TRUE(show_available_vars(*di, *img_, point, out, &err)) << err;
    EXPECT_THAT(out, ::testing::StartsWith("Available variables at " + point + "\n\t@<score+"));
    EXPECT_THAT(out, HasSubstr("\n\t\tstruct item*\tit\n"));
    EXPECT_THAT(out, HasSubstr("\n\t\tint\tscale\n"));
    EXPECT_THAT(out, HasSubstr("\n\t\tlong int\ts\n"));
    ASSERT_TRUE(show_available_vars(*di, *img_, "sum_array", out, &err)) << err;
    EXPECT_EQ(out, "Available variables at sum_array\n\t@<sum_array+0>\n\t\tconst int*\ta\n"
                   "\t\tint\tn\n");
    ASSERT_TRUE(show_available_vars(*di, *img_, rel("locals", "probe:locals"), out, &err)) << err;
    EXPECT_THAT(out, HasSubstr("\n\t\tint[3]\tarr\n"));
    EXPECT_THAT(out, HasSubstr("\n\t\tchar[8]\tword\n"));
}

INSTANTIATE_TEST_SUITE_P(dwarf, on_prog, ::testing::Values("O0", "O2"));
