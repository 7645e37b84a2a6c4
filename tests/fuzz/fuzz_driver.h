// What a fuzz target provides besides LLVMFuzzerTestOneInput: with libFuzzer nothing else;
// for the standalone driver (standalone_driver.cpp, gcc builds) a generator of pseudo-random
// inputs, so that even without libFuzzer `make check` runs the target on fresh inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// xorshift64: deterministic for a given seed.
struct fuzz_rng {
    uint64_t x;
    uint64_t next()
    {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    }
};

#ifdef DPROBE_FUZZ_STANDALONE
// One input for the target, from RNG.
void dprobe_fuzz_generate(std::vector<uint8_t> &out, fuzz_rng &rng);
#endif
