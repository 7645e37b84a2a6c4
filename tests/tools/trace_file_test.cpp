// The trace file format: metadata chunks round-trip, pages drained from real ring buffers
// read back as the events written, sessions stay apart, and a torn or corrupted tail loses
// only itself.
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tools/dprobe/resolve/perf_probe.h"
#include "tools/trace_drain.h"
#include "tools/crc32c.h"
#include "tools/trace_file.h"
#include "tools/trace_reader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace dprobe;
using namespace dprobe::tracefile;

namespace
{

struct temp_file {
    std::string path;
    int fd;
    temp_file()
    {
        char tmpl[] = "/tmp/dprobe-trace-file-test-XXXXXX";
        fd = mkstemp(tmpl);
        path = tmpl;
        std::string h = file_header(123);
        write_all(fd, h.data(), h.size());
    }
    ~temp_file()
    {
        ::close(fd);
        unlink(path.c_str());
    }
    void put(const std::string &bytes) { write_all(fd, bytes.data(), bytes.size()); }
    size_t size() const
    {
        struct stat st {
        };
        fstat(fd, &st);
        return static_cast<size_t>(st.st_size);
    }
};

// Graph events written by two threads into exported ring buffers, drained into F under
// SESSION; returns the number of events each thread wrote.
size_t record_threads(temp_file &f, uint64_t session, size_t per_thread)
{
    trace_clock_init();
    ring_buffer_set_tracing_on(true);
    ring_buffer_set_overwrite(false);
    int fd = ring_buffer_export(-1);
    EXPECT_GE(fd, 0);
    arena_drain d(f.fd, session);
    EXPECT_EQ(d.open(dup(fd)), "");
    auto writer = [&](uint64_t base) {
        pthread_setname_np(pthread_self(), base ? "second" : "first");
        for (size_t i = 0; i < per_thread; i++) {
            void *p = ring_buffer_reserve_small(sizeof(funcgraph_rec));
            ASSERT_NE(p, nullptr);
            funcgraph_rec r{i % 2 ? FUNCGRAPH_EXIT_ID : FUNCGRAPH_ENTRY_ID, 1, base + i / 2};
            std::memcpy(p, &r, sizeof r);
            ring_buffer_commit(p);
            if (i % 500 == 0) // a probe event now and then, 8-aligned with a length word
            {
                void *q = ring_buffer_reserve(20);
                ASSERT_NE(q, nullptr);
                uint16_t id = 1000;
                std::memset(q, 0x5a, 20);
                std::memcpy(q, &id, 2);
                ring_buffer_commit(q);
            }
        }
    };
    std::thread a(writer, 0);
    a.join();
    d.drain(false);
    std::thread b(writer, 1 << 20);
    b.join();
    d.drain(true);
    EXPECT_TRUE(d.finish("reason=exit\nstatus=0\n"));
    EXPECT_EQ(d.lost(), 0u);
    EXPECT_EQ(d.events(), 2 * (per_thread + (per_thread + 499) / 500));
    ring_buffer_unexport();
    ring_buffer_set_overwrite(true);
    return per_thread;
}

} // namespace

TEST(trace_file, metadata_round_trip)
{
    temp_file f;
    std::string s;
    append_kv(s, "comm", "prog");
    append_kv(s, "argv", "a\nb\\c");
    f.put(make_chunk(CHUNK_SESSION, 1ull << 32, s));
    f.put(make_chunk(CHUNK_OBJECTS, 1ull << 32, "+ 0x5000 /bin/prog\n+ 0x7000 /lib/libc.so.6\n"));
    f.put(make_chunk(CHUNK_OBJECTS, 1ull << 32, "@ 4242\n- 0x7000 /lib/libc.so.6\n"));
    f.put(
        make_chunk(CHUNK_EVENT, 1ull << 32, event_payload(1000, "grp/ev", "p:grp/ev f", "format")));
    f.put(make_chunk(CHUNK_SESSION, 2ull << 32, "pid=7\n"));
    f.put(make_chunk(CHUNK_END, 1ull << 32, "reason=exit\nstatus=0\n"));
    trace_reader r;
    std::string err;
    ASSERT_TRUE(r.open(f.path, &err)) << err;
    EXPECT_TRUE(r.warning.empty()) << r.warning;
    EXPECT_EQ(r.created_realtime_ns, 123u);
    ASSERT_EQ(r.sessions.size(), 2u);
    const session &a = r.sessions[0];
    EXPECT_EQ(a.get("comm"), "prog");
    EXPECT_EQ(a.get("argv"), "a\nb\\c");
    ASSERT_EQ(a.objects.size(), 3u);
    EXPECT_EQ(a.objects[1].path, "/lib/libc.so.6");
    EXPECT_EQ(a.objects[1].load_bias, 0x7000u);
    EXPECT_EQ(a.objects[1].ts, 0u);
    EXPECT_TRUE(a.objects[2].unloaded);
    EXPECT_EQ(a.objects[2].ts, 4242u);
    ASSERT_EQ(a.events.count(1000), 1u);
    EXPECT_EQ(a.events.at(1000).definition, "p:grp/ev f");
    EXPECT_EQ(a.end.at("reason"), "exit");
    EXPECT_EQ(r.sessions[1].pid(), 2);
    EXPECT_TRUE(r.sessions[1].end.empty());
}

TEST(trace_file, pages_read_back_as_written)
{
    temp_file f;
    const uint64_t sid = 5ull << 32;
    f.put(make_chunk(CHUNK_SESSION, sid, "pid=5\n"));
    const size_t n = record_threads(f, sid, 5000);
    trace_reader r;
    std::string err;
    ASSERT_TRUE(r.open(f.path, &err)) << err;
    EXPECT_TRUE(r.warning.empty()) << r.warning;
    ASSERT_EQ(r.streams.size(), 2u);
    ASSERT_EQ(r.sessions.size(), 1u);
    ASSERT_EQ(r.sessions[0].stats.size(), 2u);
    EXPECT_EQ(r.sessions[0].stats[0].written, n + n / 500);
    for (size_t si = 0; si < 2; si++) {
        const thread_stream &t = r.streams[si];
        EXPECT_EQ(t.comm, si ? "second" : "first");
        trace_reader::cursor c(r, si);
        event e;
        size_t graph = 0, probes = 0;
        uint64_t last = 0;
        while (c.next(e)) {
            EXPECT_EQ(e.lost_before, 0u);
            EXPECT_GE(e.ts, last);
            last = e.ts;
            uint16_t type;
            std::memcpy(&type, e.payload, 2);
            if (type == 1000) {
                EXPECT_EQ(e.len, 20u);
                probes++;
                continue;
            }
            ASSERT_EQ(e.len, sizeof(funcgraph_rec));
            funcgraph_rec g;
            std::memcpy(&g, e.payload, sizeof g);
            EXPECT_EQ(g.type, graph % 2 ? FUNCGRAPH_EXIT_ID : FUNCGRAPH_ENTRY_ID);
            EXPECT_EQ(g.func, (si ? 1u << 20 : 0u) + graph / 2);
            graph++;
        }
        EXPECT_TRUE(c.error().empty()) << c.error();
        EXPECT_EQ(graph, n);
        EXPECT_EQ(probes, n / 500);
    }
    // Both merged in time: thread 1's events all come first (it ran first).
    trace_reader::merged m(r);
    event e;
    size_t si, count = 0, switches = 0, prev = 0;
    uint64_t last = 0;
    while (m.next(e, si)) {
        EXPECT_GE(e.ts, last);
        last = e.ts;
        switches += count && si != prev;
        prev = si;
        count++;
    }
    EXPECT_EQ(count, 2 * (n + n / 500));
    EXPECT_EQ(switches, 1u);
    // 16 bytes a graph event, plus the pages' and chunks' headers: well under 20.
    EXPECT_LT(r.bytes, 2 * n * 20);
}

TEST(trace_file, torn_tail_keeps_complete_chunks)
{
    temp_file f;
    f.put(make_chunk(CHUNK_SESSION, 1ull << 32, "pid=1\n"));
    f.put(make_chunk(CHUNK_SESSION, 2ull << 32, "pid=2\n"));
    f.put(make_chunk(CHUNK_END, 1ull << 32, "reason=exit\n"));
    const size_t full = f.size();
    for (size_t cut : {size_t{3}, size_t{20}, size_t{30}}) {
        ASSERT_EQ(ftruncate(f.fd, static_cast<off_t>(full - cut)), 0);
        trace_reader r;
        ASSERT_TRUE(r.open(f.path, nullptr));
        EXPECT_FALSE(r.warning.empty()) << "cut " << cut;
        ASSERT_EQ(r.sessions.size(), 2u);
        EXPECT_TRUE(r.sessions[0].end.empty()); // the END chunk was the torn one
        ASSERT_EQ(ftruncate(f.fd, static_cast<off_t>(full)), 0);
    }
}

TEST(trace_file, corrupted_pages_stop_only_their_thread)
{
    temp_file f;
    const uint64_t sid = 6ull << 32;
    record_threads(f, sid, 300);
    // Damage a byte of the first PAGES chunk (the first thread's).
    trace_reader r0;
    ASSERT_TRUE(r0.open(f.path, nullptr));
    ASSERT_EQ(r0.streams.size(), 2u);
    const uint64_t at = r0.streams[0].chunks[0].first + 100;
    char c;
    ASSERT_EQ(pread(f.fd, &c, 1, static_cast<off_t>(at)), 1);
    c ^= 0x40;
    ASSERT_EQ(pwrite(f.fd, &c, 1, static_cast<off_t>(at)), 1);
    trace_reader r;
    ASSERT_TRUE(r.open(f.path, nullptr));
    trace_reader::cursor c0(r, 0), c1(r, 1);
    event e;
    EXPECT_FALSE(c0.next(e));
    EXPECT_NE(c0.error().find("checksum"), std::string::npos) << c0.error();
    size_t n = 0;
    while (c1.next(e))
        n++;
    EXPECT_EQ(n, 300u + 1);
}

TEST(trace_file, not_a_trace_file)
{
    char tmpl[] = "/tmp/dprobe-trace-file-test-XXXXXX";
    int fd = mkstemp(tmpl);
    std::string junk = "hello, world, this is not a trace file";
    write_all(fd, junk.data(), junk.size());
    ::close(fd);
    trace_reader r;
    std::string err;
    EXPECT_FALSE(r.open(tmpl, &err));
    EXPECT_NE(err.find("magic"), std::string::npos);
    unlink(tmpl);
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

TEST(trace_file, chunk_checksum_is_crc32c)
{
    // The check value of CRC-32C, chained as zlib's crc32() chains, and an unaligned tail.
    EXPECT_EQ(dprobe::tracefile::crc32c(0, "123456789", 9), 0xe3069283u);
    const uint32_t a = dprobe::tracefile::crc32c(0, "1234", 4);
    EXPECT_EQ(dprobe::tracefile::crc32c(a, "56789", 5), 0xe3069283u);
    std::string big(4099, 'x');
    for (size_t i = 0; i < big.size(); i++)
        big[i] = static_cast<char>(i * 31);
    uint32_t whole = dprobe::tracefile::crc32c(0, big.data() + 1, big.size() - 1);
    uint32_t parts = dprobe::tracefile::crc32c(dprobe::tracefile::crc32c(0, big.data() + 1, 13),
                                               big.data() + 14, big.size() - 14);
    EXPECT_EQ(whole, parts);
}
