// The few instructions generic code needs and C++ has no word for, as the kernel's
// asm/asm.h (current_stack_pointer), asm/msr.h (rdtsc), asm/local.h (local_inc) and
// asm/vdso/processor.h (cpu_relax).
//
// All are always inlined (no out-of-line copy a probe could land on), touch no vector register (the
// hot path's light code is built -mgeneral-regs-only) and call nothing, so any context may use
// them: trampolines' C++ callees, signal handlers, a thread that stopped the others.
#pragma once

#include <cstdint>

namespace dprobe::arch
{

// The stack pointer where the caller is.
__attribute__((always_inline)) inline uintptr_t current_stack_pointer() noexcept
{
    uintptr_t sp;
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
    return sp;
}

// The time stamp counter.
__attribute__((always_inline)) inline uint64_t rdtsc() noexcept
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

// An increment that a signal on this thread cannot tear (one instruction, the kernel's
// local_t), for counters only this thread writes and readers load atomically.
__attribute__((always_inline)) inline void local_inc(uint64_t *p) noexcept
{
    __asm__ __volatile__("incq %0" : "+m"(*p));
}

// A spin-wait loop's pause (`pause`, the kernel's cpu_relax): the sibling hyper-thread gets
// the core, and leaving the loop costs no memory-order mis-speculation.
__attribute__((always_inline)) inline void cpu_relax() noexcept
{
    __builtin_ia32_pause();
}

} // namespace dprobe::arch
