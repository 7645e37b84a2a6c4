// What the kprobe int3 hook asks of x86 when a probe is hit (the hit side of the kernel's
// arch/x86/kernel/kprobes/core.c: kprobe_int3_handler's trap address, the kprobe_emulate_*
// branch emulation, kprobe_fault_handler's fix-up; and kprobes/ftrace.c's ip conventions).
// kprobe/kprobe_int3.cpp decides what happens on a hit; these say how it is done on x86.
//
// Everything here is async-signal-safe, allocation-free, calls no libc function and lives
// in the noprobe section: the SIGTRAP and SIGSEGV hooks call it, and a probe on a libc
// function it used would recurse.
#pragma once

#include "arch/x86_64/insn.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/uctx.h"

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <ucontext.h>

namespace dprobe::arch
{

// Whether a SIGTRAP with INFO comes from an int3 (the kernel reports a breakpoint
// instruction as SI_KERNEL on x86), not from a single step or a raise(SIGTRAP).
inline bool kprobe_trap_is_int3(const siginfo_t *info) noexcept
{
    return info->si_code == SI_KERNEL;
}

// The address of the probe's int3 a thread trapped on (the kernel's `regs->ip -
// INT3_INSN_SIZE`): its ip is one past it.
inline uintptr_t kprobe_trap_addr(const ucontext_t *uc) noexcept
{
    return uc_int3_addr(uc);
}

// What kprobe handlers see in regs->ip for a probe at ADDR, on every path (int3, optimized,
// on a patch site): just past the int3, as after the kernel's trap.
inline constexpr uintptr_t kprobe_hit_ip(uintptr_t addr) noexcept
{
    return int3_trap_ip(addr);
}

// Where the post handlers of a kprobe on a patch site of LEN bytes at ADDR see regs->ip: past
// the site, as if its NOP had been stepped over (kprobe_ftrace_handler: ip + MCOUNT_INSN_SIZE).
inline constexpr uintptr_t kprobe_ftrace_step_ip(uintptr_t addr, size_t len) noexcept
{
    return addr + len;
}

// Applies the branch I (insn_can_emulate()) to REGS as if it had run at I.addr (the
// kernel's kprobe_emulate_call/jmp/jcc/loop/ret/call_indirect/jmp_indirect). A memory-
// indirect branch reads its target first through the nofault copy: when that memory is not
// readable, false and REGS unchanged (the caller lets the copy run and fault where the
// program can see it).
bool kprobe_emulate_insn(const insn &i, struct pt_regs *regs) noexcept;

// A fault with the thread (UC) at an address of the boost copy of I that starts at BOOST and
// has LEN bytes without its jump back: the thread is put back as if I had faulted in place
// (ip at I.addr; for `call *mem`, run as `push $ret ; jmp *mem`, the pushed return address
// popped again). False, UC unchanged, when the ip is not one the copy faults at.
bool kprobe_boost_fault(const insn &i, uintptr_t boost, size_t len, ucontext_t *uc) noexcept;

} // namespace dprobe::arch
