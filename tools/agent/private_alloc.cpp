// The agent's allocator (see private_alloc.h). Not on the probe hot path.
//
// A block has a 16-byte header right before it: a magic word with the size class (or
// k_large), then for a large block the distance from its mapping's start. Free blocks of a
// class are kept on a list through their first word.
//
// Whether a pointer is the allocator's is never guessed from the bytes before it (memory of
// another allocator can hold anything there): every mapping is in a table sorted by address,
// and a pointer is ours when it lies in one. The namespace's libraries free through this
// test (arch/x86_64/private_ns.h: what their C library allocated itself goes back to it).
#include "tools/agent/private_alloc.h"

#include "arch/x86_64/raw_syscall.h"
#include "core/ring_buffer.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace dprobe::agent
{

namespace
{

constexpr size_t k_classes[] = {16,   32,   48,   64,   80,   96,    112,   128,   160,
                                192,  224,  256,  320,  384,  448,   512,   640,   768,
                                896,  1024, 1280, 1536, 1792, 2048,  2560,  3072,  3584,
                                4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384};
constexpr unsigned k_nclasses = sizeof k_classes / sizeof k_classes[0];
constexpr uint32_t k_large = 0xffff;
constexpr uint32_t k_magic = 0xd9b0a110;
constexpr size_t k_arena = 1 << 20;
constexpr size_t k_page = 4096;

struct header {
    uint32_t magic;
    uint32_t cls;
    uint64_t offset; // large: from the mapping's start to the block; its length is there
};
static_assert(sizeof(header) == 16);

// The lock: 0 free, 1 held, 2 held with waiters (Drepper's futex mutex).
std::atomic<int> g_lock{0};

void lock() noexcept
{
    int c = 0;
    if (g_lock.compare_exchange_strong(c, 1, std::memory_order_acquire)) return;
    if (c != 2) c = g_lock.exchange(2, std::memory_order_acquire);
    while (c != 0) {
        arch::raw_syscall(SYS_futex, reinterpret_cast<long>(&g_lock), FUTEX_WAIT_PRIVATE, 2, 0);
        c = g_lock.exchange(2, std::memory_order_acquire);
    }
}

void unlock() noexcept
{
    if (g_lock.exchange(0, std::memory_order_release) == 2)
        arch::raw_syscall(SYS_futex, reinterpret_cast<long>(&g_lock), FUTEX_WAKE_PRIVATE, 1);
}

// The agent's streamer allocates while writers may wait for it (streamer.cpp): a signal
// handler that interrupts the holder and hits a probe must not wait, so the holder is a
// thread that never waits for room (ring_buffer_thread_nowait).
struct guard {
    guard()
    {
        ring_buffer_thread_nowait(true);
        lock();
    }
    ~guard()
    {
        unlock();
        ring_buffer_thread_nowait(false);
    }
};

void *free_list[k_nclasses];
char *arena_next = nullptr, *arena_end = nullptr;
// Every mapping, for palloc_release_all: arenas linked through their first word, live large
// blocks through the links after their length.
void *arenas = nullptr;
struct large_base {
    uint64_t len;
    large_base *prev, *next;
};
large_base *larges = nullptr;

// The mappings, [start, end) sorted by start, in a table on pages of its own (doubled when
// full). Under the lock.
struct range {
    uintptr_t start, end;
};
range *ranges = nullptr;
size_t nranges = 0, ranges_cap = 0;

void *map(size_t len) noexcept
{
    long r = arch::raw_syscall(SYS_mmap, 0, static_cast<long>(len), PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return r < 0 && r > -4096 ? nullptr : reinterpret_cast<void *>(r);
}

// The first entry whose end is above P (the one that may hold it).
size_t range_index(uintptr_t p) noexcept
{
    size_t lo = 0, hi = nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].end <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const range *range_of(const void *p) noexcept
{
    const auto a = reinterpret_cast<uintptr_t>(p);
    const size_t i = range_index(a);
    return i < nranges && ranges[i].start <= a ? &ranges[i] : nullptr;
}

bool range_add(uintptr_t start, size_t len) noexcept
{
    if (nranges == ranges_cap) {
        const size_t cap = ranges_cap ? ranges_cap * 2 : k_page / sizeof(range);
        auto *t = static_cast<range *>(map(cap * sizeof(range)));
        if (!t) return false;
        if (ranges) {
            std::memcpy(t, ranges, nranges * sizeof(range));
            arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(ranges),
                              static_cast<long>(ranges_cap * sizeof(range)));
        }
        ranges = t;
        ranges_cap = cap;
    }
    const size_t i = range_index(start);
    std::memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof(range));
    ranges[i] = {start, start + len};
    nranges++;
    return true;
}

void range_remove(const range *r) noexcept
{
    const size_t i = static_cast<size_t>(r - ranges);
    std::memmove(&ranges[i], &ranges[i + 1], (nranges - i - 1) * sizeof(range));
    nranges--;
}

unsigned class_of(size_t size) noexcept
{
    unsigned lo = 0, hi = k_nclasses;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (k_classes[mid] < size)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

header *header_of(const void *p) noexcept
{
    return reinterpret_cast<header *>(const_cast<char *>(static_cast<const char *>(p)) - 16);
}

void *small_alloc(unsigned c) noexcept
{
    guard g;
    if (void *p = free_list[c]) {
        std::memcpy(&free_list[c], p, sizeof(void *));
        return p;
    }
    const size_t need = k_classes[c] + sizeof(header);
    if (static_cast<size_t>(arena_end - arena_next) < need) {
        char *a = static_cast<char *>(map(k_arena));
        if (!a) return nullptr;
        if (!range_add(reinterpret_cast<uintptr_t>(a), k_arena)) {
            arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(a), static_cast<long>(k_arena));
            return nullptr;
        }
        std::memcpy(a, &arenas, sizeof arenas);
        arenas = a;
        arena_next = a + 16;
        arena_end = a + k_arena;
    }
    auto *h = reinterpret_cast<header *>(arena_next);
    arena_next += need;
    h->magic = k_magic;
    h->cls = c;
    h->offset = 0;
    return h + 1;
}

void *large_alloc(size_t size, size_t align) noexcept
{
    if (align < 16) align = 16;
    if (size > (size_t{1} << 46) || align > (size_t{1} << 30)) return nullptr;
    const size_t len =
        (size + align + sizeof(header) + sizeof(large_base) + k_page - 1) & ~(k_page - 1);
    char *base = static_cast<char *>(map(len));
    if (!base) return nullptr;
    auto *lb = reinterpret_cast<large_base *>(base);
    lb->len = len;
    {
        guard g;
        if (!range_add(reinterpret_cast<uintptr_t>(base), len)) {
            arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(base), static_cast<long>(len));
            return nullptr;
        }
        lb->prev = nullptr;
        lb->next = larges;
        if (larges) larges->prev = lb;
        larges = lb;
    }
    uintptr_t p = reinterpret_cast<uintptr_t>(base) + sizeof(large_base) + sizeof(header);
    p = (p + align - 1) & ~(align - 1);
    header *h = header_of(reinterpret_cast<void *>(p));
    h->magic = k_magic;
    h->cls = k_large;
    h->offset = p - reinterpret_cast<uintptr_t>(base);
    return reinterpret_cast<void *>(p);
}

} // namespace

void *palloc(size_t size) noexcept
{
    if (size == 0) size = 1;
    unsigned c = class_of(size);
    return c < k_nclasses ? small_alloc(c) : large_alloc(size, 16);
}

void *palloc_aligned(size_t align, size_t size) noexcept
{
    if (align & (align - 1)) return nullptr;
    if (align <= 16) return palloc(size);
    return large_alloc(size ? size : 1, align);
}

bool pown(const void *p) noexcept
{
    if (!p) return false;
    guard g;
    return range_of(p) != nullptr;
}

void pfree(void *p) noexcept
{
    if (!p) return;
    header *h = header_of(p);
    lock();
    const range *r = range_of(p);
    if (!r || reinterpret_cast<uintptr_t>(p) < r->start + sizeof(header) ||
        (reinterpret_cast<uintptr_t>(p) & 15) || h->magic != k_magic) {
        unlock();
        return; // not ours (should not happen): leave it rather than corrupt anything
    }
    if (h->cls == k_large) {
        auto *lb = reinterpret_cast<large_base *>(r->start);
        if (static_cast<char *>(p) - h->offset != reinterpret_cast<char *>(lb)) {
            unlock();
            return; // not a block's start: left alone, as above
        }
        h->magic = 0;
        if (lb->prev)
            lb->prev->next = lb->next;
        else
            larges = lb->next;
        if (lb->next) lb->next->prev = lb->prev;
        range_remove(r);
        unlock();
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(lb), static_cast<long>(lb->len));
        return;
    }
    std::memcpy(p, &free_list[h->cls], sizeof(void *));
    free_list[h->cls] = p;
    unlock();
}

size_t pusable(const void *p) noexcept
{
    if (!p) return 0;
    const header *h = header_of(p);
    if (h->cls != k_large) return k_classes[h->cls];
    const char *base = static_cast<const char *>(p) - h->offset;
    uint64_t len;
    std::memcpy(&len, base, sizeof len);
    return len - h->offset;
}

void *prealloc(void *p, size_t size) noexcept
{
    if (!p) return palloc(size);
    if (!pown(p))
        return nullptr; // not ours (allocated before the agent took over): its size is unknown
    if (size == 0) {
        pfree(p);
        return nullptr;
    }
    const size_t have = pusable(p);
    if (size <= have && (header_of(p)->cls == k_large || size > have / 2)) return p;
    void *n = palloc(size);
    if (!n) return nullptr;
    std::memcpy(n, p, have < size ? have : size);
    pfree(p);
    return n;
}

void palloc_release_all() noexcept
{
    guard g;
    for (void *a = arenas; a;) {
        void *next;
        std::memcpy(&next, a, sizeof next);
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(a), static_cast<long>(k_arena));
        a = next;
    }
    arenas = nullptr;
    arena_next = arena_end = nullptr;
    for (large_base *lb = larges; lb;) {
        large_base *next = lb->next;
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(lb), static_cast<long>(lb->len));
        lb = next;
    }
    larges = nullptr;
    std::memset(free_list, 0, sizeof free_list);
    if (ranges)
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(ranges),
                          static_cast<long>(ranges_cap * sizeof(range)));
    ranges = nullptr;
    nranges = ranges_cap = 0;
}

void palloc_fork_prepare() noexcept
{
    lock();
}
void palloc_fork_parent() noexcept
{
    unlock();
}
void palloc_fork_child() noexcept
{
    g_lock.store(0, std::memory_order_relaxed);
}

} // namespace dprobe::agent
