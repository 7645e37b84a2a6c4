// The extended register state (x87, MMX, SSE/AVX/AVX-512 vector and mask registers, MXCSR)
// around probe handlers.
//
// An optimized probe in the middle of a function may find any register live, so its detour
// must keep everything a handler could change. Saving the whole extended state (xsavec +
// xrstor, about 2.7 KB with AVX-512) costs far more than the rest of a hit. But most
// handlers are integer code: when every instruction reachable from the handler (following
// direct calls and jumps) provably leaves the extended state alone, the detour can skip it
// and keep only the general registers and the flags (the "light" detour). fprobe and
// kretprobe sites do the same (the light path of arch/x86_64/ftrace_tramp.S).
//
// What the light detour must still guard against is code that runs in the middle of a
// handler without having been scanned: a probe hit inside it. An int3 probe traps (the
// kernel saves and restores the whole state around the signal handler) and a nested kprobe
// handler does not run anyway (recursion), but an fprobe on a function the handler calls
// runs its own handlers from the ftrace trampolines. So while a light handler runs, the
// thread's dprobe_ext_unsaved counter is non-zero, and the ftrace trampolines then save and
// restore the whole extended state around their handlers (dprobe_call_ext_saved). Light
// fprobe and kretprobe handlers raise it too (core/ftrace_dispatch.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" {
// Bytes XSAVE needs for the features enabled in XCR0 (64-byte multiple), and whether the
// compacted form (xsavec) exists. Read by the trampolines.
extern unsigned long dprobe_xsave_size;
extern unsigned char dprobe_have_xsavec;
// Whether the CPU and OS have AVX (the trampolines then run C++ after vzeroupper).
extern unsigned char dprobe_have_avx;
// Non-zero while this thread runs a handler entered through a light detour.
extern __thread unsigned dprobe_ext_unsaved __attribute__((tls_model("initial-exec")));
// FN(A0, A1, A2) with the whole extended state saved around it when this thread runs a
// light handler, directly otherwise (arch/x86_64/optprobe_tramp.S). For rare paths of code
// that must scan clean but call code that cannot (the ring buffer's first event on a thread,
// a clock read through the C library): the scan takes a call of it as clean.
long dprobe_ext_guarded(long a0, long a1, long a2, long (*fn)(long, long, long));
}

namespace dprobe::arch
{

struct ext_state_scan {
    bool clean = false; // nothing reachable touches the extended state
    std::string why;    // otherwise: the first reason found ("movaps at 0x...: ...")
    size_t functions = 0, insns = 0;
};

// Follows the control flow from the function at ROOT: both ways at conditional branches,
// into every direct call, through direct jumps (tail calls too), until each path returns.
// Not clean: an instruction with an x87/MMX/vector/mask register operand or of a category
// that may touch such state (xsave, ldmxcsr, vzeroupper, ...); an indirect jump; an int3 (a
// probe in the code: what it runs is not known); an instruction that does not decode; more
// than MAX_INSNS instructions in all. Indirect calls are not clean either, except in ROOT
// itself when ROOT_CALLS_VETTED: a dispatcher whose indirect calls go to handlers that are
// scanned on their own. Reads code with copy_from_user_nofault (a bad address is "not
// clean", never a crash).
// SCOPE: what counts as touching the state: all of it (a light detour keeps none of it), or
// only the x87 stack and MMX registers (a return trampoline keeps the vector registers
// itself, and a function returning long double leaves its result on the x87 stack).
// VECTOR: anything but the vector registers 0-15 and the MXCSR (the x87 stack, MMX, mask
// registers, vector registers 16-31 written, AMX tiles, xsave and friends): what the
// vector optprobe caller does not keep.
enum class ext_scope { all, x87, vector };
ext_state_scan ext_state_scan_code(uintptr_t root, bool root_calls_vetted = false,
                                   size_t max_insns = 20000, ext_scope scope = ext_scope::all);

// Cached ext_state_scan_code(ROOT, ROOT_CALLS_VETTED, SCOPE).clean (the code does not change
// under a registered handler; thread-safe).
bool ext_state_clean(uintptr_t root, bool root_calls_vetted = false,
                     ext_scope scope = ext_scope::all);

} // namespace dprobe::arch
