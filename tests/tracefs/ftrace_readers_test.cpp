// What a `dprobe record` or `dprobe attach` session writes into a process's buffers, read
// back through the tree's readers in one process:
//  - the agent's compact function-graph and function records (written here byte for byte as
//    tools/agent/funcgraph.cpp writes them: small events without the common fields) read by
//    `trace` (nop and function_graph layouts), `trace_pipe` and per_cpu/cpuN/trace_pipe_raw
//    (decoded with libtraceevent's kbuffer and the format files) as the tracers' full records,
//    with the writer's pid and the exit's call time;
//  - trace_marker and trace_marker_raw written from one of dprobe's own threads, muted as the
//    agent mutes its threads (the tracefs server thread that serves a session's writes);
//  - trace_marker_raw's records in trace_pipe_raw as the kernel lays them out.
#include "ftrace_test_util.h"

#include "core/ring_buffer.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <traceevent/event-parse.h>
extern "C" {
#include <traceevent/kbuffer.h> // a C header without extern "C" of its own
}

#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <algorithm>
#include <map>
#include <thread>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int fr_outer(int a)
{
    asm volatile("" ::: "memory");
    return a + 1;
}
TARGET int fr_leaf(int a)
{
    asm volatile("" ::: "memory");
    return a + 2;
}
TARGET int fr_unused(int a)
{
    asm volatile("" ::: "memory");
    return a + 3;
}

using namespace ftt;

namespace
{

class ftrace_readers : public ::testing::Test
{
  protected:
    void SetUp() override { reset_ftrace(); }
    void TearDown() override { reset_ftrace(); }
};

int gettid_()
{
    return int(syscall(SYS_gettid));
}

uintptr_t addr(int (*f)(int))
{
    return reinterpret_cast<uintptr_t>(f);
}

// The agent's records (tools/agent/funcgraph.cpp write_graph_event, write_function_event):
// small ring-buffer events, u16 type, u16 depth (top bit: unwound), u64 func; or u16 type,
// u16 pad, u64 ip, u64 parent_ip.
void graph_rec(uint16_t type, uint16_t depth, uintptr_t func)
{
    void *p = dprobe::ring_buffer_reserve_small(12);
    ASSERT_NE(p, nullptr);
    const uint32_t head = type | uint32_t{depth} << 16;
    std::memcpy(p, &head, 4);
    std::memcpy(static_cast<char *>(p) + 4, &func, 8);
    dprobe::ring_buffer_commit(p);
}
void function_rec(uintptr_t ip, uintptr_t parent)
{
    void *p = dprobe::ring_buffer_reserve_small(20);
    ASSERT_NE(p, nullptr);
    const uint32_t head = 1;
    std::memcpy(p, &head, 4);
    std::memcpy(static_cast<char *>(p) + 4, &ip, 8);
    std::memcpy(static_cast<char *>(p) + 12, &parent, 8);
    dprobe::ring_buffer_commit(p);
}

// On a thread of its own: fr_outer calling fr_leaf, as the agent's graph records them, then
// one function record (fr_leaf called from fr_outer+1). Returns the thread's id.
int write_session_records()
{
    int tid = 0;
    std::thread([&] {
        tid = gettid_();
        graph_rec(11, 0, addr(fr_outer));
        graph_rec(11, 1, addr(fr_leaf));
        usleep(2000);
        graph_rec(10, 1, addr(fr_leaf));
        graph_rec(10, 0, addr(fr_outer));
        function_rec(addr(fr_leaf), addr(fr_outer) + 1);
    }).join();
    return tid;
}

} // namespace

TEST_F(ftrace_readers, compact_records_read_as_full_records_in_trace)
{
    const int tid = write_session_records();
    const std::string t = rd("trace");
    EXPECT_FALSE(has(t, "Unknown type")) << t;
    const auto b = body(t);
    ASSERT_EQ(b.size(), 5u) << t;
    const std::string ctx = "^ +[^ ]+-" + std::to_string(tid) + " +\\[[0-9]{3}\\] \\.{5} +";
    std::vector<std::string> g;
    // The entries, with the writer's thread (the compact records carry no pid).
    ASSERT_TRUE(matches(b[0], ctx + "([0-9]+)\\.([0-9]{6}): --> fr_outer \\(0\\)$", &g)) << b[0];
    ASSERT_TRUE(matches(b[1], ctx + "([0-9]+)\\.([0-9]{6}): --> fr_leaf \\(1\\)$", &g)) << b[1];
    const uint64_t leaf_us = std::stoull(g[1]) * 1000000 + std::stoull(g[2]);
    // The exit, as the kernel prints funcgraph_exit: its call time is its entry's.
    ASSERT_TRUE(matches(b[2],
                        ctx + "[0-9.]+: <-- fr_leaf \\(1\\) \\(start: ([0-9a-f]+)  end: "
                              "([0-9a-f]+)\\) over: 1 retval: 0$",
                        &g))
        << b[2];
    const uint64_t start = std::stoull(g[1], nullptr, 16), end = std::stoull(g[2], nullptr, 16);
    EXPECT_EQ((start + 500) / 1000, leaf_us);
    EXPECT_GE(end - start, 2000000u); // the 2 ms between them
    EXPECT_TRUE(matches(b[3], ctx + "[0-9.]+: <-- fr_outer \\(0\\) ")) << b[3];
    EXPECT_TRUE(matches(b[4], ctx + "[0-9.]+: fr_leaf <-fr_outer$")) << b[4];
}

TEST_F(ftrace_readers, compact_records_read_from_trace_pipe)
{
    const int tid = write_session_records();
    const auto b = body(rd("trace_pipe"));
    ASSERT_EQ(b.size(), 5u);
    for (const auto &l : b)
        EXPECT_TRUE(matches(l, "-" + std::to_string(tid) + " ")) << l;
    EXPECT_TRUE(has(b[0], ": --> fr_outer (0)")) << b[0];
    EXPECT_TRUE(has(b[2], ": <-- fr_leaf (1) (start: ")) << b[2];
    EXPECT_TRUE(has(b[4], ": fr_leaf <-fr_outer")) << b[4];
    EXPECT_TRUE(body(rd("trace")).empty()); // consumed
}

TEST_F(ftrace_readers, compact_records_in_the_function_graph_layout)
{
    // The graph tracer on a function nobody calls: the layout is the graph's, the records
    // are the agent's.
    ASSERT_EQ(wr("set_ftrace_filter", "fr_unused", true), 0);
    ASSERT_EQ(wr("current_tracer", "function_graph"), 0);
    write_session_records();
    const std::string t = rd("trace");
    EXPECT_FALSE(has(t, "Unknown type")) << t;
    const auto b = body(t);
    ASSERT_GE(b.size(), 3u) << t;
    EXPECT_TRUE(matches(b[0], "^ *[0-9]+\\) +\\|  fr_outer\\(\\) \\{$")) << t;
    // The leaf on one line, with its duration (at least the 2 ms slept: the kernel's mark
    // for over 1 ms, or for over 10 ms, 100 ms or 1 s when a loaded machine slept longer).
    EXPECT_TRUE(matches(b[1], "^ *[0-9]+\\) [#*@$] +[0-9]{4,}\\.[0-9]+ us +\\|    fr_leaf\\(\\);$"))
        << t;
    EXPECT_TRUE(matches(b[2], "^ *[0-9]+\\) [#*@$] +[0-9]{4,}\\.[0-9]+ us +\\|  \\}$")) << t;
}

TEST_F(ftrace_readers, compact_records_in_trace_pipe_raw_decode_as_the_kernels)
{
    const int tid = write_session_records();
    tep_handle *tep = tep_alloc();
    for (const char *n : {"function", "funcgraph_entry", "funcgraph_exit"}) {
        std::string f = rd(std::string("events/ftrace/") + n + "/format");
        ASSERT_EQ(tep_parse_event(tep, f.data(), f.size(), "ftrace"), 0) << n;
    }
    // The thread may move between CPUs while it writes: a reader merges the CPUs' pages by
    // time, as trace-cmd does, before it pairs entries with exits.
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    std::vector<std::pair<unsigned long long, std::string>> events; // (time, record bytes)
    for (long c = 0; c < ncpu; c++) {
        std::string raw = rd("per_cpu/cpu" + std::to_string(c) + "/trace_pipe_raw");
        ASSERT_EQ(raw.size() % 4096, 0u);
        kbuffer *kb = kbuffer_alloc(KBUFFER_LSIZE_8, KBUFFER_ENDIAN_LITTLE);
        for (size_t off = 0; off < raw.size(); off += 4096) {
            ASSERT_EQ(kbuffer_load_subbuffer(kb, &raw[off]), 0);
            unsigned long long ts;
            while (void *d = kbuffer_read_event(kb, &ts)) {
                events.emplace_back(
                    ts, std::string(static_cast<const char *>(d), size_t(kbuffer_event_size(kb))));
                kbuffer_next_event(kb, nullptr);
            }
        }
        kbuffer_free(kb);
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const auto &x, const auto &y) { return x.first < y.first; });
    std::vector<std::tuple<std::string, unsigned long long, unsigned long long>> seen;
    std::map<std::string, unsigned long long> ts_of;
    for (auto &[ts, bytes] : events) {
        void *d = bytes.data();
        tep_record r{};
        r.data = d;
        r.size = int(bytes.size());
        r.ts = ts;
        tep_event *ev = tep_find_event_by_record(tep, &r);
        ASSERT_NE(ev, nullptr);
        unsigned long long pid = 0, a = 0, b = 0;
        tep_format_field *pf = tep_find_common_field(ev, "common_pid");
        ASSERT_NE(pf, nullptr);
        tep_read_number_field(pf, d, &pid);
        EXPECT_EQ(int(pid), tid) << ev->name;
        if (std::string(ev->name) == "function") {
            EXPECT_EQ(r.size, 24);
            tep_read_number_field(tep_find_field(ev, "ip"), d, &a);
            tep_read_number_field(tep_find_field(ev, "parent_ip"), d, &b);
        } else if (std::string(ev->name) == "funcgraph_entry") {
            EXPECT_EQ(r.size, 24);
            tep_read_number_field(tep_find_field(ev, "func"), d, &a);
            tep_read_number_field(tep_find_field(ev, "depth"), d, &b);
            ts_of[std::to_string(a)] = ts;
        } else {
            EXPECT_EQ(r.size, 48);
            tep_read_number_field(tep_find_field(ev, "func"), d, &a);
            unsigned long long call = 0, ret = 0;
            tep_read_number_field(tep_find_field(ev, "calltime"), d, &call);
            tep_read_number_field(tep_find_field(ev, "rettime"), d, &ret);
            EXPECT_EQ(call, ts_of[std::to_string(a)]) << "the entry's time";
            EXPECT_EQ(ret, ts);
            tep_read_number_field(tep_find_field(ev, "depth"), d, &b);
        }
        seen.emplace_back(ev->name, a, b);
    }
    tep_free(tep);
    using rec = std::tuple<std::string, unsigned long long, unsigned long long>;
    const std::vector<rec> want = {{"funcgraph_entry", addr(fr_outer), 0},
                                   {"funcgraph_entry", addr(fr_leaf), 1},
                                   {"funcgraph_exit", addr(fr_leaf), 1},
                                   {"funcgraph_exit", addr(fr_outer), 0},
                                   {"function", addr(fr_leaf), addr(fr_outer) + 1}};
    EXPECT_EQ(seen, want);
}

// The agent's threads are muted (their own work is not traced): the tracefs server thread of
// a session writes trace_marker records for the process that wrote the file all the same,
// and is muted again afterwards.
TEST_F(ftrace_readers, trace_marker_from_a_muted_thread)
{
    long marker = 0, raw = 0;
    bool after_marker = true;
    int tid = 0;
    std::thread([&] {
        tid = gettid_();
        dprobe::ring_buffer_thread_mute(true); // as the agent's own threads do
        marker = T.write_file("trace_marker", "from a muted thread\n", false);
        const char data[] = {'\x2a', 0, 0, 0, 1, 2, 3};
        raw = T.write_file("trace_marker_raw", std::string(data, sizeof data), false);
        void *own = dprobe::ring_buffer_reserve(16);
        after_marker = own != nullptr;
        dprobe::ring_buffer_discard(own);
        dprobe::ring_buffer_thread_mute(false);
    }).join();
    EXPECT_EQ(marker, 0);
    EXPECT_EQ(raw, 0);
    EXPECT_FALSE(after_marker) << "the thread stays muted";
    const auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 2u);
    EXPECT_TRUE(
        matches(b[0], "-" + std::to_string(tid) + " .*: tracing_mark_write: from a muted thread$"))
        << b[0];
    EXPECT_TRUE(has(b[1], ": # 2a buf: 01 02 03 00")) << b[1];
}

TEST_F(ftrace_readers, trace_marker_from_a_thread_muted_by_name)
{
    // dprobe's threads are muted by their name on their first write (the agent's "dprobe-").
    dprobe::ring_buffer_mute_threads_named("frtest-");
    long marker = 0;
    bool own_event = true;
    std::thread([&] {
        prctl(PR_SET_NAME, "frtest-server");
        marker = T.write_file("trace_marker", "named\n", false);
        void *own = dprobe::ring_buffer_reserve(16);
        own_event = own != nullptr;
        dprobe::ring_buffer_discard(own);
    }).join();
    dprobe::ring_buffer_mute_threads_named(nullptr);
    EXPECT_EQ(marker, 0);
    EXPECT_FALSE(own_event) << "the thread stays muted";
    const auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 1u);
    EXPECT_TRUE(has(b[0], ": tracing_mark_write: named")) << b[0];
}

// trace_marker_raw's records go to trace_pipe_raw as the kernel holds them: the id and the
// bytes padded to 4 (dprobe's buffers keep the length in an extra word, which is not data).
TEST_F(ftrace_readers, trace_marker_raw_in_trace_pipe_raw)
{
    const char data[] = {'\x2a', 0, 0, 0, 'a', 'b', 'c', 'd', 'e'};
    ASSERT_EQ(T.write_file("trace_marker_raw", std::string(data, sizeof data), false), 0);
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    int found = 0;
    for (long c = 0; c < ncpu; c++) {
        std::string raw = rd("per_cpu/cpu" + std::to_string(c) + "/trace_pipe_raw");
        kbuffer *kb = kbuffer_alloc(KBUFFER_LSIZE_8, KBUFFER_ENDIAN_LITTLE);
        for (size_t off = 0; off < raw.size(); off += 4096) {
            ASSERT_EQ(kbuffer_load_subbuffer(kb, &raw[off]), 0);
            unsigned long long ts;
            while (void *d = kbuffer_read_event(kb, &ts)) {
                found++;
                EXPECT_EQ(kbuffer_event_size(kb), 8 + 4 + 8); // header, id, "abcde" + 3
                const char *p = static_cast<const char *>(d);
                EXPECT_EQ(std::string(p + 12, 5), "abcde");
                EXPECT_EQ(std::string(p + 17, 3), std::string(3, '\0'));
                kbuffer_next_event(kb, nullptr);
            }
        }
        kbuffer_free(kb);
    }
    EXPECT_EQ(found, 1);
}
