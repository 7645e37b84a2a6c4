// A signal frame written by another process, so that a thread it borrows with ptrace can
// always find its way back (tools/dprobe/attach/ptrace_call.h).
//
// `dprobe attach` and `detach` run calls (mmap, dlopen, the agent's start and unload) on a
// thread of the traced program. If the command dies while the thread is inside such a call
// (SIGKILL, a crash), the kernel lets the thread go on with whatever registers the call left.
// So every call returns through an rt_sigframe on its stack, as a signal handler does: the
// frame holds the thread's registers, its vector state and its signal mask as they were when
// it was borrowed, and the return address is a `mov $15,%eax; syscall` (rt_sigreturn). With
// the command alive, ptrace stops the thread on that rt_sigreturn and takes the return value
// (copied to rdx first); with the command gone, rt_sigreturn puts the thread back by itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <sys/user.h>
#include <vector>

namespace dprobe::arch
{

// glibc's __restore_rt, found in the C library's text: `mov $15,%rax; syscall`.
inline constexpr uint8_t RESTORE_RT_INSNS[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
                                               0x00, 0x00, 0x0f, 0x05};
// `syscall; ret`, the end of many system-call wrappers: a system call whose return goes to
// the frame's restorer.
inline constexpr uint8_t SYSCALL_RET_INSNS[] = {0x0f, 0x05, 0xc3};
// Where a borrowed call returns: `mov %rax,%rdx; mov $15,%eax; syscall`. rt_sigreturn does not
// read rdx, so the return value is still there when ptrace stops the thread on the syscall.
inline constexpr uint8_t RETURN_TRAMPOLINE[] = {0x48, 0x89, 0xc2, 0xb8, 0x0f,
                                                0x00, 0x00, 0x00, 0x0f, 0x05};
inline constexpr size_t SYSCALL_INSN_SIZE = 2;
inline constexpr long NR_RT_SIGRETURN = 15;

// The thread state a frame restores.
struct borrowed_state {
    struct user_regs_struct regs;
    // The NT_X86_XSTATE regset (XSAVE layout) as PTRACE_GETREGSET gave it; or the 512-byte
    // NT_PRFPREG FXSAVE area when the kernel has no XSAVE (xsave false).
    std::vector<uint8_t> fpu;
    bool xsave = true;
    uint64_t sigmask = 0;
};

struct sigframe_image {
    uint64_t sp = 0;            // the frame's first byte: the return address slot
    std::vector<uint8_t> bytes; // sp .. the end of the frame's vector state
    size_t sigmask_off = 0;     // offset in bytes of uc_sigmask
};

// The frame for S, ending below TOP, with RESTORER as its return address. A thread stopped
// in an interruptible system call (orig_rax >= 0 with an -ERESTART* code in rax) is made to
// issue the call again, as the kernel does when no handler runs. A sleep whose remainder
// the kernel keeps in the thread's restart block (-ERESTART_RESTARTBLOCK) cannot be resumed
// after rt_sigreturn, which clears that block: it is issued again whole (it ends late, never
// early).
sigframe_image build_rt_sigframe(const borrowed_state &s, uint64_t top, uint64_t restorer);

// Offset of the first occurrence of PATTERN in TEXT, or -1.
long find_insns(std::span<const uint8_t> text, std::span<const uint8_t> pattern);

} // namespace dprobe::arch
