// The table behind hist triggers (the kernel's kernel/trace/tracing_map.{c,h}): a lock-free
// open-addressing hash map from a fixed-size key to an element holding per-value sums.
//
// Invariants, as in the kernel:
//  - Every byte is allocated when the map is created (create + add_*_field + init): a hit
//    never allocates, never locks and never frees; an insert is a few atomic operations.
//  - max_elts = 1 << map_bits elements (the hist `size=`, rounded up to a power of two,
//    bits in [TRACING_MAP_BITS_MIN, TRACING_MAP_BITS_MAX]); the hash table has twice as many
//    slots, so a probe sequence always reaches an empty slot and terminates.
//  - A slot is claimed by a compare-and-swap of its 32-bit hash (0 = empty), then an element
//    is taken from the pool (atomic increment) and published in the slot after its key is
//    written. When the pool is exhausted the slot is given back and the hit counts in
//    drops(); hits() counts the inserts that found or made an element.
//  - Sums are 64-bit atomics (relaxed adds): counts are exact under any number of threads.
//  - An element is never removed while the map lives; clear() resets everything and must
//    not race with inserts that matter (the hist layer pauses the trigger around it).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace dprobe
{

inline constexpr unsigned TRACING_MAP_BITS_DEFAULT = 11;
inline constexpr unsigned TRACING_MAP_BITS_MAX = 17;
inline constexpr unsigned TRACING_MAP_BITS_MIN = 7;
inline constexpr unsigned TRACING_MAP_KEYS_MAX = 3;
inline constexpr unsigned TRACING_MAP_VALS_MAX = 3;
inline constexpr unsigned TRACING_MAP_FIELDS_MAX = TRACING_MAP_KEYS_MAX + TRACING_MAP_VALS_MAX;
inline constexpr unsigned TRACING_MAP_VARS_MAX = 16;
inline constexpr unsigned TRACING_MAP_SORT_KEYS_MAX = 2;

// Compares two keys' fields (the pointers are at the field's offset inside each key).
using tracing_map_cmp_fn = int (*)(const void *a, const void *b);
tracing_map_cmp_fn tracing_map_cmp_num(unsigned size, bool is_signed);
int tracing_map_cmp_string(const void *a, const void *b);
int tracing_map_cmp_none(const void *a, const void *b);

struct tracing_map_sort_key {
    unsigned field_idx = 0; // the map's field index (sums and keys in the order added)
    bool descending = false;
};

class tracing_map;

// One element: its key, its sums and PRIVATE_SIZE bytes for the user (the hist layer keeps
// the creating thread's comm there, the kernel's hist_elt_data).
struct tracing_map_elt {
    const tracing_map *map;
    uint8_t *key;
    std::atomic<uint64_t> *sums;
    uint8_t *private_data;
    // Hist variables (the kernel's elt->vars and var_set): a value and whether it is set.
    std::atomic<uint64_t> *vars;
    std::atomic<uint8_t> *var_set;
};

class tracing_map
{
  public:
    // -EINVAL for bits out of range or a key size of 0 (as tracing_map_create()).
    static int create(unsigned map_bits, unsigned key_size, size_t private_size,
                      std::unique_ptr<tracing_map> &out);
    ~tracing_map();

    // Fields, before init(): each returns its field index or -EINVAL when full.
    int add_sum_field();
    int add_key_field(unsigned offset, tracing_map_cmp_fn cmp);
    // A variable slot in every element (tracing_map_add_var): its index or -EINVAL when
    // TRACING_MAP_VARS_MAX are taken.
    int add_var();
    // Allocates the elements (all the memory the map will use). 0 or -ENOMEM.
    int init();
    // Called on a new element before it is published (the kernel's ops->elt_init): the hist
    // layer saves the creating thread's comm. Hot path. Set before init().
    void set_elt_init(void (*fn)(tracing_map_elt *elt) noexcept) { elt_init_ = fn; }
    // Whether insert() counts hits() (default on). A user that adds one to a sum of every
    // element it gets (hist's hitcount) has the same number as that sum's total and can spare
    // the shared counter, one locked instruction per hit on a cache line all threads write.
    void set_count_hits(bool on) { count_hits_ = on; }

    // Hot path: the element of KEY (key_size() bytes), created when absent (*CREATED set);
    // nullptr when the map is full (counted in drops()). Wait-free but for the short spin on
    // a slot another thread is publishing.
    tracing_map_elt *insert(const void *key, bool *created = nullptr) noexcept;
    // The element of KEY or nullptr; never creates, counts nothing.
    tracing_map_elt *lookup(const void *key) noexcept;

    static void update_sum(tracing_map_elt *elt, unsigned i, uint64_t n) noexcept
    {
        elt->sums[i].fetch_add(n, std::memory_order_relaxed);
    }
    static uint64_t read_sum(const tracing_map_elt *elt, unsigned i) noexcept
    {
        return elt->sums[i].load(std::memory_order_relaxed);
    }
    // Variables (hot path): set, read, and read-once, which takes the value and unsets it
    // (an inter-event reference consumes the value its event saved: one latency per entry).
    static void set_var(tracing_map_elt *elt, unsigned i, uint64_t n) noexcept
    {
        elt->vars[i].store(n, std::memory_order_relaxed);
        elt->var_set[i].store(1, std::memory_order_release);
    }
    static bool var_set(const tracing_map_elt *elt, unsigned i) noexcept
    {
        return elt->var_set[i].load(std::memory_order_acquire) != 0;
    }
    static uint64_t read_var(const tracing_map_elt *elt, unsigned i) noexcept
    {
        return elt->vars[i].load(std::memory_order_relaxed);
    }
    static bool read_var_once(tracing_map_elt *elt, unsigned i, uint64_t &out) noexcept
    {
        if (!elt->var_set[i].exchange(0, std::memory_order_acq_rel)) return false;
        out = elt->vars[i].load(std::memory_order_relaxed);
        return true;
    }

    // Forgets every element, zeroes hits and drops (tracing_map_clear()).
    void clear();

    // Every element, sorted by KEYS (the first one, then the second among equals);
    // sort_entries() with hitcount ascending is the kernel's default.
    std::vector<const tracing_map_elt *>
    sort_entries(std::span<const tracing_map_sort_key> keys) const;

    uint64_t hits() const noexcept { return hits_.load(std::memory_order_relaxed); }
    uint64_t drops() const noexcept { return drops_.load(std::memory_order_relaxed); }
    unsigned map_bits() const noexcept { return map_bits_; }
    unsigned max_elts() const noexcept { return max_elts_; }
    unsigned key_size() const noexcept { return key_size_; }
    unsigned n_fields() const noexcept { return n_fields_; }
    // Bytes allocated for elements and slots (tests, documentation).
    size_t memory_bytes() const noexcept;

    tracing_map(const tracing_map &) = delete;
    tracing_map &operator=(const tracing_map &) = delete;

  private:
    tracing_map() = default;

    struct entry {
        std::atomic<uint32_t> key; // hash, 0 = free
        std::atomic<uint32_t> val; // element index + 1, 0 = being published
    };
    struct field {
        bool is_key = false;
        unsigned offset = 0; // keys: inside the key; sums: the sum index
        tracing_map_cmp_fn cmp = nullptr;
    };

    tracing_map_elt *get_free_elt() noexcept;
    bool keys_match(const void *key, const tracing_map_elt *elt) const noexcept;
    uint32_t hash(const void *key) const noexcept;

    unsigned map_bits_ = 0, max_elts_ = 0, map_size_ = 0, key_size_ = 0;
    size_t private_size_ = 0;
    unsigned n_fields_ = 0, n_sums_ = 0, n_keys_ = 0, n_vars_ = 0;
    field fields_[TRACING_MAP_FIELDS_MAX];

    void (*elt_init_)(tracing_map_elt *) noexcept = nullptr;
    bool count_hits_ = true;
    std::atomic<uint32_t> next_elt_{0};
    std::atomic<uint64_t> hits_{0}, drops_{0};
    entry *entries_ = nullptr;        // map_size_ slots
    tracing_map_elt *elts_ = nullptr; // max_elts_ elements
    uint8_t *elt_mem_ = nullptr;      // their keys, sums and private data
    size_t elt_mem_size_ = 0;
};

} // namespace dprobe
