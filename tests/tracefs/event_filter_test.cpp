// Event filter expressions (the kernel's trace_events_filter.c): parsing, error names and
// positions, and evaluation over records built by the real record writer.
#include "tracefs/event_filter.h"

#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace dprobe;

namespace
{

probe_definition parse(const std::string &line)
{
    dynevent_command cmd;
    auto argv = argv_split(line);
    probe_error e = parse_dynevent(argv, parse_options{}, cmd);
    EXPECT_TRUE(e.ok()) << line << ": " << probe_err_name(e.err);
    return cmd.def;
}

// An event with every kind of field: signed/unsigned numbers of each size, a string, a char
// array (a "static string" for filters), and a symbol.
const char line[] = "p:kprobes/t do_work a=%di:s32 b=%si:u8 c=%dx:x64 s=+0(%cx):string "
                    "arr=+0(%r8):char[4] w=%r9:s16";

struct record {
    std::vector<uint8_t> buf = std::vector<uint8_t>(512);
    size_t size = 0;
};

record make(const probe_definition &d, long a, unsigned long b, unsigned long c, const char *s,
            const char *arr, long w, int pid = 77)
{
    static char sbuf[64], abuf[8];
    std::strncpy(sbuf, s, sizeof sbuf - 1);
    std::memset(abuf, 0, sizeof abuf);
    std::memcpy(abuf, arr, std::min<size_t>(std::strlen(arr), 4));
    pt_regs regs{};
    regs.di = static_cast<unsigned long>(a);
    regs.si = b;
    regs.dx = c;
    regs.cx = reinterpret_cast<unsigned long>(sbuf);
    regs.r8 = reinterpret_cast<unsigned long>(abuf);
    regs.r9 = static_cast<unsigned long>(w);
    fetch_context ctx;
    ctx.regs = &regs;
    record r;
    r.size = probe_record_store(r.buf.data(), r.buf.size(), d, ctx, 1001, pid, 0x1000, 0);
    EXPECT_GT(r.size, 0u);
    return r;
}

class EventFilter : public ::testing::Test
{
  protected:
    probe_definition def = parse(line);
    std::vector<filter_field> fields = probe_filter_fields(def);

    std::unique_ptr<event_filter> compile(const std::string &text)
    {
        filter_parse_error pe;
        auto f = event_filter::compile(text, fields, pe);
        EXPECT_TRUE(f) << text << ": " << filter_err_name(pe.err) << " at " << pe.pos;
        return f;
    }

    filter_parse_error fails(const std::string &text)
    {
        filter_parse_error pe;
        auto f = event_filter::compile(text, fields, pe);
        EXPECT_FALSE(f) << text;
        return pe;
    }

    bool matches(const std::string &text, const record &r, unsigned cpu = 0,
                 const char *comm = "worker")
    {
        auto f = compile(text);
        if (!f) return false;
        event_filter::context c;
        c.cpu = cpu;
        c.comm = comm;
        return f->match(r.buf.data(), r.size, c);
    }
};

TEST_F(EventFilter, FieldsOfAProbeEvent)
{
    std::vector<std::string> names;
    for (auto &f : fields)
        names.push_back(f.name);
    EXPECT_EQ(names, (std::vector<std::string>{"__probe_ip", "a", "b", "c", "s", "arr", "w", "CPU",
                                               "cpu", "COMM", "comm", "common_type", "common_flags",
                                               "common_preempt_count", "common_pid"}));
    auto ret = probe_filter_fields(parse("r:kprobes/r do_work v=$retval"));
    EXPECT_EQ(ret[0].name, "__probe_func");
    EXPECT_EQ(ret[1].name, "__probe_ret_ip");
    EXPECT_EQ(ret[2].name, "v");
    EXPECT_EQ(ret[2].offset, 24);
}

TEST_F(EventFilter, NumericComparisons)
{
    record r = make(def, -5, 200, 0x1234, "hello", "ab", -2);
    EXPECT_TRUE(matches("a == -5", r));
    EXPECT_FALSE(matches("a != -5", r));
    EXPECT_TRUE(matches("a < 0", r)); // signed: -5 < 0
    EXPECT_TRUE(matches("a <= -5", r));
    EXPECT_FALSE(matches("a > -5", r));
    EXPECT_TRUE(matches("a >= -6", r));
    EXPECT_TRUE(matches("b > 100", r)); // u8 200
    EXPECT_TRUE(matches("b == 0xc8", r));
    EXPECT_TRUE(matches("c & 0x1000", r)); // bit test
    EXPECT_FALSE(matches("c & 0x2000", r));
    EXPECT_TRUE(matches("w == -2", r)); // s16
    EXPECT_TRUE(matches("w < -1", r));
    EXPECT_TRUE(matches("common_pid == 77", r));
    EXPECT_TRUE(matches("common_type == 1001", r));
    EXPECT_TRUE(matches("__probe_ip == 0x1000", r));
    EXPECT_TRUE(matches("common_preempt_count == 0", r));
    // The constant is cut to the field's size, as the kernel's (type)pred->val.
    EXPECT_TRUE(matches("b == 0x1c8", r));
}

TEST_F(EventFilter, UnsignedVersusSigned)
{
    record r = make(def, 1, 255, ~0ul, "", "", 0);
    EXPECT_TRUE(matches("c > 0", r)); // x64 is unsigned: 0xffff... is large
    EXPECT_TRUE(matches("b >= 255", r));
    EXPECT_FALSE(matches("b < 0", r));
}

TEST_F(EventFilter, StringsAndGlobs)
{
    record r = make(def, 0, 0, 0, "hello_world", "abcd", 0);
    EXPECT_TRUE(matches("s == \"hello_world\"", r));
    EXPECT_TRUE(matches("s == 'hello_world'", r));
    EXPECT_FALSE(matches("s == \"hello\"", r));
    EXPECT_TRUE(matches("s != \"hello\"", r));
    EXPECT_TRUE(matches("s ~ \"hello*\"", r));
    EXPECT_TRUE(matches("s ~ \"*world\"", r));
    EXPECT_TRUE(matches("s ~ \"*lo_w*\"", r));
    EXPECT_TRUE(matches("s ~ \"h?llo_[vw]orld\"", r));
    EXPECT_FALSE(matches("s ~ \"world*\"", r));
    EXPECT_TRUE(matches("s ~ \"!world*\"", r)); // a leading '!' negates the glob
    EXPECT_TRUE(matches("arr == \"abcd\"", r)); // char[4]: a fixed-size string
    EXPECT_TRUE(matches("arr ~ \"ab*\"", r));
    EXPECT_TRUE(matches("comm == \"worker\"", r));
    EXPECT_TRUE(matches("COMM ~ \"work*\"", r));
    EXPECT_FALSE(matches("comm == \"other\"", r));
}

TEST_F(EventFilter, FaultedStringIsEmpty)
{
    probe_definition d = parse("p:kprobes/t do_work s=+0(%cx):string");
    auto fl = probe_filter_fields(d);
    pt_regs regs{};
    regs.cx = 16; // unmapped
    fetch_install_fault_handler();
    fetch_context ctx;
    ctx.regs = &regs;
    std::vector<uint8_t> buf(256);
    size_t n = probe_record_store(buf.data(), buf.size(), d, ctx, 1, 1, 0, 0);
    filter_parse_error pe;
    auto f = event_filter::compile("s == \"\"", fl, pe);
    ASSERT_TRUE(f);
    EXPECT_TRUE(f->match(buf.data(), n, {}));
    f = event_filter::compile("s ~ \"*\"", fl, pe);
    ASSERT_TRUE(f);
    EXPECT_TRUE(f->match(buf.data(), n, {}));
}

TEST_F(EventFilter, LogicAndPrecedence)
{
    record r = make(def, 1, 2, 3, "x", "", 0);
    EXPECT_TRUE(matches("a == 1 && b == 2", r));
    EXPECT_FALSE(matches("a == 1 && b == 3", r));
    EXPECT_TRUE(matches("a == 9 || b == 2", r));
    EXPECT_FALSE(matches("a == 9 || b == 9", r));
    // && binds tighter than ||.
    EXPECT_TRUE(matches("a == 1 || b == 9 && c == 9", r));
    EXPECT_FALSE(matches("(a == 1 || b == 9) && c == 9", r));
    EXPECT_TRUE(matches("a == 9 && b == 9 || c == 3", r));
    EXPECT_FALSE(matches("a == 9 && (b == 9 || c == 3)", r));
    // Negation of predicates and groups.
    EXPECT_TRUE(matches("!a == 9", r));
    EXPECT_FALSE(matches("!(a == 1 && b == 2)", r));
    EXPECT_TRUE(matches("!(a == 1 && b == 9)", r));
    EXPECT_TRUE(matches("!(!(a == 1))", r));
    // The kernel's own example shape.
    EXPECT_TRUE(matches(
        "a == 1 && !(!(b == 2) || (c == 9 && a == 1)) || c == 9 || b == 2 && !(a == 9)", r));
    EXPECT_TRUE(matches("((((a == 1))))", r));
    EXPECT_TRUE(matches("  a==1&&b==2  \n", r));
}

TEST_F(EventFilter, ExhaustiveTruthTable)
{
    // Three predicates whose truth is chosen by the record; every combination of operators
    // and groupings below is checked against C++'s own evaluation.
    struct expr {
        const char *text;
        bool (*eval)(bool, bool, bool);
    };
    const expr exprs[] = {
        {"a == 1 && b == 1 && c == 1", [](bool x, bool y, bool z) { return x && y && z; }},
        {"a == 1 || b == 1 || c == 1", [](bool x, bool y, bool z) { return x || y || z; }},
        {"a == 1 && b == 1 || c == 1", [](bool x, bool y, bool z) { return (x && y) || z; }},
        {"a == 1 || b == 1 && c == 1", [](bool x, bool y, bool z) { return x || (y && z); }},
        {"(a == 1 || b == 1) && c == 1", [](bool x, bool y, bool z) { return (x || y) && z; }},
        {"a == 1 && (b == 1 || c == 1)", [](bool x, bool y, bool z) { return x && (y || z); }},
        {"!(a == 1 || b == 1) && c == 1", [](bool x, bool y, bool z) { return !(x || y) && z; }},
        {"!(a == 1 && !(b == 1 || c == 1))",
         [](bool x, bool y, bool z) { return !(x && !(y || z)); }},
        {"a != 1 || !b == 1 && c == 1", [](bool x, bool y, bool z) { return !x || (!y && z); }},
    };
    for (const auto &e : exprs) {
        auto f = compile(e.text);
        ASSERT_TRUE(f);
        for (int m = 0; m < 8; m++) {
            bool x = m & 1, y = m & 2, z = m & 4;
            record r = make(def, x, y, z, "", "", 0);
            EXPECT_EQ(f->match(r.buf.data(), r.size, {}), e.eval(x, y, z))
                << e.text << " with " << x << y << z;
        }
    }
}

TEST_F(EventFilter, Cpu)
{
    record r = make(def, 0, 0, 0, "", "", 0);
    EXPECT_TRUE(matches("cpu == 3", r, 3));
    EXPECT_FALSE(matches("CPU != 3", r, 3));
    EXPECT_TRUE(matches("cpu < 4 && cpu >= 2", r, 3));
}

TEST_F(EventFilter, Errors)
{
    struct bad {
        const char *text;
        filter_err err;
        int pos;
    };
    // Positions as the kernel computes them (one past the predicate's first character,
    // plus the offset inside the predicate).
    const bad cases[] = {
        {"foo == 1", filter_err::FIELD_NOT_FOUND, 4},
        {"a = 1", filter_err::INVALID_OP, 3},
        {"a == 'x'", filter_err::EXPECT_DIGIT, 6},
        {"s == 1", filter_err::EXPECT_STRING, 6},
        {"s < \"x\"", filter_err::ILLEGAL_FIELD_OP, 5},
        {"a ~ 1", filter_err::ILLEGAL_FIELD_OP, 5},
        {"a == x", filter_err::INVALID_VALUE, 6},
        {"a == 12z", filter_err::ILLEGAL_INTVAL, 6},
        {"b == -1", filter_err::ILLEGAL_INTVAL, 6}, // unsigned field
        {"(a == 1", filter_err::TOO_MANY_OPEN, 0},
        {"a == 1 && (b == 2", filter_err::TOO_MANY_OPEN, 10},
        {"a == 1)", filter_err::TOO_MANY_CLOSE, 6},
        {"s == \"abc", filter_err::MISSING_QUOTE, 5},
        {"a == 1 b == 2", filter_err::TOO_MANY_PREDS, 7},
        {"a == 1 & b == 2", filter_err::TOO_MANY_PREDS, 7},
        {"a == 123456789012345678901234", filter_err::OPERAND_TOO_LONG, 30},
        {"", filter_err::ERRNO, 0},
        {"()", filter_err::ERRNO, 0},
        // A dangling && after an ||: a predicate no operator linked (found by dynevent_fuzz).
        {"a == 1 || b == 9 &&", filter_err::INVALID_FILTER, 0},
        {"a == 1 || b == 9 && ", filter_err::INVALID_FILTER, 0},
    };
    for (const auto &c : cases) {
        filter_parse_error pe = fails(c.text);
        EXPECT_EQ(filter_err_name(pe.err), std::string(filter_err_name(c.err))) << c.text;
        EXPECT_EQ(pe.pos, c.pos) << c.text;
    }
}

TEST_F(EventFilter, ErrorText)
{
    filter_parse_error pe = fails("foo == 1");
    EXPECT_EQ(filter_error_text("foo == 1\n", pe),
              "foo == 1\n    ^\nparse_error: Field not found\n");
    pe = fails("(a == 1");
    EXPECT_EQ(filter_error_text("(a == 1", pe), "(a == 1\n^\nparse_error: Too many '('\n");
    pe = fails("");
    EXPECT_EQ(filter_error_text("", pe), "\nError: (-22)\n");
}

TEST_F(EventFilter, TextIsStripped)
{
    auto f = compile("  a == 1 \n");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->text(), "a == 1");
    EXPECT_EQ(f->nr_preds(), 1u);
}

} // namespace
