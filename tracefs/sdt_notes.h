// USDT / SDT probes (SystemTap's <sys/sdt.h>, DTrace's user-space static probes): the
// .note.stapsdt notes of an ELF file and each argument as a fetch arg. tracefs makes a
// static event of each (trace_usdt.cpp); the CLI writes uprobe-style lines of them
// (tools/dprobe/resolve/sdt_notes.h).
//
// A note gives the probe's address (a one-byte NOP the compiler placed), the link-time
// address of .stapsdt.base (when the file was prelinked since, addresses move by the
// difference), the address of its semaphore (a u16 the program tests before evaluating the
// arguments; tracefs increments it while the event is enabled) and its arguments as
// "[-]SIZE[f]@OPERAND" in the assembler's syntax: %reg, $imm, disp(%base), sym+N(%rip).
// Arguments are named arg1..argN by position and typed by their size and sign (s32, u64);
// a floating-point one in a general register or memory is fetched as its bits (x32, x64).
// What fetch args cannot express (an SSE register, base+index addressing) is left out,
// keeping the others' numbers, as perf does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dprobe
{

struct sdt_probe {
    std::string provider, name;
    uint64_t pc = 0;        // the probe's virtual address (prelink-adjusted)
    uint64_t semaphore = 0; // its semaphore's virtual address, 0 without one
    uint64_t pc_offset = 0; // file offsets of both
    uint64_t sem_offset = 0;
    std::vector<std::string> args; // "-4@%edi", ...

    // "sdt_PROVIDER:NAME", the name `dprobe record -e` and perf take.
    std::string full_name() const { return "sdt_" + provider + ":" + name; }
};

// The SDT probes of the ELF file PATH (none when it has no .note.stapsdt). False with *ERR
// set when the file can't be read as ELF.
bool read_sdt_probes(const std::string &path, std::vector<sdt_probe> &out, std::string *err);

// One argument ("-4@%edi", number INDEX from 1) as a fetch arg ("arg1=%di:s32"); "" with
// *WHY set when fetch args can't express it. PATH is the probe's file: rip-relative operands
// name its symbols.
std::string sdt_arg_fetch(const std::string &spec, int index, const sdt_probe &p,
                          const std::string &path, std::string *why);

} // namespace dprobe
