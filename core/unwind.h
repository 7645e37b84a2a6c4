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
#include <unwind.h>

namespace dprobe
{

using unwind_raise_fn = _Unwind_Reason_Code (*)(struct _Unwind_Exception *);
using unwind_forced_fn = _Unwind_Reason_Code (*)(struct _Unwind_Exception *, _Unwind_Stop_Fn,
                                                 void *);
using unwind_backtrace_fn = _Unwind_Reason_Code (*)(_Unwind_Trace_Fn, void *);

struct task_ctx;

// Writes every hooked frame's real return address back into its stack slot (frames gone
// below SP excepted).
void shadow_unhook_all(task_ctx *t, uintptr_t sp);
// Hooks every frame again whose slot still holds its real return address; with DROP_GONE
// first drops the frames gone below SP (a catch block starts at SP).
void shadow_rehook(task_ctx *t, uintptr_t sp, bool drop_gone);

// What every interposed __cxa_begin_catch does before the C++ runtime's own, for a catch
// block whose stack pointer is CATCH_SP: the frames between the throw and the catch are
// gone, the live ones are hooked again (a no-op on a thread with no hooked frame).
void unwind_catch(uintptr_t catch_sp);
// The C++ runtime's __cxa_begin_catch after dprobe's object (dlsym RTLD_NEXT; null while
// the process has none: a C program).
void *unwind_next_begin_catch(void *exc);

// What the unwinder interposers do, around NEXT (the program's unwinder, or one linked in):
// the hooked return addresses of this thread written back while the unwinder walks, from
// CALLER_SP (the interposer's caller's stack pointer) up. unwind_backtrace also leaves the
// interposer's own frame out of the walk.
_Unwind_Reason_Code unwind_raise(unwind_raise_fn next, struct _Unwind_Exception *exc,
                                 uintptr_t caller_sp);
_Unwind_Reason_Code unwind_forced(unwind_forced_fn next, struct _Unwind_Exception *exc,
                                  _Unwind_Stop_Fn stop, void *arg, uintptr_t caller_sp);
_Unwind_Reason_Code unwind_backtrace(unwind_backtrace_fn real, _Unwind_Trace_Fn fn, void *arg,
                                     uintptr_t caller_sp);
// The next definitions after dprobe's (the program's unwinder): nullptr when there is none.
// unwind_next_backtrace falls back to the unwinder linked in, if any.
unwind_raise_fn unwind_next_raise();
unwind_forced_fn unwind_next_forced();
unwind_backtrace_fn unwind_next_backtrace();

} // namespace dprobe
