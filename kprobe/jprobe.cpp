// jprobes (kernel/kprobes.c's register_jprobes() and setjmp_pre_handler(), Linux 4.14): a
// kprobe on a function entry whose handler has the function's prototype.
//
// A jprobe is a kprobe of kind_jprobe in its address' record, so it shares everything a
// kprobe has: aggregation with other probes at the address, batches, enable/disable, the
// recursion guard (a hit while any kprobe handler runs on the thread counts in kp.nmissed),
// [GONE], and quiescence (unregister waits for the dispatchers and the SIGTRAP hook, so for
// any handler still running). Where it fires:
//  - On a site (a patch site, or a jump site made for it as for a kretprobe) it has an
//    ftrace_ops of its own, as a kretprobe does, attached while it is enabled (the arming
//    batch, kprobe_arm.cpp). Alone on the site, its hits take the ops' direct call
//    (arch's dprobe_jprobe_direct: the kernel's later kprobes-on-ftrace, without the pt_regs
//    path; the vector registers saved around a handler not known to leave them alone);
//    beside other users, or when the direct call declines, the full ftrace path calls
//    jprobe_ftrace_entry().
//  - Elsewhere (optimization off) an int3 at the entry: the SIGTRAP hook runs it
//    (kprobe_int3.cpp). It is never jump-optimized: the int3 detour does not keep the vector
//    registers the handler needs.
// The hit itself is arch's (jprobes_arch.h): the handler is entered with the function's
// argument registers on a copy of its stack arguments, and comes back through
// jprobe_return() or by returning.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/jprobes_arch.h"
#include "arch/x86_64/uaccess.h"
#include "core/compiler.h"
#include "kprobe/kprobe_internal.h"

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <new>
#include <vector>

namespace dprobe::kp
{

// A registered jprobe's own state: its ftrace_ops for sites, and what the direct call reads.
struct jprobe_ctl {
    arch::jprobe_desc desc; // the ops' priv
    ftrace_ops ops;
    struct jprobe *jp = nullptr;
    ftrace_site *attached = nullptr; // the site the ops is attached to
    unsigned long direct_ok = 0;     // desc.direct while it is enabled
    jprobe_ctl *next_free = nullptr;
};

namespace
{

static_assert(arch::JPROBE_STACK_MAX == JPROBE_MAX_STACK_SIZE);
// jprobe::jh is the state's address, which jprobe_return() reads as the description's.
static_assert(offsetof(jprobe_ctl, desc) == 0);
static_assert(kind_jprobe == 2); // jprobe_tramp.S's KIND_JPROBE

jprobe_ctl *free_ctls; // under kprobe_mutex(); never freed (a late reader finds valid memory)

DPROBE_NOPROBE inline jprobe_ctl *ctl_of(struct jprobe *jp) noexcept
{
    return static_cast<jprobe_ctl *>(jp->jh);
}

DPROBE_NOPROBE inline struct kprobe *probe_of(const ftrace_ops *ops) noexcept
{
    return static_cast<const arch::jprobe_desc *>(ops->priv)->kp;
}

// The full ftrace path's hit (the direct call declined it, or the site has other users).
DPROBE_NOPROBE int jprobe_ftrace_entry(ftrace_ops *ops, unsigned long, unsigned long,
                                       struct ftrace_regs *fregs, void *)
{
    struct kprobe *p = probe_of(ops);
    task_ctx *t = peek_task_ctx();
    if (!t || !child_enabled(p)) return 1;
    if (kprobe_busy_on(t)) {
        __atomic_add_fetch(&p->nmissed, 1, __ATOMIC_RELAXED);
        return 1;
    }
    t->current_kprobe = p;
    t->kprobe_status = KPROBE_HIT_ACTIVE;
    // Entry registers as the trampoline saved them (ip and flags are not read).
    jprobe_run(p, &fregs->regs, fregs->vec, fregs->vec_size, arch::fregs_vec_wide(fregs));
    t->current_kprobe = nullptr;
    t->kprobe_status = 0;
    return 1;
}

// A hit dispatch did not hand to the ops (recursion: a handler called the function).
DPROBE_NOPROBE void jprobe_ftrace_missed(ftrace_ops *ops)
{
    __atomic_add_fetch(&probe_of(ops)->nmissed, 1, __ATOMIC_RELAXED);
}

jprobe_ctl *alloc_ctl()
{
    if (jprobe_ctl *c = free_ctls) {
        free_ctls = c->next_free;
        c->next_free = nullptr;
        return c;
    }
    return new (std::nothrow) jprobe_ctl;
}

void free_ctl(jprobe_ctl *c)
{
    c->jp = nullptr;
    c->next_free = free_ctls;
    free_ctls = c;
}

} // namespace

DPROBE_NOPROBE void jprobe_run(struct kprobe *p, const struct pt_regs *regs, const void *vec,
                               unsigned long vec_size, bool wide) noexcept
{
    struct jprobe *jp = container_of_jprobe(p);
    arch::jprobe_call c;
    c.entry = __atomic_load_n(&jp->entry, __ATOMIC_RELAXED);
    c.regs = regs;
    c.vec = vec;
    c.vec_size = vec_size;
    c.wide = wide;
    // Read without trusting the stack to extend that far (a function entered at the top of a
    // makecontext() stack has little above it): what cannot be read is zero.
    alignas(16) unsigned char args[JPROBE_MAX_STACK_SIZE];
    c.stack = args;
    c.stack_len = p->ainsn.stack_len;
    if (c.stack_len &&
        copy_from_user_nofault(args, arch::jprobe_stack_args(regs), c.stack_len) != 0) {
        for (unsigned long i = 0; i < c.stack_len; ++i)
            args[i] = 0;
        for (unsigned long i = 0; i < c.stack_len; i += 8)
            if (copy_from_user_nofault(
                    args + i, static_cast<const char *>(arch::jprobe_stack_args(regs)) + i, 8))
                break;
    }
    c.frame_slot = &dprobe_jprobe_frame;
    const jprobe_ctl *ctl = ctl_of(jp);
    c.desc = ctl ? &ctl->desc : nullptr;
    if (dprobe_jprobe_call(&c)) __atomic_add_fetch(&jp->nreturned, 1, __ATOMIC_RELAXED);
}

// --- registration (under kprobe_mutex) -----------------------------------------------------

int jprobe_prepare(struct jprobe *jp)
{
    jprobe_ctl *ctl = alloc_ctl();
    if (!ctl) return -ENOMEM;
    ctl->jp = jp;
    ctl->attached = nullptr;
    ctl->desc.entry = jp->entry;
    ctl->desc.kp = &jp->kp;
    ctl->desc.nreturned = &jp->nreturned;
    ctl->desc.stack_len = JPROBE_MAX_STACK_SIZE;
    ctl->desc.direct = 0;
    ctl->desc.may_jump = 1;
    // Where jprobe_return() may return rather than jump (the common `jprobe_return(); return
    // 0;` ending): the returns after the hit stay predicted.
    ctl->desc.nsites = arch::jprobe_ret_sites(reinterpret_cast<uintptr_t>(jp->entry),
                                              reinterpret_cast<uintptr_t>(&jprobe_return),
                                              ctl->desc.sites, arch::JPROBE_RET_SITES);
    arch::jprobe_ret_publish(ctl->desc.sites, ctl->desc.nsites);
    ctl->ops.entry = jprobe_ftrace_entry;
    ctl->ops.missed = jprobe_ftrace_missed;
    ctl->ops.priv = &ctl->desc;
    // ftrace's direct facility, in its own-code form (ftrace_direct::call).
    ctl->ops.direct.call = reinterpret_cast<uintptr_t>(&dprobe_jprobe_direct);
    jp->jh = ctl;
    return 0;
}

void jprobe_set_stack(struct jprobe *jp, unsigned long stack_len, bool exact)
{
    jprobe_ctl *ctl = ctl_of(jp);
    ctl->desc.stack_len = stack_len;
    // The direct call saves no extended state for a handler that leaves it alone, and the
    // vector registers the trampoline keeps for any other.
    const bool clean = arch::ext_state_clean(reinterpret_cast<uintptr_t>(jp->entry), false);
    ctl->direct_ok = arch::JPROBE_DIRECT | (clean ? 0 : arch::JPROBE_DIRECT_VECTOR) |
                     (exact ? 0 : arch::JPROBE_DIRECT_UNKNOWN_LEN);
    ctl->desc.may_jump = arch::jprobe_may_jump(reinterpret_cast<uintptr_t>(jp->entry),
                                               reinterpret_cast<uintptr_t>(&jprobe_return),
                                               ctl->desc.sites, ctl->desc.nsites);
}

bool jprobe_sync_pair(struct jprobe *jp, bool want, ftrace_ops_site *out)
{
    jprobe_ctl *ctl = ctl_of(jp);
    if (!ctl) return false;
    // What the direct call checks instead of the probe's flags (a hit that still sees the
    // old value runs as it would have just before): set before the ops is attached, cleared
    // before it is detached.
    __atomic_store_n(&ctl->desc.direct, want ? ctl->direct_ok : 0UL, __ATOMIC_RELEASE);
    if (want && !ctl->attached) {
        ftrace_site *s = record_site(&jp->kp);
        if (!s) return false;
        *out = {&ctl->ops, s};
        return true;
    }
    if (!want && ctl->attached) {
        *out = {&ctl->ops, ctl->attached};
        return true;
    }
    return false;
}

void jprobe_sync_done(struct jprobe *jp, const ftrace_ops_site &pair, bool attached)
{
    if (jprobe_ctl *ctl = ctl_of(jp)) ctl->attached = attached ? pair.site : nullptr;
}

void jprobe_sync(struct jprobe *jp, bool want)
{
    ftrace_ops_site pair;
    if (!jprobe_sync_pair(jp, want, &pair)) return;
    ftrace_site *one[1] = {pair.site};
    if (want) {
        if (ftrace_ops_attach(pair.ops, one) == 0) jprobe_sync_done(jp, pair, true);
    } else {
        ftrace_ops_detach(pair.ops, one);
        jprobe_sync_done(jp, pair, false);
    }
}

// After the probes left their records and the sites, and the readers were waited for.
void jprobes_release(std::span<struct jprobe *const> jps)
{
    for (struct jprobe *jp : jps) {
        jprobe_ctl *ctl = ctl_of(jp);
        if (!ctl) continue;
        jprobe_sync(jp, false);
        arch::jprobe_ret_withdraw(ctl->desc.sites, ctl->desc.nsites);
        jp->jh = nullptr;
        free_ctl(ctl);
    }
}

} // namespace dprobe::kp

using namespace dprobe::kp;

extern "C" {

int register_jprobe(struct jprobe *jp)
{
    if (!jp) return -EINVAL;
    return register_jprobes(&jp, 1);
}

void unregister_jprobe(struct jprobe *jp)
{
    if (jp) unregister_jprobes(&jp, 1);
}

// As register_kretprobes(): checked in order, then armed in one batch; on the first failure
// none stays registered.
int register_jprobes(struct jprobe **jps, int num)
{
    if (!jps || num <= 0) return -EINVAL;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    std::vector<struct kprobe *> kps;
    kps.reserve(static_cast<size_t>(num));
    int err = 0;
    for (int i = 0; i < num && !err; ++i) {
        struct jprobe *jp = jps[i];
        if (!jp || !jp->entry)
            err = -EINVAL;
        else if (kprobe_registered_locked(&jp->kp))
            err = -EEXIST;
        else if (std::find(kps.begin(), kps.end(), &jp->kp) != kps.end())
            err = -EEXIST;
        // The kernel's check: a jprobe's handler mirrors the function's entry.
        else if ((err = kprobe_on_func_entry(jp->kp.addr, jp->kp.symbol_name, jp->kp.offset)))
            ;
        else if (!(err = jprobe_prepare(jp))) {
            jp->nreturned = 0;
            kps.push_back(&jp->kp);
        }
    }
    if (!err) err = register_kprobes_locked(kps.data(), static_cast<int>(kps.size()), kind_jprobe);
    if (err) {
        std::vector<struct jprobe *> prepared;
        for (struct kprobe *p : kps)
            prepared.push_back(container_of_jprobe(p));
        jprobes_release(prepared);
    }
    return err;
}

void unregister_jprobes(struct jprobe **jps, int num)
{
    if (!jps || num <= 0) return;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    std::vector<struct kprobe *> kps;
    for (int i = 0; i < num; ++i)
        if (jps[i] && kprobe_registered_locked(&jps[i]->kp)) kps.push_back(&jps[i]->kp);
    unregister_kprobes_locked(kps.data(), static_cast<int>(kps.size()));
}

// jprobe_return() is arch's (arch/x86_64/jprobe_tramp.S), as it was in the kernel.

} // extern "C"
