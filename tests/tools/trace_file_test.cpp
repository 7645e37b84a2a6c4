// The trace file format: chunks round-trip, sessions stay apart, and a torn or corrupted
// tail loses only itself.
#include "tools/dprobe/perf_probe.h"
#include "tools/trace_file.h"

#include <gtest/gtest.h>

using namespace dprobe;
using namespace dprobe::tracefile;

namespace {

std::string sample_file(uint64_t sid_a, uint64_t sid_b)
{
    std::string f = file_header(123);
    std::string s;
    append_kv(s, "comm", "prog");
    append_kv(s, "argv", "a\nb\\c");
    f += make_chunk(CHUNK_SESSION, sid_a, s);
    f += make_chunk(CHUNK_OBJECTS, sid_a, "+ 0x5000 /bin/prog\n+ 0x7000 /lib/libc.so.6\n");
    f += make_chunk(CHUNK_EVENT, sid_a, event_payload(1000, "grp/ev", "p:grp/ev f", "format"));
    f += make_chunk(CHUNK_COMM, sid_a, "42 worker\n");
    std::string recs;
    funcgraph_entry_rec e{FUNCGRAPH_ENTRY_ID, 0, 0, 42, 0x1234, 3, 0};
    append_record(recs, 10, 42, 1, 0, 0, &e, sizeof e);
    append_record(recs, 11, 42, 1, 0, 5, "xyz", 3);
    f += make_chunk(CHUNK_RECORDS, sid_a, recs);
    f += make_chunk(CHUNK_SESSION, sid_b, "pid=7\n");
    f += make_chunk(CHUNK_END, sid_a, "reason=exit\nstatus=0\n");
    return f;
}

} // namespace

TEST(trace_file, round_trip)
{
    trace_data d;
    std::string err;
    ASSERT_TRUE(parse_trace(sample_file(1ull << 32, 2ull << 32), d, &err)) << err;
    EXPECT_TRUE(d.warning.empty()) << d.warning;
    EXPECT_EQ(d.created_realtime_ns, 123u);
    ASSERT_EQ(d.sessions.size(), 2u);
    const session &a = d.sessions[0];
    EXPECT_EQ(a.get("comm"), "prog");
    EXPECT_EQ(a.get("argv"), "a\nb\\c");
    ASSERT_EQ(a.objects.size(), 2u);
    EXPECT_EQ(a.objects[1].path, "/lib/libc.so.6");
    EXPECT_EQ(a.objects[1].load_bias, 0x7000u);
    ASSERT_EQ(a.events.count(1000), 1u);
    EXPECT_EQ(a.events.at(1000).definition, "p:grp/ev f");
    EXPECT_EQ(a.comms.at(42), "worker");
    ASSERT_EQ(a.records.size(), 2u);
    EXPECT_EQ(a.records[0].data.size(), sizeof(funcgraph_entry_rec));
    EXPECT_EQ(a.records[1].data, "xyz");
    EXPECT_EQ(a.records[1].lost_before, 5u);
    EXPECT_EQ(a.end.at("reason"), "exit");
    EXPECT_EQ(d.sessions[1].pid(), 2);
    EXPECT_TRUE(d.sessions[1].end.empty());
}

TEST(trace_file, torn_tail_keeps_complete_chunks)
{
    std::string f = sample_file(1ull << 32, 2ull << 32);
    for (size_t cut : {size_t{3}, size_t{20}, size_t{30}}) {
        trace_data d;
        ASSERT_TRUE(parse_trace(std::string_view(f).substr(0, f.size() - cut), d, nullptr));
        EXPECT_FALSE(d.warning.empty()) << "cut " << cut;
        ASSERT_EQ(d.sessions.size(), 2u);
        EXPECT_EQ(d.sessions[0].records.size(), 2u);
        EXPECT_TRUE(d.sessions[0].end.empty()); // the END chunk was the torn one
    }
}

TEST(trace_file, corrupted_chunk_stops_reading)
{
    std::string f = sample_file(1ull << 32, 2ull << 32);
    size_t pos = f.find("xyz");
    ASSERT_NE(pos, std::string::npos);
    f[pos] = 'Q';
    trace_data d;
    ASSERT_TRUE(parse_trace(f, d, nullptr));
    EXPECT_NE(d.warning.find("checksum"), std::string::npos) << d.warning;
    EXPECT_TRUE(d.sessions[0].records.empty());
}

TEST(trace_file, not_a_trace_file)
{
    trace_data d;
    std::string err;
    EXPECT_FALSE(parse_trace("hello, world, this is not a trace file", d, &err));
    EXPECT_NE(err.find("magic"), std::string::npos);
}

TEST(perf_probe, group_names)
{
    EXPECT_EQ(tools::perf_group_for("libc.so.6"), "probe_libc");
    EXPECT_EQ(tools::perf_group_for("my-app"), "probe_my");
    EXPECT_EQ(tools::perf_group_for("wordfreq"), "probe_wordfreq");
}

TEST(perf_probe, translation_against_a_binary)
{
    std::string err;
    auto img = tools::elf_image::open(std::string(DPROBE_TEST_PROGS) + "/fentry/args", &err);
    ASSERT_TRUE(img) << err;
    auto r = tools::translate_perf_probe({"add", "a=%di:s32"}, *img);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "p:probe_args/add args:add a=%di:s32");
    r = tools::translate_perf_probe({"ev=add%return", "$retval"}, *img);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "r:probe_args/ev args:add arg1=$retval");
    r = tools::translate_perf_probe({"grp:ev=slen+1"}, *img);
    EXPECT_FALSE(r.ok); // inside the 5-byte site: not an instruction boundary
    EXPECT_NE(r.error_log.find("Probe point is not an instruction boundary"), std::string::npos);
    r = tools::translate_perf_probe({"add%retrun"}, *img);
    EXPECT_FALSE(r.ok);
    r = tools::translate_perf_probe({"add", "x=%bogus"}, *img);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error_log.find("Invalid register name"), std::string::npos);
}

TEST(perf_probe, parameter_names_from_dwarf)
{
    std::string err;
    auto img = tools::elf_image::open(std::string(DPROBE_TEST_PROGS) + "/pfe/args", &err);
    ASSERT_TRUE(img) << err;
    auto r = tools::translate_perf_probe({"add", "b", "first=a"}, *img);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "p:probe_args/add args:add b=$arg2:s32 first=$arg1:s32");
    r = tools::translate_perf_probe({"slen", "s:string"}, *img);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "p:probe_args/slen args:slen s=+0($arg1):string");
    r = tools::translate_perf_probe({"add%return", "$params", "$retval"}, *img);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.line, "r:probe_args/add__return args:add a=$arg1:s32 b=$arg2:s32 arg3=$retval");
    r = tools::translate_perf_probe({"add", "nosuch"}, *img);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("not a parameter of add"), std::string::npos) << r.message;
}
