// Stack walking for the tracers' stack traces (func_stack_trace, the stacktrace command and
// the stack tracer): the kernel's unwind_* over ORC, here over the DWARF call-frame
// information every x86-64 object carries in .eh_frame (found through the loader's lock-free
// _dl_find_object and the .eh_frame_hdr search table).
//
// The walk starts at a function entry: the registers of the patch site, where RSP points at
// the return address and the callee-saved registers still hold the caller's values. Each
// step finds the caller's frame description, computes its canonical frame address (CFA),
// reads the return address and restores RBP, RBX and R12-R15 where the caller saved them.
// It stops at a frame without a description, at one whose return address is undefined (the
// outermost frame), at a signal frame, or at a rule it does not model (an expression).
//
// Async-signal-safe and allocation-free: it may run in a probe handler. Memory is read with
// copy_from_user_nofault, so a wrong rule ends the walk instead of faulting.
#pragma once

#include <cstddef>
#include <cstdint>

struct pt_regs;

namespace dprobe::arch
{

struct unwind_frame {
    uintptr_t ip;   // return address into this frame's function
    uintptr_t slot; // where on the stack that return address is stored
};

// Maps a return address read from SLOT to the real one (a hooked return holds the return
// trampoline's address; the shadow stack knows the caller's). May be nullptr.
using unwind_fix_return = uintptr_t (*)(uintptr_t ra, uintptr_t slot);

// Walks from a function entry with registers REGS. OUT[0] is the caller (the return address
// at REGS->sp), OUT[1] its caller, and so on. Returns the number of frames written (at most
// MAX). CALLEE_SAVED: whether REGS' callee-saved registers other than RSP and RBP hold the
// caller's values (false: they are treated as unknown).
size_t unwind_from_entry(const struct pt_regs *regs, unwind_frame *out, size_t max,
                         unwind_fix_return fix, bool callee_saved = true) noexcept;
// Walks from anywhere in a function (the registers of a kprobe hit, all of them valid): OUT[0]
// is REGS->ip itself (slot 0), then its caller, and so on.
size_t unwind_from_regs(const struct pt_regs *regs, unwind_frame *out, size_t max,
                        unwind_fix_return fix) noexcept;

} // namespace dprobe::arch
