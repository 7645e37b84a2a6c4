// The compiled form of fetch programs (fetch_arg.h): a probe argument whose program has one
// of the common shapes - load a register, an immediate or a saved entry argument, then store
// it as is or dereference it once, 1 to 8 bytes (`$argN`, `%reg`, `$retval`, `$stack`,
// `\imm`, `+off(%reg)`, ...) - is compiled from that program into one fetch_fast_store, which
// the record writer runs in place of the interpreter (~2 ns instead of ~6 ns an argument).
// There is one fetch engine: fetch_fast_compile() reads only the fetch_insn program, so a
// store does exactly what fetch_run() does with it (the tracefs tests compare the two on
// every shape); a program of any other shape is never compiled and runs interpreted.
// No kernel counterpart (the kernel always interprets). fetch_fast_run is hot-path code:
// noexcept, allocation-free, lock-free, and reads traced memory only through the nofault
// copy, so a bad pointer stores zeroes.
#pragma once

#include "tracefs/fetch_arg.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace dprobe
{

// One argument's compiled program.
struct fetch_fast_store {
    enum : uint8_t {
        REGS,
        IMM,
        EDATA
    } src;           // the program's load: REG/ARG/RETVAL/STACKP,
                     // IMM, EDATA
    bool mem;        // ST_MEM / ST_UMEM: read SIZE bytes at value + mem_off (a fault: zeroes)
    uint8_t size;    // the store's size
    uint16_t dest;   // offset in the record
    uint32_t param;  // pt_regs byte offset (REGS), entry-data offset (EDATA)
    int64_t mem_off; // ST_MEM's offset
    uint64_t imm;    // IMM's value
};

// Compiles the programs of ARGS (their fixed fields at ARGS_OFF + arg.offset in the record)
// into OUT. False, OUT unspecified, when one of them has another shape (an array, a
// string, a dereference chain, a bitfield, ...): the probe then runs the interpreter.
bool fetch_fast_compile(std::span<const probe_arg> args, size_t args_off,
                        std::vector<fetch_fast_store> &out);

// Runs STORES for one record at REC: what store_trace_args() would store for the programs
// they were compiled from.
void fetch_fast_run(std::span<const fetch_fast_store> stores, const fetch_context &ctx,
                    uint8_t *rec) noexcept;

} // namespace dprobe
