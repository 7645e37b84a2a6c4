// events/<grp>/<ev>/format text, record layout and trace-file text of probe events; the
// format must be readable by libtraceevent, which must decode the args as the trace file
// prints them.
#include "tracefs/event_format.h"

#include "core/symbols.h"

#include <gtest/gtest.h>

#include <traceevent/event-parse.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace dprobe;

extern "C" __attribute__((noinline, used)) int dprobe_evfmt_target(int x)
{
    asm volatile("" ::: "memory");
    return x * 3 + 1;
}

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

// A two-function symbol table: do_work [0x1000, 0x1020), caller [0x2000, 0x2040).
size_t fake_symbolize(char *buf, size_t len, uintptr_t addr)
{
    int n;
    if (addr >= 0x1000 && addr < 0x1020)
        n = std::snprintf(buf, len, "do_work+0x%" PRIxPTR "/0x20", addr - 0x1000);
    else if (addr >= 0x2000 && addr < 0x2040)
        n = std::snprintf(buf, len, "caller+0x%" PRIxPTR "/0x40", addr - 0x2000);
    else
        n = std::snprintf(buf, len, "0x%" PRIxPTR, addr);
    return static_cast<size_t>(n) < len ? static_cast<size_t>(n) : len - 1;
}

const char common_fields[] =
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"
    "\n";

const char entry_line[] =
    "p:kprobes/myprobe do_work dfd=%di:s32 flags=%si:x32 name=+0(%dx):string arr=+0(%cx):u16[2] "
    "c=%r8:char";

TEST(EventFormat, EntryProbeFormatFile)
{
    probe_definition d = parse(entry_line);
    probe_event_layout l = probe_layout(d);
    EXPECT_EQ(l.ip_off, 8u);
    EXPECT_EQ(l.args_off, 16u);
    EXPECT_EQ(l.fixed_size, 33u);
    EXPECT_EQ(probe_format_file(d, 1234),
              std::string("name: myprobe\nID: 1234\nformat:\n") + common_fields +
                  "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n"
                  "\tfield:s32 dfd;\toffset:16;\tsize:4;\tsigned:1;\n"
                  "\tfield:u32 flags;\toffset:20;\tsize:4;\tsigned:0;\n"
                  "\tfield:__data_loc char[] name;\toffset:24;\tsize:4;\tsigned:1;\n"
                  "\tfield:u16 arr[2];\toffset:28;\tsize:4;\tsigned:0;\n"
                  "\tfield:u8 c;\toffset:32;\tsize:1;\tsigned:0;\n"
                  "\n"
                  "print fmt: \"(%lx) dfd=%d flags=0x%x name=\\\"%s\\\" arr={%u,%u} c='%c'\", "
                  "REC->__probe_ip, REC->dfd, REC->flags, __get_str(name), REC->arr[0], "
                  "REC->arr[1], REC->c\n");
}

TEST(EventFormat, ReturnProbeFormatFile)
{
    probe_definition d = parse("r:kprobes/myret do_work $retval ret2=$retval:u8");
    probe_event_layout l = probe_layout(d);
    EXPECT_EQ(l.ret_ip_off, 16u);
    EXPECT_EQ(l.args_off, 24u);
    EXPECT_EQ(probe_format_file(d, 7),
              std::string("name: myret\nID: 7\nformat:\n") + common_fields +
                  "\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;\n"
                  "\tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;\n"
                  "\tfield:u64 arg1;\toffset:24;\tsize:8;\tsigned:0;\n"
                  "\tfield:u8 ret2;\toffset:32;\tsize:1;\tsigned:0;\n"
                  "\n"
                  "print fmt: \"(%lx <- %lx) arg1=0x%Lx ret2=%u\", REC->__probe_func, "
                  "REC->__probe_ret_ip, REC->arg1, REC->ret2\n");

    // fprobe exit and a symbol-typed argument and a string array.
    d = parse("f:fprobes/fx vfs_read%return r=$retval:s64 p=$arg1:symbol");
    EXPECT_NE(probe_format_file(d, 3).find("\tfield:u64 p;\toffset:32;\tsize:8;\tsigned:0;\n"),
              std::string::npos);
    EXPECT_NE(probe_print_fmt(d).find(" r=%Ld p=%pS\""), std::string::npos);
    EXPECT_EQ(d.error_loc(), std::string("trace_fprobe"));
    probe_definition e = parse("p:kprobes/sa f s=+0(%di):string[2] b=%ax:b3@1/16");
    EXPECT_EQ(probe_print_fmt(e),
              "\"(%lx) s={\\\"%s\\\",\\\"%s\\\"} b=%u\", REC->__probe_ip, __get_str(s[0]), "
              "__get_str(s[1]), REC->b");
    EXPECT_NE(probe_format_file(e, 1).find(
                  "\tfield:__data_loc char[][2] s;\toffset:16;\tsize:8;\tsigned:1;\n"
                  "\tfield:u16 b;\toffset:24;\tsize:2;\tsigned:0;\n"),
              std::string::npos);
}

struct entry_record {
    pt_regs regs{};
    const char *name = "hello";
    uint16_t arr[2] = {7, 9};
    std::vector<uint8_t> buf = std::vector<uint8_t>(256, 0);
    size_t size = 0;

    explicit entry_record(const probe_definition &d)
    {
        regs.di = static_cast<unsigned long>(-3L);
        regs.si = 0x40;
        regs.dx = reinterpret_cast<unsigned long>(name);
        regs.cx = reinterpret_cast<unsigned long>(arr);
        regs.r8 = 'k';
        fetch_context ctx;
        ctx.regs = &regs;
        size = probe_record_store(buf.data(), buf.size(), d, ctx, 1234, 42, 0x1004, 0);
    }
};

TEST(EventFormat, EntryRecordPrintsLikeTheTraceFile)
{
    probe_definition d = parse(entry_line);
    entry_record r(d);
    ASSERT_EQ(r.size, 33u + 6u);
    trace_entry_header h;
    std::memcpy(&h, r.buf.data(), sizeof(h));
    EXPECT_EQ(h.type, 1234);
    EXPECT_EQ(h.pid, 42);
    EXPECT_EQ(format_probe_record(d, r.buf.data(), r.size, fake_symbolize),
              "myprobe: (do_work+0x4/0x20) dfd=-3 flags=0x40 name=\"hello\" arr={7,9} c='k'");
    EXPECT_EQ(format_probe_record(d, r.buf.data(), r.size, nullptr),
              "myprobe: (0x1004) dfd=-3 flags=0x40 name=\"hello\" arr={7,9} c='k'");

    // A faulting string prints (fault).
    r.regs.dx = 8;
    fetch_context ctx;
    ctx.regs = &r.regs;
    fetch_install_fault_handler();
    size_t n = probe_record_store(r.buf.data(), r.buf.size(), d, ctx, 1234, 42, 0x1000, 0);
    EXPECT_EQ(n, 33u);
    EXPECT_EQ(format_probe_record(d, r.buf.data(), n, fake_symbolize),
              "myprobe: (do_work+0x0/0x20) dfd=-3 flags=0x40 name=(fault) arr={7,9} c='k'");
    // Too small a buffer for the fixed part stores nothing.
    EXPECT_EQ(probe_record_store(r.buf.data(), 20, d, ctx, 1, 1, 0x1000, 0), 0u);
}

TEST(EventFormat, ReturnAndUprobeRecords)
{
    probe_definition d = parse("r:kprobes/myret do_work $retval ret2=$retval:u8 s=%ax:symstr");
    pt_regs regs{};
    regs.ax = 0x2004;
    fetch_context ctx;
    ctx.regs = &regs;
    ctx.symbolize = fake_symbolize;
    std::vector<uint8_t> buf(256);
    size_t n = probe_record_store(buf.data(), buf.size(), d, ctx, 7, 1, 0x1000, 0x201d);
    ASSERT_GT(n, 0u);
    EXPECT_EQ(format_probe_record(d, buf.data(), n, fake_symbolize),
              "myret: (caller+0x1d/0x40 <- do_work) arg1=0x2004 ret2=4 "
              "s=\"caller+0x4/0x40\"");
    // Unknown addresses print in hex; address 0 prints "0".
    n = probe_record_store(buf.data(), buf.size(), d, ctx, 7, 1, 0x9000, 0);
    EXPECT_EQ(format_probe_record(d, buf.data(), n, fake_symbolize),
              "myret: (0 <- 0x9000) arg1=0x2004 ret2=4 s=\"caller+0x4/0x40\"");

    probe_definition u = parse("p:uprobes/myu /bin/sh:0x10 %ax:u32");
    regs.ax = 5;
    n = probe_record_store(buf.data(), buf.size(), u, ctx, 8, 1, 0x401000, 0);
    EXPECT_EQ(format_probe_record(u, buf.data(), n, fake_symbolize), "myu: (0x401000) arg1=5");
    probe_definition ur = parse("r:uprobes/myur /bin/sh:0x10 $retval");
    regs.ax = 42;
    n = probe_record_store(buf.data(), buf.size(), ur, ctx, 9, 1, 0x401000, 0x401050);
    EXPECT_EQ(format_probe_record(ur, buf.data(), n, fake_symbolize),
              "myur: (0x401050 <- 0x401000) arg1=0x2a");

    probe_definition f = parse("f:fprobes/fe do_work a=$arg1:s8 p=$arg2:symbol");
    regs.di = 0xff;
    regs.si = 0x2001;
    n = probe_record_store(buf.data(), buf.size(), f, ctx, 10, 1, 0x1004, 0);
    EXPECT_EQ(f.listing(), "f:fprobes/fe do_work a=$arg1:s8 p=$arg2:symbol");
    EXPECT_EQ(format_probe_record(f, buf.data(), n, fake_symbolize),
              "fe: (do_work+0x4/0x20) a=-1 p=caller+0x1/0x40");
}

TEST(EventFormat, LibtraceeventReadsTheFormat)
{
    // Without the char argument: libtraceevent 1.7 prints '%c' of a u8 field as '>c<'.
    std::string line = entry_line;
    line.resize(line.find(" c=%r8:char"));
    probe_definition d = parse(line);
    std::string fmt = probe_format_file(d, 1234);
    tep_handle *tep = tep_alloc();
    ASSERT_NE(tep, nullptr);
    tep_set_long_size(tep, 8);
    tep_set_file_bigendian(tep, TEP_LITTLE_ENDIAN);
    tep_set_local_bigendian(tep, TEP_LITTLE_ENDIAN);
    ASSERT_EQ(tep_parse_event(tep, fmt.c_str(), fmt.size(), "kprobes"), TEP_ERRNO__SUCCESS);
    tep_event *ev = tep_find_event_by_name(tep, "kprobes", "myprobe");
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->id, 1234);

    entry_record r(d);
    tep_record rec{};
    rec.size = static_cast<int>(r.size);
    rec.data = r.buf.data();
    unsigned long long val = 0;
    tep_format_field *f = tep_find_field(ev, "flags");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->offset, 20);
    ASSERT_EQ(tep_read_number_field(f, r.buf.data(), &val), 0);
    EXPECT_EQ(val, 0x40u);
    f = tep_find_field(ev, "name");
    ASSERT_NE(f, nullptr);
    EXPECT_TRUE(f->flags & TEP_FIELD_IS_DYNAMIC);

    trace_seq s;
    trace_seq_init(&s);
    tep_print_event(tep, &s, &rec, "%s", TEP_PRINT_INFO);
    trace_seq_terminate(&s);
    std::string decoded(s.buffer, s.len);
    trace_seq_destroy(&s);
    tep_free(tep);

    // libtraceevent prints the raw ip; the arguments must read exactly as the trace file's.
    std::string ours = format_probe_record(d, r.buf.data(), r.size, fake_symbolize);
    ASSERT_EQ(decoded.substr(0, 7), "(1004) ") << decoded;
    EXPECT_EQ(decoded.substr(decoded.find(')') + 1), ours.substr(ours.find(')') + 1));
}

TEST(EventFormat, ProcessSymbolizer)
{
    // The runtime's symbol table (created once at start-up) knows this test's own functions.
    kallsyms::instance();
    probe_definition d = parse("p:kprobes/t dprobe_evfmt_target s=%ip:symstr");
    auto fn = reinterpret_cast<uintptr_t>(&dprobe_evfmt_target);
    pt_regs regs{};
    regs.ip = fn + 4;
    fetch_context ctx;
    ctx.regs = &regs;
    ctx.symbolize = sprint_symbol_hook;
    std::vector<uint8_t> buf(512);
    size_t n = probe_record_store(buf.data(), buf.size(), d, ctx, 1, 1, fn, 0);
    std::string text = format_probe_record(d, buf.data(), n, sprint_symbol_hook);
    EXPECT_EQ(text.rfind("t: (dprobe_evfmt_target+0x0/0x", 0), 0u) << text;
    EXPECT_NE(text.find(") s=\"dprobe_evfmt_target+0x4/0x"), std::string::npos) << text;
    EXPECT_EQ(dprobe_evfmt_target(1), 4);
}

} // namespace
