// The `tracing_cpumask` file's text (the kernel's tracing_cpumask_read/_write, which print
// with "%*pb" and parse with cpumask_parse_user / bitmap_parse): hexadecimal, 32-bit chunks
// separated by commas, most significant first, nr_cpu_ids bits. The mask itself is kept and
// enforced by the ring buffer (ring_buffer_set_cpumask).
//
// Invariants: a mask of nr_cpu_ids bits (the possible CPUs, get_nprocs_conf(), at most
// k_rb_max_cpus); a parse error changes nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

// The number of bits of a cpumask: the possible CPUs (nr_cpu_ids), at most k_rb_max_cpus.
unsigned cpumask_nr_bits();

// "%*pb" of the first NBITS bits of MASK (64-bit words, CPU n is bit n % 64 of word n / 64),
// with a newline: "3\n" for two CPUs, "ffffffff,ffffffff\n" for 64.
std::string cpumask_format(const std::vector<uint64_t> &mask, unsigned nbits);

// bitmap_parse(): OUT gets NBITS bits (the words past them zero). 0, -EINVAL (not a hex
// digit or separator), or -EOVERFLOW (a chunk of more than 8 digits, more chunks than
// NBITS needs, or a bit set at NBITS or above).
int cpumask_parse(std::string_view text, unsigned nbits, std::vector<uint64_t> &out);

} // namespace dprobe
