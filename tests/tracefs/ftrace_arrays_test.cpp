// Trace arrays and the files around the buffers: instances/ (mkdir, rmdir, EBUSY, their own
// tracer, events and filters), snapshot, set_event and available_events, trace_marker and
// trace_marker_raw (and the program's dprobe_trace_marker), saved_cmdlines and saved_tgids,
// the function profiler (trace_stat/), the stack tracer, events/ftrace formats,
// events/header_page and header_event, and per_cpu/cpuN (trace, stats, trace_pipe_raw in the
// kernel's page format, decoded here with libtraceevent's kbuffer).
#include "ftrace_test_util.h"

#include "tracefs/raw_buffer.h"
#include "tracefs/trace_marker.h"

#include <dprobe/tracefs.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

extern "C" {
#include <traceevent/kbuffer.h>
}

#include <cerrno>
#include <cstring>
#include <thread>

#define TARGET extern "C" __attribute__((noipa, used, patchable_function_entry(5, 0)))

TARGET int ta_leaf(int a)
{
    asm volatile("" ::: "memory");
    return a + 1;
}
TARGET int ta_deep(int n)
{
    volatile char pad[200];
    pad[0] = char(n);
    return (n ? ta_deep(n - 1) : ta_leaf(0)) + pad[0]; // no tail calls: every frame stays
}
TARGET int ta_mark(int i)
{
    int r = dprobe_trace_printk("mark %d", i);
    asm volatile("" ::: "memory"); // not a tail call: the record names ta_mark
    return r;
}

using namespace ftt;

namespace
{

class ftrace_arrays : public ::testing::Test
{
  protected:
    void SetUp() override { reset_ftrace(); }
    void TearDown() override { reset_ftrace(); }
};

int gettid_()
{
    return int(syscall(SYS_gettid));
}

} // namespace

TEST_F(ftrace_arrays, instances_mkdir_rmdir_and_their_own_state)
{
    std::vector<std::string> v;
    ASSERT_EQ(T.list("instances", v), 0);
    EXPECT_TRUE(v.empty());
    ASSERT_EQ(T.mkdir("instances/a"), 0);
    EXPECT_EQ(T.mkdir("instances/a"), -EEXIST);
    EXPECT_EQ(T.mkdir("instances/a/b"), -EPERM);
    EXPECT_EQ(T.mkdir("events/x"), -EPERM);
    ASSERT_EQ(T.list("instances", v), 0);
    EXPECT_EQ(v, std::vector<std::string>{"a"});
    ASSERT_EQ(T.list("instances/a", v), 0);
    for (const char *f : {"current_tracer", "trace", "trace_pipe", "tracing_on", "events",
                          "set_ftrace_filter", "snapshot", "trace_marker", "per_cpu", "options"})
        EXPECT_NE(std::find(v.begin(), v.end(), f), v.end()) << f;
    for (const char *f : {"dynamic_events", "set_graph_function", "instances", "stack_trace"})
        EXPECT_EQ(std::find(v.begin(), v.end(), f), v.end()) << f;

    // Its own tracer, filter and buffer.
    ASSERT_EQ(wr("instances/a/set_ftrace_filter", "ta_leaf", true), 0);
    ASSERT_EQ(wr("instances/a/current_tracer", "function"), 0);
    EXPECT_EQ(rd("current_tracer"), "nop\n");
    EXPECT_EQ(rd("set_ftrace_filter"), "#### all functions enabled ####\n");
    ta_leaf(0);
    EXPECT_EQ(body(rd("instances/a/trace")).size(), 1u);
    EXPECT_TRUE(body(rd("trace")).empty());
    ASSERT_EQ(wr("instances/a/tracing_on", "0"), 0);
    ta_leaf(0);
    EXPECT_EQ(body(rd("instances/a/trace")).size(), 1u);
    EXPECT_EQ(rd("tracing_on"), "1\n");

    // An open file of the instance keeps it: rmdir answers EBUSY.
    std::unique_ptr<dprobe::tracefs_file> f;
    ASSERT_EQ(T.open("instances/a/trace_pipe", O_RDONLY | O_NONBLOCK, f), 0);
    EXPECT_EQ(T.rmdir("instances/a"), -EBUSY);
    f.reset();
    EXPECT_EQ(T.rmdir("instances/a"), 0);
    EXPECT_EQ(T.rmdir("instances/a"), -ENOENT);
    dprobe::tracefs_stat st;
    EXPECT_EQ(T.stat("instances/a", st), -ENOENT);
    // The tracer stopped with it: calls cost nothing in a gone instance.
    EXPECT_EQ(rd("enabled_functions").find("ta_leaf"), std::string::npos);
}

TEST_F(ftrace_arrays, events_are_enabled_and_filtered_per_instance)
{
    ASSERT_EQ(wr("dynamic_events", "f:tag/ev ta_leaf a=$arg1:s32"), 0);
    EXPECT_EQ(rd("available_events"), "tag:ev\n");
    ASSERT_EQ(T.mkdir("instances/b"), 0);
    ASSERT_EQ(wr("instances/b/set_event", "tag:ev"), 0);
    EXPECT_EQ(rd("instances/b/set_event"), "tag:ev\n");
    EXPECT_EQ(rd("set_event"), "");
    EXPECT_EQ(rd("instances/b/events/tag/ev/enable"), "1\n");
    EXPECT_EQ(rd("events/tag/ev/enable"), "0\n");
    EXPECT_EQ(rd("instances/b/events/enable"), "1\n");
    ASSERT_EQ(wr("events/tag/ev/enable", "1"), 0);
    ASSERT_EQ(wr("instances/b/events/tag/ev/filter", "a > 5"), 0);
    EXPECT_EQ(rd("events/tag/ev/filter"), "none\n");
    for (int i = 0; i < 10; i++)
        ta_leaf(i);
    EXPECT_EQ(body(rd("trace")).size(), 10u);
    auto b = body(rd("instances/b/trace"));
    ASSERT_EQ(b.size(), 4u);
    EXPECT_TRUE(has(b[0], " ev: (ta_leaf+0x0/") && has(b[0], ") a=6"));
    // set_event_pid of the instance: only listed threads record there.
    ASSERT_EQ(wr("instances/b/trace", "", true), 0);
    ASSERT_EQ(wr("instances/b/set_event_pid", "1"), 0); // no such thread of ours
    ta_leaf(9);
    EXPECT_TRUE(body(rd("instances/b/trace")).empty());
    ASSERT_EQ(wr("instances/b/set_event_pid", std::to_string(gettid_())), 0);
    ta_leaf(9);
    EXPECT_EQ(body(rd("instances/b/trace")).size(), 1u);
    // set_event: "!" removes, O_TRUNC clears, unknown names are EINVAL.
    EXPECT_EQ(wr("instances/b/set_event", "!tag:ev"), 0);
    EXPECT_EQ(rd("instances/b/events/tag/ev/enable"), "0\n");
    EXPECT_EQ(wr("instances/b/set_event", "tag:*"), 0);
    EXPECT_EQ(rd("instances/b/events/tag/ev/enable"), "1\n");
    EXPECT_EQ(wr("instances/b/set_event", "", true), 0);
    EXPECT_EQ(rd("instances/b/set_event"), "");
    EXPECT_EQ(wr("set_event", "tag:nosuch"), -EINVAL);
    EXPECT_EQ(wr("set_event", "ev"), 0); // a bare word names an event (or a system)
    EXPECT_EQ(rd("set_event"), "tag:ev\n");
    // Enabled in the instance, the event cannot be deleted; rmdir lets go of it.
    ASSERT_EQ(wr("events/tag/ev/enable", "0"), 0);
    ASSERT_EQ(wr("instances/b/set_event", "tag:ev"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:tag/ev"), -EBUSY);
    ASSERT_EQ(T.rmdir("instances/b"), 0);
    EXPECT_EQ(wr("dynamic_events", "-:tag/ev"), 0);
}

TEST_F(ftrace_arrays, snapshot_swaps_and_reads)
{
    std::string s = rd("snapshot");
    EXPECT_TRUE(has(s, "# * Snapshot is freed *\n")) << s;
    EXPECT_TRUE(
        has(s, "# echo 1 > snapshot : Allocates snapshot buffer, if not already allocated."));
    ASSERT_EQ(wr("set_ftrace_filter", "ta_leaf", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    ta_leaf(1);
    ta_leaf(2);
    ASSERT_EQ(wr("snapshot", "1"), 0);
    ta_leaf(3);
    EXPECT_EQ(body(rd("snapshot")).size(), 2u);
    EXPECT_EQ(body(rd("trace")).size(), 1u);
    ASSERT_EQ(wr("snapshot", "2"), 0); // clears, stays allocated
    EXPECT_TRUE(has(rd("snapshot"), "# * Snapshot is allocated *\n"));
    ASSERT_EQ(wr("snapshot", "1"), 0);
    EXPECT_EQ(body(rd("snapshot")).size(), 1u);
    EXPECT_TRUE(body(rd("trace")).empty());
    EXPECT_EQ(wr("snapshot", "x"), -EINVAL);
    ASSERT_EQ(wr("snapshot", "0"), 0);
    EXPECT_TRUE(has(rd("snapshot"), "# * Snapshot is freed *\n"));
    // The snapshot command takes one when a function is called.
    ASSERT_EQ(wr("set_ftrace_filter", "ta_deep:snapshot:1"), 0);
    ta_leaf(4);
    ta_deep(0);
    ta_leaf(5);
    auto snap = body(rd("snapshot"));
    ASSERT_EQ(snap.size(), 1u) << rd("snapshot");
    EXPECT_TRUE(has(snap[0], ": ta_leaf <-"));
    EXPECT_TRUE(has(rd("set_ftrace_filter"), "ta_deep:snapshot:count=0\n"));
}

TEST_F(ftrace_arrays, trace_marker_and_raw)
{
    ASSERT_EQ(wr("trace_marker", "hello world\n"), 0);
    ASSERT_EQ(T.write_file("trace_marker", "no newline"), 0);
    ta_mark(7);
    uint32_t raw[2] = {0x1234, 0x04030201};
    ASSERT_EQ(
        T.write_file("trace_marker_raw", std::string(reinterpret_cast<char *>(raw), sizeof raw)),
        0);
    EXPECT_EQ(T.write_file("trace_marker_raw", "ab"), -EINVAL); // shorter than the id
    // A payload that is not a multiple of 4 prints rounded up with zeros, as the kernel
    // prints its 4-byte aligned records.
    ASSERT_EQ(T.write_file("trace_marker_raw", std::string("\x05\0\0\0XYZZY", 9)), 0);
    auto b = body(rd("trace"));
    ASSERT_EQ(b.size(), 5u);
    EXPECT_TRUE(has(b[4], ": # 5 buf: 58 59 5a 5a 59 00 00 00")) << b[4];
    EXPECT_TRUE(has(b[0], ": tracing_mark_write: hello world")) << b[0];
    EXPECT_TRUE(has(b[1], ": tracing_mark_write: no newline")) << b[1];
    EXPECT_TRUE(has(b[2], "-" + std::to_string(gettid_()) + " ") && has(b[2], ": ta_mark: mark 7"))
        << b[2];
    EXPECT_TRUE(has(b[3], ": # 1234 buf: 01 02 03 04")) << b[3];
    ASSERT_EQ(wr("options/markers", "0"), 0);
    EXPECT_EQ(wr("trace_marker", "x"), -EINVAL);
    EXPECT_EQ(dprobe_trace_marker("y"), -EINVAL);
    ASSERT_EQ(wr("options/markers", "1"), 0);
    ASSERT_EQ(wr("tracing_on", "0"), 0);
    EXPECT_EQ(wr("trace_marker", "x"), -EBADF); // the kernel's answer when tracing is off
    // A long write takes what one event can hold and returns that count (as the kernel cuts
    // it to its ring buffer's largest event); the writer writes the rest, which becomes the
    // next record (the kernel's selftest 00basic/trace_marker.tc: the line is broken, and
    // the pieces make the whole text).
    ASSERT_EQ(wr("tracing_on", "1"), 0);
    ASSERT_EQ(wr("trace", "", true), 0);
    std::string text(5000, 'z');
    text[0] = 'a';
    text.back() = 'b';
    std::unique_ptr<dprobe::tracefs_file> f;
    ASSERT_EQ(T.open("trace_marker", O_WRONLY, f), 0);
    EXPECT_EQ(f->write(text.data(), text.size(), 0), ssize_t(dprobe::TRACE_MARKER_MAX_SIZE));
    f.reset();
    b = body(rd("trace"));
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].size() - b[0].find("azz"), dprobe::TRACE_MARKER_MAX_SIZE);
    ASSERT_EQ(wr("trace", "", true), 0);
    ASSERT_EQ(T.write_file("trace_marker", text), 0); // write_file writes the rest
    b = body(rd("trace"));
    ASSERT_EQ(b.size(), 2u);
    std::string joined;
    for (const std::string &l : b)
        joined += l.substr(l.find(": tracing_mark_write: ") + 22);
    EXPECT_EQ(joined, text);
}

TEST_F(ftrace_arrays, saved_cmdlines_and_tgids)
{
    ASSERT_EQ(wr("set_ftrace_filter", "ta_leaf", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    int tid = 0;
    std::thread t([&] {
        tid = gettid_();
        pthread_setname_np(pthread_self(), "ta-worker");
        ta_leaf(0);
    });
    t.join();
    ta_leaf(0);
    std::string c = rd("saved_cmdlines");
    EXPECT_TRUE(has(c, std::to_string(tid) + " ta-worker\n")) << c;
    std::string g = rd("saved_tgids");
    EXPECT_TRUE(has(g, std::to_string(tid) + " " + std::to_string(getpid()) + "\n")) << g;
    // The exited thread's name stays in the trace.
    EXPECT_TRUE(has(rd("trace"), "ta-worker-" + std::to_string(tid)));
}

TEST_F(ftrace_arrays, function_profile)
{
    ASSERT_EQ(wr("set_ftrace_filter", "ta_leaf ta_deep", true), 0);
    EXPECT_EQ(rd("function_profile_enabled"), "0\n");
    // One file per possible CPU, as the kernel's (func_profile_stat.tc reads function0).
    const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    std::vector<std::string> files;
    ASSERT_EQ(T.list("trace_stat", files), 0);
    ASSERT_EQ(long(files.size()), ncpu);
    for (long c = 0; c < ncpu; c++)
        EXPECT_EQ(files[size_t(c)], "function" + std::to_string(c));
    dprobe::tracefs_stat st;
    EXPECT_EQ(T.stat("trace_stat/function", st), -ENOENT); // no per-process sum

    ASSERT_EQ(wr("function_profile_enabled", "1"), 0);
    // Pinned: the calls land in the file of the CPU they ran on.
    cpu_set_t old_set;
    ASSERT_EQ(sched_getaffinity(0, sizeof old_set, &old_set), 0);
    int first = -1, second = -1; // two CPUs this thread may run on (one on a 1-CPU machine)
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &old_set)) continue;
        if (first < 0)
            first = c;
        else if (second < 0)
            second = c;
    }
    ASSERT_GE(first, 0);
    auto pin = [](int c) {
        cpu_set_t s;
        CPU_ZERO(&s);
        CPU_SET(c, &s);
        return sched_setaffinity(0, sizeof s, &s);
    };
    ASSERT_EQ(pin(first), 0);
    for (int i = 0; i < 5; i++)
        ta_leaf(i);
    ta_deep(3); // 4 calls of ta_deep, 1 of ta_leaf
    if (second >= 0) {
        ASSERT_EQ(pin(second), 0);
        ta_leaf(0);
        std::thread([] { ta_leaf(0); }).join(); // a new thread inherits the affinity
    }
    ASSERT_EQ(sched_setaffinity(0, sizeof old_set, &old_set), 0);

    auto hits = [](const std::string &text, const std::string &fn) {
        std::vector<std::string> g;
        for (const std::string &l : lines(text))
            if (matches(l, "^  ([a-z_]+) +([0-9]+)    [0-9.]+ us +[0-9.]+ us +[0-9.]+ us +$", &g) &&
                g[1] == fn)
                return std::stoi(g[2]);
        return 0;
    };
    std::string one = rd("trace_stat/function" + std::to_string(first));
    auto l = lines(one);
    ASSERT_EQ(l.size(), 4u) << one;
    EXPECT_EQ(l[0], "  Function                               Hit    Time            Avg"
                    "             s^2");
    EXPECT_EQ(l[1], "  --------                               ---    ----            ---"
                    "             ---");
    EXPECT_EQ(hits(one, "ta_leaf"), 6) << one;
    EXPECT_EQ(hits(one, "ta_deep"), 4) << one;
    if (second >= 0) {
        std::string two = rd("trace_stat/function" + std::to_string(second));
        EXPECT_EQ(hits(two, "ta_leaf"), 2) << two;
        EXPECT_EQ(hits(two, "ta_deep"), 0) << two;
    }
    // graph-time 0: a function's own time only.
    ASSERT_EQ(wr("options/graph-time", "0"), 0);
    ASSERT_EQ(wr("function_profile_enabled", "0"), 0);
    ASSERT_EQ(wr("function_profile_enabled", "1"), 0); // starts from zero
    EXPECT_EQ(lines(rd("trace_stat/function" + std::to_string(first))).size(), 2u);
    ASSERT_EQ(wr("function_profile_enabled", "2"), -EINVAL);
}

TEST_F(ftrace_arrays, stack_tracer)
{
    std::string t = rd("stack_trace");
    EXPECT_TRUE(has(t, "        Depth    Size   Location    (0 entries)\n"
                       "        -----    ----   --------\n"
                       "#\n#  Stack tracer disabled\n"))
        << t;
    ASSERT_EQ(wr("stack_trace_filter", "ta_deep ta_leaf", true), 0);
    EXPECT_EQ(rd("stack_trace_filter"), "ta_leaf\nta_deep\n"); // address order
    ASSERT_EQ(wr("stack_tracer_enabled", "1"), 0);
    ta_deep(1);
    uint64_t small = std::stoull(rd("stack_max_size"));
    ta_deep(6);
    uint64_t big = std::stoull(rd("stack_max_size"));
    EXPECT_GT(big, small + 5 * 200); // five more frames of at least 200 bytes
    t = rd("stack_trace");
    auto l = lines(t);
    std::vector<std::string> g;
    ASSERT_TRUE(matches(l[0], "\\(([0-9]+) entries\\)$", &g)) << t;
    ASSERT_GE(std::stoul(g[1]), 8u) << t; // ta_leaf, 7 ta_deep, the test's frames
    // Entry 0: the deepest function, at the maximum depth; then its callers, each with the
    // size of its frame, down to the bottom of the stack.
    ASSERT_TRUE(matches(l[2], "^  0\\) +([0-9]+) +([0-9]+)   ta_leaf\\+0x0/0x[0-9a-f]+$", &g)) << t;
    EXPECT_EQ(std::stoull(g[1]), big);
    uint64_t prev = big;
    for (size_t i = 3; i < 10; i++) {
        ASSERT_TRUE(matches(l[i], "^ *[0-9]+\\) +([0-9]+) +([0-9]+)   ta_deep\\+0x", &g)) << t;
        uint64_t depth = std::stoull(g[1]);
        EXPECT_LT(depth, prev);
        EXPECT_GE(std::stoull(g[2]), 200u) << l[i]; // the frame holds its 200-byte array
        prev = depth;
    }
    ASSERT_EQ(wr("stack_max_size", "0"), 0);
    EXPECT_EQ(rd("stack_max_size"), "0\n");
    ASSERT_EQ(wr("stack_tracer_enabled", "0"), 0);
}

TEST_F(ftrace_arrays, ftrace_formats_and_ring_buffer_headers)
{
    std::string f = rd("events/ftrace/function/format");
    EXPECT_EQ(f, "name: function\nID: 1\nformat:\n"
                 "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
                 "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
                 "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
                 "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
                 "\tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n"
                 "\tfield:unsigned long parent_ip;\toffset:16;\tsize:8;\tsigned:0;\n\n"
                 "print fmt: \" %ps <-- %ps\", (void *)REC->ip, (void *)REC->parent_ip\n");
    EXPECT_TRUE(has(rd("events/ftrace/print/format"), "\tfield:char buf[];\toffset:16;\tsize:0;"));
    EXPECT_EQ(rd("events/ftrace/funcgraph_exit/id"), "10\n");
    EXPECT_EQ(rd("events/header_page"), "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
                                        "\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
                                        "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
                                        "\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n");
    EXPECT_TRUE(has(rd("events/header_event"), "\ttype_len    :    5 bits\n"
                                               "\ttime_delta  :   27 bits\n"));
    EXPECT_EQ(wr("events/ftrace/enable", "1"), -EACCES);
}

// events/ftrace/<name>/filter: checked and shown as the kernel's (which no longer applies
// them), per array.
TEST_F(ftrace_arrays, ftrace_event_filter_files)
{
    std::vector<std::string> files;
    ASSERT_EQ(T.list("events/ftrace/function", files), 0);
    EXPECT_EQ(files, (std::vector<std::string>{"filter", "format", "id"}));
    // print, trace_marker's event, has trigger files too (marker_trigger_test.cpp).
    ASSERT_EQ(T.list("events/ftrace/print", files), 0);
    EXPECT_EQ(files, (std::vector<std::string>{"filter", "format", "hist", "hist_debug", "id",
                                               "trigger"}));
    EXPECT_EQ(rd("events/ftrace/print/filter"), "none\n");
    EXPECT_EQ(wr("events/ftrace/funcgraph_entry/filter", "depth > 2 && common_pid != 0"), 0);
    EXPECT_EQ(rd("events/ftrace/funcgraph_entry/filter"), "depth > 2 && common_pid != 0\n");
    EXPECT_EQ(wr("events/ftrace/function/filter", "ip == 'do_work'"), 0);
    EXPECT_EQ(rd("events/ftrace/function/filter"), "ip == 'do_work'\n");
    EXPECT_EQ(wr("events/ftrace/function/filter", "parent_ip == 1"), -EINVAL);
    EXPECT_TRUE(has(rd("events/ftrace/function/filter"),
                    "parse_error: Only 'ip' field is supported for function trace"))
        << rd("events/ftrace/function/filter");
    EXPECT_EQ(wr("events/ftrace/kernel_stack/filter", "nosuch == 1"), -EINVAL);
    EXPECT_TRUE(has(rd("events/ftrace/kernel_stack/filter"), "parse_error: Field not found"));
    // Per array: an instance's files are its own.
    ASSERT_EQ(T.mkdir("instances/ff"), 0);
    EXPECT_EQ(rd("instances/ff/events/ftrace/funcgraph_entry/filter"), "none\n");
    EXPECT_EQ(T.rmdir("instances/ff"), 0);
    // They filter nothing (as the kernel's since 6.12): the records still come.
    ASSERT_EQ(wr("events/ftrace/function/filter", "ip == 'nothing_here'"), 0);
    ASSERT_EQ(wr("set_ftrace_filter", "ta_leaf", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    ta_leaf(1);
    EXPECT_TRUE(has(rd("trace"), "ta_leaf"));
    ASSERT_EQ(wr("current_tracer", "nop"), 0);
    EXPECT_EQ(wr("set_ftrace_filter", "", true), 0);
    for (const char *n : {"function", "funcgraph_entry", "kernel_stack"})
        EXPECT_EQ(wr(std::string("events/ftrace/") + n + "/filter", "0"), 0);
    EXPECT_EQ(rd("events/ftrace/function/filter"), "none\n");
}

TEST_F(ftrace_arrays, per_cpu_raw_pages_decode_with_kbuffer)
{
    ASSERT_EQ(wr("set_ftrace_filter", "ta_leaf", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    const int n = 400; // more than a page's worth (24-byte records + 4-byte headers)
    for (int i = 0; i < n; i++)
        ta_leaf(i);
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    std::vector<std::string> cpus;
    ASSERT_EQ(T.list("per_cpu", cpus), 0);
    ASSERT_EQ(cpus.size(), size_t(ncpu));
    // per_cpu/cpuN/trace: that CPU's records only.
    size_t per = 0;
    for (long c = 0; c < ncpu; c++)
        per += body(rd("per_cpu/cpu" + std::to_string(c) + "/trace")).size();
    EXPECT_EQ(per, size_t(n));
    size_t records = 0, pages = 0;
    uint64_t last_ts = 0;
    for (long c = 0; c < ncpu; c++) {
        std::string raw = rd("per_cpu/cpu" + std::to_string(c) + "/trace_pipe_raw");
        ASSERT_EQ(raw.size() % 4096, 0u);
        kbuffer *kb = kbuffer_alloc(KBUFFER_LSIZE_8, KBUFFER_ENDIAN_LITTLE);
        for (size_t off = 0; off < raw.size(); off += 4096) {
            pages++;
            ASSERT_EQ(kbuffer_load_subbuffer(kb, &raw[off]), 0);
            unsigned long long ts;
            while (void *d = kbuffer_read_event(kb, &ts)) {
                EXPECT_EQ(kbuffer_event_size(kb), 24);
                uint16_t type;
                uint64_t ip;
                std::memcpy(&type, d, 2);
                std::memcpy(&ip, static_cast<char *>(d) + 8, 8);
                EXPECT_EQ(type, 1u);
                EXPECT_GE(ip, reinterpret_cast<uintptr_t>(&ta_leaf));
                EXPECT_LE(ip, reinterpret_cast<uintptr_t>(&ta_leaf) + 4);
                if (ncpu == 1 || c == 0) {
                    EXPECT_GE(ts, last_ts); // in time order within a CPU
                    last_ts = ts;
                }
                records++;
                kbuffer_next_event(kb, nullptr);
            }
        }
        kbuffer_free(kb);
        last_ts = 0;
        // Consumed: the next read has nothing.
        std::string again;
        EXPECT_EQ(T.read_file("per_cpu/cpu" + std::to_string(c) + "/trace_pipe_raw", again), 0);
        EXPECT_TRUE(again.empty());
    }
    EXPECT_EQ(records, size_t(n));
    EXPECT_GE(pages, 3u);
    std::string st = rd("per_cpu/cpu0/stats");
    EXPECT_TRUE(matches(st, "^entries: 0\noverrun: 0\ncommit overrun: 0\nbytes: 0\n"
                            "oldest event ts: +[0-9]+\\.[0-9]{6}\nnow ts: +[0-9]+\\.[0-9]{6}\n"
                            "dropped events: 0\nread events: [0-9]+\n$"))
        << st;
}

TEST(kpage_writer, deltas_extends_long_events_and_missed_counts)
{
    dprobe::kpage_writer w;
    uint64_t small[3] = {1, 2, 3};    // 24 bytes: type_len 6
    std::vector<uint64_t> big(40, 7); // 320 bytes: type_len 0 + length word
    w.add(1000, small, sizeof small, 0);
    w.add(1000 + (1ull << 30), big.data(), big.size() * 8, 0); // needs a time extend
    w.add(1000 + (1ull << 30) + 5, small, sizeof small, 3);    // 3 lost before: a new page
    w.flush();
    ASSERT_EQ(w.pages.size(), 2u);
    kbuffer *kb = kbuffer_alloc(KBUFFER_LSIZE_8, KBUFFER_ENDIAN_LITTLE);
    ASSERT_EQ(kbuffer_load_subbuffer(kb, w.pages[0].data()), 0);
    unsigned long long ts;
    void *d = kbuffer_read_event(kb, &ts);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(ts, 1000u);
    EXPECT_EQ(kbuffer_event_size(kb), 24);
    EXPECT_EQ(std::memcmp(d, small, 24), 0);
    d = kbuffer_next_event(kb, &ts);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(ts, 1000u + (1ull << 30));
    EXPECT_EQ(kbuffer_event_size(kb), 320);
    EXPECT_EQ(std::memcmp(d, big.data(), 320), 0);
    EXPECT_EQ(kbuffer_next_event(kb, &ts), nullptr);
    EXPECT_EQ(kbuffer_missed_events(kb), 0);
    ASSERT_EQ(kbuffer_load_subbuffer(kb, w.pages[1].data()), 0);
    EXPECT_EQ(kbuffer_missed_events(kb), 3);
    d = kbuffer_read_event(kb, &ts);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(ts, 1000u + (1ull << 30) + 5);
    kbuffer_free(kb);
}

// tracing_cpumask (ftrace/func_cpumask.tc): the kernel's "%*pb" text over the possible CPUs,
// bitmap_parse's errors, and only the threads on a CPU of the mask record - in the top
// array and, with a mask of its own, in an instance.
TEST_F(ftrace_arrays, tracing_cpumask_limits_recording_to_its_cpus)
{
    const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    if (ncpu < 2 || ncpu > 32 || sysconf(_SC_NPROCESSORS_ONLN) < 2)
        GTEST_SKIP() << "needs 2 to 32 CPUs, two online";
    char all[16];
    snprintf(all, sizeof all, "%lx\n", (1ul << ncpu) - 1);
    struct restore {
        std::string mask;
        ~restore()
        {
            wr("tracing_cpumask", mask);
            T.rmdir("instances/m");
        }
    } guard{all};
    EXPECT_EQ(rd("tracing_cpumask"), all);
    ASSERT_EQ(wr("tracing_cpumask", "2"), 0);
    EXPECT_EQ(rd("tracing_cpumask"), std::string(size_t((ncpu + 3) / 4 - 1), '0') + "2\n");
    // Errors change nothing.
    EXPECT_EQ(wr("tracing_cpumask", "xyz"), -EINVAL);
    EXPECT_EQ(wr("tracing_cpumask", "1,2"), -EOVERFLOW);       // two chunks for <= 32 CPUs
    EXPECT_EQ(wr("tracing_cpumask", "123456789"), -EOVERFLOW); // 9 digits in a chunk
    char past[16];
    snprintf(past, sizeof past, "%lx", 1ul << ncpu); // the bit of CPU nr_cpu_ids
    EXPECT_EQ(wr("tracing_cpumask", past), -EOVERFLOW);
    EXPECT_EQ(rd("tracing_cpumask").back(), '\n');
    EXPECT_EQ(rd("tracing_cpumask").find_first_not_of('0'), rd("tracing_cpumask").size() - 2);

    ASSERT_EQ(T.mkdir("instances/m"), 0);
    EXPECT_EQ(rd("instances/m/tracing_cpumask"), all); // its own, full
    ASSERT_EQ(wr("instances/m/tracing_cpumask", "1"), 0);
    ASSERT_EQ(wr("set_ftrace_filter", "ta_leaf", true), 0);
    ASSERT_EQ(wr("instances/m/set_ftrace_filter", "ta_leaf", true), 0);
    ASSERT_EQ(wr("current_tracer", "function"), 0);
    ASSERT_EQ(wr("instances/m/current_tracer", "function"), 0);
    std::thread t([] {
        for (int i = 0; i < 6; i++) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(i % 2, &set);
            if (sched_setaffinity(0, sizeof set, &set) == 0) ta_leaf(i);
        }
    });
    t.join();
    auto top = body(rd("trace"));
    auto inst = body(rd("instances/m/trace"));
    ASSERT_EQ(wr("current_tracer", "nop"), 0);
    ASSERT_EQ(wr("instances/m/current_tracer", "nop"), 0);
    ASSERT_EQ(top.size(), 3u);
    for (const std::string &l : top)
        EXPECT_TRUE(has(l, "[001]") && has(l, "ta_leaf")) << l;
    ASSERT_EQ(inst.size(), 3u);
    for (const std::string &l : inst)
        EXPECT_TRUE(has(l, "[000]") && has(l, "ta_leaf")) << l;
}
