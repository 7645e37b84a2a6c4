/* SPDX-License-Identifier: MIT */
/*
 * fprobe: entry and exit handlers on many functions at once, as in Linux 6.18
 * (include/linux/fprobe.h). Functions are reached through their patch sites: the call of
 * __fentry__ in code built with -pg -mfentry, a -fpatchable-function-entry NOP sled, or
 * (where a function has neither) an optimized function-entry probe.
 *
 *   static int on_entry(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
 *                       struct ftrace_regs *fregs, void *data)
 *   { printf("%lu\n", ftrace_regs_get_argument(fregs, 0)); return 0; }
 *   static struct fprobe fp = { .entry_handler = on_entry };
 *   register_fprobe(&fp, "parse_*", "parse_debug*");
 *
 * Handlers run on the thread that called the function, must be async-signal-safe in
 * spirit (they can run inside a signal handler) and must not block for long: a handler
 * that calls a probed function does not recurse; the nested hit counts in fp->nmissed.
 */
#ifndef DPROBE_FPROBE_H
#define DPROBE_FPROBE_H

#include <stddef.h>
#include <dprobe/compiler.h>
#include <dprobe/ptrace.h>

DPROBE_EXTERN_C_BEGIN

struct fprobe;
struct fprobe_hlist;

typedef int (*fprobe_entry_cb)(struct fprobe *fp, unsigned long entry_ip, unsigned long ret_ip,
                               struct ftrace_regs *regs, void *entry_data);
typedef void (*fprobe_exit_cb)(struct fprobe *fp, unsigned long entry_ip, unsigned long ret_ip,
                               struct ftrace_regs *regs, void *entry_data);
/* dprobe's extension: a call whose entry handler ran (and returned 0) left without returning
 * (longjmp, siglongjmp, a C++ exception caught further up, thread exit or cancellation): the
 * exit handler will not run for it. Called on the same thread, from the probe hot path, when
 * dprobe notices: at the catch (__cxa_begin_catch), at the thread's next probe hit or hooked
 * return after a longjmp, at thread exit. Frames are reported innermost first. */
typedef void (*fprobe_unwound_cb)(struct fprobe *fp, void *entry_data);

struct fprobe {
    /* Hits not handled: recursion, shadow stack full; and exits that never come because the
     * function was left without returning (longjmp, a C++ exception, thread exit) when no
     * unwound_handler takes them. */
    unsigned long nmissed;
    unsigned int flags;     /* FPROBE_FL_* */
    size_t entry_data_size; /* per-call private data, rounded up to sizeof(long) */
    fprobe_entry_cb entry_handler;
    fprobe_exit_cb exit_handler;
    struct fprobe_hlist *hlist_array; /* internal; non-NULL while registered */
    /* Optional (dprobe's extension, needs exit_handler): calls left without returning. Those
     * are then reported here instead of being counted in nmissed. */
    fprobe_unwound_cb unwound_handler;
};

#define FPROBE_FL_DISABLED 1      /* soft-disabled: sites stay hooked, handlers are skipped */
#define FPROBE_FL_KPROBE_SHARED 2 /* handlers shared with kprobes; set before register */
/* Set before register_fprobe() (dprobe's extension; the kernel's :mod: filters play this
 * role): the filter is applied again to every object loaded later with dlopen, including a
 * library loaded again after dlclose, as soon as the loader has mapped it: before it is
 * relocated and before its constructors run. Nothing matching at registration is then not
 * an error, and functions that cannot be probed are left out instead of failing the
 * registration. register_fprobe_ips() and register_fprobe_syms() refuse it (-EINVAL).
 * (An unloaded object's functions are dropped with or without this flag.) */
#define FPROBE_FL_FOLLOW_LOADS 4

#define FPROBE_DATA_SIZE_BITS 4
#define MAX_FPROBE_DATA_SIZE_WORD ((1L << FPROBE_DATA_SIZE_BITS) - 1)
#define MAX_FPROBE_DATA_SIZE (MAX_FPROBE_DATA_SIZE_WORD * sizeof(long))

/* Probe every function whose name matches the glob FILTER and not NOTFILTER (may be NULL).
 * Each may hold several globs separated by white space, each with an optional "lib:"
 * prefix ("libz.so:inflate* parse_*"). With FPROBE_FL_FOLLOW_LOADS also in objects loaded
 * later; -EBUSY then if a debugger's breakpoint is on the loader's _dl_debug_state, and
 * -EOPNOTSUPP if that function is not the one dprobe knows how to hook. */
DPROBE_API int register_fprobe(struct fprobe *fp, const char *filter, const char *notfilter);
/* Probe the given patch-site addresses (as returned by ftrace_location()). */
DPROBE_API int register_fprobe_ips(struct fprobe *fp, unsigned long *addrs, int num);
/* Probe the given symbols; SYMS is sorted in place, as in the kernel. */
DPROBE_API int register_fprobe_syms(struct fprobe *fp, const char **syms, int num);
/* Returns only when no handler of FP can still run; FP may then be freed or reused. */
DPROBE_API int unregister_fprobe(struct fprobe *fp);
/* Number of functions FILTER/NOTFILTER would probe. */
DPROBE_API int fprobe_count_ips_from_filter(const char *filter, const char *notfilter);

static inline int fprobe_is_registered(struct fprobe *fp)
{
    return fp && fp->hlist_array;
}
static inline int fprobe_disabled(struct fprobe *fp)
{
    return fp && (fp->flags & FPROBE_FL_DISABLED);
}
static inline int fprobe_shared_with_kprobes(struct fprobe *fp)
{
    return fp && (fp->flags & FPROBE_FL_KPROBE_SHARED);
}
static inline void disable_fprobe(struct fprobe *fp)
{
    if (fp) __atomic_or_fetch(&fp->flags, FPROBE_FL_DISABLED, __ATOMIC_RELEASE);
}
static inline void enable_fprobe(struct fprobe *fp)
{
    if (fp) __atomic_and_fetch(&fp->flags, ~FPROBE_FL_DISABLED, __ATOMIC_RELEASE);
}

DPROBE_EXTERN_C_END

#endif
