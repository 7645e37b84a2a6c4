// Stack traces of the traced thread (the kernel's __trace_stack / stack_trace_save): the
// kernel_stack records written after a function record (options/func_stack_trace) or an
// event (options/stacktrace, the stacktrace function command), and the stack tracer's
// walks. The walk itself is arch/x86_64/unwind_cfi.h; here hooked returns are mapped back to
// the real return addresses through the shadow stack.
#pragma once

#include <cstddef>
#include <cstdint>

struct ftrace_regs;
struct pt_regs;

namespace dprobe
{

class trace_array;

// Return addresses from a function entry (REGS): the caller first. SLOTS (may be nullptr)
// receives where each is stored. Returns the number written (at most MAX). Hot path.
size_t trace_stack_save(const struct pt_regs *regs, uint64_t *ips, uintptr_t *slots,
                        size_t max) noexcept;

// The stack at REGS, the registers of a probe hit anywhere in a function: REGS->ip first,
// then the return addresses. Returns the number written (at most MAX). Hot path.
size_t trace_stack_save_regs(const struct pt_regs *regs, uint64_t *ips, size_t max) noexcept;

// Writes a kernel_stack record of the stack at FREGS (a function entry) into TR's buffer.
void trace_stack_record(trace_array &tr, const struct ftrace_regs *fregs) noexcept;
// The same at REGS, the registers of a probe hit anywhere in a function: the record starts
// with REGS->ip.
void trace_stack_record_regs(trace_array &tr, const struct pt_regs *regs) noexcept;
// A kernel_stack record of IPS (N return addresses already known) for thread PID (0: the
// calling thread).
void trace_stack_record_ips(trace_array &tr, int32_t pid, const uint64_t *ips, size_t n) noexcept;

// Makes the nofault reads the walk uses safe (installs the fault hook once).
void trace_stack_init();

} // namespace dprobe
