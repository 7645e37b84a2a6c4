// Executable memory for trampolines, per-site stubs, kprobe instruction slots and optprobe
// detour buffers (the kernel's module_alloc/insn slot role).
//
// Each region is a memfd mapped twice: once read+execute where the code runs, once
// read+write where dprobe writes it. No page is ever writable and executable at the same
// address, and code can be added to a region while other threads execute in it. Regions are
// placed within +-2 GiB of the code they serve so a 5-byte call/jmp rel32 reaches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dprobe
{

struct exec_chunk {
    uintptr_t rx = 0;      // address where the code executes
    uint8_t *rw = nullptr; // writable alias of the same bytes
    size_t size = 0;
    explicit operator bool() const { return rx != 0; }
};

// SIZE bytes (rounded up to 16) reachable by rel32 from every address in [near_lo, near_hi].
// Returns an empty chunk when no memory can be placed in range.
exec_chunk exec_alloc(uintptr_t near_lo, uintptr_t near_hi, size_t size);

// Returns a chunk to its region. The caller guarantees no thread can still execute it
// (after a quiescence wait).
void exec_free(const exec_chunk &chunk);

// True when [addr, addr+len) lies in dprobe's executable memory.
bool exec_mem_contains(uintptr_t addr, size_t len = 1);

// False when an allocation holds the lock (for a forked child: see core/dl_notify.cpp).
bool exec_mem_lock_free();

// Every region mapped (where code executes, and its size): dprobe's own code, for
// core/unload.cpp.
std::vector<std::pair<uintptr_t, size_t>> exec_mem_ranges();
// Unmaps every region. Only when no thread can execute or return into any of them
// (core/unload.h); nothing may be allocated afterwards.
void exec_mem_release_all();

// Bytes of executable memory mapped so far (for memory-per-site figures).
size_t exec_mem_mapped_bytes();

} // namespace dprobe
