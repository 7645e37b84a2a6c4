/* SPDX-License-Identifier: MIT */
/*
 * Register snapshots handed to probe handlers, in the kernel's x86-64 layout.
 *
 * struct pt_regs has the field names and order of arch/x86/include/asm/ptrace.h, so code
 * written for a kernel module reads regs->di, regs->ax, regs->ip, regs->sp unchanged.
 *
 * struct ftrace_regs is what fprobe handlers get. As in the kernel it is opaque: only the
 * accessors below may be used, and only the argument registers, the return value registers,
 * the stack pointer, the frame pointer and the instruction pointer hold valid values.
 * User space passes arguments in vector registers too, so dprobe's ftrace_regs also carries
 * the saved vector argument registers; see ftrace_regs_get_xmm().
 */
#ifndef DPROBE_PTRACE_H
#define DPROBE_PTRACE_H

#include <stddef.h>
#include <dprobe/compiler.h>

/*
 * The system's <asm/ptrace.h> (also pulled in by <linux/ptrace.h>) defines a struct pt_regs
 * of the same layout with user space's field names (rax, rip, ...). dprobe's stands in for
 * it: it has both the kernel's names and those, and marks that header as read, so either
 * spelling compiles in a program that includes both (dprobe's first). <asm/ptrace.h>'s
 * other contents, the PTRACE_* request numbers of <asm/ptrace-abi.h>, are left out: they
 * clash with glibc's <sys/ptrace.h>, where programs get them.
 */
#if defined(_ASM_X86_PTRACE_H) && !defined(DPROBE_PT_REGS_DEFINED)
#error                                                                                             \
    "dprobe: <asm/ptrace.h> (or <linux/ptrace.h>) was included before <dprobe/ptrace.h>: include the dprobe headers first; dprobe's struct pt_regs then stands in for the system's (same layout, with the kernel's and user space's field names)"
#endif
#define DPROBE_PT_REGS_DEFINED 1
#ifndef _ASM_X86_PTRACE_H
#define _ASM_X86_PTRACE_H
#endif

DPROBE_EXTERN_C_BEGIN

#define DPROBE_PT_REG(kernel_name, user_name)                                                      \
    union {                                                                                        \
        unsigned long kernel_name;                                                                 \
        unsigned long user_name;                                                                   \
    }

struct pt_regs {
    unsigned long r15;
    unsigned long r14;
    unsigned long r13;
    unsigned long r12;
    DPROBE_PT_REG(bp, rbp);
    DPROBE_PT_REG(bx, rbx);
    unsigned long r11;
    unsigned long r10;
    unsigned long r9;
    unsigned long r8;
    DPROBE_PT_REG(ax, rax);
    DPROBE_PT_REG(cx, rcx);
    DPROBE_PT_REG(dx, rdx);
    DPROBE_PT_REG(si, rsi);
    DPROBE_PT_REG(di, rdi);
    DPROBE_PT_REG(orig_ax, orig_rax);
    DPROBE_PT_REG(ip, rip);
    unsigned long cs;
    DPROBE_PT_REG(flags, eflags);
    DPROBE_PT_REG(sp, rsp);
    unsigned long ss;
};

#undef DPROBE_PT_REG

struct ftrace_regs {
    struct pt_regs regs;
    /* Saved vector registers: xmm0-7 at entry, xmm0-1 at return, each VEC_SIZE bytes apart
     * (16, 32 or 64: the full xmm, ymm or zmm register, whatever the CPU has); NULL when
     * the hit saved none (its handlers leave them alone). Read them with
     * ftrace_regs_get_xmm(). */
    void *vec;
    unsigned long vec_size;
};

#define PT_REGS_ARG_COUNT 6

static inline unsigned long regs_return_value(struct pt_regs *regs)
{
    return regs->ax;
}
static inline void regs_set_return_value(struct pt_regs *regs, unsigned long rc)
{
    regs->ax = rc;
}
static inline unsigned long instruction_pointer(struct pt_regs *regs)
{
    return regs->ip;
}
static inline void instruction_pointer_set(struct pt_regs *regs, unsigned long val)
{
    regs->ip = val;
}
static inline unsigned long kernel_stack_pointer(struct pt_regs *regs)
{
    return regs->sp;
}
static inline unsigned long user_stack_pointer(struct pt_regs *regs)
{
    return regs->sp;
}
static inline unsigned long frame_pointer(struct pt_regs *regs)
{
    return regs->bp;
}

/* The N-th word on the stack at the time of the probe (0 = the top), and its address. */
static inline unsigned long *regs_get_kernel_stack_nth_addr(struct pt_regs *regs, unsigned int n)
{
    return (unsigned long *)regs->sp + n;
}
static inline unsigned long regs_get_kernel_stack_nth(struct pt_regs *regs, unsigned int n)
{
    return *regs_get_kernel_stack_nth_addr(regs, n);
}
/* At function entry: the address the function will return to. */
static inline unsigned long regs_get_return_address(struct pt_regs *regs)
{
    return regs_get_kernel_stack_nth(regs, 0);
}

/*
 * The N-th integer argument (0-based) of the function, valid at function entry:
 * di si dx cx r8 r9, then the stack above the return address.
 */
static inline unsigned long regs_get_kernel_argument(struct pt_regs *regs, unsigned int n)
{
    switch (n) {
    case 0:
        return regs->di;
    case 1:
        return regs->si;
    case 2:
        return regs->dx;
    case 3:
        return regs->cx;
    case 4:
        return regs->r8;
    case 5:
        return regs->r9;
    default:
        return regs_get_kernel_stack_nth(regs, n - PT_REGS_ARG_COUNT + 1);
    }
}

/*
 * Where the N-th integer argument (0-based) is in memory at function entry: on the stack
 * above the return address for N >= PT_REGS_ARG_COUNT, NULL for one passed in a register.
 * For code that must read the stack without faulting (fetch args).
 */
static inline unsigned long *regs_get_kernel_argument_addr(struct pt_regs *regs, unsigned int n)
{
    if (n < PT_REGS_ARG_COUNT) return NULL;
    return regs_get_kernel_stack_nth_addr(regs, n - PT_REGS_ARG_COUNT + 1);
}

/* Offset of a register in pt_regs by its kernel name ("ax", "di", "r8", "ip", ...), or -1. */
DPROBE_API int regs_query_register_offset(const char *name);
/* Name of the register at a pt_regs offset, or NULL. */
DPROBE_API const char *regs_query_register_name(unsigned int offset);

static inline unsigned long regs_get_register(struct pt_regs *regs, unsigned int offset)
{
    if (offset > offsetof(struct pt_regs, ss)) return 0;
    return *(unsigned long *)((char *)regs + offset);
}

/* ftrace_regs accessors (include/linux/ftrace_regs.h and the x86 arch part). */
static inline struct pt_regs *arch_ftrace_get_regs(struct ftrace_regs *fregs)
{
    return &fregs->regs;
}
static inline unsigned long ftrace_regs_get_instruction_pointer(struct ftrace_regs *fregs)
{
    return fregs->regs.ip;
}
static inline void ftrace_regs_set_instruction_pointer(struct ftrace_regs *fregs, unsigned long ip)
{
    fregs->regs.ip = ip;
}
static inline unsigned long ftrace_regs_get_argument(struct ftrace_regs *fregs, unsigned int n)
{
    return regs_get_kernel_argument(&fregs->regs, n);
}
static inline unsigned long ftrace_regs_get_stack_pointer(struct ftrace_regs *fregs)
{
    return fregs->regs.sp;
}
static inline unsigned long ftrace_regs_get_return_value(struct ftrace_regs *fregs)
{
    return fregs->regs.ax;
}
static inline void ftrace_regs_set_return_value(struct ftrace_regs *fregs, unsigned long ret)
{
    fregs->regs.ax = ret;
}
static inline unsigned long ftrace_regs_get_frame_pointer(struct ftrace_regs *fregs)
{
    return fregs->regs.bp;
}
/* At function entry: the address the function will return to. */
static inline unsigned long ftrace_regs_get_return_address(struct ftrace_regs *fregs)
{
    return regs_get_return_address(&fregs->regs);
}
static inline unsigned long ftrace_regs_get_kernel_stack_nth(struct ftrace_regs *fregs,
                                                             unsigned int n)
{
    return regs_get_kernel_stack_nth(&fregs->regs, n);
}
static inline int ftrace_regs_query_register_offset(const char *name)
{
    return regs_query_register_offset(name);
}
/* Vector register N (xmm0-7 at entry, xmm0-1 at return) as the probed function had it, as a
 * pointer to its low 16 bytes, valid while the handler runs. Out of line: a handler that
 * reads vector registers makes its probe save them (see Documentation/fprobe.md). */
DPROBE_API void *ftrace_regs_get_xmm(struct ftrace_regs *fregs, unsigned int n);
/* fprobe handlers never get a full pt_regs in dprobe (no SAVE_REGS ops). */
static inline struct pt_regs *ftrace_get_regs(struct ftrace_regs *fregs)
{
    (void)fregs;
    return NULL;
}
/* A pt_regs snapshot of the partial registers, for code shared with kprobe handlers. */
static inline struct pt_regs *ftrace_partial_regs(struct ftrace_regs *fregs, struct pt_regs *regs)
{
    *regs = fregs->regs;
    return regs;
}

DPROBE_EXTERN_C_END

#endif
