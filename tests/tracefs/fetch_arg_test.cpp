// Fetch args compiled from their text and run against a register snapshot that points at
// real memory, including pointers that fault.
#include "tracefs/fetch_arg.h"
#include "tracefs/probe_parse.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace dprobe;

namespace
{

constexpr unsigned entry_flags = TPARG_FL_KERNEL | TPARG_FL_FENTRY;
constexpr unsigned return_flags = TPARG_FL_KERNEL | TPARG_FL_RETURN;

probe_arg compile(const std::string &text, unsigned flags = entry_flags,
                  entry_arg_table *eargs = nullptr)
{
    entry_arg_table local;
    probe_arg a;
    probe_error e = parse_probe_arg(text, 2, 0, {}, flags, eargs ? *eargs : local, a);
    EXPECT_TRUE(e.ok()) << text << ": " << probe_err_name(e.err) << " at " << e.offset;
    return a;
}

std::string hexaddr(const void *p)
{
    char buf[32];
    std::snprintf(buf, sizeof(buf), "0x%lx", reinterpret_cast<unsigned long>(p));
    return buf;
}

struct record {
    static constexpr size_t field = 16; // after an 8-byte header and __probe_ip
    static constexpr size_t size = 16384;
    std::vector<uint8_t> buf = std::vector<uint8_t>(size, 0xa5);
    size_t dyn_used = 0;

    size_t run(const probe_arg &a, const fetch_context &ctx)
    {
        size_t dyn = field + a.field_size();
        dyn_used = fetch_run(a.prog, ctx, buf.data(), field, dyn, size - dyn);
        return dyn_used;
    }
    template <class T> T at(size_t off = 0) const
    {
        T v;
        std::memcpy(&v, buf.data() + field + off, sizeof(T));
        return v;
    }
    // The string a __data_loc at field + OFF points to; "(fault)" when its length is 0.
    std::string str(size_t off = 0) const
    {
        uint32_t dl = at<uint32_t>(off);
        if (!data_loc_len(dl)) return "(fault)";
        const char *s = reinterpret_cast<const char *>(buf.data() + data_loc_offset(dl));
        EXPECT_EQ(std::strlen(s) + 1, data_loc_len(dl)) << "length counts the NUL";
        return s;
    }
};

class FetchArgTest : public ::testing::Test
{
  protected:
    static void SetUpTestSuite() { fetch_install_fault_handler(); }

    void SetUp() override
    {
        std::memset(&regs, 0, sizeof(regs));
        regs.sp = reinterpret_cast<unsigned long>(stack);
        ctx.regs = &regs;
    }

    pt_regs regs{};
    unsigned long stack[16] = {};
    fetch_context ctx;
    record rec;
};

struct sample {
    uint64_t a;
    uint32_t b;
    uint16_t c[4];
    const char *name;
    const char *names[3];
};

uint32_t global_word = 0xc0ffee11;

TEST_F(FetchArgTest, RegistersAndTypes)
{
    regs.di = 0x1122334455667788ul;
    regs.ax = 0xfffffffffffffffful;
    regs.ip = 0x401234;
    auto a = compile("%di");
    EXPECT_EQ(a.type->name, std::string("x64"));
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 0x1122334455667788ul);

    a = compile("%di:u8");
    std::fill(rec.buf.begin(), rec.buf.end(), 0xa5);
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint8_t>(), 0x88);
    EXPECT_EQ(rec.buf[record::field + 1], 0xa5) << "a 1-byte field writes one byte";

    a = compile("%ax:s16");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<int16_t>(), -1);

    a = compile("%ip:x32");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint32_t>(), 0x401234u);

    regs.ax = 'Z';
    a = compile("%ax:char");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<char>(), 'Z');

    a = compile("%ip:symbol");
    EXPECT_EQ(a.field_size(), 8u);
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 0x401234u);
}

TEST_F(FetchArgTest, ImmediatesAndDataStrings)
{
    auto a = compile("\\123");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 123u);
    a = compile("\\0x10:u8");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint8_t>(), 0x10);
    a = compile("\\-2:s32");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<int32_t>(), -2);
    a = compile("\\\"hello world\"");
    EXPECT_TRUE(a.dynamic);
    EXPECT_EQ(rec.run(a, ctx), 12u);
    EXPECT_EQ(rec.str(), "hello world");
    // The string lands right after the fixed field, offset counted from the record start.
    EXPECT_EQ(data_loc_offset(rec.at<uint32_t>()), record::field + 4);
}

TEST_F(FetchArgTest, DereferencesAndStrings)
{
    sample s{};
    s.a = 0xabcdef;
    s.b = 77;
    s.c[0] = 1;
    s.c[1] = 2;
    s.c[2] = 3;
    s.c[3] = 4;
    s.name = "probe me";
    s.names[0] = "zero";
    s.names[1] = "one";
    s.names[2] = nullptr;
    regs.di = reinterpret_cast<unsigned long>(&s);
    regs.si = reinterpret_cast<unsigned long>(&s.b);

    auto a = compile("+0(%di):u64");
    EXPECT_EQ(a.prog.code[0].op, fetch_op::REG);
    EXPECT_EQ(a.prog.code[1].op, fetch_op::ST_MEM);
    EXPECT_EQ(a.prog.code[2].op, fetch_op::END);
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 0xabcdefu);

    a = compile("+8(%di):u32");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint32_t>(), 77u);
    a = compile("-8(%si):u64");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 0xabcdefu);
    a = compile("+u8(%di):s32");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<int32_t>(), 77);

    a = compile("+" + std::to_string(offsetof(sample, name)) + "(%di):x64");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), reinterpret_cast<uint64_t>(s.name));

    a = compile("+0(+" + std::to_string(offsetof(sample, name)) + "(%di)):string");
    EXPECT_EQ(rec.run(a, ctx), 9u);
    EXPECT_EQ(rec.str(), "probe me");
    a = compile("+0(+" + std::to_string(offsetof(sample, name)) + "(%di)):ustring");
    rec.run(a, ctx);
    EXPECT_EQ(rec.str(), "probe me");
    // Offset inside the string.
    a = compile("+6(+" + std::to_string(offsetof(sample, name)) + "(%di)):string");
    rec.run(a, ctx);
    EXPECT_EQ(rec.str(), "me");

    // Arrays.
    a = compile("+" + std::to_string(offsetof(sample, c)) + "(%di):u16[4]");
    EXPECT_EQ(a.field_size(), 8u);
    EXPECT_EQ(a.fmt, "u16[4]");
    rec.run(a, ctx);
    for (int i = 0; i < 4; i++)
        EXPECT_EQ(rec.at<uint16_t>(2 * i), i + 1);
    a = compile("+" + std::to_string(offsetof(sample, names)) + "(%di):string[3]");
    EXPECT_EQ(a.field_size(), 12u);
    rec.run(a, ctx);
    EXPECT_EQ(rec.str(0), "zero");
    EXPECT_EQ(rec.str(4), "one");
    EXPECT_EQ(rec.str(8), "(fault)"); // a NULL pointer
}

TEST_F(FetchArgTest, FaultingPointersGiveZeroesAndFault)
{
    long page = sysconf(_SC_PAGESIZE);
    void *m = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    char *p = static_cast<char *>(m);
    ASSERT_EQ(munmap(p + page, page), 0);
    // An unterminated string running into the unmapped page.
    std::memset(p + page - 8, 'x', 8);

    regs.dx = 16; // the NULL page
    regs.cx = reinterpret_cast<unsigned long>(p + page - 8);
    regs.bx = reinterpret_cast<unsigned long>(p + page); // unmapped

    auto a = compile("+0(%dx):u64");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 0u);
    a = compile("+0(+0(%bx)):u32");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint32_t>(), 0u);
    a = compile("+0(%dx):string");
    EXPECT_EQ(rec.run(a, ctx), 0u);
    EXPECT_EQ(rec.str(), "(fault)");
    a = compile("+0(%cx):string");
    EXPECT_EQ(rec.run(a, ctx), 0u);
    EXPECT_EQ(rec.str(), "(fault)");
    a = compile("+0(+0(%bx)):string");
    rec.run(a, ctx);
    EXPECT_EQ(rec.str(), "(fault)");
    // Part of an array: good elements stay, the faulting one is zero.
    a = compile("+0(%cx):u32[4]");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint32_t>(0), 0x78787878u);
    EXPECT_EQ(rec.at<uint32_t>(4), 0x78787878u);
    EXPECT_EQ(rec.at<uint32_t>(8), 0u);
    EXPECT_EQ(rec.at<uint32_t>(12), 0u);
    // $stackN beyond a bad stack pointer.
    regs.sp = 8;
    a = compile("$stack3");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 0u);
    EXPECT_EQ(fetch_dynamic_size(compile("+0(%dx):string").prog, ctx), 0u);
    munmap(p, page);
}

TEST_F(FetchArgTest, StackArgumentsAndReturnValue)
{
    for (int i = 0; i < 16; i++)
        stack[i] = 1000 + i;
    regs.di = 1;
    regs.si = 2;
    regs.dx = 3;
    regs.cx = 4;
    regs.r8 = 5;
    regs.r9 = 6;
    regs.ax = 42;

    auto a = compile("$stack");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), reinterpret_cast<uint64_t>(stack));
    a = compile("$stack0");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 1000u);
    a = compile("$stack5:u32");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint32_t>(), 1005u);
    a = compile("+8($stack):u64");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 1001u);

    // At entry, sp points at the return address: $arg7 is the word above it.
    for (int n = 1; n <= 9; n++) {
        a = compile("$arg" + std::to_string(n));
        EXPECT_EQ(a.prog.code[0].op, fetch_op::ARG);
        rec.run(a, ctx);
        uint64_t want = n <= 6 ? static_cast<uint64_t>(n) : 1000u + static_cast<uint64_t>(n - 6);
        EXPECT_EQ(rec.at<uint64_t>(), want) << "$arg" << n;
    }

    a = compile("$retval", return_flags);
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 42u);
    a = compile("$retval:s8", return_flags);
    regs.ax = 0xfe;
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<int8_t>(), -2);
}

TEST_F(FetchArgTest, EntryArgumentsOfReturnProbes)
{
    dynevent_command cmd;
    auto argv = argv_split("r:x f $arg2 $arg8 $retval b=$arg2:u8");
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    const probe_definition &d = cmd.def;
    ASSERT_EQ(d.entry_data_size(), 16u);
    EXPECT_EQ(d.args[0].prog.code[0].op, fetch_op::EDATA);

    // Entry: arguments in registers and on the stack.
    stack[2] = 0x8888;
    regs.si = 0x2222;
    unsigned long edata[2] = {};
    store_entry_args(d.entry_args, &regs, edata);
    EXPECT_EQ(edata[0], 0x2222u);
    EXPECT_EQ(edata[1], 0x8888u);

    // Exit: registers are clobbered; the saved values are used.
    pt_regs exit_regs{};
    exit_regs.ax = 7;
    fetch_context xctx;
    xctx.regs = &exit_regs;
    xctx.edata = edata;
    std::vector<uint8_t> buf(256, 0);
    size_t used = store_trace_args(d.args, d.args_size, xctx, buf.data(), 16, buf.size());
    EXPECT_EQ(used, 16u + d.args_size);
    uint64_t v;
    std::memcpy(&v, buf.data() + 16, 8);
    EXPECT_EQ(v, 0x2222u);
    std::memcpy(&v, buf.data() + 24, 8);
    EXPECT_EQ(v, 0x8888u);
    std::memcpy(&v, buf.data() + 32, 8);
    EXPECT_EQ(v, 7u);
    EXPECT_EQ(buf[40], 0x22);
}

TEST_F(FetchArgTest, CommIsTheThreadName)
{
    char want[16] = {};
    prctl(PR_GET_NAME, want, 0, 0, 0);
    auto a = compile("$comm");
    rec.run(a, ctx);
    EXPECT_EQ(rec.str(), want);

    std::string other;
    std::thread t([&] {
        prctl(PR_SET_NAME, "fetch-worker", 0, 0, 0);
        record r;
        r.run(a, ctx);
        other = r.str();
    });
    t.join();
    EXPECT_EQ(other, "fetch-worker");
}

TEST_F(FetchArgTest, MemoryAndSymbols)
{
    auto a = compile("@" + hexaddr(&global_word) + ":u32");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint32_t>(), 0xc0ffee11u);

    // @SYM is resolved by the registering code through a callback.
    std::vector<probe_arg> args;
    args.push_back(compile("@global_word:u32"));
    args.push_back(compile("@global_word+2:u16"));
    args.push_back(compile("@global_word-0:u8"));
    EXPECT_EQ(args[0].prog.code[0].op, fetch_op::NOP_SYMBOL);
    fetch_resolver res;
    res.symbol = [](std::string_view name) -> std::optional<uintptr_t> {
        if (name == "global_word") return reinterpret_cast<uintptr_t>(&global_word);
        return std::nullopt;
    };
    ASSERT_TRUE(resolve_fetch_args(args, res).ok());
    rec.run(args[0], ctx);
    EXPECT_EQ(rec.at<uint32_t>(), 0xc0ffee11u);
    rec.run(args[1], ctx);
    EXPECT_EQ(rec.at<uint16_t>(), 0xc0ffu);
    rec.run(args[2], ctx);
    EXPECT_EQ(rec.at<uint8_t>(), 0x11u);

    // An unknown symbol is BAD_PROBE_ADDR at its argument, caret under the '@'.
    std::vector<probe_arg> bad;
    bad.push_back(compile("%ax"));
    probe_arg b;
    entry_arg_table e;
    ASSERT_TRUE(parse_probe_arg("v=+4(@nosuch)", 3, 1, bad, entry_flags, e, b).ok());
    bad.push_back(b);
    probe_error err = resolve_fetch_args(bad, res);
    EXPECT_EQ(err.err, probe_err::BAD_PROBE_ADDR);
    EXPECT_EQ(err.index, 3);
    EXPECT_EQ(err.offset, 5);
    EXPECT_EQ(err.errnum, ENOENT);
}

size_t fake_symbolize(char *buf, size_t len, uintptr_t addr)
{
    return static_cast<size_t>(
        std::snprintf(buf, len, "func+0x%lx/0x100", static_cast<unsigned long>(addr - 0x1000)));
}

TEST_F(FetchArgTest, SymstrAndBitfields)
{
    regs.ip = 0x1010;
    ctx.symbolize = fake_symbolize;
    auto a = compile("%ip:symstr");
    EXPECT_EQ(a.prog.code[1].op, fetch_op::ST_SYMSTR);
    EXPECT_EQ(fetch_dynamic_size(a.prog, ctx), 16u); // 15 characters and the NUL
    rec.run(a, ctx);
    EXPECT_EQ(rec.str(), "func+0x10/0x100");
    ctx.symbolize = nullptr;
    rec.run(a, ctx);
    EXPECT_EQ(rec.str(), "0x1010");

    regs.ax = 0xb6; // 1011 0110
    a = compile("%ax:b4@2/8");
    EXPECT_EQ(a.type->name, std::string("u8"));
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint8_t>(), 0xd); // bits 2..5
    a = compile("%ax:b1@7/8");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint8_t>(), 1);
    regs.ax = 0xdeadbeefcafef00dul;
    a = compile("%ax:b16@32/64");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint64_t>(), 0xbeefu);
    uint32_t words[2] = {0xf0f0f0f0, 0x12345678};
    regs.di = reinterpret_cast<unsigned long>(words);
    a = compile("+0(%di):b8@4/32[2]");
    rec.run(a, ctx);
    EXPECT_EQ(rec.at<uint32_t>(0), 0x0fu);
    EXPECT_EQ(rec.at<uint32_t>(4), 0x67u);
}

TEST_F(FetchArgTest, NestingLimit)
{
    // 13 dereferences around @addr fit in FETCH_INSN_MAX (IMM, 14 DEREF/ST_MEM, END).
    std::string text = "@" + hexaddr(&global_word);
    for (int i = 0; i < 12; i++)
        text = "+0(" + text + ")";
    probe_arg a;
    entry_arg_table e;
    std::string ok = "+0(" + text + "):u32";
    ASSERT_LE(ok.size(), 63u + 10);
    // Bodies longer than 63 characters are ARG_TOO_LONG before nesting counts.
    probe_error err = parse_probe_arg(ok, 2, 0, {}, entry_flags, e, a);
    EXPECT_EQ(err.err, probe_err::ARG_TOO_LONG);
    std::string text2 = "@1";
    for (int i = 0; i < 13; i++)
        text2 = "+0(" + text2 + ")";
    ASSERT_TRUE(parse_probe_arg(text2, 2, 0, {}, entry_flags, e, a).ok());
    EXPECT_EQ(a.prog.code[0].op, fetch_op::IMM);
    EXPECT_EQ(a.prog.code[14].op, fetch_op::ST_MEM);
    EXPECT_EQ(a.prog.code[15].op, fetch_op::END);
    err = parse_probe_arg("+0(" + text2 + ")", 2, 0, {}, entry_flags, e, a);
    EXPECT_EQ(err.err, probe_err::TOO_MANY_OPS);
    EXPECT_EQ(err.offset, 3);
}

TEST_F(FetchArgTest, WholeRecordLayoutAndLimits)
{
    const char *name = "first";
    std::string big(5000, 'q');
    const char *bigp = big.c_str();
    regs.di = reinterpret_cast<unsigned long>(&name);
    regs.si = reinterpret_cast<unsigned long>(&bigp);
    regs.dx = 9;

    dynevent_command cmd;
    auto argv = argv_split("p:x f a=+0(+0(%di)):string n=%dx:u16 b=+0(+0(%si)):string c=$comm");
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    const probe_definition &d = cmd.def;
    EXPECT_EQ(d.args_size, 4u + 2u + 4u + 4u);
    EXPECT_TRUE(d.has_dynamic_args());
    size_t need = trace_args_dynamic_size(d.args, ctx);
    size_t commlen = std::strlen(fetch_current_comm()) + 1;
    EXPECT_EQ(need, 6u + static_cast<size_t>(MAX_STRING_SIZE) + commlen);

    std::vector<uint8_t> buf(16 + d.args_size + need, 0);
    size_t used = store_trace_args(d.args, d.args_size, ctx, buf.data(), 16, buf.size());
    EXPECT_EQ(used, buf.size());
    auto loc_at = [&](size_t off) {
        uint32_t dl;
        std::memcpy(&dl, buf.data() + 16 + off, 4);
        return dl;
    };
    EXPECT_EQ(data_loc_offset(loc_at(0)), 16u + d.args_size);
    EXPECT_EQ(data_loc_len(loc_at(0)), 6u);
    EXPECT_STREQ(reinterpret_cast<char *>(buf.data() + data_loc_offset(loc_at(0))), "first");
    uint16_t n;
    std::memcpy(&n, buf.data() + 16 + 4, 2);
    EXPECT_EQ(n, 9);
    // The long string is cut at MAX_STRING_SIZE (including its NUL).
    EXPECT_EQ(data_loc_len(loc_at(6)), static_cast<uint32_t>(MAX_STRING_SIZE));
    EXPECT_EQ(data_loc_offset(loc_at(6)), 16u + d.args_size + 6u);
    EXPECT_EQ(std::strlen(reinterpret_cast<char *>(buf.data() + data_loc_offset(loc_at(6)))),
              static_cast<size_t>(MAX_STRING_SIZE - 1));
    EXPECT_EQ(data_loc_len(loc_at(10)), commlen);

    // Too little room: strings get what is left, then nothing (length 0), never overflow.
    std::vector<uint8_t> small(16 + d.args_size + 10 + 8, 0xee);
    used = store_trace_args(d.args, d.args_size, ctx, small.data(), 16, small.size() - 8);
    EXPECT_LE(used, small.size() - 8);
    for (size_t i = small.size() - 8; i < small.size(); i++)
        EXPECT_EQ(small[i], 0xee) << "wrote past the capacity";
    uint32_t dl;
    std::memcpy(&dl, small.data() + 16 + 6, 4);
    EXPECT_EQ(data_loc_len(dl), 4u); // "qqq" + NUL in the 4 bytes left after "first"
    std::memcpy(&dl, small.data() + 16 + 10, 4);
    EXPECT_EQ(data_loc_len(dl), 0u);
}

TEST(FetchArgNumbers, KernelStyleParsing)
{
    unsigned long long u;
    long long l;
    EXPECT_EQ(kstrtoull("0x1f", 0, u), 0);
    EXPECT_EQ(u, 31u);
    EXPECT_EQ(kstrtoull("017", 0, u), 0);
    EXPECT_EQ(u, 15u);
    EXPECT_EQ(kstrtoull("17\n", 0, u), 0);
    EXPECT_EQ(u, 17u);
    EXPECT_EQ(kstrtoull("+5", 0, u), 0);
    EXPECT_EQ(u, 5u);
    EXPECT_EQ(kstrtoull("", 0, u), -EINVAL);
    EXPECT_EQ(kstrtoull("08", 0, u), -EINVAL);
    EXPECT_EQ(kstrtoull("12a", 10, u), -EINVAL);
    EXPECT_EQ(kstrtoull("99999999999999999999", 0, u), -ERANGE);
    EXPECT_EQ(kstrtoll("-0x10", 0, l), 0);
    EXPECT_EQ(l, -16);
    EXPECT_EQ(kstrtoll("9223372036854775808", 0, l), -ERANGE);
    EXPECT_EQ(kstrtoll("-9223372036854775808", 0, l), 0);
}

} // namespace
