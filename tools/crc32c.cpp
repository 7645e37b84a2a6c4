// CRC-32C (see crc32c.h).
#include "tools/crc32c.h"

#include <cstring>

namespace dprobe::tracefile
{

namespace
{

constexpr uint32_t k_poly = 0x82f63b78; // reflected Castagnoli polynomial

struct table {
    uint32_t t[256];
    constexpr table() : t()
    {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ k_poly : c >> 1;
            t[i] = c;
        }
    }
};
constexpr table k_table;

uint32_t soft(uint32_t c, const unsigned char *p, size_t n) noexcept
{
    while (n--)
        c = k_table.t[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

__attribute__((target("sse4.2"))) uint32_t hard(uint32_t c, const unsigned char *p,
                                                size_t n) noexcept
{
    while (n && (reinterpret_cast<uintptr_t>(p) & 7)) {
        c = __builtin_ia32_crc32qi(c, *p++);
        n--;
    }
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        std::memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
    }
    c = static_cast<uint32_t>(c64);
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

// 0: not looked yet, 1: SSE4.2, 2: none (no guard variable: the agent calls this too).
int g_hw = 0;

bool have_sse42() noexcept
{
    int h = __atomic_load_n(&g_hw, __ATOMIC_RELAXED);
    if (!h) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("sse4.2") ? 1 : 2;
        __atomic_store_n(&g_hw, h, __ATOMIC_RELAXED);
    }
    return h == 1;
}

} // namespace

uint32_t crc32c(uint32_t crc, const void *data, size_t len) noexcept
{
    const auto *p = static_cast<const unsigned char *>(data);
    return ~(have_sse42() ? hard(~crc, p, len) : soft(~crc, p, len));
}

} // namespace dprobe::tracefile
