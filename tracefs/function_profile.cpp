// The function profiler (see function_profile.h).
//
// A thread's table is an open-addressing hash of (function, CPU) pairs, mapped on the
// thread's first profiled call and linked into a global list that outlives the thread. Only
// its thread writes it, with relaxed atomic stores; readers sum relaxed loads, one CPU's
// records of every table for trace_stat/function<CPU>. A table that is full counts the
// calls it could not place (the kernel's "profile records exhausted").
#include "tracefs/function_profile.h"

#include "core/compiler.h"
#include "core/ring_buffer.h" // raw_smp_processor_id()
#include "core/trace_clock.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/func_ops.h"
#include "tracefs/function_stat.h"
#include "tracefs/graph_output.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_task.h"
#include "tracefs/tracer.h"
#include "tracefs/tracer_graph.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

namespace dprobe
{
namespace
{

constexpr size_t k_slots = 8192;      // (function, CPU) pairs a thread can hold
constexpr unsigned k_max_depth = 512; // nesting tracked for graph-time off

struct prof_rec {
    std::atomic<uint64_t> ip; // stored last (release): cpu is set when a reader sees it
    std::atomic<uint32_t> cpu;
    std::atomic<uint64_t> hits;
    std::atomic<uint64_t> time;
    std::atomic<uint64_t> time_sq; // sum of squares, for s^2
};

struct prof_table {
    prof_table *next; // global list
    int32_t tid;
    uint32_t gen; // the profiler run it belongs to
    std::atomic<uint64_t> exhausted;
    unsigned depth; // open calls, for the callees' time
    uint64_t sub[k_max_depth];
    prof_rec recs[k_slots];
};

std::atomic<prof_table *> g_tables{nullptr};
std::atomic<uint32_t> g_gen{1};
bool g_enabled = false;
func_ops *const g_ops = new func_ops;

struct prof_data {
    uint64_t calltime;
    uint32_t depth;
    uint32_t cpu; // where the call entered: its time goes with its hit
};

DPROBE_NOPROBE prof_table *my_table() noexcept
{
    trace_task *t = current_trace_task();
    if (!t) return nullptr;
    auto *pt = static_cast<prof_table *>(t->profile.load(std::memory_order_relaxed));
    const uint32_t gen = g_gen.load(std::memory_order_relaxed);
    if (likely(pt && pt->gen == gen && pt->tid == t->tid)) return pt;
    if (pt && pt->tid == t->tid) {
        // This thread's table of an earlier run: reset in place (it stays on the list).
        std::memset(static_cast<void *>(pt->recs), 0, sizeof pt->recs);
        pt->exhausted.store(0, std::memory_order_relaxed);
        pt->depth = 0;
        pt->gen = gen;
        return pt;
    }
    // Pages are touched only where functions land: a thread that calls few functions costs
    // a few pages.
    void *m = mmap(nullptr, sizeof(prof_table), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    pt = static_cast<prof_table *>(m);
    pt->tid = t->tid;
    pt->gen = gen;
    prof_table *head = g_tables.load(std::memory_order_relaxed);
    do {
        pt->next = head;
    } while (!g_tables.compare_exchange_weak(head, pt, std::memory_order_release,
                                             std::memory_order_relaxed));
    t->profile.store(pt, std::memory_order_relaxed);
    return pt;
}

DPROBE_NOPROBE prof_rec *find_rec(prof_table *pt, uint64_t ip, uint32_t cpu) noexcept
{
    size_t h = ((ip + cpu) * 0x9e3779b97f4a7c15ull) >> 51; // 13 bits
    for (size_t i = 0; i < k_slots; i++) {
        prof_rec &r = pt->recs[(h + i) & (k_slots - 1)];
        uint64_t cur = r.ip.load(std::memory_order_relaxed);
        if (cur == ip && r.cpu.load(std::memory_order_relaxed) == cpu) return &r;
        if (cur == 0) {
            r.cpu.store(cpu, std::memory_order_relaxed);
            r.ip.store(ip, std::memory_order_release);
            return &r;
        }
    }
    pt->exhausted.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
}

DPROBE_NOPROBE inline void add(std::atomic<uint64_t> &a, uint64_t v) noexcept
{
    a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
}

DPROBE_NOPROBE int prof_entry(ftrace_ops *, unsigned long ip, unsigned long, struct ftrace_regs *,
                              void *data)
{
    prof_table *pt = my_table();
    if (!pt) return 1;
    // The kernel's function_profile_call() counts in this CPU's table.
    const uint32_t cpu = raw_smp_processor_id();
    if (prof_rec *r = find_rec(pt, ip, cpu)) add(r->hits, 1);
    auto *d = static_cast<prof_data *>(data);
    d->cpu = cpu;
    d->depth = pt->depth;
    if (pt->depth < k_max_depth) pt->sub[pt->depth] = 0;
    pt->depth++;
    d->calltime = trace_clock_now();
    return 0;
}

DPROBE_NOPROBE void prof_exit(ftrace_ops *, unsigned long ip, unsigned long, struct ftrace_regs *,
                              void *data)
{
    const uint64_t now = trace_clock_now();
    prof_table *pt = my_table();
    if (!pt) return;
    auto *d = static_cast<prof_data *>(data);
    pt->depth = d->depth; // frames a longjmp skipped leave no drift
    uint64_t t = now - d->calltime;
    if (d->depth > 0 && d->depth - 1 < k_max_depth)
        pt->sub[d->depth - 1] += t; // the caller's callee time
    if (!trace_array_top().opt(OPT_GRAPH_TIME) && d->depth < k_max_depth)
        t = t > pt->sub[d->depth] ? t - pt->sub[d->depth] : 0;
    // The kernel adds the time in the table of the CPU the function returns on; a thread
    // here moves between CPUs at any instruction, so the call's time goes where its hit
    // went and each file's Avg stays its own calls' time over their count.
    if (prof_rec *r = find_rec(pt, ip, d->cpu)) {
        add(r->time, t);
        add(r->time_sq, t * t);
    }
}

DPROBE_NOPROBE void prof_unwound(ftrace_ops *, void *data)
{
    if (prof_table *pt = my_table()) pt->depth = static_cast<prof_data *>(data)->depth;
}

struct sum {
    uint64_t hits = 0, time = 0, time_sq = 0;
};

// The records of PT made on CPU, added into OUT by function.
void collect(prof_table *pt, long cpu, std::map<uint64_t, sum> &out)
{
    for (const prof_rec &r : pt->recs) {
        uint64_t ip = r.ip.load(std::memory_order_acquire);
        if (!ip || r.cpu.load(std::memory_order_relaxed) != uint32_t(cpu)) continue;
        sum &s = out[ip];
        s.hits += r.hits.load(std::memory_order_relaxed);
        s.time += r.time.load(std::memory_order_relaxed);
        s.time_sq += r.time_sq.load(std::memory_order_relaxed);
    }
}

std::string format(const std::map<uint64_t, sum> &m)
{
    std::vector<function_stat> rows;
    rows.reserve(m.size());
    for (const auto &[ip, s] : m) {
        function_stat r;
        print_ip_sym(r.name, ip, ftrace_print_flags{});
        r.hits = s.hits;
        r.time = s.time;
        r.time_sq = s.time_sq;
        rows.push_back(std::move(r));
    }
    return function_stat_text(std::move(rows), tracing_thresh());
}

} // namespace

bool function_profile_enabled()
{
    std::lock_guard<std::mutex> g(trace_types_lock());
    return g_enabled;
}

int function_profile_set(bool on)
{
    if (on == g_enabled) return 0;
    if (!on) {
        g_ops->stop();
        g_enabled = false;
        return 0;
    }
    // Starting again starts from zero: tables of the old run no longer count.
    g_gen.fetch_add(1, std::memory_order_relaxed);
    trace_array &top = trace_array_top();
    g_ops->ops.entry = prof_entry;
    g_ops->ops.exit = prof_exit;
    g_ops->ops.unwound = prof_unwound;
    g_ops->ops.data_words = sizeof(prof_data) / sizeof(long);
    g_ops->ops.priv = nullptr;
    g_ops->want_all = [&top] { return tracer_functions(top); };
    g_ops->want_loaded = [&top](std::span<const object_ptr> added) {
        return tracer_functions_loaded(top, added);
    };
    if (int err = g_ops->start()) return err;
    g_enabled = true;
    return 0;
}

void function_profile_release_all() noexcept
{
    prof_table *pt = g_tables.exchange(nullptr, std::memory_order_acquire);
    while (pt) {
        prof_table *next = pt->next;
        munmap(pt, sizeof(prof_table));
        pt = next;
    }
}

void function_profile_update()
{
    if (g_enabled) g_ops->update();
}

namespace
{

// The CPUs with a file: every possible one (function0 .. function<N-1>, as the kernel makes
// one per possible CPU, used or not), and any higher one a record names.
std::vector<long> stat_cpus()
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    if (n < 1) n = 1;
    std::vector<long> v;
    for (long c = 0; c < n; c++)
        v.push_back(c);
    const uint32_t gen = g_gen.load(std::memory_order_relaxed);
    for (prof_table *pt = g_tables.load(std::memory_order_acquire); pt; pt = pt->next) {
        if (pt->gen != gen) continue;
        for (const prof_rec &r : pt->recs)
            if (r.ip.load(std::memory_order_acquire) &&
                long(r.cpu.load(std::memory_order_relaxed)) >= n)
                v.push_back(long(r.cpu.load(std::memory_order_relaxed)));
    }
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

} // namespace

std::vector<std::string> trace_stat_files()
{
    std::vector<std::string> v;
    for (long c : stat_cpus())
        v.push_back("function" + std::to_string(c));
    return v;
}

std::string trace_stat_text(const std::string &name)
{
    if (!name.starts_with("function") || name.size() == 8) return "";
    const std::string rest = name.substr(8);
    if (rest.size() > 1 && rest[0] == '0') return ""; // "function01" is no file
    char *end;
    const long cpu = std::strtol(rest.c_str(), &end, 10);
    if (*end || cpu < 0) return "";
    auto cpus = stat_cpus();
    if (!std::binary_search(cpus.begin(), cpus.end(), cpu)) return "";
    const uint32_t gen = g_gen.load(std::memory_order_relaxed);
    std::map<uint64_t, sum> m;
    for (prof_table *pt = g_tables.load(std::memory_order_acquire); pt; pt = pt->next)
        if (pt->gen == gen) collect(pt, cpu, m);
    return format(m);
}

} // namespace dprobe
