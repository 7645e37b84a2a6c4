// Process-wide synchronous-signal handling shared by every part of dprobe that traps:
// text_poke's int3 protocol and kprobes (SIGTRAP), nofault memory reads (SIGSEGV, SIGBUS).
//
// dprobe installs its handler for a signal only when the first hook for it is added, so a
// program that registers nothing keeps its signal dispositions untouched. Hooks run first;
// a signal no hook claims goes to the program's own handler (the one it had, or installs
// later through sigaction/signal, which dprobe interposes while it owns the signal), or
// gets the default action.
#pragma once

#include <csignal>
#include <ucontext.h>
#include <vector>

namespace dprobe
{

// Returns true when the hook handled the signal (the ucontext may have been changed).
// Hooks run in signal context: async-signal-safe code only.
using fault_hook = bool (*)(int sig, siginfo_t *info, ucontext_t *uc);

// Adds HOOK for SIG (SIGTRAP, SIGSEGV, SIGBUS, ...). Idempotent. Not async-signal-safe.
void signal_chain_add_hook(int sig, fault_hook hook);

// True when dprobe currently owns SIG's disposition.
bool signal_chain_owns(int sig);

// Used by the sigaction interposer: records the program's disposition for a signal dprobe
// owns instead of installing it. Returns false when dprobe does not own SIG.
bool signal_chain_set_program_action(int sig, const struct sigaction *act,
                                     struct sigaction *oldact);

// Used by the sigaction interposer for the signals dprobe does not own: true, with ACT in OUT
// minus SIGTRAP in its sa_mask, when dprobe owns SIGTRAP and ACT's mask holds it (a probe hit
// in the handler must not find SIGTRAP blocked; core/sigmask_interpose.cpp).
bool sigaction_mask_filtered(const struct sigaction *act, struct sigaction *out);

// The end of dprobe in the process (core/unload.h): every signal dprobe owns gets the
// program's disposition back and its hooks are removed. Returns the signals whose disposition
// could not be restored (empty normally). Only when no trap of dprobe's can still arrive.
std::vector<int> signal_chain_release();

} // namespace dprobe
