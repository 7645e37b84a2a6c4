// tracing_cpumask text: the kernel's "%*pb" printing and bitmap_parse() (lib/bitmap-str.c),
// for a user-space process's CPUs. See tracing_cpumask.h.
#include "tracefs/tracing_cpumask.h"

#include "core/ring_buffer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <sys/sysinfo.h>

namespace dprobe
{
namespace
{

constexpr unsigned chunk_bits = 32;

uint32_t chunk_of(const std::vector<uint64_t> &mask, unsigned bit)
{
    const size_t w = bit / 64;
    return w < mask.size() ? static_cast<uint32_t>(mask[w] >> (bit % 64)) : 0;
}

int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// What separates chunks when read from the end: white space and commas.
bool end_of_region(char c)
{
    return c == ',' || std::isspace(static_cast<unsigned char>(c));
}

} // namespace

unsigned cpumask_nr_bits()
{
    const int n = get_nprocs_conf();
    return static_cast<unsigned>(std::clamp(n, 1, static_cast<int>(k_rb_max_cpus)));
}

std::string cpumask_format(const std::vector<uint64_t> &mask, unsigned nbits)
{
    std::string s;
    // The most significant chunk is as wide as the bits it holds; the others 8 digits.
    unsigned width = nbits % chunk_bits ? nbits % chunk_bits : chunk_bits;
    for (int i = static_cast<int>((nbits + chunk_bits - 1) / chunk_bits * chunk_bits - chunk_bits);
         i >= 0; i -= chunk_bits) {
        uint32_t v = chunk_of(mask, static_cast<unsigned>(i));
        if (width < chunk_bits) v &= (uint32_t{1} << width) - 1;
        char buf[16];
        std::snprintf(buf, sizeof buf, "%0*x", static_cast<int>((width + 3) / 4), v);
        if (!s.empty()) s += ',';
        s += buf;
        width = chunk_bits;
    }
    return s + "\n";
}

int cpumask_parse(std::string_view text, unsigned nbits, std::vector<uint64_t> &out)
{
    // Up to the first newline, read from the end one 32-bit chunk at a time.
    text = text.substr(0, text.find('\n'));
    const unsigned nchunks = (nbits + chunk_bits - 1) / chunk_bits;
    std::vector<uint64_t> mask((std::max(nbits, 1u) + 63) / 64, 0);
    long end = static_cast<long>(text.size()) - 1;
    unsigned chunk = 0;
    for (;; chunk++) {
        while (end >= 0 && end_of_region(text[static_cast<size_t>(end)]))
            end--;
        if (end < 0) break;
        if (chunk >= nchunks) return -EOVERFLOW;
        uint32_t v = 0;
        for (unsigned i = 0;; i += 4) {
            if (i == chunk_bits)
                return hex_value(text[static_cast<size_t>(end)]) >= 0 ? -EOVERFLOW : -EINVAL;
            const int d = hex_value(text[static_cast<size_t>(end)]);
            if (d < 0) return -EINVAL;
            v |= static_cast<uint32_t>(d) << i;
            end--;
            if (end < 0 || end_of_region(text[static_cast<size_t>(end)])) break;
        }
        const unsigned bit = chunk * chunk_bits;
        if (bit / 64 < mask.size()) mask[bit / 64] |= static_cast<uint64_t>(v) << (bit % 64);
    }
    // Bits at NBITS and above, within the chunks given, are an overflow.
    for (unsigned b = nbits; b < chunk * chunk_bits; b++)
        if (b / 64 < mask.size() && (mask[b / 64] >> (b % 64) & 1)) return -EOVERFLOW;
    out = std::move(mask);
    return 0;
}

} // namespace dprobe
