// Optimized probes (the kernel's optprobes, arch/x86/kernel/kprobes/opt.c): a probe in the
// middle of a function whose instructions at the probe address are replaced by a jmp to a
// detour that saves everything, calls the handler, restores, runs the relocated
// instructions and jumps back. No trap: nanoseconds instead of a ~3 us SIGTRAP.
//
// The kprobe layer decides when a probe may be optimized (no post handler, not a site) and
// keeps the int3 path as the fallback; this file allocates the detour near the code and
// keeps its state; the region checks, the detour's bytes and the jmp are the arch verbs'
// (arch/x86_64/detour.h, kprobes_arch.h: arch_prepare_optimized_kprobe,
// arch_optimize_kprobes, arch_unoptimize_kprobes).
#pragma once

#include "arch/x86_64/detour.h"
#include "arch/x86_64/kprobes_arch.h"
#include "core/exec_mem.h"
#include "core/text_poke.h"

#include <dprobe/ptrace.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace dprobe
{

using optprobe_handler = void (*)(void *arg, struct pt_regs *regs);
// The light detour's handler (see optprobe_set_mode): returns 1, before changing anything,
// when it cannot run without the extended state saved (the full handler then runs).
using optprobe_light_handler = int (*)(void *arg, struct pt_regs *regs);

struct optprobe {
    uintptr_t addr = 0; // the probe address: the region starts here
    uint8_t len = 0;    // bytes the jmp replaces (whole instructions, >= 5)
    exec_chunk mem;     // the detour's memory
    arch::detour d;     // the detour: region, relocated copy, moves
    optprobe_handler fn = nullptr;
    optprobe_light_handler light_fn = nullptr; // called by the light caller
    optprobe_light_handler vec_fn = nullptr;   // called by the vector caller
    void *arg = nullptr;
    bool armed = false;
    bool df_safe = false; // the function never sets DF: a light detour may serve it
    bool light = false;   // the detour calls the light caller
    arch::optprobe_mode mode = arch::optprobe_mode::full; // which caller the detour calls
};

// Prepares the detour for a probe at ADDR in the function [FUNC, FUNC+SIZE). CODE points to
// the function's original bytes (a copy when a probe's int3 is already written in the live
// text). Returns nullptr with *WHY set when the region cannot be optimized.
std::unique_ptr<optprobe> optprobe_prepare(uintptr_t func, size_t size, const uint8_t *code,
                                           uintptr_t addr, optprobe_handler fn, void *arg,
                                           std::string *why);

// Switches OP's detour to the caller of MODE (arch::optprobe_mode): the full caller saves the
// whole register and extended state; the vector caller the general registers, the flags,
// the vector registers 0-15 and the MXCSR (handlers clean in arch::ext_scope::vector); the
// light one the general registers and the arithmetic flags only, and calls LIGHT_FN
// (handlers that provably leave the extended state alone, in a function that never sets DF:
// op.df_safe, otherwise the full caller is used). One atomic store: threads in another
// caller finish there. Returns the mode now in use.
// CHECKED_FN: the light or vector caller's handler.
arch::optprobe_mode optprobe_set_mode(optprobe &op, arch::optprobe_mode mode,
                                      optprobe_light_handler checked_fn = nullptr);

// Writes the jmp (all other threads stopped; a thread stopped inside the region continues in
// the relocated copy). What the region held before (original bytes, or a kprobe's int3 over
// the first one) does not matter.
int optprobe_arm(optprobe &op);

// Writes the original instructions back over the jmp, or with KEEP_INT3 an int3 followed by
// their tail (the kprobe stays armed). A thread reaching the site meanwhile runs the
// relocated copy.
int optprobe_disarm(optprobe &op, bool keep_int3 = false);

// The same for many probes at once (the kernel's arch_optimize_kprobes() and
// arch_unoptimize_kprobes() over their lists): every jmp of OPS written during one stop of
// the threads, a thread stopped at one of EXTRA's `from` addresses moved too (an
// out-of-line copy whose jump back lands inside a region), and the writes of ALSO made in
// the same stop (other detours' jumps back re-aimed)...
int optprobe_arm_many(std::span<optprobe *const> ops, std::span<const rip_move> extra,
                      std::span<const text_poke_req> also = {});
// ...and written back in one text patch.
int optprobe_disarm_many(std::span<optprobe *const> ops, bool keep_int3);

// Releases the detour and OP. The detour refers to OP, and a thread may be anywhere in it
// for as long as it can still be running code it entered before the disarm (a thread
// preempted inside it): only call this when no thread can be (the callers keep disarmed
// optprobes for the life of the process, like the kernel keeps insn slots until a
// quiescent state).
void optprobe_free(std::unique_ptr<optprobe> op);

} // namespace dprobe

extern "C" void dprobe_optprobe_dispatch(dprobe::optprobe *op, struct pt_regs *regs) noexcept;
extern "C" int dprobe_optprobe_dispatch_vec(dprobe::optprobe *op, struct pt_regs *regs) noexcept;
extern "C" int dprobe_optprobe_dispatch_light(dprobe::optprobe *op, struct pt_regs *regs) noexcept;
