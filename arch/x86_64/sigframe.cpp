#include "arch/x86_64/sigframe.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <sys/syscall.h>
#include <sys/ucontext.h>

namespace dprobe::arch
{

namespace
{

// The kernel's names: UC_FP_XSTATE..., FP_XSTATE_MAGIC1/2, ERESTARTSYS...
// The kernel reads the prefix of glibc's ucontext_t that is its own struct ucontext: flags,
// link, the alternate stack, struct sigcontext (glibc's gregs are in its order) and the first
// eight bytes of the mask.
static_assert(offsetof(ucontext_t, uc_mcontext) == 40);
static_assert(offsetof(ucontext_t, uc_sigmask) == 296);

constexpr unsigned long k_uc_fp_xstate = 0x1, k_uc_sigcontext_ss = 0x2,
                        k_uc_strict_restore_ss = 0x4;
constexpr uint32_t k_fp_xstate_magic1 = 0x46505853, k_fp_xstate_magic2 = 0x46505845;
constexpr size_t FXSAVE_SW_BYTES = 464; // struct _fpx_sw_bytes in FXSAVE's software area
constexpr size_t XSAVE_HEADER = 512;    // xstate_bv, then xcomp_bv (0: standard format)
constexpr long k_erestartsys = 512, k_erestartnointr = 513, k_erestartnohand = 514,
               k_erestart_restartblock = 516;

struct fpx_sw_bytes {
    uint32_t magic1;
    uint32_t extended_size;
    uint64_t xfeatures;
    uint32_t xstate_size;
    uint32_t padding[7];
};
static_assert(sizeof(fpx_sw_bytes) == 48);

// The registers rt_sigreturn restores, with a system call the thread was stopped in made to
// run again (what the kernel's signal code does when no handler takes the signal).
void put_regs(const struct user_regs_struct &r, mcontext_t &mc)
{
    greg_t *g = mc.gregs;
    g[REG_R8] = static_cast<greg_t>(r.r8);
    g[REG_R9] = static_cast<greg_t>(r.r9);
    g[REG_R10] = static_cast<greg_t>(r.r10);
    g[REG_R11] = static_cast<greg_t>(r.r11);
    g[REG_R12] = static_cast<greg_t>(r.r12);
    g[REG_R13] = static_cast<greg_t>(r.r13);
    g[REG_R14] = static_cast<greg_t>(r.r14);
    g[REG_R15] = static_cast<greg_t>(r.r15);
    g[REG_RDI] = static_cast<greg_t>(r.rdi);
    g[REG_RSI] = static_cast<greg_t>(r.rsi);
    g[REG_RBP] = static_cast<greg_t>(r.rbp);
    g[REG_RBX] = static_cast<greg_t>(r.rbx);
    g[REG_RDX] = static_cast<greg_t>(r.rdx);
    g[REG_RAX] = static_cast<greg_t>(r.rax);
    g[REG_RCX] = static_cast<greg_t>(r.rcx);
    g[REG_RSP] = static_cast<greg_t>(r.rsp);
    g[REG_RIP] = static_cast<greg_t>(r.rip);
    g[REG_EFL] = static_cast<greg_t>(r.eflags);
    // cs, gs, fs and (with k_uc_sigcontext_ss) ss, 16 bits each; only cs and ss are restored.
    g[REG_CSGSFS] = static_cast<greg_t>((r.cs & 0xffff) | (r.ss & 0xffff) << 48);
    if (static_cast<long>(r.orig_rax) >= 0) {
        switch (-static_cast<long>(r.rax)) {
        case k_erestartsys:
        case k_erestartnointr:
        case k_erestartnohand:
            g[REG_RAX] = static_cast<greg_t>(r.orig_rax);
            g[REG_RIP] -= SYSCALL_INSN_SIZE;
            break;
        case k_erestart_restartblock:
            // The remainder lives in the thread's restart block, which rt_sigreturn clears:
            // issue the sleep again from the start (a sleep may end late, never early), or
            // end with EINTR when it was itself a restart.
            if (r.orig_rax != SYS_restart_syscall) {
                g[REG_RAX] = static_cast<greg_t>(r.orig_rax);
                g[REG_RIP] -= SYSCALL_INSN_SIZE;
            } else {
                g[REG_RAX] = -EINTR;
            }
            break;
        default:
            break;
        }
    }
}

} // namespace

sigframe_image build_rt_sigframe(const borrowed_state &s, uint64_t top, uint64_t restorer)
{
    const size_t n = s.fpu.size();
    const uint64_t fp = (top - (n + sizeof(uint32_t))) & ~uint64_t{63}; // XRSTOR: 64-aligned
    constexpr size_t head = sizeof(uint64_t) + sizeof(ucontext_t) + sizeof(siginfo_t);
    // As the kernel's get_sigframe: (sp + 8) 16-byte aligned, as after a call.
    const uint64_t sp = ((fp - head) & ~uint64_t{15}) - 8;

    sigframe_image img;
    img.sp = sp;
    img.bytes.assign(fp + n + sizeof(uint32_t) - sp, 0);
    uint8_t *b = img.bytes.data();
    std::memcpy(b, &restorer, sizeof restorer);

    ucontext_t uc;
    std::memset(&uc, 0, sizeof uc);
    uc.uc_flags = k_uc_sigcontext_ss | k_uc_strict_restore_ss | (s.xsave ? k_uc_fp_xstate : 0);
    // rt_sigreturn sets the alternate signal stack from uc_stack and ignores a refusal: flags
    // no kernel accepts keep the thread's own setting, which dprobe cannot read.
    uc.uc_stack.ss_flags = SS_ONSTACK | SS_DISABLE;
    put_regs(s.regs, uc.uc_mcontext);
    uc.uc_mcontext.fpregs = reinterpret_cast<fpregset_t>(fp);
    std::memcpy(&uc.uc_sigmask, &s.sigmask, sizeof s.sigmask);
    std::memcpy(b + sizeof(uint64_t), &uc, sizeof uc);
    img.sigmask_off = sizeof(uint64_t) + offsetof(ucontext_t, uc_sigmask);

    uint8_t *f = b + (fp - sp);
    std::memcpy(f, s.fpu.data(), n);
    fpx_sw_bytes sw{};
    if (s.xsave && n > XSAVE_HEADER + 8) {
        fpx_sw_bytes given;
        std::memcpy(&given, f + FXSAVE_SW_BYTES, sizeof given);
        uint64_t xstate_bv;
        std::memcpy(&xstate_bv, f + XSAVE_HEADER, sizeof xstate_bv);
        sw.magic1 = k_fp_xstate_magic1;
        sw.extended_size = static_cast<uint32_t>(n + sizeof(uint32_t));
        // The kernel's own description of the layout when ptrace gave it; else what the
        // buffer holds (x87 and SSE always).
        sw.xfeatures = given.magic1 == k_fp_xstate_magic1 ? given.xfeatures : xstate_bv | 3;
        sw.xstate_size = static_cast<uint32_t>(n);
        std::memcpy(f + n, &k_fp_xstate_magic2, sizeof k_fp_xstate_magic2);
    }
    if (n >= FXSAVE_SW_BYTES + sizeof sw) std::memcpy(f + FXSAVE_SW_BYTES, &sw, sizeof sw);
    return img;
}

long find_insns(std::span<const uint8_t> text, std::span<const uint8_t> pattern)
{
    auto it = std::search(text.begin(), text.end(), pattern.begin(), pattern.end());
    return it == text.end() ? -1 : static_cast<long>(it - text.begin());
}

} // namespace dprobe::arch
