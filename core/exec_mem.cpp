#include "core/exec_mem.h"

#include "arch/x86_64/text_patching.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace dprobe
{
namespace
{

constexpr size_t region_size = 1 << 20; // 1 MiB: ~40k site stubs
constexpr size_t align = 16;
constexpr uintptr_t reach = (1UL << 31) - region_size - 4096;

struct region {
    uintptr_t rx;
    uint8_t *rw;
    size_t used;
    std::map<size_t, std::vector<uintptr_t>> free_lists; // by size: freed chunks
};

std::mutex lock;
std::vector<region> regions;
size_t mapped_bytes;

bool in_reach(uintptr_t base, uintptr_t lo, uintptr_t hi)
{
    uintptr_t end = base + region_size;
    auto dist = [](uintptr_t a, uintptr_t b) { return a > b ? a - b : b - a; };
    return dist(base, lo) < reach && dist(end, lo) < reach && dist(base, hi) < reach &&
           dist(end, hi) < reach;
}

// Maps a new dual-mapped region somewhere within reach of [lo, hi].
region *map_region(uintptr_t lo, uintptr_t hi)
{
    int fd = memfd_create("dprobe-text", MFD_CLOEXEC);
    if (fd < 0) return nullptr;
    if (ftruncate(fd, region_size) < 0) {
        close(fd);
        return nullptr;
    }
    const long page = sysconf(_SC_PAGESIZE);
    void *rx = MAP_FAILED;
    // Probe candidate addresses moving away from the code, below first (typical free space
    // between the program and the heap is small; below shared libraries there is plenty).
    uintptr_t mid = lo / 2 + hi / 2;
    for (uintptr_t step = 64UL << 20; step < (2UL << 30) && rx == MAP_FAILED; step += 64UL << 20) {
        for (int dir = 0; dir < 2 && rx == MAP_FAILED; ++dir) {
            uintptr_t cand = dir == 0 ? mid - step : mid + step;
            if (dir == 0 && step > mid) continue;
            cand &= ~static_cast<uintptr_t>(page - 1);
            if (!in_reach(cand, lo, hi) || cand < 0x10000) continue;
            void *p = mmap(reinterpret_cast<void *>(cand), region_size, PROT_READ | PROT_EXEC,
                           MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
            if (p == MAP_FAILED) continue;
            if (reinterpret_cast<uintptr_t>(p) != cand) { // old kernels ignore the flag
                munmap(p, region_size);
                continue;
            }
            rx = p;
        }
    }
    if (rx == MAP_FAILED) {
        close(fd);
        return nullptr;
    }
    void *rw = mmap(nullptr, region_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (rw == MAP_FAILED) {
        munmap(rx, region_size);
        return nullptr;
    }
    // int3-fill so a stray jump into unused space traps instead of running garbage.
    arch::fill_trap(static_cast<uint8_t *>(rw), region_size);
    regions.push_back({reinterpret_cast<uintptr_t>(rx), static_cast<uint8_t *>(rw), 0, {}});
    mapped_bytes += region_size;
    return &regions.back();
}

// After fork() the child's regions would still share their pages with the parent (memfd,
// MAP_SHARED): stubs either process writes later would land in the other. Give the child
// its own copy of each region, mapped at the same two addresses.
void unshare_after_fork()
{
    for (auto &r : regions) {
        int fd = memfd_create("dprobe-text", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, region_size) < 0 ||
            pwrite(fd, r.rw, region_size, 0) != static_cast<ssize_t>(region_size)) {
            if (fd >= 0) close(fd);
            continue; // keep sharing rather than lose the code
        }
        mmap(reinterpret_cast<void *>(r.rx), region_size, PROT_READ | PROT_EXEC,
             MAP_SHARED | MAP_FIXED, fd, 0);
        mmap(r.rw, region_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
        close(fd);
    }
}

__attribute__((constructor)) void register_fork_handler()
{
    pthread_atfork(nullptr, nullptr, unshare_after_fork);
}

} // namespace

exec_chunk exec_alloc(uintptr_t near_lo, uintptr_t near_hi, size_t size)
{
    size = (size + align - 1) & ~(align - 1);
    if (size == 0 || size > region_size) return {};
    std::lock_guard<std::mutex> g(lock);
    for (int attempt = 0; attempt < 2; ++attempt) {
        for (auto &r : regions) {
            if (!in_reach(r.rx, near_lo, near_hi)) continue;
            auto it = r.free_lists.find(size);
            if (it != r.free_lists.end() && !it->second.empty()) {
                uintptr_t rx = it->second.back();
                it->second.pop_back();
                return {rx, r.rw + (rx - r.rx), size};
            }
            if (r.used + size <= region_size) {
                uintptr_t rx = r.rx + r.used;
                r.used += size;
                return {rx, r.rw + (rx - r.rx), size};
            }
        }
        if (attempt == 0 && !map_region(near_lo, near_hi)) return {};
    }
    return {};
}

void exec_free(const exec_chunk &chunk)
{
    if (!chunk) return;
    std::lock_guard<std::mutex> g(lock);
    for (auto &r : regions) {
        if (chunk.rx >= r.rx && chunk.rx < r.rx + region_size) {
            arch::fill_trap(chunk.rw, chunk.size);
            r.free_lists[chunk.size].push_back(chunk.rx);
            return;
        }
    }
}

bool exec_mem_contains(uintptr_t addr, size_t len)
{
    std::lock_guard<std::mutex> g(lock);
    return std::any_of(regions.begin(), regions.end(), [&](const region &r) {
        return addr >= r.rx && addr + len <= r.rx + region_size;
    });
}

size_t exec_mem_mapped_bytes()
{
    std::lock_guard<std::mutex> g(lock);
    return mapped_bytes;
}

bool exec_mem_lock_free()
{
    if (!lock.try_lock()) return false;
    lock.unlock();
    return true;
}

std::vector<std::pair<uintptr_t, size_t>> exec_mem_ranges()
{
    std::lock_guard<std::mutex> g(lock);
    std::vector<std::pair<uintptr_t, size_t>> out;
    for (const region &r : regions)
        out.emplace_back(r.rx, region_size);
    return out;
}

void exec_mem_release_all()
{
    std::lock_guard<std::mutex> g(lock);
    for (const region &r : regions) {
        munmap(reinterpret_cast<void *>(r.rx), region_size);
        munmap(r.rw, region_size);
    }
    regions.clear();
    mapped_bytes = 0;
}

} // namespace dprobe
