// The floor (floor_hook.S): what the hardware allows a hook that runs an entry and an exit
// handler with calls and returns paired, on the same workload as dprobe and its peers. Two
// modes: empty handlers that count their hits (matched with dprobe's fprobe row), and
// handlers that record each entry and exit with a TSC stamp into a per-thread buffer, the
// least a function-graph recorder does (matched with dprobe record's row).
#include "bench/peers/peers.h"

#include <x86intrin.h>

extern "C" {
unsigned long caller_floor(unsigned long);
using floor_handler_t = void (*)(unsigned long ip, void *regs);
// Read by floor_hook.S.
extern floor_handler_t floor_entry_handler, floor_exit_handler;
extern __thread unsigned long *floor_shadow_top;
}

namespace
{

uint64_t entries, exits;

void count_entry(unsigned long, void *)
{
    __atomic_store_n(&entries, __atomic_load_n(&entries, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}
void count_exit(unsigned long, void *)
{
    __atomic_store_n(&exits, __atomic_load_n(&exits, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

// One record: the TSC, shifted left by one with the low bit saying exit, and the function.
struct record {
    uint64_t stamp;
    uint64_t ip;
};
constexpr unsigned ring_records = 1u << 12; // wraps: only the cost of writing counts
alignas(64) record ring[ring_records];
uint64_t ring_pos;

inline void put(unsigned long ip, uint64_t exit_bit)
{
    const uint64_t pos = __atomic_load_n(&ring_pos, __ATOMIC_RELAXED);
    ring[pos % ring_records] = {(__rdtsc() << 1) | exit_bit, ip};
    __atomic_store_n(&ring_pos, pos + 1, __ATOMIC_RELAXED);
}
void record_entry(unsigned long ip, void *)
{
    put(ip, 0);
    count_entry(ip, nullptr);
}
void record_exit(unsigned long ip, void *)
{
    put(ip, 1);
    count_exit(ip, nullptr);
}

constexpr unsigned shadow_words = 64;
__thread unsigned long shadow[shadow_words];

void add_floor(std::vector<peers::mode> &modes, const char *key, const char *match,
               const char *name, floor_handler_t entry, floor_handler_t exit, unsigned long calls)
{
    peers::mode m;
    m.tool = "floor";
    m.key = key;
    m.match = match;
    m.name = name;
    m.calls = calls;
    m.untraced = caller_plain; // the same leaf, called directly
    m.traced = caller_floor;
    m.arm = [entry, exit]() -> std::string {
        floor_entry_handler = entry;
        floor_exit_handler = exit;
        floor_shadow_top = shadow; // the measuring thread's; the workload nests one deep
        return "";
    };
    m.hits = [] {
        return std::min(__atomic_load_n(&entries, __ATOMIC_RELAXED),
                        __atomic_load_n(&exits, __ATOMIC_RELAXED));
    };
    modes.push_back(std::move(m));
}

} // namespace

extern "C" {
floor_handler_t floor_entry_handler = count_entry, floor_exit_handler = count_exit;
__thread unsigned long *floor_shadow_top;
}

namespace peers
{

void add_floor_modes(std::vector<mode> &modes, double scale)
{
    auto n = [scale](double c) { return static_cast<unsigned long>(std::max(1000.0, c * scale)); };
    add_floor(modes, "floor", "fprobe", "minimal paired-call hook, empty entry and exit handlers",
              count_entry, count_exit, n(2e6));
    add_floor(modes, "floor_record", "graph",
              "minimal paired-call hook, a TSC-stamped record per entry and per exit", record_entry,
              record_exit, n(2e6));
}

} // namespace peers
