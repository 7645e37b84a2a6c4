// text_poke: the one module that writes to code (arch/x86/kernel/alternative.c's role). It
// applies requests that arch verbs built (it never decides bytes itself).
//
// Writes are batched: every page of the batch is made writable once and restored once. When
// other threads may run the code, each instruction is replaced with the kernel's int3
// protocol: int3 over the first byte, sync every core (membarrier SYNC_CORE), the tail, sync,
// the first byte, sync. A thread that reaches a site meanwhile traps, and the SIGTRAP hook
// makes it continue as if the new instruction had run. A site that fits in one aligned
// 8-byte word is written with one atomic store instead.
#pragma once

#include "arch/x86_64/text_patching.h"
#include "core/stop_machine.h"

#include <cstddef>
#include <cstdint>
#include <span>

namespace dprobe
{

// A write (new bytes, and what a thread meeting the protocol's breakpoint does meanwhile),
// built by the arch verbs (arch/x86_64/text_patching.h and its users).
using arch::text_poke_req;

// Applies every request. Returns 0 or a negative errno (nothing is written then).
int text_poke_batch(std::span<text_poke_req> reqs);

// A plain copy for code no other thread can run yet (an object still being set up, or a
// single-threaded process). Same page handling as the batch.
int text_poke_early(uintptr_t addr, const void *bytes, size_t len);
// The same for many requests, each page made writable once.
int text_poke_early(std::span<const text_poke_req> reqs);

// Where a thread stopped at an old instruction boundary must continue instead, for writes
// that replace several instructions by one.
using arch::rip_move;

// Writes every request while all other threads are stopped (stop_machine), moving any thread
// whose instruction pointer is one of MOVES' `from` addresses (listed in any order) to its
// `to`. For rewrites the int3 protocol cannot make safe. A single-threaded process is written
// directly.
int text_poke_stopped(std::span<const text_poke_req> reqs, std::span<const rip_move> moves);

// Runs with every other thread stopped, before a stopped write: returning false cancels the
// write (THREADS is empty when the caller is the only thread).
using text_poke_gate = bool (*)(stopped_thread *threads, size_t n, void *arg);

// Writes back every byte of code dprobe changed since the process started (the journal of
// core/text_journal.h), with the other threads stopped: the end of dprobe in the process.
// Callers have removed every probe first; this puts back what has no owner to undo it (the
// NOPs made of patch sites at load) and anything an owner missed. GATE, if given, runs first
// in the stopped state (core/unload.cpp: no thread may be inside dprobe's code). 0, -EAGAIN
// when GATE refused, or -errno; nothing is written unless 0.
int text_poke_restore_all(text_poke_gate gate = nullptr, void *gate_arg = nullptr);
// The same for the bytes in [LO, HI) only (one hook's site, say).
int text_poke_restore(uintptr_t lo, uintptr_t hi);

// Serialises the instruction stream of every thread of the process.
void text_poke_sync();

// False when a batch holds the text lock (for a forked child: see core/dl_notify.cpp).
bool text_poke_lock_free();

// Number of threads of this process (from /proc/self/stat); 0 when unknown.
int process_thread_count();

} // namespace dprobe
