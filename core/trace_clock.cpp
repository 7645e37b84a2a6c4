#include "core/trace_clock.h"

#include "arch/x86_64/ext_state.h"

#include <cpuid.h>
#include <time.h>

#include <cerrno>
#include <iterator>
#include <mutex>

namespace dprobe
{

namespace detail
{
trace_clock_state g_trace_clock = {0, 0, 0, 0, {false}, {trace_clock_id::local}};
} // namespace detail

namespace
{

struct clock_desc {
    const char *name;
    trace_clock_id id;
    bool in_ns;
};

// Kernel order (kernel/trace/trace.c trace_clocks[]), minus `uptime`.
constexpr clock_desc k_clocks[] = {
    {"local", trace_clock_id::local, true},      {"global", trace_clock_id::global, true},
    {"counter", trace_clock_id::counter, false}, {"perf", trace_clock_id::perf, true},
    {"mono", trace_clock_id::mono, true},        {"mono_raw", trace_clock_id::mono_raw, true},
    {"boot", trace_clock_id::boot, true},        {"tai", trace_clock_id::tai, true},
    {"x86-tsc", trace_clock_id::x86_tsc, false},
};

uint64_t read_posix(clockid_t c) noexcept
{
    struct timespec ts;
    clock_gettime(c, &ts); // vDSO for MONOTONIC/BOOTTIME/TAI; async-signal-safe
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool cpu_has_invariant_tsc() noexcept
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u) return false;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1u;
}

// One (tsc, CLOCK_MONOTONIC) pair: the tightest bracket of a few tries, TSC at its middle.
struct clock_pair {
    uint64_t tsc, ns;
};
clock_pair sample_pair() noexcept
{
    clock_pair best{0, 0};
    uint64_t best_width = ~0ull;
    for (int i = 0; i < 16; i++) {
        uint64_t t0 = trace_clock_rdtsc();
        uint64_t ns = read_posix(CLOCK_MONOTONIC);
        uint64_t t1 = trace_clock_rdtsc();
        if (t1 - t0 < best_width) {
            best_width = t1 - t0;
            best = {t0 + (t1 - t0) / 2, ns};
        }
    }
    return best;
}

std::once_flag g_init_once;
uint64_t g_tsc_khz;

void calibrate() noexcept
{
    if (!cpu_has_invariant_tsc()) return; // `local` keeps reading CLOCK_MONOTONIC
    clock_pair a = sample_pair();
    struct timespec req = {0, 10 * 1000 * 1000};
    while (nanosleep(&req, &req) != 0 && errno == EINTR) {
    }
    clock_pair b = sample_pair();
    uint64_t dtsc = b.tsc - a.tsc, dns = b.ns - a.ns;
    if (dtsc == 0 || dns == 0 || b.tsc < a.tsc) return;
    auto &s = detail::g_trace_clock;
    s.shift = 32;
    s.mult = static_cast<uint64_t>((static_cast<unsigned __int128>(dns) << s.shift) / dtsc);
    s.base_tsc = b.tsc;
    s.base_ns = b.ns;
    g_tsc_khz = static_cast<uint64_t>(static_cast<unsigned __int128>(dtsc) * 1000000u / dns);
    s.tsc_ready.store(true, std::memory_order_release);
}

} // namespace

namespace detail
{
// Branches and a table, no switch: a compiler turns a switch into a jump table, and the
// indirect jump would hide from arch::ext_state_scan_code() that the handlers reading the
// clock (the function-graph recorder's exit handler among them) never touch the x87
// stack, so every hooked return would set a long double result aside for them.
uint64_t trace_clock_slow(trace_clock_id id) noexcept
{
    // The C library's clock_gettime cannot be scanned (it calls the vDSO through a pointer):
    // the handlers of the light path, which run with the extended state unsaved, read it
    // with that state saved.
    const auto posix = [](clockid_t c) {
        return static_cast<uint64_t>(dprobe_ext_guarded(c, 0, 0, [](long c, long, long) {
            return static_cast<long>(read_posix(static_cast<clockid_t>(c)));
        }));
    };
    if (id == trace_clock_id::local || id == trace_clock_id::global || id == trace_clock_id::perf) {
        if (g_trace_clock.tsc_ready.load(std::memory_order_acquire))
            return tsc_to_ns(g_trace_clock, trace_clock_rdtsc());
        return posix(CLOCK_MONOTONIC);
    }
    if (id == trace_clock_id::counter || id == trace_clock_id::x86_tsc) return trace_clock_rdtsc();
    static constexpr clockid_t posix_clock[] = {
        CLOCK_MONOTONIC, CLOCK_MONOTONIC,     CLOCK_MONOTONIC, CLOCK_MONOTONIC, // local..perf
        CLOCK_MONOTONIC, CLOCK_MONOTONIC_RAW, CLOCK_BOOTTIME,  CLOCK_TAI,       // mono..tai
        CLOCK_MONOTONIC};                                                       // x86_tsc
    const auto i = static_cast<size_t>(id);
    return posix(i < std::size(posix_clock) ? posix_clock[i] : CLOCK_MONOTONIC);
}
} // namespace detail

void trace_clock_init() noexcept
{
    std::call_once(g_init_once, calibrate);
}

bool trace_clock_tsc_calibrated() noexcept
{
    return detail::g_trace_clock.tsc_ready.load(std::memory_order_acquire);
}

uint64_t trace_clock_read(trace_clock_id id) noexcept
{
    return detail::trace_clock_slow(id);
}

uint64_t trace_clock_tsc_to_ns(uint64_t tsc) noexcept
{
    return detail::tsc_to_ns(detail::g_trace_clock, tsc);
}

uint64_t trace_clock_tsc_khz() noexcept
{
    return trace_clock_tsc_calibrated() ? g_tsc_khz : 0;
}

trace_clock_id trace_clock_current() noexcept
{
    return detail::g_trace_clock.current.load(std::memory_order_relaxed);
}

bool trace_clock_in_ns(trace_clock_id id) noexcept
{
    for (const auto &c : k_clocks)
        if (c.id == id) return c.in_ns;
    return true;
}

const char *trace_clock_name(trace_clock_id id) noexcept
{
    for (const auto &c : k_clocks)
        if (c.id == id) return c.name;
    return "?";
}

int trace_clock_set(std::string_view name) noexcept
{
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ' || name.back() == '\t'))
        name.remove_suffix(1);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t'))
        name.remove_prefix(1);
    for (const auto &c : k_clocks) {
        if (name == c.name) {
            detail::g_trace_clock.current.store(c.id, std::memory_order_relaxed);
            return 0;
        }
    }
    return -EINVAL;
}

std::string trace_clock_list()
{
    std::string out;
    trace_clock_id cur = trace_clock_current();
    for (const auto &c : k_clocks) {
        if (!out.empty()) out += ' ';
        if (c.id == cur) {
            out += '[';
            out += c.name;
            out += ']';
        } else {
            out += c.name;
        }
    }
    out += '\n';
    return out;
}

} // namespace dprobe
