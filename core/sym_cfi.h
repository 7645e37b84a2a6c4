// Function extents from call-frame information, for code no symbol covers: the .eh_frame
// FDE (or .debug_frame) that describes an address gives the start and end of the function
// (or of its cold part) that contains it. A stripped object (the python3 interpreter of a
// distribution, say) has only its exported functions in .dynsym, while every function
// compiled with unwind tables has an FDE; kprobes use this to check instruction boundaries
// and to decode a function for jump optimization where kallsyms knows nothing.
// Thread-safe; the first query on an object reads its call-frame information (kept for the
// life of the process).
#pragma once

#include <cstdint>
#include <optional>

namespace dprobe
{

struct cfi_range {
    uintptr_t start; // runtime address of the function's first byte
    uint64_t size;
};

// The extent of the function containing ADDR (a runtime address in a loaded object) as its
// FDE states it; nullopt when no FDE covers ADDR.
std::optional<cfi_range> cfi_function_at(uintptr_t addr);

// Closes every object's file this cache opened (the end of dprobe in the process).
void cfi_cache_release();

} // namespace dprobe
