// Nofault memory reads: the kernel's copy_from_user_nofault family for a user-space process.
//
// Fetch args dereference pointers taken from a traced program's registers and memory, which
// may be garbage. These routines read such memory without ever crashing: each instruction
// that touches the source is listed in an exception table (uaccess.S), and a SIGSEGV/SIGBUS
// hook, uaccess_fixup_fault(), moves the faulting RIP to the routine's fixup label, which
// returns -EFAULT. On the good path they cost a plain copy.
//
// The hook must be installed for SIGSEGV and SIGBUS (the signal chain in core/ does it for
// the runtime); until then a bad pointer crashes like a plain load would.
#pragma once

#include <csignal>
#include <cstddef>
#include <ucontext.h>

extern "C" {

// Copies SIZE bytes from SRC to DST. Returns 0, or -EFAULT when any source byte is not
// readable (DST may then hold a partial copy). Async-signal-safe.
long copy_from_user_nofault(void *dst, const void *src, size_t size);

// Copies the NUL-terminated string at SRC into DST, at most COUNT-1 characters, and always
// NUL-terminates DST (when COUNT > 0). Returns the number of characters copied (without the
// NUL; COUNT-1 when the string was truncated), or -EFAULT when the string runs into an
// unreadable byte (DST then holds the prefix read so far, NUL-terminated).
long strncpy_from_user_nofault(char *dst, const void *src, long count);

// Length of the NUL-terminated string at SRC, looking at no more than COUNT bytes: the number
// of characters before the NUL, or COUNT when no NUL was found; -EFAULT on an unreadable byte.
long strnlen_user_nofault(const void *src, long count);

} // extern "C"

namespace dprobe
{

// SIGSEGV/SIGBUS hook: when the faulting instruction is one of the nofault routines' listed
// loads, redirects the context to its fixup and returns true; otherwise returns false and
// changes nothing. Pure ucontext work, async-signal-safe.
bool uaccess_fixup_fault(int sig, siginfo_t *info, ucontext_t *uc);

// True when ADDR is one of the listed faulting instructions (for tests and diagnostics).
bool uaccess_is_fixup_insn(unsigned long addr);

} // namespace dprobe
