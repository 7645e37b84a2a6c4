// How a function's entry looks to the site machinery (the kernel's ftrace_make_call /
// ftrace_make_nop checks of the bytes at a site): a call to __fentry__, a NOP left by
// -fpatchable-function-entry or by a site turned off, and the PLT entries a call may go
// through. Reading bytes only, no writing, no state: the offline library has it (the CLI
// classifies entries in files it reads, core/ftrace_sites.cpp in loaded code).
#pragma once

#include <cstdint>
#include <optional>

namespace dprobe::arch
{

enum class entry_kind : uint8_t {
    none,
    fentry_call, // e8 rel32: call __fentry__ (directly or through its PLT entry)
    fentry_got,  // ff 15 disp32: call *__fentry__@GOTPCREL(%rip) (PIE)
    nop,         // one multi-byte NOP of >= 5 bytes (clang's sled, or a site turned off)
    nop_sled,    // >= 5 one-byte NOPs (gcc's -fpatchable-function-entry sled)
};

struct entry_insn {
    entry_kind kind = entry_kind::none;
    uint8_t len = 0;      // bytes of the site (5 or 6; a sled uses its first 5)
    uintptr_t target = 0; // fentry_call: call target; fentry_got: GOT slot address
};

// Classifies the instruction at IP (the function entry, after any endbr64). The caller
// guarantees 16 readable bytes.
entry_insn classify_entry(uintptr_t ip) noexcept;

// The GOT slot a PLT entry jumps through (jmp *disp(%rip), with or without endbr64/bnd).
std::optional<uintptr_t> plt_got_slot(uintptr_t plt_entry) noexcept;

} // namespace dprobe::arch
