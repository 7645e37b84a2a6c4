// libtracefs, the kernel's own library, drives this process's dprobe tracefs (mounted with
// FUSE) through its public API: events and formats (tracefs_local_events), kprobe and
// fprobe events (tracefs_kprobe_alloc, tracefs_dynevent_*), tracers and function filters
// (tracefs_tracer_set, tracefs_function_filter), instances, trace_marker (tracefs_printf),
// and the raw per-CPU buffers read back record by record (tracefs_iterate_raw_events,
// libtraceevent's kbuffer underneath) with their fields decoded from the format files.
//
// FUSE is required; with DPROBE_NO_FUSE=1 the tests are skipped.
#include "tracefs/tracefs_fuse.h"
#include "workload.h"

#include <gtest/gtest.h>

extern "C" {
#include <traceevent/event-parse.h>
#include <tracefs/tracefs.h>
}

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace dprobe;

namespace
{

std::string g_mp;

// One decoded record.
struct rec {
    std::string system, name;
    int cpu;
    unsigned long long ts;
    std::map<std::string, unsigned long long> vals;
    std::string str;
};

struct collect_ctx {
    std::vector<rec> recs;
    std::vector<std::string> fields; // to read from each record
};

int collect_cb(struct tep_event *ev, struct tep_record *r, int cpu, void *data)
{
    auto *c = static_cast<collect_ctx *>(data);
    rec x;
    x.system = ev->system;
    x.name = ev->name;
    x.cpu = cpu;
    x.ts = r->ts;
    for (const std::string &f : c->fields) {
        unsigned long long v;
        if (tep_find_field(ev, f.c_str()) &&
            tep_get_field_val(nullptr, ev, f.c_str(), r, &v, 0) == 0)
            x.vals[f] = v;
    }
    if (tep_find_field(ev, "buf")) {
        int len = 0;
        const char *p =
            static_cast<const char *>(tep_get_field_raw(nullptr, ev, "buf", r, &len, 0));
        if (p) x.str.assign(p, strnlen(p, size_t(r->size) - size_t(p - (char *)r->data)));
    }
    c->recs.push_back(x);
    return 0;
}

std::vector<rec> read_raw(tracefs_instance *inst, std::vector<std::string> fields)
{
    collect_ctx c;
    c.fields = std::move(fields);
    tep_handle *tep = tracefs_local_events(nullptr);
    EXPECT_NE(tep, nullptr);
    if (!tep) return {};
    EXPECT_EQ(tracefs_iterate_raw_events(tep, inst, nullptr, 0, collect_cb, &c), 0);
    tep_free(tep);
    return c.recs;
}

std::vector<rec> only(const std::vector<rec> &v, const std::string &name)
{
    std::vector<rec> out;
    for (const rec &r : v)
        if (r.name == name) out.push_back(r);
    return out;
}

std::string read_file(tracefs_instance *inst, const char *f)
{
    char *s = tracefs_instance_file_read(inst, f, nullptr);
    std::string r = s ? s : "";
    free(s);
    return r;
}

class libtracefs_client : public ::testing::Test
{
  protected:
    static void SetUpTestSuite()
    {
        if (std::getenv("DPROBE_NO_FUSE") && std::string(std::getenv("DPROBE_NO_FUSE")) == "1")
            return;
        char tmpl[] = "/tmp/dprobe-libtracefs.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        std::string mp = std::string(tmpl) + "/tracing";
        int r = tracefs_fuse_mount(mp);
        ASSERT_EQ(r, 0) << "FUSE mount failed: " << std::strerror(-r)
                        << " (set DPROBE_NO_FUSE=1 to skip)";
        g_mp = mp;
        ASSERT_EQ(tracefs_set_tracing_dir(const_cast<char *>(g_mp.c_str())), 0);
    }
    static void TearDownTestSuite()
    {
        if (g_mp.empty()) return;
        // libtracefs keeps trace_marker open after tracefs_printf / tracefs_binary_write: an
        // open file keeps a lazily unmounted FUSE connection (and the server's threads
        // reading it) alive, so close them before the server unmounts its own mount.
        tracefs_print_close(nullptr);
        tracefs_binary_close(nullptr);
        tracefs_fuse_unmount();
        rmdir(g_mp.c_str());
        rmdir(g_mp.substr(0, g_mp.rfind('/')).c_str());
    }
    void SetUp() override
    {
        if (g_mp.empty()) GTEST_SKIP() << "DPROBE_NO_FUSE=1";
        ASSERT_STREQ(tracefs_tracing_dir(), g_mp.c_str());
        tracefs_tracer_clear(nullptr);
        tracefs_instance_file_clear(nullptr, "trace");
        tracefs_trace_on(nullptr);
    }
};

} // namespace

TEST_F(libtracefs_client, local_events_parse_every_format)
{
    tep_handle *tep = tracefs_local_events(nullptr);
    ASSERT_NE(tep, nullptr);
    // events/header_page: 8-byte longs, 4096-byte sub-buffers (kbuffer's page geometry).
    EXPECT_EQ(tep_get_header_page_size(tep), 8);
    EXPECT_EQ(tep_get_sub_buffer_size(tep), 4096);
    for (const char *name :
         {"function", "funcgraph_entry", "funcgraph_exit", "print", "kernel_stack", "raw_data"}) {
        tep_event *ev = tep_find_event_by_name(tep, "ftrace", name);
        ASSERT_NE(ev, nullptr) << name;
        EXPECT_EQ(
            ev->id,
            std::atoi(read_file(nullptr, ("events/ftrace/" + std::string(name) + "/id").c_str())
                          .c_str()));
    }
    tep_event *fn = tep_find_event_by_name(tep, "ftrace", "function");
    ASSERT_NE(tep_find_field(fn, "ip"), nullptr);
    EXPECT_EQ(tep_find_field(fn, "parent_ip")->offset, 16);
    tep_free(tep);
    // The tracers libtracefs knows by name.
    char **tr = tracefs_tracers(nullptr);
    ASSERT_NE(tr, nullptr);
    std::vector<std::string> names;
    for (char **p = tr; *p; p++)
        names.push_back(*p);
    tracefs_list_free(tr);
    // (libtracefs leaves nop out of its list.)
    EXPECT_EQ(names, (std::vector<std::string>{"function_graph", "function"}));
}

TEST_F(libtracefs_client, kprobe_kretprobe_and_fprobe_events_read_back_raw)
{
    tracefs_dynevent *kp = tracefs_kprobe_alloc("lt", "kp_work", "lt_work", "a=%di:s32 b=%si:s64");
    ASSERT_NE(kp, nullptr);
    ASSERT_EQ(tracefs_dynevent_create(kp), 0) << read_file(nullptr, "error_log");
    tracefs_dynevent *kr =
        tracefs_kretprobe_alloc("lt", "kr_work", "lt_work", "ret=$retval:s32", 0);
    ASSERT_NE(kr, nullptr);
    ASSERT_EQ(tracefs_dynevent_create(kr), 0) << read_file(nullptr, "error_log");
    // libtracefs 1.6 has no fprobe constructor: the line goes through its file API.
    ASSERT_GE(tracefs_instance_file_append(nullptr, "dynamic_events",
                                           "f:lt/fp_leaf lt_leaf x=$arg1:s32 y=$arg2:s64\n"),
              0)
        << read_file(nullptr, "error_log");

    tracefs_dynevent **all =
        tracefs_dynevent_get_all(TRACEFS_DYNEVENT_KPROBE | TRACEFS_DYNEVENT_KRETPROBE, "lt");
    ASSERT_NE(all, nullptr);
    std::vector<std::string> seen;
    for (tracefs_dynevent **p = all; *p; p++) {
        char *sys = nullptr, *ev = nullptr, *prefix = nullptr, *addr = nullptr, *fmt = nullptr;
        tracefs_dynevent_info(*p, &sys, &ev, &prefix, &addr, &fmt);
        seen.push_back(std::string(prefix) + ":" + sys + "/" + ev + " " + addr);
        free(sys), free(ev), free(prefix), free(addr), free(fmt);
    }
    tracefs_dynevent_list_free(all);
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<std::string>{"p:lt/kp_work lt_work", "r:lt/kr_work lt_work"}));

    ASSERT_EQ(tracefs_event_enable(nullptr, "lt", nullptr), 0);
    const int n = 50;
    lt_run(n);
    ASSERT_EQ(tracefs_event_disable(nullptr, "lt", nullptr), 0);

    auto recs = read_raw(nullptr, {"a", "b", "ret", "x", "y", "__probe_ip"});
    auto kps = only(recs, "kp_work"), krs = only(recs, "kr_work"), fps = only(recs, "fp_leaf");
    ASSERT_EQ(kps.size(), size_t(n));
    ASSERT_EQ(krs.size(), size_t(n));
    ASSERT_EQ(fps.size(), size_t(n));
    const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(kps[i].system, "lt");
        EXPECT_EQ(kps[i].vals["a"], unsigned(i));
        EXPECT_EQ(kps[i].vals["b"], unsigned(100 + i));
        EXPECT_EQ(kps[i].vals["__probe_ip"] & ~0xfull,
                  reinterpret_cast<uintptr_t>(&lt_work) & ~0xfull);
        EXPECT_EQ(int(krs[i].vals["ret"]), 2 * (i + 100 + i));
        EXPECT_EQ(fps[i].vals["x"], unsigned(i));
        EXPECT_EQ(fps[i].vals["y"], unsigned(100 + i));
        EXPECT_LT(kps[i].cpu, ncpu);
        // One thread, in order: each kprobe hit precedes its fprobe entry and its return.
        EXPECT_LE(kps[i].ts, fps[i].ts);
        EXPECT_LE(fps[i].ts, krs[i].ts);
        if (i) {
            EXPECT_LE(kps[i - 1].ts, kps[i].ts);
        }
    }

    EXPECT_EQ(tracefs_dynevent_destroy(kp, false), 0);
    EXPECT_EQ(tracefs_dynevent_destroy(kr, false), 0);
    tracefs_dynevent_free(kp);
    tracefs_dynevent_free(kr);
    EXPECT_GE(tracefs_instance_file_append(nullptr, "dynamic_events", "-:lt/fp_leaf\n"), 0);
    EXPECT_EQ(read_file(nullptr, "dynamic_events"), "");
}

TEST_F(libtracefs_client, function_tracer_and_filter_through_the_api)
{
    // tracefs_function_filter matches against available_filter_functions and writes the
    // line numbers it found there.
    ASSERT_EQ(tracefs_function_filter(nullptr, "lt_leaf", nullptr, TRACEFS_FL_RESET), 0);
    EXPECT_EQ(read_file(nullptr, "set_ftrace_filter"), "lt_leaf\n");
    ASSERT_EQ(tracefs_tracer_set(nullptr, TRACEFS_TRACER_FUNCTION), 0);
    EXPECT_EQ(read_file(nullptr, "current_tracer"), "function\n");
    const int n = 20;
    lt_run(n);
    ASSERT_EQ(tracefs_trace_off(nullptr), 0);
    auto fns = only(read_raw(nullptr, {"ip", "parent_ip"}), "function");
    ASSERT_EQ(fns.size(), size_t(n));
    const uintptr_t leaf = reinterpret_cast<uintptr_t>(&lt_leaf);
    const uintptr_t work = reinterpret_cast<uintptr_t>(&lt_work);
    for (const rec &r : fns) {
        EXPECT_EQ(r.system, "ftrace");
        EXPECT_GE(r.vals.at("ip"), leaf); // the site: the entry, or after its endbr64
        EXPECT_LE(r.vals.at("ip"), leaf + 4);
        EXPECT_GT(r.vals.at("parent_ip"), work); // a return address inside lt_work
        EXPECT_LT(r.vals.at("parent_ip"), work + 64);
    }
    EXPECT_EQ(tracefs_tracer_clear(nullptr), 0);
    EXPECT_EQ(tracefs_function_filter(nullptr, nullptr, nullptr, TRACEFS_FL_RESET), 0);
    EXPECT_EQ(read_file(nullptr, "set_ftrace_filter"), "#### all functions enabled ####\n");
}

TEST_F(libtracefs_client, function_graph_records_pair_up)
{
    ASSERT_EQ(tracefs_function_filter(nullptr, "lt_*", nullptr, TRACEFS_FL_RESET), 0);
    ASSERT_EQ(tracefs_tracer_set(nullptr, TRACEFS_TRACER_FUNCTION_GRAPH), 0);
    lt_run(10);
    ASSERT_EQ(tracefs_trace_off(nullptr), 0);
    auto recs = read_raw(nullptr, {"func", "depth", "calltime", "rettime", "retval"});
    std::vector<rec> g;
    for (const rec &r : recs)
        if (r.name == "funcgraph_entry" || r.name == "funcgraph_exit") g.push_back(r);
    // lt_run { lt_work { lt_leaf } x 10 }: lt_run's entry, then entry/entry/exit/exit at
    // depths 1 and 2 per iteration, then lt_run's return.
    ASSERT_EQ(g.size(), 42u);
    const uintptr_t leaf = reinterpret_cast<uintptr_t>(&lt_leaf);
    const uintptr_t run = reinterpret_cast<uintptr_t>(&lt_run);
    EXPECT_EQ(g.front().name, "funcgraph_entry");
    EXPECT_EQ(g.front().vals.at("depth"), 0u);
    EXPECT_GE(g.front().vals.at("func"), run);
    EXPECT_LE(g.front().vals.at("func"), run + 4);
    EXPECT_EQ(g.back().name, "funcgraph_exit");
    EXPECT_EQ(g.back().vals.at("func"), g.front().vals.at("func"));
    EXPECT_EQ(int(g.back().vals.at("retval")), lt_run(10));
    for (int i = 0; i < 10; i++) {
        const rec *q = &g[size_t(1 + 4 * i)];
        EXPECT_EQ(q[0].name, "funcgraph_entry");
        EXPECT_EQ(q[1].name, "funcgraph_entry");
        EXPECT_EQ(q[2].name, "funcgraph_exit");
        EXPECT_EQ(q[3].name, "funcgraph_exit");
        EXPECT_EQ(q[0].vals.at("depth"), 1u);
        EXPECT_EQ(q[1].vals.at("depth"), 2u);
        EXPECT_EQ(q[2].vals.at("depth"), 2u);
        EXPECT_EQ(q[3].vals.at("depth"), 1u);
        EXPECT_EQ(q[2].vals.at("func"), q[1].vals.at("func"));
        EXPECT_EQ(q[3].vals.at("func"), q[0].vals.at("func"));
        EXPECT_GE(q[2].vals.at("func"), leaf);
        EXPECT_LE(q[2].vals.at("func"), leaf + 4);
        EXPECT_EQ(int(q[2].vals.at("retval")), i + 100 + i);
        EXPECT_EQ(int(q[3].vals.at("retval")), 2 * (i + 100 + i));
        EXPECT_LE(q[2].vals.at("calltime"), q[2].vals.at("rettime"));
        EXPECT_LE(q[3].vals.at("calltime"), q[2].vals.at("calltime"));
        EXPECT_LE(q[2].vals.at("rettime"), q[3].vals.at("rettime"));
    }
    EXPECT_EQ(tracefs_tracer_clear(nullptr), 0);
    tracefs_function_filter(nullptr, nullptr, nullptr, TRACEFS_FL_RESET);
}

TEST_F(libtracefs_client, instance_has_its_own_events_and_buffer)
{
    ASSERT_GE(tracefs_instance_file_append(nullptr, "dynamic_events",
                                           "f:lt/fp_inst lt_leaf x=$arg1:s32\n"),
              0);
    tracefs_instance *inst = tracefs_instance_create("lt_inst");
    ASSERT_NE(inst, nullptr);
    // (libtracefs 1.6's tracefs_instance_exists() looks in the system's tracing directory,
    // whatever tracefs_set_tracing_dir() said: the directory is checked here.)
    struct stat st;
    EXPECT_EQ(stat((g_mp + "/instances/lt_inst").c_str(), &st), 0);
    ASSERT_EQ(tracefs_event_enable(inst, "lt", "fp_inst"), 0);
    EXPECT_EQ(read_file(inst, "events/lt/fp_inst/enable"), "1\n");
    EXPECT_EQ(read_file(nullptr, "events/lt/fp_inst/enable"), "0\n");
    lt_run(7);
    auto in = only(read_raw(inst, {"x"}), "fp_inst");
    ASSERT_EQ(in.size(), 7u);
    for (int i = 0; i < 7; i++)
        EXPECT_EQ(in[size_t(i)].vals["x"], unsigned(i));
    EXPECT_TRUE(only(read_raw(nullptr, {"x"}), "fp_inst").empty());
    ASSERT_EQ(tracefs_event_disable(inst, "lt", "fp_inst"), 0);
    EXPECT_EQ(tracefs_instance_destroy(inst), 0);
    tracefs_instance_free(inst);
    EXPECT_NE(stat((g_mp + "/instances/lt_inst").c_str(), &st), 0);
    EXPECT_GE(tracefs_instance_file_append(nullptr, "dynamic_events", "-:lt/fp_inst\n"), 0);
}

TEST_F(libtracefs_client, trace_marker_through_tracefs_printf_and_binary_write)
{
    ASSERT_EQ(tracefs_printf(nullptr, "hello from libtracefs %d\n", 42), 0);
    uint32_t raw[3] = {0x2a, 0x04030201, 0x08070605};
    ASSERT_EQ(tracefs_binary_write(nullptr, raw, sizeof raw), 0);
    auto recs = read_raw(nullptr, {"id"});
    auto prints = only(recs, "print");
    ASSERT_EQ(prints.size(), 1u);
    EXPECT_EQ(prints[0].str, "hello from libtracefs 42\n");
    auto raws = only(recs, "raw_data");
    ASSERT_EQ(raws.size(), 1u);
    EXPECT_EQ(raws[0].vals["id"], 0x2au);
}
