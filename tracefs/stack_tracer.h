// The stack tracer (the kernel's trace_stack.c): at the entry of every traced function it
// measures how deep the calling thread's stack is, and when that is the deepest seen so far
// it records the call chain with each frame's depth and size.
//
//   stack_tracer_enabled   1 starts it, 0 stops it (the kernel's sysctl
//                          kernel.stack_tracer_enabled, which has no place in a process)
//   stack_max_size         the deepest stack seen, in bytes; writing sets it (0 starts over)
//   stack_trace            the chain of that deepest stack:
//                                  Depth    Size   Location    (N entries)
//                                  -----    ----   --------
//                            0)     4680      64   do_work+0x4/0x80
//   stack_trace_filter     the functions it measures at (the set_ftrace_filter syntax;
//                          empty: every function built with a patch site)
//
// Depth counts bytes from the top of the thread's stack: for the main thread the stack
// pointer the program started with (glibc's __libc_stack_end), for other threads the top of
// their stack mapping (where glibc also keeps the thread's control block and static TLS).
// Frames come from the .eh_frame call-frame information (arch/x86_64/unwind_cfi.h).
#pragma once

#include "tracefs/ftrace_filter.h"

#include <cstdint>
#include <string>

namespace dprobe
{

bool stack_tracer_enabled();
// trace_types_lock held. 0 or -errno.
int stack_tracer_set(bool on);
// stack_trace_filter changed (trace_types_lock held).
void stack_tracer_update();
ftrace_hash &stack_trace_filter_hash();
uint64_t stack_max_size();
void stack_set_max_size(uint64_t v);
std::string stack_trace_text();

} // namespace dprobe
