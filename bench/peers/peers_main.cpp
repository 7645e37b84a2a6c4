// bench_peers: the in-process half of bench/peers (dprobe's probe kinds and kernel uprobes
// on the common workload; how costs grow). Prints JSON lines; bench/peers/run runs it with
// the other tools and makes the table. Usage:
//   bench_peers [--rounds N] [--scale F] [--only KEY[,KEY...]]   ns per call of each mode
//   bench_peers --scaling [--rounds N] [--max-funcs N]           how cost grows
#include "bench/peers/peers.h"

#include <cpuid.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>

namespace peers
{

double now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double thread_cpu_ns()
{
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double time_run(caller_fn f, unsigned long calls)
{
    caller_fn volatile call = f;
    // CPU time of this thread, in user space and in the kernel (traps, uprobes): time spent
    // preempted by other load on the machine does not count.
    const double t0 = thread_cpu_ns();
    unsigned long x = call(calls);
    const double t = thread_cpu_ns() - t0;
    // The leaf maps x to 5x + 1 (mod 2^64), one call feeding the next: the result is known.
    unsigned long want = 0;
    static unsigned long memo_calls = 0, memo_want = 0;
    if (memo_calls == calls) {
        want = memo_want;
    } else {
        for (unsigned long i = 0; i < calls; ++i)
            want = want * 5 + 1;
        memo_calls = calls;
        memo_want = want;
    }
    if (x != want) {
        std::fprintf(stderr, "bench_peers: the workload computed %#lx, expected %#lx\n", x, want);
        std::abort();
    }
    return t / static_cast<double>(calls);
}

std::string json_escape(const std::string &s)
{
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
            continue;
        }
        o += c;
    }
    return o;
}

namespace
{

std::string json_array(const std::vector<double> &v)
{
    std::ostringstream o;
    o << '[';
    for (size_t i = 0; i < v.size(); ++i) {
        char b[32];
        std::snprintf(b, sizeof b, "%.3f", v[i]);
        o << (i ? "," : "") << b;
    }
    o << ']';
    return o.str();
}

// XINUSE, where the CPU has AVX (upper vector state) and XGETBV with ECX=1.
bool xinuse_readable()
{
    unsigned a, b, c, d;
    return __builtin_cpu_supports("avx") && __get_cpuid_count(0xd, 1, &a, &b, &c, &d) && (a & 4);
}

uint64_t xinuse()
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return lo | static_cast<uint64_t>(hi) << 32;
}

// The upper-state bits one traced call changes, from clean state (the vzeroupper right
// before: nothing in between runs vector code).
int64_t xinuse_change(caller_fn f)
{
    __asm__ volatile("vzeroupper" ::: "memory");
    const uint64_t before = xinuse();
    f(1);
    const uint64_t after = xinuse();
    return static_cast<int64_t>((before ^ after) & 0xe4);
}

} // namespace

void print_json(const mode &m)
{
    std::printf(
        "{\"kind\":\"mode\",\"tool\":\"%s\",\"key\":\"%s\",\"mode\":\"%s\",\"match\":\"%s\","
        "\"calls\":%lu",
        json_escape(m.tool).c_str(), json_escape(m.key).c_str(), json_escape(m.name).c_str(),
        json_escape(m.match).c_str(), m.calls);
    if (!m.skipped.empty()) {
        std::printf(",\"skipped\":\"%s\"}\n", json_escape(m.skipped).c_str());
    } else {
        std::printf(",\"overhead_ns\":%s,\"untraced_ns\":%s", json_array(m.overhead_ns).c_str(),
                    json_array(m.untraced_ns).c_str());
        if (m.hits)
            std::printf(",\"expected_hits\":%lu,\"hits\":%lu",
                        static_cast<unsigned long>(m.expected_hits),
                        static_cast<unsigned long>(m.seen_hits));
        if (m.xinuse_changed >= 0)
            std::printf(",\"xinuse_changed\":%lld", static_cast<long long>(m.xinuse_changed));
        std::printf("}\n");
    }
    std::fflush(stdout);
}

void run_rounds(std::vector<mode> &modes, int rounds)
{
    for (mode &m : modes) // warm the code and the page tables
        if (m.skipped.empty()) time_run(m.untraced, std::min(m.calls, 100000ul));
    for (int r = 0; r < rounds; ++r) {
        for (mode &m : modes) {
            if (!m.skipped.empty()) continue;
            const double before = time_run(m.untraced, m.calls);
            std::string why = m.arm ? m.arm() : "";
            if (!why.empty()) {
                m.skipped = why;
                continue;
            }
            if (r == 0 && xinuse_readable()) m.xinuse_changed = xinuse_change(m.traced);
            const uint64_t h0 = m.hits ? m.hits() : 0;
            const double traced = time_run(m.traced, m.calls);
            const uint64_t h1 = m.hits ? m.hits() : 0;
            if (m.disarm) m.disarm();
            const double after = time_run(m.untraced, m.calls);
            const double base = (before + after) / 2;
            m.overhead_ns.push_back(traced - base);
            m.untraced_ns.push_back(base);
            m.expected_hits += m.calls;
            m.seen_hits += h1 - h0;
        }
    }
    for (const mode &m : modes)
        print_json(m);
}

} // namespace peers

namespace
{

void on_signal(int sig)
{
    peers::uprobe_cleanup();
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

} // namespace

int main(int argc, char **argv)
{
    int rounds = 9;
    double scale = 1.0;
    bool scaling = false;
    unsigned max_funcs = 100000;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        auto arg = [&](const char *name) {
            if (std::strcmp(argv[i], name) != 0) return static_cast<const char *>(nullptr);
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_peers: %s needs a value\n", name);
                std::exit(2);
            }
            return static_cast<const char *>(argv[++i]);
        };
        if (const char *v = arg("--rounds"))
            rounds = std::max(1, std::atoi(v));
        else if (const char *v = arg("--scale"))
            scale = std::max(0.001, std::atof(v));
        else if (const char *v = arg("--max-funcs"))
            max_funcs = static_cast<unsigned>(std::max(1, std::atoi(v)));
        else if (const char *v = arg("--only"))
            only = std::string(",") + v + ",";
        else if (std::strcmp(argv[i], "--scaling") == 0)
            scaling = true;
        else {
            std::fprintf(stderr, "usage: bench_peers [--rounds N] [--scale F] [--only KEY,...]\n"
                                 "       bench_peers --scaling [--rounds N] [--max-funcs N]\n");
            return 2;
        }
    }
    if (scaling) {
        peers::run_scaling(rounds, max_funcs);
        return 0;
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::vector<peers::mode> modes;
    peers::add_dprobe_modes(modes, scale);
    peers::add_uprobe_modes(modes, scale);
    peers::add_floor_modes(modes, scale);
    if (!only.empty())
        modes.erase(std::remove_if(modes.begin(), modes.end(),
                                   [&](const peers::mode &m) {
                                       return only.find("," + m.key + ",") == std::string::npos;
                                   }),
                    modes.end());
    peers::run_rounds(modes, rounds);
    peers::uprobe_cleanup();
    return 0;
}
