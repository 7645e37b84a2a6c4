// Arguments and return values in the graph (record -a/-A/-R): the agent's fprobes
// (tools/agent/graph_args.cpp, graph_args_light.cpp) hook functions of this process, their
// graph records with values go through an exported ring buffer into a trace file, and the
// file's reader hands each out as the two records it stands for - the compact graph record,
// then the probe record of the values, decoded with the layout's definition - as an older
// file's separate records read. Plain loads ride the light and direct paths (the handlers are
// scanned clean); a string takes the full path. The live readers' expander shows the graph
// part of such a record.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/ftrace_frame.h"
#include "core/ftrace.h"
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tools/agent/graph_args.h"
#include "tools/agent/graph_args_record.h"
#include "tools/trace_drain.h"
#include "tools/trace_file.h"
#include "tools/trace_reader.h"
#include "tracefs/event_format.h"
#include "tracefs/ftrace_entries.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" {
struct gv_pair {
    long first;
    unsigned second;
};
long gv_regs(long a, int b, short c, unsigned char d, const gv_pair *p);
int gv_str(const char *s, int n);
}

using namespace dprobe;
using namespace dprobe::tracefile;

namespace
{

volatile auto regs_fn = gv_regs;
volatile auto str_fn = gv_str;

struct temp_file {
    std::string path;
    int fd;
    temp_file()
    {
        char tmpl[] = "/tmp/dprobe-graph-values-test-XXXXXX";
        fd = mkstemp(tmpl);
        path = tmpl;
        const std::string h = file_header(1);
        write_all(fd, h.data(), h.size());
    }
    ~temp_file()
    {
        ::close(fd);
        unlink(path.c_str());
    }
    void put(const std::string &bytes) { write_all(fd, bytes.data(), bytes.size()); }
};

uintptr_t site_of(const void *fn)
{
    ftrace_update_objects();
    const ftrace_site *s = ftrace_location_or_jump(reinterpret_cast<uintptr_t>(fn));
    return s ? s->ip : 0;
}

// The values of a probe record as text ("a=-5 b=2"), by the layout of event ID.
std::string values_text(uint16_t id, const void *rec, size_t len)
{
    for (const auto &s : agent::graph_args_table->specs)
        if (s->id == id) {
            const std::string t =
                format_probe_record(s->def, static_cast<const uint8_t *>(rec), len, nullptr);
            const size_t p = t.find(") ");
            return p == std::string::npos ? t : t.substr(p + 2);
        }
    return "?";
}

struct read_event {
    uint16_t type;
    bool graph;
    bool entry;
    int depth;
    uint64_t func;
    std::string text; // a values record's
    uint64_t ts;
};

std::vector<read_event> read_all(const trace_reader &r, size_t stream)
{
    std::vector<read_event> out;
    trace_reader::cursor c(r, stream);
    event e;
    while (c.next(e)) {
        read_event x{};
        std::memcpy(&x.type, e.payload, 2);
        x.ts = e.ts;
        if (ftrace_compact_type(e.payload, e.len) == TRACE_GRAPH_ENT ||
            ftrace_compact_type(e.payload, e.len) == TRACE_GRAPH_RET) {
            funcgraph_rec g;
            std::memcpy(&g, e.payload, sizeof g);
            x.graph = true;
            x.entry = g.type == FUNCGRAPH_ENTRY_ID;
            x.depth = g.depth & FUNCGRAPH_DEPTH_MAX;
            x.func = g.func;
        } else {
            trace_entry_header h;
            std::memcpy(&h, e.payload, sizeof h);
            EXPECT_EQ(h.pid, e.tid);
            std::memcpy(&x.func, static_cast<const char *>(e.payload) + 8, 8);
            x.text = values_text(x.type, e.payload, e.len);
        }
        out.push_back(x);
    }
    EXPECT_TRUE(c.error().empty()) << c.error();
    return out;
}

} // namespace

TEST(graph_values, light_handlers_are_clean)
{
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "sanitizer-instrumented handlers are not clean";
#endif
    // What register_fprobe's scan decides the light path by (fprobe/fprobe.cpp).
    EXPECT_TRUE(arch::ext_state_clean(reinterpret_cast<uintptr_t>(agent::graph_args_light_entry)));
    EXPECT_TRUE(arch::ext_state_clean(reinterpret_cast<uintptr_t>(agent::graph_args_light_exit)));
    EXPECT_TRUE(arch::ext_state_clean(reinterpret_cast<uintptr_t>(agent::graph_args_unwound)));
}

TEST(graph_values, recorded_and_read_back_as_graph_and_values_records)
{
    temp_file f;
    const uint64_t sid = 9ull << 32;
    f.put(make_chunk(CHUNK_SESSION, sid, "pid=9\n"));
    trace_clock_init();
    ring_buffer_set_tracing_on(true);
    ring_buffer_set_overwrite(false);
    const int fd = ring_buffer_export(-1);
    ASSERT_GE(fd, 0);
    arena_drain d(f.fd, sid);
    ASSERT_EQ(d.open(dup(fd)), "");

    agent::graph_args_config c;
    // Plain loads (registers, a type's low bytes, an immediate, one dereference and a bad
    // one, which stores zeroes), and a string.
    c.args = {"gv_regs a=$arg1:s64 b=$arg2:s32 c=$arg3:s16 d=$arg4:u8 k=\\7:u32 "
              "second=+8($arg5):u32 bad=+0($arg2):u64",
              "gv_str s=+0($arg1):string n=$arg2:s32"};
    c.retvals = {"gv_regs r=$retval:s64", "gv_str r=$retval:s32"};
    const uintptr_t regs_ip = site_of(reinterpret_cast<void *>(gv_regs));
    const uintptr_t str_ip = site_of(reinterpret_cast<void *>(gv_str));
    ASSERT_NE(regs_ip, 0u);
    ASSERT_NE(str_ip, 0u);
    std::vector<unsigned long> ips{std::min(regs_ip, str_ip), std::max(regs_ip, str_ip)};
    std::string warn, err;
    ASSERT_EQ(agent::graph_args_start(c, ips, &warn, &err), 2) << err;
    EXPECT_TRUE(warn.empty()) << warn;
    EXPECT_TRUE(ips.empty()) << "both hooked by the values' fprobes";

    const gv_pair p1{0, 77}, p2{0, 1};
    EXPECT_EQ(regs_fn(-5, 2, -3, 200, &p1), 271);
    EXPECT_EQ(regs_fn(1L << 40, -1, 7, 1, &p2), (1L << 40) + 8);
    EXPECT_EQ(str_fn("hello", 5), 10 + 'h');
#if !defined(__SANITIZE_ADDRESS__)
    // Past the thread's first hit (which takes the full path), the plain loads' function is
    // on the direct path, the string's on the full one.
    EXPECT_TRUE(ftrace_location(regs_ip)->light.load() & SITE_LIGHT_DIRECT);
    EXPECT_FALSE(ftrace_location(str_ip)->light.load() & SITE_LIGHT_ON);
#endif
    agent::graph_args_stop();
    for (const auto &[id, payload] : agent::graph_args_events())
        f.put(make_chunk(CHUNK_EVENT, sid, payload));
    d.drain(true);
    ASSERT_TRUE(d.finish("reason=exit\nstatus=0\n"));
    EXPECT_EQ(d.lost(), 0u);
    // One record a call's entry and one its exit, as on the plain graph.
    EXPECT_EQ(d.events(), 6u);
    ring_buffer_unexport();
    ring_buffer_set_overwrite(true);

    trace_reader r;
    ASSERT_TRUE(r.open(f.path, &err)) << err;
    ASSERT_EQ(r.streams.size(), 1u);
    for (const auto &[id, ev] : r.sessions[0].events)
        EXPECT_TRUE(ev.flags & EVENT_FL_GRAPH_VALUES) << ev.name;
    const auto evs = read_all(r, 0);
    ASSERT_EQ(evs.size(), 12u);
    const struct {
        bool graph, entry;
        uint64_t func;
        const char *text;
    } want[] = {
        {true, true, regs_ip, ""},
        {false, false, regs_ip, "a=-5 b=2 c=-3 d=200 k=7 second=77 bad=0"},
        {true, false, regs_ip, ""},
        {false, false, regs_ip, "r=271"},
        {true, true, regs_ip, ""},
        {false, false, regs_ip, "a=1099511627776 b=-1 c=7 d=1 k=7 second=1 bad=0"},
        {true, false, regs_ip, ""},
        {false, false, regs_ip, "r=1099511627784"},
        {true, true, str_ip, ""},
        {false, false, str_ip, "s=\"hello\" n=5"},
        {true, false, str_ip, ""},
        {false, false, str_ip, "r=114"},
    };
    for (size_t i = 0; i < evs.size(); i++) {
        SCOPED_TRACE(i);
        EXPECT_EQ(evs[i].graph, want[i].graph);
        EXPECT_EQ(evs[i].func, want[i].func);
        if (want[i].graph) {
            EXPECT_EQ(evs[i].entry, want[i].entry);
            EXPECT_EQ(evs[i].depth, 0);
        } else {
            EXPECT_GE(evs[i].type, GRAPH_ARGS_FIRST_ID);
            EXPECT_EQ(evs[i].text, want[i].text);
            EXPECT_EQ(evs[i].ts, evs[i - 1].ts) << "the values have their graph record's time";
        }
    }
    // The merged reader hands them out in the same order.
    trace_reader::merged m(r);
    event e;
    size_t si, n = 0;
    while (m.next(e, si)) {
        uint16_t type;
        std::memcpy(&type, e.payload, 2);
        EXPECT_EQ(type, evs[n].graph ? (evs[n].entry ? FUNCGRAPH_ENTRY_ID : FUNCGRAPH_EXIT_ID)
                                     : evs[n].type);
        n++;
    }
    EXPECT_EQ(n, evs.size());
}

// A graph record with values as the agent writes it, by hand: the live readers' expander
// gives its graph part; split, its probe record has the values at the layout's offsets.
TEST(graph_values, split_and_expanded)
{
    uint8_t rec[12 + 8 + 4] = {};
    const uint16_t type = 123, depth = 3 | FTRACE_GRAPH_VALUES_FL_EXIT;
    const uint64_t func = 0x401000, v = 0x1122334455667788;
    std::memcpy(rec, &type, 2);
    std::memcpy(rec + 2, &depth, 2);
    std::memcpy(rec + 4, &func, 8);
    std::memcpy(rec + 12, &v, 8);
    ASSERT_TRUE(ftrace_is_graph_values(rec, sizeof rec));
    EXPECT_EQ(ftrace_compact_type(rec, sizeof rec), 0) << "not a compact record by itself";

    ftrace_full_record full;
    bool unwound = true;
    EXPECT_EQ(ftrace_compact_expander().expand(rec, sizeof rec, 42, 7, full), 0u)
        << "a reader of trace files splits it first";
    ASSERT_EQ(ftrace_compact_expander(true).expand(rec, sizeof rec, 42, 7, full, &unwound),
              sizeof(ftrace_graph_ret_entry));
    EXPECT_EQ(full.ent.type, TRACE_GRAPH_RET);
    EXPECT_EQ(full.ent.pid, 42);
    EXPECT_EQ(full.graph_ret.func, func);
    EXPECT_EQ(full.graph_ret.depth, 3);
    EXPECT_FALSE(unwound);

    ftrace_graph_compact g;
    std::vector<uint8_t> values;
    ASSERT_TRUE(ftrace_graph_values_split(rec, sizeof rec, 42, g, values));
    EXPECT_EQ(g.type, TRACE_GRAPH_RET);
    EXPECT_EQ(g.depth, 3);
    EXPECT_EQ(g.func, func);
    // An exit's layout: header, __probe_func, __probe_ret_ip (0), then the values.
    ASSERT_EQ(values.size(), 24u + 12);
    trace_entry_header h;
    std::memcpy(&h, values.data(), sizeof h);
    EXPECT_EQ(h.type, type);
    EXPECT_EQ(h.pid, 42);
    uint64_t x;
    std::memcpy(&x, values.data() + 8, 8);
    EXPECT_EQ(x, func);
    std::memcpy(&x, values.data() + 16, 8);
    EXPECT_EQ(x, 0u);
    std::memcpy(&x, values.data() + 24, 8);
    EXPECT_EQ(x, v);
}

// An older file (no EVENT_FL_GRAPH_VALUES) has the probe records themselves: read as they are.
TEST(graph_values, older_files_read_as_written)
{
    temp_file f;
    const uint64_t sid = 3ull << 32;
    f.put(make_chunk(CHUNK_SESSION, sid, "pid=3\n"));
    f.put(make_chunk(CHUNK_EVENT, sid,
                     event_payload(100, "graph_args/args100",
                                   "p:graph_args/args100 0x401000 a=$arg1", "format")));
    trace_clock_init();
    ring_buffer_set_tracing_on(true);
    ring_buffer_set_overwrite(false);
    const int fd = ring_buffer_export(-1);
    ASSERT_GE(fd, 0);
    arena_drain d(f.fd, sid);
    ASSERT_EQ(d.open(dup(fd)), "");
    uint8_t probe[24] = {};
    const trace_entry_header h{100, 0, 0, 77};
    std::memcpy(probe, &h, sizeof h);
    void *p = ring_buffer_reserve(sizeof probe);
    ASSERT_NE(p, nullptr);
    std::memcpy(p, probe, sizeof probe);
    ring_buffer_commit(p);
    d.drain(true);
    ASSERT_TRUE(d.finish("reason=exit\n"));
    ring_buffer_unexport();
    ring_buffer_set_overwrite(true);
    trace_reader r;
    std::string err;
    ASSERT_TRUE(r.open(f.path, &err)) << err;
    ASSERT_EQ(r.streams.size(), 1u);
    EXPECT_EQ(r.sessions[0].events.at(100).flags, 0u);
    trace_reader::cursor c(r, 0);
    event e;
    ASSERT_TRUE(c.next(e));
    EXPECT_EQ(e.len, sizeof probe);
    EXPECT_EQ(std::memcmp(e.payload, probe, sizeof probe), 0);
    EXPECT_FALSE(c.next(e));
}
