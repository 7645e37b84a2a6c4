// dynamic_events parser: accepted lines and their listing, rejected lines with the kernel's
// error name, caret and errno (cases after the kernel's kprobe/fprobe/uprobe syntax-error
// selftests, adapted to user space), delete requests, append rules and error_log text.
#include "tracefs/probe_parse.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <string>
#include <vector>

using namespace dprobe;

namespace
{

std::vector<std::string> split(const std::string &s)
{
    return argv_split(s);
}

// --- accepted lines ------------------------------------------------------------------------

struct accepted_case {
    const char *line;
    const char *listing;
};

const accepted_case accepted[] = {
    {"p:myprobe do_sys_open dfd=%ax filename=%dx flags=%cx mode=+4($stack)",
     "p:kprobes/myprobe do_sys_open dfd=%ax filename=%dx flags=%cx mode=+4($stack)"},
    {"r4:kprobes/myretprobe do_sys_open $retval", "r4:kprobes/myretprobe do_sys_open arg1=$retval"},
    {"r0x10:rp do_sys_open", "r16:kprobes/rp do_sys_open"},
    {"p:x vfs_read%return", "r:kprobes/x vfs_read"},
    {"r:x vfs_read", "r:kprobes/x vfs_read"},
    {"r vfs_read", "r:kprobes/r_vfs_read_0 vfs_read"},
    {"p vfs_read%return $retval", "r:kprobes/r_vfs_read_0 vfs_read arg1=$retval"},
    {"p do_work+4 a=%di:u32", "p:kprobes/p_do_work_4 do_work+4 a=%di:u32"},
    {"p do_work+0x10", "p:kprobes/p_do_work_16 do_work+16"},
    {"p libc.so.6:malloc size=%di:u64",
     "p:kprobes/p_libc_so_6_malloc_0 libc.so.6:malloc size=%di:u64"},
    {"p ld-linux-x86-64.so.2:_dl_open+3",
     "p:kprobes/p_ld_linux_x86_64_so_2__dl_open_3 ld-linux-x86-64.so.2:_dl_open+3"},
    {"p 0x401000", "p:kprobes/p_0x0000000000401000 0x0000000000401000"},
    {"p:foo.bar sym", "p:foo/bar sym"},
    {"p:foo/ sym", "p:foo/p_sym_0 sym"},
    {"p:g-1/e_2 sym", "p:g-1/e_2 sym"},
    {"p:ev\t  sym\t  %ip", "p:kprobes/ev sym arg1=%ip"},
    {"r sym $arg2 $retval", "r:kprobes/r_sym_0 sym arg1=$arg2 arg2=$retval"},
    {"p sym a=+0(+8(%di)):string b=$comm c=\\\"hi\" d=\\-123:s8 e=@0x1000:u8[4]",
     "p:kprobes/p_sym_0 sym a=+0(+8(%di)):string b=$comm c=\\\"hi\" d=\\-123:s8 e=@0x1000:u8[4]"},
    {"p sym g=%ax:b4@2/32 h=$stack3 i=$stack j=$arg1 k=+u0(%si):ustring l=@data_sym-8:x32",
     "p:kprobes/p_sym_0 sym g=%ax:b4@2/32 h=$stack3 i=$stack j=$arg1 k=+u0(%si):ustring "
     "l=@data_sym-8:x32"},
    {"p sym s=+0(%di):string[3] c=$COMM:string y=%ip:symbol z=+8(%sp):symstr q=%ax:char",
     "p:kprobes/p_sym_0 sym s=+0(%di):string[3] c=$COMM:string y=%ip:symbol z=+8(%sp):symstr "
     "q=%ax:char"},
    {"f vfs_read", "f:fprobes/vfs_read__entry vfs_read"},
    {"f vfs_read%return", "f:fprobes/vfs_read__exit vfs_read%return"},
    {"f:x vfs_read $retval", "f:fprobes/x vfs_read%return arg1=$retval"},
    {"f:fprobes/x vfs_read%return arg1=$retval", "f:fprobes/x vfs_read%return arg1=$retval"},
    {"f libc.so.6:malloc size=$arg1",
     "f:fprobes/libc_so_6_malloc__entry libc.so.6:malloc size=$arg1"},
    {"f parse_* $arg1", "f:fprobes/parse____entry parse_* arg1=$arg1"},
    // A generated name never starts with a digit (it could not be named again).
    {"f 9lives", "f:fprobes/_9lives__entry 9lives"},
    {"f 3d.so:draw%return", "f:fprobes/_3d_so_draw__exit 3d.so:draw%return"},
    {"p:uprobes/x /bin/sh:0x46420", "p:uprobes/x /bin/sh:0x0000000000046420"},
    {"p /bin/sh:0x46420 %ip %ax",
     "p:uprobes/p_sh_0x46420 /bin/sh:0x0000000000046420 arg1=%ip arg2=%ax"},
    {"r /bin/sh:100(0x20)", "r:uprobes/p_sh_0x64 /bin/sh:0x0000000000000064(0x20)"},
    {"p:u /bin/sh:0x10%return $retval @+0x20:u32",
     "r:uprobes/u /bin/sh:0x0000000000000010 arg1=$retval arg2=@+0x20:u32"},
    // Event probes (their fields are checked where the attached event is known); the
    // filter is not listed, as in the kernel.
    {"e:ep/x fp.add c=$code p=$path:string n=+8($req):u32 if code > 1",
     "e:ep/x fp.add c=$code p=$path:string n=+8($req):u32"},
    {"e fp/add $comm", "e:eprobes/add fp.add arg1=$comm"},
    // An SDT probe's line, as dprobe probe writes it.
    {"p:sdt_python/function__entry /bin/sh:0x00000000004f20a1(0xa84260) arg1=%bp:u64",
     "p:sdt_python/function__entry /bin/sh:0x00000000004f20a1(0xa84260) arg1=%bp:u64"},
};

TEST(ProbeParse, AcceptedLinesAndListing)
{
    for (const auto &c : accepted) {
        SCOPED_TRACE(c.line);
        dynevent_command cmd;
        auto argv = split(c.line);
        probe_error e = parse_dynevent(argv, parse_options{}, cmd);
        ASSERT_TRUE(e.ok()) << probe_err_name(e.err) << " idx " << e.index << " off " << e.offset
                            << " errno " << e.errnum;
        ASSERT_EQ(cmd.kind, dynevent_command::type::create);
        EXPECT_EQ(cmd.def.listing(), c.listing);
    }
}

TEST(ProbeParse, DefinitionDetails)
{
    dynevent_command cmd;
    auto argv = split("r:grp/ev libc.so.6:malloc+0 $retval a=$arg1 b=$arg3 c=$arg1:u32");
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    const probe_definition &d = cmd.def;
    EXPECT_EQ(d.kind, probe_kind::kprobe);
    EXPECT_TRUE(d.is_return);
    EXPECT_EQ(d.group, "grp");
    EXPECT_EQ(d.event, "ev");
    EXPECT_EQ(d.place.object, "libc.so.6");
    EXPECT_EQ(d.place.symbol, "malloc");
    EXPECT_EQ(d.place.offset, 0u);
    EXPECT_STREQ(d.error_loc(), "trace_kprobe");
    // $arg1 is saved once, $arg3 once: two entry slots.
    EXPECT_EQ(d.entry_data_size(), 16u);
    EXPECT_EQ(d.entry_args.arg[0], 0);
    EXPECT_EQ(d.entry_args.arg[1], 2);
    ASSERT_EQ(d.args.size(), 4u);
    EXPECT_EQ(d.args[0].name, "arg1");
    EXPECT_EQ(d.args[0].offset, 0u);
    EXPECT_EQ(d.args[3].offset, 24u);
    EXPECT_EQ(d.args_size, 28u);

    argv = split("p 0x1234 %ax");
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    EXPECT_EQ(cmd.def.place.kind, probe_place::form::address);
    EXPECT_EQ(cmd.def.place.address, 0x1234u);
    EXPECT_FALSE(cmd.def.at_func_entry);

    argv = split("p /bin/sh:0x46420(0x10)");
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    EXPECT_EQ(cmd.def.kind, probe_kind::uprobe);
    EXPECT_EQ(cmd.def.place.object, "/bin/sh");
    EXPECT_EQ(cmd.def.place.file_offset, 0x46420u);
    EXPECT_EQ(cmd.def.place.ref_ctr_offset, 0x10u);
    EXPECT_STREQ(cmd.def.error_loc(), "trace_uprobe");

    // An is_func_entry callback decides what "function entry" means (e.g. after endbr64).
    parse_options opts;
    opts.is_func_entry = [](const probe_place &p) { return p.symbol == "f" && p.offset == 4; };
    argv = split("r f+4 $arg1");
    ASSERT_TRUE(parse_dynevent(argv, opts, cmd).ok());
    argv = split("p f+4 $arg1");
    ASSERT_TRUE(parse_dynevent(argv, opts, cmd).ok());
    EXPECT_TRUE(cmd.def.at_func_entry);
    argv = split("p f $arg1");
    probe_error e = parse_dynevent(argv, opts, cmd);
    EXPECT_EQ(e.err, probe_err::NOFENTRY_ARGS);
    argv = split("r f");
    e = parse_dynevent(argv, opts, cmd);
    EXPECT_EQ(e.err, probe_err::BAD_RETPROBE);
}

// --- rejected lines ------------------------------------------------------------------------

struct rejected_case {
    const char *line; // '^' marks where the caret must be
    const char *err;  // error NAME
    int errnum;
    const char *loc;
};

const rejected_case rejected[] = {
    // kprobes
    {"p^100 vfs_read", "BAD_MAXACT_TYPE", EINVAL, "trace_kprobe"},
    {"r^1a111 vfs_read", "BAD_MAXACT", EINVAL, "trace_kprobe"},
    {"r^100000 vfs_read", "MAXACT_TOO_BIG", EINVAL, "trace_kprobe"},
    {"r^0 vfs_read", "BAD_MAXACT", EINVAL, "trace_kprobe"},
    {"p^x:ev vfs_read", "BAD_MAXACT", EINVAL, "trace_kprobe"},
    {"p ^hoge-fuga", "BAD_PROBE_ADDR", EINVAL, "trace_kprobe"},
    {"p ^hoge+1000-1000", "BAD_PROBE_ADDR", EINVAL, "trace_kprobe"},
    {"p ^hoge+0x100000000", "BAD_PROBE_ADDR", EINVAL, "trace_kprobe"},
    {"p ^:hoge", "BAD_PROBE_ADDR", EINVAL, "trace_kprobe"},
    {"r ^vfs_read+10", "BAD_RETPROBE", EINVAL, "trace_kprobe"},
    {"p ^vfs_read+10%return", "BAD_RETPROBE", EINVAL, "trace_kprobe"},
    {"p vfs_read^%hoge", "BAD_ADDR_SUFFIX", EINVAL, "trace_kprobe"},
    {"p:^/bar vfs_read", "NO_GROUP_NAME", EINVAL, "trace_kprobe"},
    {"p:^12345678901234567890123456789012345678901234567890123456789012345/bar vfs_read",
     "GROUP_TOO_LONG", EINVAL, "trace_kprobe"},
    {"p:^foo.1/bar vfs_read", "BAD_GROUP_NAME", EINVAL, "trace_kprobe"},
    {"p:^ vfs_read", "NO_EVENT_NAME", EINVAL, "trace_kprobe"},
    {"r12:^ vfs_read", "NO_EVENT_NAME", EINVAL, "trace_kprobe"},
    {"p:foo/^12345678901234567890123456789012345678901234567890123456789012345 vfs_read",
     "EVENT_TOO_LONG", EINVAL, "trace_kprobe"},
    {"p:^1234567890123456789012345678901234567890123456789012345678901234 vfs_read",
     "EVENT_TOO_LONG", EINVAL, "trace_kprobe"},
    {"p:foo/^bar.1 vfs_read", "BAD_EVENT_NAME", EINVAL, "trace_kprobe"},
    {"p:foo/^1bar vfs_read", "BAD_EVENT_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$retval", "RETVAL_ON_PROBE", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$stack10000", "BAD_STACK_NUM", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$arg10000", "BAD_ARG_NUM", EINVAL, "trace_kprobe"},
    {"p vfs_read a=^$arg0", "BAD_ARG_NUM", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$none_var", "BAD_VAR", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$stackp", "BAD_VAR", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$stack0+10", "BAD_VAR", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$argx", "BAD_VAR", EINVAL, "trace_kprobe"},
    {"r vfs_read a=^$retvalx", "BAD_VAR", EINVAL, "trace_kprobe"},
    {"p vfs_read ^%none_reg", "BAD_REG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read ^%ex", "BAD_REG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read ^@12345678abcde", "BAD_MEM_ADDR", EINVAL, "trace_kprobe"},
    {"p vfs_read ^@+10", "FILE_ON_KPROBE", EINVAL, "trace_kprobe"},
    {"p vfs_read arg1=\\^x", "BAD_IMM", EINVAL, "trace_kprobe"},
    {"p vfs_read arg1=\\\"abcd^", "IMMSTR_NO_CLOSE", EINVAL, "trace_kprobe"},
    {"p vfs_read ^+0@0)", "DEREF_NEED_BRACE", EINVAL, "trace_kprobe"},
    {"p vfs_read ^+0ab1(@0)", "BAD_DEREF_OFFS", EINVAL, "trace_kprobe"},
    {"p vfs_read ^+(%ax)", "BAD_DEREF_OFFS", EINVAL, "trace_kprobe"},
    {"p vfs_read ^-(%ax)", "BAD_DEREF_OFFS", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(+0(@0^)", "DEREF_OPEN_BRACE", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(%ax)^+10", "BAD_FETCH_ARG", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(^$comm)", "COMM_CANT_DEREF", EINVAL, "trace_kprobe"},
    {"p vfs_read +u8(^\\\"s\")", "COMM_CANT_DEREF", EINVAL, "trace_kprobe"},
    {"p vfs_read ^&1", "BAD_FETCH_ARG", EINVAL, "trace_kprobe"},
    {"p vfs_read ^(%ax)", "BAD_FETCH_ARG", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(^+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(@0))))))))))))))", "TOO_MANY_OPS",
     EINVAL, "trace_kprobe"},
    {"p vfs_read +0(@11):u8[10^", "ARRAY_NO_CLOSE", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(@11):u8[10]^a", "BAD_ARRAY_SUFFIX", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(@11):u8[^10a]", "BAD_ARRAY_NUM", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(@11):u8[^0]", "BAD_ARRAY_NUM", EINVAL, "trace_kprobe"},
    {"p vfs_read +0(@11):u8[^256]", "ARRAY_TOO_BIG", EINVAL, "trace_kprobe"},
    {"p vfs_read @11:^unknown_type", "BAD_TYPE", EINVAL, "trace_kprobe"},
    {"p vfs_read %ax:^y16", "BAD_TYPE", EINVAL, "trace_kprobe"},
    {"p vfs_read %ax:^:x16", "BAD_TYPE", EINVAL, "trace_kprobe"},
    {"p vfs_read @11:^b4@2", "BAD_TYPE", EINVAL, "trace_kprobe"},
    {"p vfs_read @11:^b4@2/12", "BAD_TYPE", EINVAL, "trace_kprobe"},
    {"p vfs_read $stack0:^string", "BAD_STRING", EINVAL, "trace_kprobe"},
    {"p vfs_read %ax:^string", "BAD_STRING", EINVAL, "trace_kprobe"},
    {"p vfs_read $stack:^string", "BAD_STRING", EINVAL, "trace_kprobe"},
    {"p vfs_read $stack1:^x8[8]", "BAD_STRING", EINVAL, "trace_kprobe"},
    {"p vfs_read \\1:^symstr", "BAD_SYMSTRING", EINVAL, "trace_kprobe"},
    {"p vfs_read @11:^b10@a/16", "BAD_BITFIELD", EINVAL, "trace_kprobe"},
    {"p vfs_read @11:^b4@30/32", "BAD_BITFIELD", EINVAL, "trace_kprobe"},
    {"p vfs_read @11:^b0@1/32", "BAD_BITFIELD", EINVAL, "trace_kprobe"},
    {"p vfs_read ^arg123456789012345678901234567890=@11", "ARG_NAME_TOO_LONG", EINVAL,
     "trace_kprobe"},
    {"p vfs_read ^=@11", "NO_ARG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read ^var.1=@11", "BAD_ARG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read var1=@11 ^var1=@12", "USED_ARG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read %ax ^arg1=%dx", "USED_ARG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read ^common_pid=%ax", "USED_ARG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read ^__probe_ip=%ax", "USED_ARG_NAME", EINVAL, "trace_kprobe"},
    {"p vfs_read ^+1234567(+1234567(+1234567(+1234567(+1234567(+1234567(@1234))))))",
     "ARG_TOO_LONG", E2BIG, "trace_kprobe"},
    {"p vfs_read arg1=^", "NO_ARG_BODY", EINVAL, "trace_kprobe"},
    {"p vfs_read+20 ^$arg1", "NOFENTRY_ARGS", EINVAL, "trace_kprobe"},
    {"p vfs_read+20 a=^$arg1", "NOFENTRY_ARGS", EINVAL, "trace_kprobe"},
    {"p 0x1000 ^$arg1", "NOFENTRY_ARGS", EINVAL, "trace_kprobe"},
    {"p vfs_read ^$arg*", "NOSUP_BTFARG", EOPNOTSUPP, "trace_kprobe"},
    {"p vfs_read $arg* ^$arg*", "DOUBLE_ARGS", EINVAL, "trace_kprobe"},
    {"p vfs_read ^hoge", "NOSUP_BTFARG", EOPNOTSUPP, "trace_kprobe"},
    {"p vfs_read varname=^varname2=%ax", "NOSUP_BTFARG", EOPNOTSUPP, "trace_kprobe"},
    {"p vfs_read $comm:^x64", "NEED_STRING_TYPE", EINVAL, "trace_kprobe"},
    {"p vfs_read $comm:^string[2]", "NEED_STRING_TYPE", EINVAL, "trace_kprobe"},
    {"p vfs_read \\\"foo\":^u8", "NEED_STRING_TYPE", EINVAL, "trace_kprobe"},
    // fprobes
    {"f^100 vfs_read", "BAD_MAXACT", EINVAL, "trace_fprobe"},
    {"f ^vfs_read+10", "BAD_PROBE_ADDR", ENOENT, "trace_fprobe"},
    {"f ^0x1000", "BAD_PROBE_ADDR", ENOENT, "trace_fprobe"},
    {"f:^/bar vfs_read", "NO_GROUP_NAME", EINVAL, "trace_fprobe"},
    {"f:^12345678901234567890123456789012345678901234567890123456789012345/bar vfs_read",
     "GROUP_TOO_LONG", EINVAL, "trace_fprobe"},
    {"f:^foo.1/bar vfs_read", "BAD_GROUP_NAME", EINVAL, "trace_fprobe"},
    {"f:^ vfs_read", "NO_EVENT_NAME", EINVAL, "trace_fprobe"},
    {"f:foo/^12345678901234567890123456789012345678901234567890123456789012345 vfs_read",
     "EVENT_TOO_LONG", EINVAL, "trace_fprobe"},
    {"f:foo/^bar.1 vfs_read", "BAD_EVENT_NAME", EINVAL, "trace_fprobe"},
    {"f vfs_read ^$stack10000", "BAD_STACK_NUM", EINVAL, "trace_fprobe"},
    {"f vfs_read ^$arg10000", "BAD_ARG_NUM", EINVAL, "trace_fprobe"},
    {"f vfs_read ^$none_var", "BAD_VAR", EINVAL, "trace_fprobe"},
    {"f vfs_read ^%ax", "BAD_VAR", EINVAL, "trace_fprobe"},
    {"f vfs_read ^$retvalue", "RETVAL_ON_PROBE", EINVAL, "trace_fprobe"}, // not an exit probe
    {"f vfs_read ^@12345678abcde", "BAD_MEM_ADDR", EINVAL, "trace_fprobe"},
    {"f vfs_read ^@+10", "FILE_ON_KPROBE", EINVAL, "trace_fprobe"},
    {"f vfs_read arg1=\\^x", "BAD_IMM", EINVAL, "trace_fprobe"},
    {"f vfs_read arg1=\\\"abcd^", "IMMSTR_NO_CLOSE", EINVAL, "trace_fprobe"},
    {"f vfs_read ^+0@0)", "DEREF_NEED_BRACE", EINVAL, "trace_fprobe"},
    {"f vfs_read ^+0ab1(@0)", "BAD_DEREF_OFFS", EINVAL, "trace_fprobe"},
    {"f vfs_read +0(+0(@0^)", "DEREF_OPEN_BRACE", EINVAL, "trace_fprobe"},
    {"f vfs_read +0(^$comm)", "COMM_CANT_DEREF", EINVAL, "trace_fprobe"},
    {"f vfs_read ^&1", "BAD_FETCH_ARG", EINVAL, "trace_fprobe"},
    {"f vfs_read +0(^+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(@0))))))))))))))", "TOO_MANY_OPS",
     EINVAL, "trace_fprobe"},
    {"f vfs_read +0(@11):u8[10^", "ARRAY_NO_CLOSE", EINVAL, "trace_fprobe"},
    {"f vfs_read +0(@11):u8[10]^a", "BAD_ARRAY_SUFFIX", EINVAL, "trace_fprobe"},
    {"f vfs_read +0(@11):u8[^10a]", "BAD_ARRAY_NUM", EINVAL, "trace_fprobe"},
    {"f vfs_read +0(@11):u8[^256]", "ARRAY_TOO_BIG", EINVAL, "trace_fprobe"},
    {"f vfs_read @11:^unknown_type", "BAD_TYPE", EINVAL, "trace_fprobe"},
    {"f vfs_read $stack0:^string", "BAD_STRING", EINVAL, "trace_fprobe"},
    {"f vfs_read @11:^b10@a/16", "BAD_BITFIELD", EINVAL, "trace_fprobe"},
    {"f vfs_read ^arg123456789012345678901234567890=@11", "ARG_NAME_TOO_LONG", EINVAL,
     "trace_fprobe"},
    {"f vfs_read ^=@11", "NO_ARG_NAME", EINVAL, "trace_fprobe"},
    {"f vfs_read ^var.1=@11", "BAD_ARG_NAME", EINVAL, "trace_fprobe"},
    {"f vfs_read var1=@11 ^var1=@12", "USED_ARG_NAME", EINVAL, "trace_fprobe"},
    {"f vfs_read ^+1234567(+1234567(+1234567(+1234567(+1234567(+1234567(@1234))))))",
     "ARG_TOO_LONG", E2BIG, "trace_fprobe"},
    {"f vfs_read arg1=^", "NO_ARG_BODY", EINVAL, "trace_fprobe"},
    {"f vfs_read^%hoge", "BAD_ADDR_SUFFIX", EINVAL, "trace_fprobe"},
    {"f vfs_read ^$arg*", "NOSUP_BTFARG", EOPNOTSUPP, "trace_fprobe"},
    // uprobe-style
    {"p ^/non_exist_file:100", "FILE_NOT_FOUND", ENOENT, "trace_uprobe"},
    {"p ^/tmp:100", "NO_REGULAR_FILE", EINVAL, "trace_uprobe"},
    {"p /bin/sh:^10a", "BAD_UPROBE_OFFS", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10(^1a)", "BAD_REFCNT", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10(10^", "REFCNT_OPEN_BRACE", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10(10)^a", "BAD_REFCNT_SUFFIX", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10(10)^%return", "BAD_REFCNT_SUFFIX", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10^%hoge", "BAD_ADDR_SUFFIX", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10 ^@+ab", "BAD_FILE_OFFS", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10 ^@symbol", "SYM_ON_UPROBE", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10 ^$arg1", "NOFENTRY_ARGS", EINVAL, "trace_uprobe"},
    {"r /bin/sh:10 ^$arg1", "NOFENTRY_ARGS", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10 ^$retval", "RETVAL_ON_PROBE", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10 %ax:^symbol", "BAD_TYPE", EINVAL, "trace_uprobe"},
    {"p /bin/sh:10 %ax:^symstr", "BAD_TYPE", EINVAL, "trace_uprobe"},
    {"p:^/x /bin/sh:10", "NO_GROUP_NAME", EINVAL, "trace_uprobe"},
    // event probes (eprobes_syntax_errors.tc)
    {"e ^a.", "NO_EVENT_INFO", EINVAL, "event_probe"},
    {"e ^.b", "NO_EVENT_INFO", EINVAL, "event_probe"},
    {"e:^/bar a.b", "NO_GROUP_NAME", EINVAL, "event_probe"},
    {"e:^foo.1/bar a.b", "BAD_GROUP_NAME", EINVAL, "event_probe"},
    {"e:foo/^bar.1 a.b", "BAD_EVENT_NAME", EINVAL, "event_probe"},
    {"e:foo/bar a.b arg=^dfd", "BAD_FETCH_ARG", EINVAL, "event_probe"},
    {"e:foo/bar a.b ^%ax", "BAD_VAR", EINVAL, "event_probe"},
    {"e:foo/bar a.b ^@+10", "FILE_ON_KPROBE", EINVAL, "event_probe"},
};

TEST(ProbeParse, RejectedLinesLogTheKernelError)
{
    for (const auto &c : rejected) {
        SCOPED_TRACE(c.line);
        std::string marked = c.line;
        size_t caret = marked.find('^');
        ASSERT_NE(caret, std::string::npos);
        std::string line = marked.substr(0, caret) + marked.substr(caret + 1);
        auto argv = split(line);
        ASSERT_EQ(join_argv(argv), line) << "test lines use single spaces";

        error_log log;
        dynevent_command cmd;
        int r = parse_dynevent_logged(argv, parse_options{}, log, cmd);
        EXPECT_EQ(r, -c.errnum);
        auto entries = log.entries();
        ASSERT_EQ(entries.size(), 1u);
        EXPECT_STREQ(probe_err_name(entries[0].err), c.err);
        EXPECT_EQ(entries[0].loc, c.loc);
        EXPECT_EQ(entries[0].command, line);
        EXPECT_EQ(entries[0].pos, caret);

        // The caret line of the file text: 11 + pos spaces, then '^'.
        std::string text = log.read();
        std::string expect_tail =
            "  Command: " + line + "\n" + std::string(11 + caret, ' ') + "^\n";
        ASSERT_GE(text.size(), expect_tail.size());
        EXPECT_EQ(text.substr(text.size() - expect_tail.size()), expect_tail);
        EXPECT_NE(text.find(std::string(c.loc) +
                            ": error: " + probe_err_text(probe_err_from_name(c.err))),
                  std::string::npos);
    }
}

TEST(ProbeParse, UnloggedFailures)
{
    struct {
        const char *line;
        unsigned accept;
        int errnum;
    } cases[] = {
        {"a:x sym", ACCEPT_DYNAMIC, EINVAL},       // nobody's command
        {"p", ACCEPT_DYNAMIC, EINVAL},             // no place
        {"p /bin/sh:abc", ACCEPT_DYNAMIC, EINVAL}, // path without numeric offset
        {"r4 /bin/sh:10", ACCEPT_DYNAMIC, EINVAL}, // uprobes take no maxactive
        {"f vfs_read", ACCEPT_KPROBE, EINVAL},     // kprobe_events takes no f
        {"p /bin/sh:10", ACCEPT_KPROBE, EINVAL},   // nor uprobes
        {"p vfs_read", ACCEPT_UPROBE, EINVAL},     // uprobe_events takes no kprobes
        {"-x", ACCEPT_DYNAMIC, EINVAL},
        {"-:", ACCEPT_DYNAMIC, EINVAL},
        {"!foo", ACCEPT_DYNAMIC, EINVAL},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.line);
        error_log log;
        dynevent_command cmd;
        parse_options opts;
        opts.accept = c.accept;
        auto argv = split(c.line);
        EXPECT_EQ(parse_dynevent_logged(argv, opts, log, cmd), -c.errnum);
        EXPECT_EQ(log.size(), 0u);
    }
}

TEST(ProbeParse, ArgumentCountAndEventSizeLimits)
{
    std::string line = "p:x sym";
    for (int i = 0; i < MAX_TRACE_ARGS; i++)
        line += " \\" + std::to_string(i);
    dynevent_command cmd;
    auto argv = split(line);
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    EXPECT_EQ(cmd.def.args.size(), 128u);
    EXPECT_EQ(cmd.def.args[127].name, "arg128");

    line += " \\128";
    argv = split(line);
    error_log log;
    EXPECT_EQ(parse_dynevent_logged(argv, parse_options{}, log, cmd), -E2BIG);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_EQ(log.entries()[0].err, probe_err::TOO_MANY_ARGS);
    EXPECT_EQ(log.entries()[0].pos, std::string("p:x sym ").size());

    // 6 x 512 bytes = 3072 fit; a 7th array does not.
    line = "p:x sym";
    for (int i = 0; i < 7; i++)
        line += " a" + std::to_string(i) + "=+0(%di):u64[64]";
    argv = split(line);
    probe_error e = parse_dynevent(argv, parse_options{}, cmd);
    EXPECT_EQ(e.err, probe_err::EVENT_TOO_BIG);
    EXPECT_EQ(e.index, 8);
    EXPECT_EQ(e.errnum, E2BIG);
}

TEST(ProbeParse, FprobeEntryArgsLimit)
{
    // 15 distinct saved args = 120 bytes: fine; 16 = 128 > MAX_FPROBE_DATA_SIZE.
    std::string line = "f:x vfs_read%return";
    for (int i = 1; i <= 15; i++)
        line += " $arg" + std::to_string(i);
    dynevent_command cmd;
    auto argv = split(line);
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    EXPECT_EQ(cmd.def.entry_data_size(), 120u);
    line += " $arg1 $arg16";
    argv = split(line);
    error_log log;
    EXPECT_EQ(parse_dynevent_logged(argv, parse_options{}, log, cmd), -E2BIG);
    ASSERT_EQ(log.size(), 1u);
    EXPECT_EQ(log.entries()[0].err, probe_err::TOO_MANY_EARGS);
    EXPECT_EQ(log.entries()[0].loc, "trace_fprobe");
    EXPECT_EQ(log.entries()[0].pos, std::string("f:x vfs_read%return ").size());

    // A kretprobe may save them all (its data limit is 4096 bytes).
    line = "r:x vfs_read";
    for (int i = 1; i <= 40; i++)
        line += " $arg" + std::to_string(i);
    argv = split(line);
    ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
    EXPECT_EQ(cmd.def.entry_data_size(), 320u);
}

// --- registration-time errors through the same plumbing ------------------------------------

TEST(ProbeParse, RegistrationErrorsPointAtThePlace)
{
    struct {
        const char *line;
        probe_err err;
        int errnum;
        const char *message;
    } cases[] = {
        {"p non_exist_func", probe_err::BAD_PROBE_ADDR, ENOENT, "Invalid probed address or symbol"},
        {"p:e dup_sym %ax", probe_err::NON_UNIQ_SYMBOL, EADDRNOTAVAIL, "The symbol is not unique"},
        {"p vfs_read+3", probe_err::BAD_INSN_BNDRY, EILSEQ,
         "Probe point is not an instruction boundary"},
        {"f vfs_read", probe_err::FAIL_REG_PROBE, EBUSY, "Failed to register probe event"},
        {"r 0x401003", probe_err::BAD_RETPROBE, EINVAL,
         "Retprobe address must be an function entry"},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.line);
        dynevent_command cmd;
        auto argv = split(c.line);
        ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
        error_log log;
        probe_error e = registration_error(c.err, -c.errnum);
        EXPECT_EQ(e.errnum, c.errnum);
        log.append(cmd.def.error_loc(), argv, e);
        std::string text = log.read();
        size_t place = argv[0].size() + 1;
        std::string expect = std::string(cmd.def.error_loc()) + ": error: " + c.message +
                             "\n  Command: " + c.line + "\n" + std::string(11 + place, ' ') + "^\n";
        EXPECT_NE(text.find(expect), std::string::npos) << text;
    }
}

// --- append rules --------------------------------------------------------------------------

probe_definition def_of(const std::string &line)
{
    dynevent_command cmd;
    auto argv = split(line);
    probe_error e = parse_dynevent(argv, parse_options{}, cmd);
    EXPECT_TRUE(e.ok()) << line << ": " << probe_err_name(e.err);
    return cmd.def;
}

TEST(ProbeParse, AppendRules)
{
    probe_definition base = def_of("p:kprobes/testevent kernel_clone abcd=\\1");
    const probe_definition *existing[] = {&base};

    struct {
        const char *line; // '^' marks the caret
        probe_err err;
    } cases[] = {
        {"^r:kprobes/testevent do_exit abcd=\\1", probe_err::DIFF_PROBE_TYPE},
        {"p:kprobes/testevent kernel_clone ^bcd=\\1", probe_err::DIFF_ARG_TYPE},
        {"p:kprobes/testevent kernel_clone ^abcd=\\1:u8", probe_err::DIFF_ARG_TYPE},
        {"p:kprobes/testevent kernel_clone ^abcd=\\\"foo\"", probe_err::DIFF_ARG_TYPE},
        {"p:kprobes/testevent kernel_clone abcd=\\1 ^x=%ax", probe_err::DIFF_ARG_TYPE},
        {"p:kprobes/testevent kernel_clone ^", probe_err::DIFF_ARG_TYPE},
        {"^p:kprobes/testevent kernel_clone abcd=\\1", probe_err::SAME_PROBE},
        {"^f:kprobes/testevent kernel_clone abcd=\\1", probe_err::EVENT_EXIST},
        {"p:kprobes/testevent do_exit abcd=\\1", probe_err::NONE},
        {"p:kprobes/testevent kernel_clone abcd=\\2", probe_err::NONE},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.line);
        std::string marked = c.line;
        size_t caret = marked.find('^');
        std::string line = marked;
        if (caret != std::string::npos) line.erase(caret, 1);
        while (!line.empty() && line.back() == ' ')
            line.pop_back();
        probe_definition d = def_of(line);
        probe_error e = check_append(existing, d);
        EXPECT_EQ(e.err, c.err) << probe_err_name(e.err);
        if (c.err == probe_err::NONE) {
            EXPECT_TRUE(e.ok());
            continue;
        }
        EXPECT_EQ(e.errnum, EEXIST);
        auto argv = split(line);
        EXPECT_EQ(probe_error_pos(argv, e), caret);
    }

    // SAME_PROBE is checked against every probe of the event.
    probe_definition second = def_of("p:kprobes/testevent do_exit abcd=\\1");
    const probe_definition *two[] = {&base, &second};
    EXPECT_EQ(check_append(two, def_of("p:kprobes/testevent do_exit abcd=\\1")).err,
              probe_err::SAME_PROBE);
    // fprobes: entry vs exit under one name.
    probe_definition f = def_of("f:fprobes/testevent kernel_clone");
    const probe_definition *fe[] = {&f};
    EXPECT_EQ(check_append(fe, def_of("f:fprobes/testevent do_exit%return")).err,
              probe_err::DIFF_PROBE_TYPE);
}

// --- delete requests -----------------------------------------------------------------------

TEST(ProbeParse, DeleteRequests)
{
    probe_definition k = def_of("p:kprobes/testevent kernel_clone+4 a=%ax b=%dx");
    probe_definition f = def_of("f:myf vfs_read%return $retval");
    probe_definition u = def_of("p:uprobes/zfree /bin/sh:0x46420(0x8) arg1=%ip");
    probe_definition a = def_of("p:x 0x401000");

    struct {
        const char *line;
        const probe_definition *def;
        bool match;
    } cases[] = {
        {"-:testevent", &k, true},
        {"-:kprobes/testevent", &k, true},
        {"-:other/testevent", &k, false},
        {"-:kprobes/", &k, true},
        {"-:kprobes/other", &k, false},
        {"-:kprobes/testevent kernel_clone+4", &k, true},
        {"-:kprobes/testevent kernel_clone", &k, false},
        {"-:testevent kernel_clone+4 a=%ax", &k, true},
        {"-:testevent kernel_clone+4 a=%ax b=%dx", &k, true},
        {"-:testevent kernel_clone+4 a=%dx", &k, false},
        {"-:testevent kernel_clone+4 a=%ax b=%dx c=%cx", &k, false},
        {"!p:kprobes/testevent", &k, true},
        {"-:myf vfs_read", &f, true},
        {"-:myf vfs_read%return", &f, false},
        {"-:fprobes/myf vfs_read arg1=$retval", &f, true},
        {"-:zfree /bin/sh:0x0000000000046420(0x8)", &u, true},
        {"-:zfree /bin/sh:0x46420", &u, false},
        {"-:x 0x0000000000401000", &a, true},
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.line);
        dynevent_command cmd;
        auto argv = split(c.line);
        ASSERT_TRUE(parse_dynevent(argv, parse_options{}, cmd).ok());
        ASSERT_EQ(cmd.kind, dynevent_command::type::remove);
        EXPECT_EQ(delete_matches(cmd.del, *c.def), c.match);
    }
}

// --- buffer splitting ----------------------------------------------------------------------

TEST(ProbeParse, RunCommandSplitsLinesAndStopsAtFirstFailure)
{
    std::vector<std::string> seen;
    auto create = [&](std::span<const std::string> argv) {
        seen.push_back(join_argv(argv));
        return argv[0] == "bad" ? -EINVAL : 0;
    };
    std::string buf =
        "p:a  f1 # comment\n\n   \n# only a comment\n\tp:b f2\t%ax\nbad line\np:c f3\n";
    EXPECT_EQ(trace_parse_run_command(buf, create), -EINVAL);
    EXPECT_EQ(seen, (std::vector<std::string>{"p:a f1", "p:b f2 %ax", "bad line"}));

    seen.clear();
    EXPECT_EQ(trace_parse_run_command("p:a f1\np:b f2", create), 0);
    EXPECT_EQ(seen.size(), 2u);

    // 4094 characters plus '\n' is the longest line.
    seen.clear();
    std::string ok_line = "p:a " + std::string(4090, 'x');
    EXPECT_EQ(trace_parse_run_command(ok_line + "\n", create), 0);
    EXPECT_EQ(seen.size(), 1u);
    std::string long_line = ok_line + "y";
    seen.clear();
    EXPECT_EQ(trace_parse_run_command("p:a f1\n" + long_line + "\n", create), -EINVAL);
    EXPECT_EQ(seen.size(), 1u); // the first line was applied
}

TEST(ProbeParse, ArgvSplitAndSanitize)
{
    EXPECT_EQ(argv_split("  p:a\t f  x=\"a b\"  "),
              (std::vector<std::string>{"p:a", "f", "x=\"a", "b\""}));
    EXPECT_TRUE(argv_split(" \t ").empty());
    EXPECT_EQ(sanitize_event_name("p_libc.so.6:malloc*_0"), "p_libc_so_6_malloc__0");
}

// --- error_log -----------------------------------------------------------------------------

// Replaces every "[<spaces><digits>.<6 digits>]" stamp at a line start by "[TS]".
std::string mask_stamps(const std::string &s)
{
    std::string out;
    size_t i = 0;
    while (i < s.size()) {
        bool line_start = i == 0 || s[i - 1] == '\n';
        size_t j = i + 1;
        if (line_start && s[i] == '[') {
            while (j < s.size() && s[j] == ' ')
                j++;
            size_t d = j;
            while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
                j++;
            size_t dot = j;
            if (j > d && j < s.size() && s[j] == '.') {
                j++;
                while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
                    j++;
                if (j - dot == 7 && j < s.size() && s[j] == ']' && dot - i >= 6) {
                    out += "[TS]";
                    i = j + 1;
                    continue;
                }
            }
        }
        out += s[i++];
    }
    return out;
}

TEST(ErrorLog, FormatKeepsEightAndClears)
{
    error_log log;
    auto argv = split("p non_exist_func");
    log.append("trace_kprobe", argv, registration_error(probe_err::BAD_PROBE_ADDR, ENOENT));
    EXPECT_EQ(mask_stamps(log.read()),
              "[TS] trace_kprobe: error: Invalid probed address or symbol\n"
              "  Command: p non_exist_func\n"
              "             ^\n");
    // The stamp: at least 5 characters of seconds, dot, 6 digits of microseconds.
    std::string raw = log.read();
    ASSERT_EQ(raw[0], '[');
    size_t dot = raw.find('.');
    EXPECT_GE(dot, 6u);
    EXPECT_EQ(raw.substr(dot + 7, 2), "] ");

    log.append_raw("trace_fprobe", probe_err::BAD_VAR, "f a %ax", 4, 1234567890123ull);
    std::string text = log.read();
    EXPECT_NE(text.find("[ 1234.567890] trace_fprobe: error: Invalid $-valiable specified\n"
                        "  Command: f a %ax\n"
                        "               ^\n"),
              std::string::npos);

    // Caret past the end when the index is beyond the last token.
    error_log l2;
    l2.append("trace_kprobe", argv, probe_error::make(probe_err::TOO_MANY_ARGS, 5, 0, E2BIG));
    EXPECT_EQ(l2.entries()[0].pos, std::string("p non_exist_func ").size());

    for (int i = 0; i < 10; i++)
        log.append_raw("trace_kprobe", probe_err::BAD_IMM, "c" + std::to_string(i), 0, 0);
    auto e = log.entries();
    ASSERT_EQ(e.size(), error_log::max_entries);
    EXPECT_EQ(e.front().command, "c2");
    EXPECT_EQ(e.back().command, "c9");

    // Not-logged errors are ignored.
    log.append("trace_kprobe", argv, probe_error::plain(EINVAL));
    EXPECT_EQ(log.size(), 8u);

    log.clear();
    EXPECT_EQ(log.size(), 0u);
    EXPECT_EQ(log.read(), "");
}

TEST(ErrorLog, NamesAndTexts)
{
    EXPECT_STREQ(probe_err_name(probe_err::BAD_MAXACT), "BAD_MAXACT");
    EXPECT_STREQ(probe_err_text(probe_err::BAD_MAXACT), "Invalid maxactive number");
    EXPECT_STREQ(probe_err_text(probe_err::IMMSTR_NO_CLOSE), "String is not closed with '\"'");
    EXPECT_STREQ(probe_err_text(probe_err::EVENT_TOO_BIG), "Event too big (too many fields?)");
    EXPECT_EQ(probe_err_from_name("TOO_MANY_EARGS"), probe_err::TOO_MANY_EARGS);
    EXPECT_EQ(probe_err_from_name("NOPE"), probe_err::NONE);
    // Kernel order: FILE_NOT_FOUND is the first error, EVENT_TOO_BIG the 81st.
    EXPECT_EQ(static_cast<int>(probe_err::FILE_NOT_FOUND), 1);
    EXPECT_EQ(static_cast<int>(probe_err::EVENT_TOO_BIG), 81);
}

} // namespace
