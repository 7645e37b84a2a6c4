/* SPDX-License-Identifier: MIT */
/*
 * kprobes, kretprobes and jprobes for a user-space process, as in Linux 6.18
 * (include/linux/kprobes.h).
 *
 *   static int pre(struct kprobe *p, struct pt_regs *regs)
 *   { printf("hit %p ip=%lx\n", p->addr, regs->ip); return 0; }
 *   static struct kprobe kp = { .symbol_name = "parse_line", .pre_handler = pre };
 *   register_kprobe(&kp);      ... unregister_kprobe(&kp);
 *
 * A kprobe may sit on any instruction of the program or of a loaded library ("lib:sym" names
 * a symbol of one object). It fires through an int3 and a SIGTRAP handler; the probed
 * instruction then runs out of line (copied and jumped back from, or copied and followed by
 * a second trap when a post_handler needs to run after it; branches are emulated). A probe on
 * a patch site (the __fentry__ call or -fpatchable-function-entry NOP of a function entry)
 * rides on the site instead: no trap, flagged KPROBE_FLAG_FTRACE. A probe without a
 * post_handler whose instructions allow it is jump-optimized (KPROBE_FLAG_OPTIMIZED): a jmp to
 * a detour replaces the int3, no trap either (see kprobes_set_optimization()).
 *
 * Handlers run on the thread that hit the probe, often inside a signal handler: they must be
 * async-signal-safe in spirit and short. As in the kernel, a probe hit while a kprobe handler
 * runs on the same thread is not handled: the instruction runs and the probe's nmissed grows.
 */
#ifndef DPROBE_KPROBES_H
#define DPROBE_KPROBES_H

#include <stddef.h>
#include <dprobe/compiler.h>
#include <dprobe/ptrace.h>

DPROBE_EXTERN_C_BEGIN

typedef unsigned char kprobe_opcode_t;

/* Default member initializers in C++, so designated initializers of kernel-style code
 * ({ .symbol_name = ..., .pre_handler = ... }) build cleanly with -Wextra. In C++, clear a
 * struct with `kp = {}` rather than memset (g++ -Wclass-memaccess). */
#ifdef __cplusplus
#define DPROBE_DFLT = {}
#else
#define DPROBE_DFLT
#endif

struct kprobe;
struct kretprobe;
struct kretprobe_instance;

typedef int (*kprobe_pre_handler_t)(struct kprobe *, struct pt_regs *);
typedef void (*kprobe_post_handler_t)(struct kprobe *, struct pt_regs *, unsigned long flags);
typedef int (*kretprobe_handler_t)(struct kretprobe_instance *, struct pt_regs *);

/* Kernel list heads, kept for source compatibility; dprobe does not use them. */
struct dprobe_hlist_node {
    void *next DPROBE_DFLT, **pprev DPROBE_DFLT;
};
struct dprobe_list_head {
    void *next DPROBE_DFLT, *prev DPROBE_DFLT;
};

/* Internal per-probe state (the kernel's arch_specific_insn): do not touch. */
struct arch_specific_insn {
    void *rec DPROBE_DFLT;         /* the probed address' record */
    unsigned int kind DPROBE_DFLT; /* plain kprobe or the entry probe of a kretprobe */
    unsigned int boostable DPROBE_DFLT;
    unsigned int stack_len DPROBE_DFLT; /* jprobe: bytes of stack arguments its handler gets */
};

struct kprobe {
    struct dprobe_hlist_node hlist DPROBE_DFLT;
    struct dprobe_list_head list DPROBE_DFLT;
    /* Hits not handled: the probe was hit while a kprobe handler ran on the same thread. */
    unsigned long nmissed DPROBE_DFLT;
    /* Where the probe is; set by register_kprobe() when symbol_name is used. */
    kprobe_opcode_t *addr DPROBE_DFLT;
    /* "sym" or "lib:sym"; either addr or symbol_name, not both. */
    const char *symbol_name DPROBE_DFLT;
    unsigned int offset DPROBE_DFLT;
    /* Called before the instruction runs, with regs->ip == addr + 1. A non-zero return means
     * the handler changed regs->ip: the instruction is skipped and execution continues there. */
    kprobe_pre_handler_t pre_handler DPROBE_DFLT;
    /* Called after the instruction ran (flags is always 0). */
    kprobe_post_handler_t post_handler DPROBE_DFLT;
    /* The original first byte of the probed instruction. */
    kprobe_opcode_t opcode DPROBE_DFLT;
    struct arch_specific_insn ainsn DPROBE_DFLT;
    /* KPROBE_FLAG_*: only KPROBE_FLAG_DISABLED may be set by the caller before registering. */
    unsigned int flags DPROBE_DFLT;
};

#define KPROBE_FLAG_GONE 1           /* the probed code was unloaded (dlclose) */
#define KPROBE_FLAG_DISABLED 2       /* registered but not armed */
#define KPROBE_FLAG_OPTIMIZED 4      /* jump-optimized (optprobes) */
#define KPROBE_FLAG_FTRACE 8         /* rides on a patch site */
#define KPROBE_FLAG_ON_FUNC_ENTRY 16 /* on a function entry (after endbr64) */

/* kprobe_status values, as per-thread state (the kernel keeps them per CPU). */
#define KPROBE_HIT_ACTIVE 0x00000001
#define KPROBE_HIT_SS 0x00000002
#define KPROBE_REENTER 0x00000004
#define KPROBE_HIT_SSDONE 0x00000008

static inline int kprobe_gone(struct kprobe *p)
{
    return p->flags & KPROBE_FLAG_GONE;
}
static inline int kprobe_disabled(struct kprobe *p)
{
    return p->flags & (KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE);
}
static inline int kprobe_optimized(struct kprobe *p)
{
    return p->flags & KPROBE_FLAG_OPTIMIZED;
}
static inline int kprobe_ftrace(struct kprobe *p)
{
    return p->flags & KPROBE_FLAG_FTRACE;
}

struct kretprobe {
    struct kprobe kp DPROBE_DFLT; /* the entry probe: a function entry */
    /* Called when the function returns; regs_return_value(regs) is its return value and
     * regs->ip the address it returns to. The return value of the handler is ignored. */
    kretprobe_handler_t handler DPROBE_DFLT;
    /* Called at entry; a non-zero return means: do not hook this call's return. */
    kretprobe_handler_t entry_handler DPROBE_DFLT;
    /* Calls in flight at once (all threads); <= 0 selects the default (max(10, 2 * CPUs)). */
    int maxactive DPROBE_DFLT;
    /* Calls whose return was not reported: maxactive were in flight, or the function was
     * left without returning (longjmp, a C++ exception, thread exit or cancellation). */
    int nmissed DPROBE_DFLT;
    /* Per-call private data (ri->data), at most KRETPROBE_MAX_DATA_SIZE bytes. */
    size_t data_size DPROBE_DFLT;
    void *rh DPROBE_DFLT; /* internal */
};

#define KRETPROBE_MAX_DATA_SIZE 4096
#define KRETPROBE_MAXACTIVE_MAX 4096

/* One in-flight call. It lives on the calling thread's shadow stack, next to fprobe exits. */
struct kretprobe_instance {
    struct kretprobe *rp;      /* owner (use get_kretprobe()) */
    kprobe_opcode_t *ret_addr; /* the real return address */
    void *fp;                  /* address of the return-address slot at entry */
    char data[];               /* data_size bytes */
};

DPROBE_API struct kretprobe *get_kretprobe(struct kretprobe_instance *ri);
DPROBE_API unsigned long get_kretprobe_retaddr(struct kretprobe_instance *ri);

/* 0 or a negative errno: -EINVAL (addr and symbol_name both or neither set, blacklisted,
 * not an instruction boundary, not code), -EILSEQ (inside a patch site's NOP), -ENOENT
 * (unknown symbol), -EEXIST (this struct is already registered), -EOPNOTSUPP (an instruction
 * that can neither run out of line nor be emulated). */
DPROBE_API int register_kprobe(struct kprobe *p);
/* Returns once no handler of P runs any more; harmless for a probe not registered. */
DPROBE_API void unregister_kprobe(struct kprobe *p);
/* Registers in order; on the first failure unregisters those already done. num <= 0: -EINVAL.
 * The probes are armed together: one text patch (and one stop of the threads for the
 * optimized ones) for all of them, so 10,000 probes register in milliseconds. */
DPROBE_API int register_kprobes(struct kprobe **kps, int num);
DPROBE_API void unregister_kprobes(struct kprobe **kps, int num);
DPROBE_API int register_kretprobe(struct kretprobe *rp);
DPROBE_API void unregister_kretprobe(struct kretprobe *rp);
DPROBE_API int register_kretprobes(struct kretprobe **rps, int num);
DPROBE_API void unregister_kretprobes(struct kretprobe **rps, int num);
/* -EINVAL for a probe that is not registered (or gone, for enable). */
DPROBE_API int disable_kprobe(struct kprobe *kp);
DPROBE_API int enable_kprobe(struct kprobe *kp);
/* dprobe's batch versions (the kernel has none): every probe of KPS armed or disarmed in one
 * batch, as register_kprobes() does, e.g. to enable thousands of trace events at once. All
 * or nothing: on failure every probe keeps its state. -EINVAL when one is not registered (or
 * gone, for enable) or num <= 0. */
DPROBE_API int enable_kprobes(struct kprobe **kps, int num);
DPROBE_API int disable_kprobes(struct kprobe **kps, int num);
static inline int disable_kretprobe(struct kretprobe *rp)
{
    return disable_kprobe(&rp->kp);
}
static inline int enable_kretprobe(struct kretprobe *rp)
{
    return enable_kprobe(&rp->kp);
}

/*
 * jprobes (the kernel's, removed from Linux in 4.15; dprobe keeps them): a probe on a function
 * entry whose handler has the probed function's prototype and reads its arguments as
 * parameters.
 *
 *   static long my_parse(const char *buf, size_t len)
 *   { printf("parse(%.*s)\n", (int)len, buf); jprobe_return(); return 0; }
 *   static struct jprobe jp = { .kp.symbol_name = "parse", .entry = JPROBE_ENTRY(my_parse) };
 *   register_jprobe(&jp);      ... unregister_jprobe(&jp);
 *
 * The handler is entered with the argument state of the function's entry: rdi rsi rdx rcx r8
 * r9, rax (al: vector registers used by a variadic call), r10, xmm0-7 (at full width when
 * their upper halves were in use) and a copy of the stack-passed arguments (as many bytes as
 * DWARF says; without DWARF the first JPROBE_MAX_STACK_SIZE), so a handler that writes its
 * parameters changes a copy. When it is
 * done it calls jprobe_return(), which resumes the function with every register, flag and
 * stack byte as at its entry (MXCSR's sticky exception flags excepted, as for every handler). A
 * handler that returns instead is resumed the same way and counted in jp->nreturned (dprobe's; the
 * kernel's would crash). The handler must not throw or longjmp out. It runs as a kprobe pre
 * handler: a probe hit meanwhile on the same thread counts in its nmissed, and unregister_jprobe()
 * returns once no handler of it runs.
 */
struct jprobe {
    struct kprobe kp DPROBE_DFLT; /* a function entry: addr, or symbol_name (offset 0) */
    void *entry DPROBE_DFLT;      /* the handler: same prototype as the probed function */
    /* dprobe's: hits whose handler returned without calling jprobe_return(). */
    unsigned long nreturned DPROBE_DFLT;
    void *jh DPROBE_DFLT; /* internal */
};

/* Bytes of stack-passed arguments the handler sees (the kernel's MAX_STACK_SIZE on x86):
 * with more, register_jprobe() says -E2BIG when the function's DWARF tells its parameters. */
#define JPROBE_MAX_STACK_SIZE 64
#define JPROBE_ENTRY(pentry) ((void *)(pentry))

/* 0 or a negative errno: those of register_kprobe(), and -EINVAL for a place that is not a
 * function entry or no entry handler, -E2BIG for a function whose stack-passed arguments
 * exceed JPROBE_MAX_STACK_SIZE bytes (DWARF of the object, when it has some). */
DPROBE_API int register_jprobe(struct jprobe *jp);
DPROBE_API void unregister_jprobe(struct jprobe *jp);
/* In order, armed in one batch; on the first failure none stays registered. */
DPROBE_API int register_jprobes(struct jprobe **jps, int num);
DPROBE_API void unregister_jprobes(struct jprobe **jps, int num);
/* Ends the jprobe handler running on this thread: the probed function runs on with its
 * entry state. Does nothing (returns) outside a jprobe handler. */
DPROBE_API void jprobe_return(void);
static inline int disable_jprobe(struct jprobe *jp)
{
    return disable_kprobe(&jp->kp);
}
static inline int enable_jprobe(struct jprobe *jp)
{
    return enable_kprobe(&jp->kp);
}

/* The first registered probe at ADDR (for an aggregated address, the first in order). */
DPROBE_API struct kprobe *get_kprobe(void *addr);
/* The probe whose handler runs on this thread, or NULL. */
DPROBE_API struct kprobe *kprobe_running(void);
/* Mark "a kprobe handler is running" on this thread: probes hit meanwhile count as missed. */
DPROBE_API void kprobe_busy_begin(void);
DPROBE_API void kprobe_busy_end(void);
/* 0 if ADDR (or SYM+OFFSET) is a function entry, -EINVAL if not, -ENOENT for an unknown SYM. */
DPROBE_API int kprobe_on_func_entry(kprobe_opcode_t *addr, const char *sym, unsigned long offset);
/* dprobe's: 0 if ADDR (or SYM+OFFSET, past SYM's end included) starts an instruction of the
 * function that holds it (decoded from the function's start, over the bytes before any
 * probe), -EILSEQ if not (what the kernel's arch_prepare_kprobe() returns; register_kprobe()
 * here says -EINVAL, see Documentation/kprobes.md), -EINVAL when no known function holds it,
 * -ENOENT for an unknown SYM. The tracefs layer tells BAD_INSN_BNDRY with it. */
DPROBE_API int kprobe_insn_boundary(kprobe_opcode_t *addr, const char *sym, unsigned long offset);
/* Whether ADDR may not be probed (dprobe itself, the signal return trampoline, NOKPROBE). */
DPROBE_API int within_kprobe_blacklist(unsigned long addr);
DPROBE_API void dump_kprobe(struct kprobe *kp);

/* kprobes/enabled: 0 disarms every probe (their own DISABLED state is kept), 1 rearms. */
DPROBE_API int kprobes_set_enabled(int enabled);
DPROBE_API int kprobes_enabled(void);

/* kprobes/optimization (the sysctl debug.kprobes-optimization), 1 by default: int3 kprobes
 * without post handlers (and not kretprobe entries) get their instructions replaced by a jmp
 * to a detour that calls the pre handlers without a trap (KPROBE_FLAG_OPTIMIZED; changes of
 * regs->ip are then ignored, as in the kernel). 0 turns every optimized probe back into an
 * int3 probe. Returns 0, or -EINVAL for a value other than 0 and 1. */
DPROBE_API int kprobes_set_optimization(int on);
DPROBE_API int kprobes_optimization(void);

/*
 * NOKPROBE_SYMBOL(fname): fname may not be probed. Records the function's address in the
 * _kprobe_blacklist section of the object; dprobe reads it per loaded object.
 */
#define NOKPROBE_SYMBOL(fname)                                                                     \
    static void *__attribute__((used, section("_kprobe_blacklist"))) _kbl_addr_##fname =           \
        (void *)&(fname)

DPROBE_EXTERN_C_END

#ifdef __cplusplus
#include <string>
namespace dprobe
{
/* The text of kprobes/list: one line per registered probe (aggregates expanded). */
DPROBE_API std::string kprobes_list_text();
/* The text of kprobes/blacklist: "0x<start>-0x<end>\t<sym>" per range. */
DPROBE_API std::string kprobes_blacklist_text();
/* "optimized", or why the registered probe P is not (for debugging and `dprobe funcs`). */
DPROBE_API std::string kprobe_optimization_status(const struct kprobe *p);
} // namespace dprobe
#endif

#endif
