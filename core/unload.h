// dprobe leaving a process for good (`dprobe detach`): after every probe is gone, make sure
// no thread can still run dprobe's code or return into it, put every byte of code back
// (text_poke_restore_all), then free what the core mapped, so that the runtime object can be
// unloaded (dlclose) and the process is left as it was.
//
// The kernel's counterparts: a module's unload (delete_module waits until nobody uses the
// module, then frees its text) and ftrace's freeing of trampolines after
// synchronize_rcu_tasks (a task may still be inside one, or have one as a return address).
// User space cannot wait for a voluntary context switch, so the threads are stopped
// (stop_machine) and looked at:
//   - none may be inside dprobe's code (its object's text, executable memory), inside a
//     probe handler (task_ctx::seq odd), single-stepped out of line, or have a breakpoint trap
//     on its way;
//   - none may be running a signal handler that interrupted dprobe's code (a signal frame on
//     its stack whose saved instruction pointer is in dprobe's code);
// and when none is, every return address dprobe hooked (a shadow frame's slot, or one of the
// dropped frames' that still holds a return trampoline) gets its real value back: a function
// entered through a trampoline returns straight to its caller, as if never hooked. A thread
// found inside is given time and looked at again (the caller retries on -EAGAIN).
//
// Invariant: after unload_release() nothing of dprobe can execute: no patched code, no
// hooked return address, no signal handler, no thread; its mappings are gone.
#pragma once

#include <cstdint>
#include <string>

namespace dprobe
{

// The calling thread's state where it was interrupted, when it is a thread borrowed by a
// debugger-like caller (ptrace) that will resume it there: its instruction and stack
// pointers. Zero when the caller is an ordinary thread of the process.
struct unload_caller {
    uintptr_t ip = 0, sp = 0;
};

// With every other thread stopped, in one step: when no thread can still execute or return
// into dprobe's code, the hooked returns and every byte of code dprobe changed are written
// back, and 0 is returned. -EAGAIN with *WHY when a thread is inside it now (try again a
// little later); another -errno with *WHY when the threads cannot be stopped. Nothing is
// changed on failure.
int unload_quiesce(const unload_caller &caller, std::string *why);

// After a successful unload_quiesce: the core's mappings, descriptors and thread keys freed
// (executable memory, per-thread contexts, ring buffers). The process must not run any
// dprobe code afterwards but the object's own destructors.
void unload_release();

} // namespace dprobe
