/* dprobe's headers with the system's ptrace headers (<linux/ptrace.h>, which includes
 * <asm/ptrace.h>; glibc's <sys/ptrace.h> clashes with it by itself): dprobe first (compiles; both
 * field spellings work), or the system's first (HEADERS_SYSTEM_FIRST: a clear #error). */
#ifdef HEADERS_SYSTEM_FIRST
#include <linux/ptrace.h>
#endif
#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>
#include <linux/ptrace.h>
#include <sys/user.h>

unsigned long both_spellings(struct pt_regs *regs)
{
    /* the kernel's names (what kprobe handlers use) and user space's (<asm/ptrace.h>) */
    return regs->di + regs->rdi + regs->ip + regs->rip + (unsigned long)PTRACE_PEEKUSR;
}
