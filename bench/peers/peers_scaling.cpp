// How dprobe's costs grow: the hot path with 1, 1,000 and 100,000 other probes registered,
// register/unregister time for 1 to 100,000 functions (an fprobe over them; register_kprobes()
// of a kprobe on each function's patch site, and of one on an ordinary instruction of each,
// jump-optimized; the kprobes once more while another thread keeps calling the functions),
// trace events as `dprobe record -e` sets them up (N p events against one f event on N
// functions), memory per patch site and per thread. The other probes sit on generated functions
// (gen_funcs.py): a 5-byte patchable NOP, then ordinary instructions.
#include "bench/peers/peers.h"
#include "core/ring_buffer.h"
#include "tracefs/trace_events.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <pthread.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

extern "C" {
extern unsigned long (*const peers_fn_table[])(unsigned long);
extern const unsigned peers_fn_count;
}

namespace peers
{

namespace
{

// Offset of the ordinary instruction after each generated function's 5-byte NOP.
constexpr unsigned k_insn_offset = 5;

std::atomic<uint64_t> other_hits, leaf_entries, leaf_exits;
// Hits are counted on the measuring thread only (a busy thread calls the functions too).
thread_local bool counts_hits = true;

int other_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    if (counts_hits) other_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
void other_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *) {}
int other_pre(struct kprobe *, struct pt_regs *)
{
    if (counts_hits) other_hits.fetch_add(1, std::memory_order_relaxed);
    return 0;
}
int leaf_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    leaf_entries.store(leaf_entries.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return 0;
}
void leaf_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    leaf_exits.store(leaf_exits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
int leaf_pre(struct kprobe *, struct pt_regs *)
{
    leaf_entries.store(leaf_entries.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return 0;
}

// Calls each of the first N generated functions once; returns how many of those calls the
// other probes saw.
uint64_t call_others(unsigned n)
{
    uint64_t before = other_hits.load();
    unsigned long x = 0;
    for (unsigned i = 0; i < n; ++i)
        x += peers_fn_table[i](i);
    __asm__ volatile("" ::"r"(x));
    return other_hits.load() - before;
}

// The glob that matches exactly the first N generated functions (N a power of ten).
std::string glob_for(unsigned n)
{
    std::string g = "peers_fn_";
    unsigned digits = 0;
    for (unsigned v = n; v > 1; v /= 10)
        ++digits;
    g += std::string(6 - digits, '0');
    g += std::string(digits, '?');
    return g;
}

struct proc_mem {
    long rss_kb = 0, size_kb = 0;
};

proc_mem read_mem()
{
    proc_mem m;
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("VmRSS:", 0) == 0)
            m.rss_kb = std::stol(line.substr(6));
        else if (line.rfind("VmSize:", 0) == 0)
            m.size_kb = std::stol(line.substr(7));
    }
    return m;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// Wall-clock and CPU time (of the calling thread: on a loaded machine the wall clock also
// counts the time other processes had the CPU) of one step, in ms.
struct step_ms {
    double wall = 0, cpu = 0;
};

template <class F> step_ms timed(F f)
{
    const double w = now_ns(), c = thread_cpu_ns();
    f();
    return {(now_ns() - w) / 1e6, (thread_cpu_ns() - c) / 1e6};
}

// Medians of a series of steps.
struct step_series {
    std::vector<double> wall, cpu;
    void add(step_ms s)
    {
        wall.push_back(s.wall);
        cpu.push_back(s.cpu);
    }
    bool empty() const { return wall.empty(); }
    // ,"KEY_ms":wall,"KEY_cpu_ms":cpu
    void print(const std::string &key) const
    {
        if (!empty())
            std::printf(",\"%s_ms\":%.3f,\"%s_cpu_ms\":%.3f", key.c_str(), median(wall),
                        key.c_str(), median(cpu));
    }
};

// ---- the hot path with other probes registered -------------------------------------

void hot_path(int rounds, unsigned max_funcs)
{
    std::vector<unsigned> counts;
    for (unsigned k : {1u, 1000u, 100000u})
        if (k <= max_funcs && k <= peers_fn_count) counts.push_back(k);
    for (unsigned k : counts) {
        // K other probes: an fprobe over K functions (K patch sites), and a kprobe on each
        // of them (on each function's patch site, [FTRACE]).
        struct fprobe others = {};
        others.entry_handler = other_entry;
        others.exit_handler = other_exit;
        int err = register_fprobe(&others, glob_for(k).c_str(), nullptr);
        const unsigned nk = k;
        std::vector<struct kprobe> kps(nk);
        std::vector<struct kprobe *> kpp(nk);
        for (unsigned i = 0; i < nk; ++i) {
            kps[i].addr = reinterpret_cast<kprobe_opcode_t *>(peers_fn_table[i]);
            kps[i].pre_handler = other_pre;
            kpp[i] = &kps[i];
        }
        int kerr = 0;
        const double kreg_ms =
            timed([&] { kerr = register_kprobes(kpp.data(), static_cast<int>(nk)); }).wall;
        uint64_t seen = call_others(k);
        if (err || kerr || seen != static_cast<uint64_t>(k) + nk) {
            std::printf("{\"kind\":\"hot_path\",\"others\":%u,\"skipped\":\"register: %d/%d, "
                        "%lu of %u hits\"}\n",
                        k, err, kerr, static_cast<unsigned long>(seen), k + nk);
            if (!err) unregister_fprobe(&others);
            if (!kerr) unregister_kprobes(kpp.data(), static_cast<int>(nk));
            continue;
        }
        std::vector<mode> modes;
        {
            auto fp = std::make_shared<struct fprobe>();
            mode m;
            m.tool = "dprobe";
            m.key = "fprobe";
            m.name = "fprobe entry+exit, patch site";
            m.calls = 1000000;
            m.untraced = m.traced = caller_pfe;
            m.arm = [fp]() -> std::string {
                *fp = {};
                fp->entry_handler = leaf_entry;
                fp->exit_handler = leaf_exit;
                return register_fprobe(fp.get(), "leaf_pfe", nullptr) ? "register_fprobe" : "";
            };
            m.disarm = [fp] { unregister_fprobe(fp.get()); };
            m.hits = [] { return std::min(leaf_entries.load(), leaf_exits.load()); };
            modes.push_back(std::move(m));
        }
        {
            auto kp = std::make_shared<struct kprobe>();
            mode m;
            m.tool = "dprobe";
            m.key = "kprobe_opt";
            m.name = "optimized kprobe on ordinary instructions";
            m.calls = 1000000;
            m.untraced = m.traced = caller_plain;
            m.arm = [kp]() -> std::string {
                *kp = {};
                kp->addr = reinterpret_cast<kprobe_opcode_t *>(leaf_plain_insn);
                kp->pre_handler = leaf_pre;
                if (register_kprobe(kp.get())) return "register_kprobe";
                return kprobe_optimized(kp.get()) ? "" : "not optimized";
            };
            m.disarm = [kp] { unregister_kprobe(kp.get()); };
            m.hits = [] { return leaf_entries.load(); };
            modes.push_back(std::move(m));
        }
        // run_rounds prints the modes; tag them with the number of other probes first.
        std::printf("{\"kind\":\"hot_path_begin\",\"others\":%u,\"other_sites\":%u,"
                    "\"other_kprobes\":%u,\"kprobes_register_ms\":%.3f}\n",
                    k, k, nk, kreg_ms);
        run_rounds(modes, rounds);
        std::printf("{\"kind\":\"hot_path_end\",\"others\":%u}\n", k);
        unregister_kprobes(kpp.data(), static_cast<int>(nk));
        unregister_fprobe(&others);
    }
}

// ---- registration time -------------------------------------------------------------

// A thread calling the first N generated functions until told to stop: registration with
// the probed code running (every write then takes the cross-core protocol, the jmps a stop
// of the threads).
class busy_caller
{
  public:
    explicit busy_caller(unsigned n)
        : t_([this, n] {
              counts_hits = false;
              unsigned long x = 0;
              while (!stop_.load(std::memory_order_relaxed))
                  for (unsigned i = 0; i < n; ++i)
                      x += peers_fn_table[i](i);
              __asm__ volatile("" ::"r"(x));
          })
    {
    }
    ~busy_caller()
    {
        stop_.store(true);
        t_.join();
    }

  private:
    std::atomic<bool> stop_{false};
    std::thread t_;
};

struct kprobes_cost {
    step_ms reg, unreg;
    unsigned optimized = 0;
    bool ok = false;
};

// register_kprobes() of a kprobe at OFFSET in each of the first N functions, the hits, then
// unregister_kprobes().
kprobes_cost time_kprobes(unsigned n, unsigned offset)
{
    kprobes_cost c;
    std::vector<struct kprobe> kps(n);
    std::vector<struct kprobe *> kpp(n);
    for (unsigned i = 0; i < n; ++i) {
        kps[i].addr = reinterpret_cast<kprobe_opcode_t *>(peers_fn_table[i]) + offset;
        kps[i].pre_handler = other_pre;
        kpp[i] = &kps[i];
    }
    int err = 0;
    c.reg = timed([&] { err = register_kprobes(kpp.data(), static_cast<int>(n)); });
    if (err) return c;
    for (struct kprobe &k : kps)
        c.optimized += kprobe_optimized(&k) ? 1 : 0;
    c.ok = call_others(n) == n;
    c.unreg = timed([&] { unregister_kprobes(kpp.data(), static_cast<int>(n)); });
    c.ok = c.ok && call_others(n) == 0;
    return c;
}

void registration(int rounds, unsigned max_funcs)
{
    for (unsigned n = 1; n <= max_funcs && n <= peers_fn_count; n *= 10) {
        step_series reg, unreg;
        // kprobes on sites, on instructions; the same with a busy thread.
        step_series kreg[4], kunreg[4];
        unsigned optimized[2] = {n, n};
        bool ok = true;
        for (int r = 0; r < rounds && ok; ++r) {
            struct fprobe fp = {};
            fp.entry_handler = other_entry;
            fp.exit_handler = other_exit;
            int err = 0;
            step_ms t = timed([&] { err = register_fprobe(&fp, glob_for(n).c_str(), nullptr); });
            if (err) {
                ok = false;
                break;
            }
            reg.add(t);
            ok = call_others(n) == n;
            unreg.add(timed([&] { unregister_fprobe(&fp); }));
            ok = ok && call_others(n) == 0;
            for (int v = 0; v < 4 && ok; ++v) {
                std::unique_ptr<busy_caller> busy;
                if (v >= 2) busy = std::make_unique<busy_caller>(n);
                kprobes_cost c = time_kprobes(n, v % 2 ? k_insn_offset : 0);
                ok = c.ok;
                kreg[v].add(c.reg);
                kunreg[v].add(c.unreg);
                if (v % 2) optimized[v / 2] = std::min(optimized[v / 2], c.optimized);
            }
        }
        std::printf("{\"kind\":\"registration\",\"functions\":%u,\"ok\":%s", n,
                    ok ? "true" : "false");
        reg.print("fprobe_register");
        unreg.print("fprobe_unregister");
        static const char *const keys[4] = {"kprobes", "kprobes_insn", "kprobes_busy",
                                            "kprobes_insn_busy"};
        for (int v = 0; v < 4; ++v) {
            kreg[v].print(std::string(keys[v]) + "_register");
            kunreg[v].print(std::string(keys[v]) + "_unregister");
        }
        // The fewest kprobes on instructions found optimized after register_kprobes().
        if (!kreg[1].empty()) std::printf(",\"kprobes_insn_optimized\":%u", optimized[0]);
        if (!kreg[3].empty()) std::printf(",\"kprobes_insn_busy_optimized\":%u", optimized[1]);
        std::printf("}\n");
        std::fflush(stdout);
    }
}

// ---- trace events -----------------------------------------------------------------------

// Trace records attempted (written or dropped) so far.
uint64_t records_attempted()
{
    const dprobe::rb_stats st = dprobe::ring_buffer_stats();
    return st.written + st.dropped;
}

// What `dprobe record -e` does before main, through the tracefs model: lines written to
// dynamic_events, then the events enabled together (events/<group>/enable); N p events on N
// functions (kprobes on their patch sites, and on an ordinary instruction of each) against
// one f event on the same N functions. Then disabled and deleted. Event ids are 16 bits:
// at most 10,000 events.
void trace_event_costs(int rounds, unsigned max_funcs)
{
    using dprobe::trace_events;
    trace_events &te = trace_events::instance();
    dprobe::ring_buffer_set_tracing_on(true);
    for (unsigned n = 1; n <= max_funcs && n <= peers_fn_count && n <= 10000; n *= 10) {
        step_series on[3], off[3];
        bool ok = true;
        for (int r = 0; r < rounds && ok; ++r) {
            for (int v = 0; v < 3 && ok; ++v) {
                std::string text;
                if (v == 0) {
                    text = "f:scaling/fev " + glob_for(n) + "\n";
                } else {
                    char line[96];
                    for (unsigned i = 0; i < n; ++i) {
                        std::snprintf(line, sizeof line, "p:scaling/k%u peers_fn_%06u%s\n", i, i,
                                      v == 2 ? "+5" : "");
                        text += line;
                    }
                }
                on[v].add(timed([&] {
                    ok = te.write_commands(text, dprobe::ACCEPT_DYNAMIC) == 0 &&
                         te.set_group_enabled("scaling", true) == 0;
                }));
                uint64_t before = records_attempted();
                call_others(n);
                ok = ok && records_attempted() - before == n;
                off[v].add(timed([&] {
                    te.set_group_enabled("scaling", false);
                    te.release_all(dprobe::ACCEPT_DYNAMIC);
                }));
                ok = ok && te.nr_events() == 0;
            }
        }
        std::printf("{\"kind\":\"trace_events\",\"functions\":%u,\"ok\":%s", n,
                    ok ? "true" : "false");
        static const char *const keys[3] = {"f_event", "p_events", "p_events_insn"};
        for (int v = 0; v < 3; ++v) {
            on[v].print(std::string(keys[v]) + "_enable");
            off[v].print(std::string(keys[v]) + "_remove");
        }
        std::printf("}\n");
        std::fflush(stdout);
    }
    dprobe::ring_buffer_set_tracing_on(false);
}

// ---- memory ------------------------------------------------------------------------------

void memory(unsigned max_funcs)
{
    const unsigned n = std::min(max_funcs, peers_fn_count);
    call_others(n); // the functions' own pages resident before measuring
    proc_mem m0 = read_mem();
    struct fprobe fp = {};
    fp.entry_handler = other_entry;
    fp.exit_handler = other_exit;
    std::string glob = n == peers_fn_count ? "peers_fn_*" : glob_for(n);
    if (register_fprobe(&fp, glob.c_str(), nullptr) == 0) {
        uint64_t seen = call_others(n);
        proc_mem m1 = read_mem();
        std::printf("{\"kind\":\"memory_site\",\"sites\":%u,\"hits_ok\":%s,\"rss_bytes_per_site\":"
                    "%.1f,\"vm_bytes_per_site\":%.1f}\n",
                    n, seen == n ? "true" : "false", (m1.rss_kb - m0.rss_kb) * 1024.0 / n,
                    (m1.size_kb - m0.size_kb) * 1024.0 / n);
        unregister_fprobe(&fp);
    }

    // Per thread: T threads that each call the probed leaf once and wait, against T threads
    // that call it with no probe registered (their own stacks cancel out).
    const int threads = 64;
    // Small thread stacks, so that glibc's stack cache (40 MB) keeps them all from one run
    // to the next and the two runs differ by dprobe's share only.
    struct park_state {
        std::atomic<int> ready{0};
        std::atomic<bool> go{false};
    };
    auto park = [&](bool probed) {
        park_state ps;
        struct fprobe lp = {};
        lp.entry_handler = leaf_entry;
        lp.exit_handler = leaf_exit;
        if (probed && register_fprobe(&lp, "leaf_pfe", nullptr) != 0) return proc_mem{};
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        std::vector<pthread_t> ts(threads);
        for (int i = 0; i < threads; ++i)
            pthread_create(
                &ts[i], &attr,
                [](void *arg) -> void * {
                    auto *p = static_cast<park_state *>(arg);
                    caller_fn volatile f = caller_pfe;
                    f(1);
                    p->ready.fetch_add(1);
                    while (!p->go.load())
                        usleep(1000);
                    return nullptr;
                },
                &ps);
        pthread_attr_destroy(&attr);
        while (ps.ready.load() < threads)
            usleep(1000);
        proc_mem m = read_mem();
        ps.go.store(true);
        for (pthread_t t : ts)
            pthread_join(t, nullptr);
        if (probed) unregister_fprobe(&lp);
        return m;
    };
    park(false); // thread stacks cached by glibc from here on
    proc_mem plain = park(false);
    uint64_t e0 = leaf_entries.load();
    proc_mem probed = park(true);
    uint64_t hits = leaf_entries.load() - e0;
    std::printf("{\"kind\":\"memory_thread\",\"threads\":%d,\"hits_ok\":%s,"
                "\"rss_bytes_per_thread\":%.1f,\"vm_bytes_per_thread\":%.1f}\n",
                threads, hits == static_cast<uint64_t>(threads) ? "true" : "false",
                (probed.rss_kb - plain.rss_kb) * 1024.0 / threads,
                (probed.size_kb - plain.size_kb) * 1024.0 / threads);
    std::fflush(stdout);
}

} // namespace

void run_scaling(int rounds, unsigned max_funcs)
{
    memory(max_funcs);
    registration(std::max(1, std::min(rounds, 5)), max_funcs);
    trace_event_costs(std::max(1, std::min(rounds, 5)), max_funcs);
    hot_path(rounds, max_funcs);
}

} // namespace peers
