// Hooked return addresses versus unwinders (the kernel's ftrace_graph_ret_addr role).
//
// A function whose exit is traced returns through the return trampoline: its stack slot
// holds the trampoline's address, which no unwind table describes. Before an unwinder
// walks this thread's stack, the real return addresses are written back; when a C++ catch
// block starts, the frames it unwound are dropped and the live ones hooked again.
// Interposed: _Unwind_RaiseException, _Unwind_ForcedUnwind, _Unwind_Backtrace, backtrace,
// __cxa_begin_catch (core/unwind.cpp). Unwinders that dprobe cannot interpose (glibc's
// thread cancellation, a rethrow through _Unwind_Resume after a cleanup hooked the frames
// again) meet the trampoline's own frame, whose personality routine supplies the real
// address (dprobe_return_personality).
#pragma once

#include <cstdint>

namespace dprobe
{

struct task_ctx;

// Writes every hooked frame's real return address back into its stack slot (frames gone
// below SP excepted).
void shadow_unhook_all(task_ctx *t, uintptr_t sp);
// Hooks every frame again whose slot still holds its real return address; with DROP_GONE
// first drops the frames gone below SP (a catch block starts at SP).
void shadow_rehook(task_ctx *t, uintptr_t sp, bool drop_gone);

} // namespace dprobe
