// text_poke: the one module that writes to code (arch/x86/kernel/alternative.c's role).
//
// Writes are batched: every page of the batch is made writable once and restored once. When
// other threads may run the code, each instruction is replaced with the kernel's int3
// protocol: int3 over the first byte, sync every core (membarrier SYNC_CORE), the tail, sync,
// the first byte, sync. A thread that reaches a site meanwhile traps, and the SIGTRAP hook
// makes it continue as if the new instruction had run. A site that fits in one aligned
// 8-byte word is written with one atomic store instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace dprobe {

struct text_poke_req {
    uintptr_t addr = 0;
    uint8_t len = 0;        // bytes to write, at most 24 (an optimized probe's region)
    uint8_t bytes[24] = {}; // the new bytes
    // What a thread trapping on the temporary int3 does: as if the new first instruction ran.
    enum class emulate : uint8_t {
        nop,  // continue at addr + len
        call, // push addr + insn_len, continue at target
        jmp,  // continue at target
        trap, // the new first byte is itself an int3 owned by someone else: let them handle it
    } emu = emulate::nop;
    uint8_t insn_len = 0; // length of the new first instruction (call: 5)
    uintptr_t target = 0;
};

// Applies every request. Returns 0 or a negative errno (nothing is written then).
int text_poke_batch(std::span<text_poke_req> reqs);

// A plain copy for code no other thread can run yet (an object still being set up, or a
// single-threaded process). Same page handling as the batch.
int text_poke_early(uintptr_t addr, const void *bytes, size_t len);
// The same for many requests, each page made writable once.
int text_poke_early(std::span<const text_poke_req> reqs);

// Where a thread stopped at an old instruction boundary must continue instead, for writes
// that replace several instructions by one (sorted by from).
struct rip_move {
    uintptr_t from, to;
};

// Writes every request while all other threads are stopped (stop_machine), moving any thread
// whose instruction pointer is one of MOVES' `from` addresses (listed in any order) to its
// `to`. For rewrites the int3 protocol cannot make safe. A single-threaded process is written
// directly.
int text_poke_stopped(std::span<const text_poke_req> reqs, std::span<const rip_move> moves);

// Serialises the instruction stream of every thread of the process.
void text_poke_sync();

// False when a batch holds the text lock (for a forked child: see core/dl_notify.cpp).
bool text_poke_lock_free();

// Number of threads of this process (from /proc/self/stat); 0 when unknown.
int process_thread_count();

} // namespace dprobe
