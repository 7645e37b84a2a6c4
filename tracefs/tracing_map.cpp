// tracing_map: the kernel's lock-free insert (__tracing_map_insert) over memory allocated
// once; the sort the hist file prints with (tracing_map_sort_entries). See tracing_map.h.
#include "tracefs/tracing_map.h"

#include "arch/x86_64/cpu.h"
#include "core/compiler.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dprobe
{
namespace
{

template <typename T> int cmp_num(const void *a, const void *b)
{
    T x, y;
    std::memcpy(&x, a, sizeof(T));
    std::memcpy(&y, b, sizeof(T));
    return x < y ? -1 : (x > y ? 1 : 0);
}

constexpr size_t align8(size_t n)
{
    return (n + 7) & ~size_t{7};
}

} // namespace

tracing_map_cmp_fn tracing_map_cmp_num(unsigned size, bool is_signed)
{
    switch (size) {
    case 8:
        return is_signed ? cmp_num<int64_t> : cmp_num<uint64_t>;
    case 4:
        return is_signed ? cmp_num<int32_t> : cmp_num<uint32_t>;
    case 2:
        return is_signed ? cmp_num<int16_t> : cmp_num<uint16_t>;
    case 1:
        return is_signed ? cmp_num<int8_t> : cmp_num<uint8_t>;
    default:
        return tracing_map_cmp_none;
    }
}

int tracing_map_cmp_string(const void *a, const void *b)
{
    return std::strcmp(static_cast<const char *>(a), static_cast<const char *>(b));
}

int tracing_map_cmp_none(const void *, const void *)
{
    return 0;
}

int tracing_map::create(unsigned map_bits, unsigned key_size, size_t private_size,
                        std::unique_ptr<tracing_map> &out)
{
    if (map_bits < TRACING_MAP_BITS_MIN || map_bits > TRACING_MAP_BITS_MAX || !key_size)
        return -EINVAL;
    std::unique_ptr<tracing_map> m(new tracing_map);
    m->map_bits_ = map_bits;
    m->max_elts_ = 1u << map_bits;
    m->map_size_ = 1u << (map_bits + 1);
    m->key_size_ = key_size;
    m->private_size_ = private_size;
    out = std::move(m);
    return 0;
}

tracing_map::~tracing_map()
{
    std::free(entries_);
    std::free(elts_);
    std::free(elt_mem_);
}

int tracing_map::add_sum_field()
{
    if (n_fields_ >= TRACING_MAP_FIELDS_MAX) return -EINVAL;
    fields_[n_fields_] = field{false, n_sums_++, nullptr};
    return static_cast<int>(n_fields_++);
}

int tracing_map::add_key_field(unsigned offset, tracing_map_cmp_fn cmp)
{
    if (n_fields_ >= TRACING_MAP_FIELDS_MAX) return -EINVAL;
    fields_[n_fields_] = field{true, offset, cmp};
    n_keys_++;
    return static_cast<int>(n_fields_++);
}

int tracing_map::add_var()
{
    if (n_vars_ >= TRACING_MAP_VARS_MAX) return -EINVAL;
    return static_cast<int>(n_vars_++);
}

int tracing_map::init()
{
    entries_ = static_cast<entry *>(std::calloc(map_size_, sizeof(entry)));
    elts_ = static_cast<tracing_map_elt *>(std::calloc(max_elts_, sizeof(tracing_map_elt)));
    const size_t vars_off = align8(key_size_) + n_sums_ * sizeof(uint64_t) + align8(private_size_);
    const size_t stride = vars_off + n_vars_ * sizeof(uint64_t) + align8(n_vars_);
    elt_mem_size_ = stride * max_elts_;
    elt_mem_ =
        static_cast<uint8_t *>(std::aligned_alloc(64, align8(elt_mem_size_ + 63) & ~size_t{63}));
    if (!entries_ || !elts_ || !elt_mem_) return -ENOMEM;
    std::memset(elt_mem_, 0, elt_mem_size_);
    for (unsigned i = 0; i < max_elts_; i++) {
        uint8_t *p = elt_mem_ + stride * i;
        tracing_map_elt &e = elts_[i];
        e.map = this;
        e.key = p;
        e.sums = reinterpret_cast<std::atomic<uint64_t> *>(p + align8(key_size_));
        e.private_data = p + align8(key_size_) + n_sums_ * sizeof(uint64_t);
        e.vars = reinterpret_cast<std::atomic<uint64_t> *>(p + vars_off);
        e.var_set = reinterpret_cast<std::atomic<uint8_t> *>(p + vars_off + n_vars_ * 8);
    }
    return 0;
}

size_t tracing_map::memory_bytes() const noexcept
{
    return map_size_ * sizeof(entry) + max_elts_ * sizeof(tracing_map_elt) + elt_mem_size_;
}

DPROBE_NOPROBE uint32_t tracing_map::hash(const void *key) const noexcept
{
    // Keys are whole u64 words (the hist layer aligns every key field to 8 bytes).
    const auto *p = static_cast<const uint8_t *>(key);
    uint64_t h = 0x243f6a8885a308d3ULL ^ key_size_;
    for (unsigned i = 0; i + 8 <= key_size_; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    for (unsigned i = key_size_ & ~7u; i < key_size_; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    h *= 0xbf58476d1ce4e5b9ULL;
    auto k = static_cast<uint32_t>(h >> 32);
    return k ? k : 1;
}

DPROBE_NOPROBE bool tracing_map::keys_match(const void *key,
                                            const tracing_map_elt *elt) const noexcept
{
    return std::memcmp(key, elt->key, key_size_) == 0;
}

DPROBE_NOPROBE tracing_map_elt *tracing_map::get_free_elt() noexcept
{
    // atomic_fetch_add_unless(&next_elt, 1, max_elts)
    uint32_t idx = next_elt_.load(std::memory_order_relaxed);
    do {
        if (idx >= max_elts_) return nullptr;
    } while (!next_elt_.compare_exchange_weak(idx, idx + 1, std::memory_order_relaxed));
    return &elts_[idx];
}

DPROBE_NOPROBE tracing_map_elt *tracing_map::insert(const void *key, bool *created) noexcept
{
    const uint32_t key_hash = hash(key);
    uint32_t idx = key_hash >> (32 - (map_bits_ + 1));
    unsigned dup_try = 0;
    for (;;) {
        idx &= map_size_ - 1;
        entry &e = entries_[idx];
        uint32_t test_key = e.key.load(std::memory_order_acquire);
        if (test_key && test_key == key_hash) {
            uint32_t v = e.val.load(std::memory_order_acquire);
            if (v && keys_match(key, &elts_[v - 1])) {
                if (count_hits_) hits_.fetch_add(1, std::memory_order_relaxed);
                if (created) *created = false;
                return &elts_[v - 1];
            }
            if (unlikely(!v)) {
                // Another thread is publishing an element with this hash (perhaps this
                // key): look again until it is there.
                if (++dup_try > map_size_) {
                    drops_.fetch_add(1, std::memory_order_relaxed);
                    return nullptr;
                }
                arch::cpu_relax();
                continue;
            }
        }
        if (!test_key) {
            uint32_t expected = 0;
            if (e.key.compare_exchange_strong(expected, key_hash, std::memory_order_acq_rel)) {
                tracing_map_elt *elt = get_free_elt();
                if (!elt) {
                    drops_.fetch_add(1, std::memory_order_relaxed);
                    e.key.store(0, std::memory_order_release);
                    return nullptr;
                }
                std::memcpy(elt->key, key, key_size_);
                if (elt_init_) elt_init_(elt);
                e.val.store(static_cast<uint32_t>(elt - elts_) + 1, std::memory_order_release);
                if (count_hits_) hits_.fetch_add(1, std::memory_order_relaxed);
                if (created) *created = true;
                return elt;
            }
            // Lost the slot: look at what was put there.
            dup_try++;
            continue;
        }
        idx++;
    }
}

DPROBE_NOPROBE tracing_map_elt *tracing_map::lookup(const void *key) noexcept
{
    const uint32_t key_hash = hash(key);
    uint32_t idx = key_hash >> (32 - (map_bits_ + 1));
    for (unsigned n = 0; n < map_size_; n++, idx++) {
        idx &= map_size_ - 1;
        entry &e = entries_[idx];
        uint32_t test_key = e.key.load(std::memory_order_acquire);
        if (!test_key) return nullptr;
        if (test_key == key_hash) {
            uint32_t v = e.val.load(std::memory_order_acquire);
            if (v && keys_match(key, &elts_[v - 1])) return &elts_[v - 1];
        }
    }
    return nullptr;
}

void tracing_map::clear()
{
    next_elt_.store(0, std::memory_order_relaxed);
    hits_.store(0, std::memory_order_relaxed);
    drops_.store(0, std::memory_order_relaxed);
    for (unsigned i = 0; i < map_size_; i++) {
        entries_[i].val.store(0, std::memory_order_relaxed);
        entries_[i].key.store(0, std::memory_order_relaxed);
    }
    std::memset(elt_mem_, 0, elt_mem_size_);
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

std::vector<const tracing_map_elt *>
tracing_map::sort_entries(std::span<const tracing_map_sort_key> keys) const
{
    std::vector<const tracing_map_elt *> v;
    for (unsigned i = 0; i < map_size_; i++) {
        const entry &e = entries_[i];
        uint32_t val = e.val.load(std::memory_order_acquire);
        if (e.key.load(std::memory_order_acquire) && val) v.push_back(&elts_[val - 1]);
    }
    auto cmp_one = [this](const tracing_map_sort_key &k, const tracing_map_elt *a,
                          const tracing_map_elt *b) {
        int r;
        const field &f = fields_[k.field_idx < n_fields_ ? k.field_idx : 0];
        if (f.is_key) {
            r = f.cmp(a->key + f.offset, b->key + f.offset);
        } else {
            uint64_t x = read_sum(a, f.offset), y = read_sum(b, f.offset);
            r = x < y ? -1 : (x > y ? 1 : 0);
        }
        return k.descending ? -r : r;
    };
    std::stable_sort(v.begin(), v.end(), [&](const tracing_map_elt *a, const tracing_map_elt *b) {
        for (const auto &k : keys) {
            int r = cmp_one(k, a, b);
            if (r) return r < 0;
        }
        return false;
    });
    return v;
}

} // namespace dprobe
