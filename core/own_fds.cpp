// dprobe's own file descriptors (see own_fds.h): one bit per descriptor number.
#include "core/own_fds.h"

#include <atomic>
#include <cstdint>

namespace dprobe
{
namespace
{

constexpr int k_words = k_own_fds_max / 64;
std::atomic<uint64_t> fd_bits[k_words];
std::atomic<int> fd_count{0};

bool in_range(int fd)
{
    return fd >= 0 && fd < k_own_fds_max;
}

} // namespace

void own_fd_add(int fd) noexcept
{
    if (!in_range(fd)) return;
    const uint64_t bit = uint64_t{1} << (fd % 64);
    if (!(fd_bits[fd / 64].fetch_or(bit, std::memory_order_acq_rel) & bit))
        fd_count.fetch_add(1, std::memory_order_relaxed);
}

void own_fd_remove(int fd) noexcept
{
    if (!in_range(fd)) return;
    const uint64_t bit = uint64_t{1} << (fd % 64);
    if (fd_bits[fd / 64].fetch_and(~bit, std::memory_order_acq_rel) & bit)
        fd_count.fetch_sub(1, std::memory_order_relaxed);
}

bool own_fd(int fd) noexcept
{
    return in_range(fd) && (fd_bits[fd / 64].load(std::memory_order_acquire) >> (fd % 64) & 1) != 0;
}

int own_fd_next(int from) noexcept
{
    if (from < 0) from = 0;
    if (fd_count.load(std::memory_order_relaxed) == 0) return -1;
    for (int w = from / 64; w < k_words; w++) {
        uint64_t bits = fd_bits[w].load(std::memory_order_acquire);
        if (w == from / 64) bits &= ~uint64_t{0} << (from % 64);
        if (bits) return w * 64 + __builtin_ctzll(bits);
    }
    return -1;
}

} // namespace dprobe
