// trace_clock: the time source stamped on every ring-buffer record, selected through the
// tracefs `trace_clock` file exactly like the kernel's.
//
// Clocks (kernel order; the kernel's `uptime` (jiffies) has no user-space counterpart and is
// not offered):
//   local     TSC scaled to nanoseconds with a precomputed mult/shift, calibrated against
//             CLOCK_MONOTONIC, so stamps line up with clock_gettime(CLOCK_MONOTONIC). The
//             default. Without an invariant TSC (or before trace_clock_init()) it reads
//             CLOCK_MONOTONIC instead (same unit and origin).
//   global    the kernel's globally-ordered clock. In user space the invariant TSC is already
//             synchronised across CPUs (the kernel checks that at boot), so this is `local`.
//   counter   a raw cycle count (rdtsc), not converted: shown as a plain number.
//   perf      the kernel's perf clock is local_clock(); here too it is `local`.
//   mono      clock_gettime(CLOCK_MONOTONIC) (vDSO).
//   mono_raw  clock_gettime(CLOCK_MONOTONIC_RAW).
//   boot      clock_gettime(CLOCK_BOOTTIME).
//   tai       clock_gettime(CLOCK_TAI).
//   x86-tsc   the raw TSC, not converted.
//
// Recorded stamps are nanoseconds for every clock but `counter` and `x86-tsc`, whose
// records hold cycles and are printed as raw counts (the kernel's `in_ns == 0` clocks).
#pragma once

#include "arch/x86_64/cpu.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dprobe
{

enum class trace_clock_id : uint8_t {
    local,
    global,
    counter,
    perf,
    mono,
    mono_raw,
    boot,
    tai,
    x86_tsc,
};

// Calibrates the TSC against CLOCK_MONOTONIC (about 10 ms, once; later calls return at
// once). Thread-safe, not async-signal-safe. Until it has run, `local` reads CLOCK_MONOTONIC.
void trace_clock_init() noexcept;

// True when `local` is backed by a calibrated invariant TSC.
bool trace_clock_tsc_calibrated() noexcept;

// The current clock's reading: nanoseconds, or cycles for counter/x86-tsc. Hot path:
// noexcept, async-signal-safe, no syscall for the TSC clocks. Defined inline below.
inline uint64_t trace_clock_now() noexcept;

// Reads a given clock (same units as above).
uint64_t trace_clock_read(trace_clock_id id) noexcept;

// `local` computed from a TSC value (nanoseconds, CLOCK_MONOTONIC origin). Exposed for tests.
uint64_t trace_clock_tsc_to_ns(uint64_t tsc) noexcept;

// TSC frequency found by calibration, in kHz (0 if not calibrated).
uint64_t trace_clock_tsc_khz() noexcept;

trace_clock_id trace_clock_current() noexcept;
// True when stamps of clock ID are nanoseconds (printed as seconds.microseconds).
bool trace_clock_in_ns(trace_clock_id id) noexcept;
const char *trace_clock_name(trace_clock_id id) noexcept;

// Selects a clock by name (a trailing newline, as `echo` writes it, is ignored).
// Returns 0 or -EINVAL for an unknown name. The ring buffer must be reset by the caller
// (ring_buffer_set_clock does both), as stamps of different clocks do not compare.
int trace_clock_set(std::string_view name) noexcept;

// The text of the `trace_clock` file: every clock, the current one in brackets, e.g.
// "[local] global counter perf mono mono_raw boot tai x86-tsc\n".
std::string trace_clock_list();

// Raw TSC read.
static inline uint64_t trace_clock_rdtsc() noexcept
{
    return arch::rdtsc();
}

namespace detail
{
// Read-mostly state of the hot path; written once by trace_clock_init, and by
// trace_clock_set. ns = base_ns + ((tsc - base_tsc) * mult) >> shift (128-bit product).
struct trace_clock_state {
    uint64_t base_tsc;
    uint64_t base_ns;
    uint64_t mult;
    uint32_t shift;
    std::atomic<bool> tsc_ready;         // calibrated, invariant TSC (release-published)
    std::atomic<trace_clock_id> current; // selected clock
};
extern trace_clock_state g_trace_clock;

static inline uint64_t tsc_to_ns(const trace_clock_state &s, uint64_t tsc) noexcept
{
    // Signed delta: a TSC read on another CPU may be a hair behind the calibration base.
    int64_t d = static_cast<int64_t>(tsc - s.base_tsc);
    if (__builtin_expect(d < 0, 0))
        return s.base_ns -
               static_cast<uint64_t>((static_cast<unsigned __int128>(-d) * s.mult) >> s.shift);
    return s.base_ns +
           static_cast<uint64_t>((static_cast<unsigned __int128>(d) * s.mult) >> s.shift);
}
uint64_t trace_clock_slow(trace_clock_id id) noexcept;
} // namespace detail

inline uint64_t trace_clock_now() noexcept
{
    const detail::trace_clock_state &s = detail::g_trace_clock;
    // Both loads are plain movs on x86; the acquire orders the mult/base reads after the flag.
    trace_clock_id id = s.current.load(std::memory_order_relaxed);
    if (__builtin_expect(id == trace_clock_id::local, 1) &&
        __builtin_expect(s.tsc_ready.load(std::memory_order_acquire), 1))
        return detail::tsc_to_ns(s, trace_clock_rdtsc());
    return detail::trace_clock_slow(id);
}

} // namespace dprobe
