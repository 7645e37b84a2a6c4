// kretprobes on the shadow stack shared with fprobe exits (kernel/kprobes.c's kretprobe part,
// with rethook's role played by core's ftrace dispatch).
//
// Each registered kretprobe owns one ftrace_ops with an exit callback; its per-call data
// (struct kretprobe_instance + data_size bytes) lives in the shadow frame. When the function
// has a patch site the ops attaches to the site; otherwise an int3 kprobe at the function
// entry hands the trapped registers to dprobe_ftrace_entry() with a private site record
// (never in the site table) whose only user is the ops. Either way the function returns
// through core's return trampoline, which runs the exit callback.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/insn_bytes.h"
#include "core/compiler.h"
#include "kprobe/kprobe_internal.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <unistd.h>
#include <vector>

namespace dprobe::kp
{

struct kretprobe_ctl {
    ftrace_ops ops;
    ftrace_site psite; // private site for the int3 entry
    struct kretprobe *rp = nullptr;
    std::atomic<int> inflight{0};
    int maxactive = 0;
    ftrace_site *attached = nullptr; // the real site the ops is attached to
    kretprobe_ctl *next_free = nullptr;
};

namespace
{

kretprobe_ctl *free_ctls; // under kprobe_mutex()

DPROBE_NOPROBE inline kretprobe_ctl *ctl_of(struct kretprobe *rp) noexcept
{
    return static_cast<kretprobe_ctl *>(rp->rh);
}

// While a kretprobe handler runs, the hooked callers' return-address slots show their real
// return addresses, so backtrace() walks through them (the kernel's unwinders ask
// kretprobe_find_ret_addr() for the same). Returns a mask of the slots changed.
DPROBE_NOPROBE uint64_t unhide_return_addresses(task_ctx *t, uintptr_t sp_now) noexcept
{
    uint64_t mask = 0;
    uint32_t top = t->shadow_top;
    for (unsigned n = 0; top && n < 64; ++n) {
        unsigned long *f = &t->shadow[top - t->shadow[top - 1]];
        // A frame above sp_now may be gone and its slot reused (stack_slot_read).
        if (f[sf_retp] > sp_now && stack_slot_read(f[sf_retp]) == f[sf_hook] &&
            !arch::is_return_hook(f[sf_ret])) {
            stack_slot_write(f[sf_retp], f[sf_ret]);
            mask |= uint64_t{1} << n;
        }
        top -= static_cast<uint32_t>(t->shadow[top - 1]);
    }
    return mask;
}

DPROBE_NOPROBE void rehide_return_addresses(task_ctx *t, uint64_t mask) noexcept
{
    uint32_t top = t->shadow_top;
    for (unsigned n = 0; top && mask; ++n) {
        unsigned long *f = &t->shadow[top - t->shadow[top - 1]];
        if (mask & (uint64_t{1} << n)) {
            stack_slot_write(f[sf_retp], f[sf_hook]);
            mask &= ~(uint64_t{1} << n);
        }
        top -= static_cast<uint32_t>(t->shadow[top - 1]);
    }
}

DPROBE_NOPROBE int krp_entry(ftrace_ops *ops, unsigned long ip, unsigned long parent_ip,
                             struct ftrace_regs *fregs, void *data)
{
    auto *ctl = static_cast<kretprobe_ctl *>(ops->priv);
    struct kretprobe *rp = ctl->rp;
    task_ctx *t = peek_task_ctx();
    const bool from_int3 = fregs == int3_fregs();
    if (!from_int3) {
        // On a site: the kprobe checks the int3 hook makes for the entry probe.
        if (!t || !child_enabled(&rp->kp)) return 1;
        if (kprobe_busy_on(t)) {
            __atomic_add_fetch(&rp->kp.nmissed, 1, __ATOMIC_RELAXED);
            return 1;
        }
    }
    auto *ri = static_cast<struct kretprobe_instance *>(data);
    // Noted before the instance is reserved: should a signal handler cut this entry short
    // with a jump, krp_abandoned() gives it back (once too often at worst, a window of one
    // instruction; never leaked, which would end in every call being missed).
    ri->rp = rp;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (ctl->inflight.fetch_add(1, std::memory_order_relaxed) >= ctl->maxactive) {
        ctl->inflight.fetch_sub(1, std::memory_order_relaxed);
        ri->rp = nullptr;
        __atomic_add_fetch(&rp->nmissed, 1, __ATOMIC_RELAXED);
        return 1;
    }
    ri->ret_addr = reinterpret_cast<kprobe_opcode_t *>(parent_ip);
    ri->fp = reinterpret_cast<void *>(ftrace_regs_get_stack_pointer(fregs));
    if (!rp->entry_handler) return 0;
    // int3: the hook's registers (a real pt_regs, ip past the int3); site: the trampoline's.
    struct pt_regs *regs = arch_ftrace_get_regs(fregs);
    unsigned long snap = 0, orig_ip = 0;
    if (!from_int3) {
        snap = fregs_make_pt_regs(fregs);
        orig_ip = instruction_pointer(regs);
        instruction_pointer_set(regs, arch::int3_trap_ip(ip));
    }
    struct kprobe *prev = t->current_kprobe;
    t->current_kprobe = &rp->kp;
    t->kprobe_status = KPROBE_HIT_ACTIVE;
    const uint64_t mask = unhide_return_addresses(t, ftrace_regs_get_stack_pointer(fregs));
    int r = rp->entry_handler(ri, regs);
    rehide_return_addresses(t, mask);
    t->current_kprobe = prev;
    if (!from_int3) {
        instruction_pointer_set(regs, orig_ip);
        fregs_undo_pt_regs(fregs, snap);
    }
    if (r) {
        // Discarded: no return hook, and not a miss.
        ctl->inflight.fetch_sub(1, std::memory_order_relaxed);
        ri->rp = nullptr;
        return 1;
    }
    return 0;
}

DPROBE_NOPROBE void krp_exit(ftrace_ops *ops, unsigned long, unsigned long,
                             struct ftrace_regs *fregs, void *data)
{
    auto *ctl = static_cast<kretprobe_ctl *>(ops->priv);
    struct kretprobe *rp = ctl->rp;
    task_ctx *t = peek_task_ctx();
    if (!rp || !rp->handler || !t) {
        ctl->inflight.fetch_sub(1, std::memory_order_relaxed);
        return;
    }
    auto *ri = static_cast<struct kretprobe_instance *>(data);
    // regs->ip is the real return address (core put it there); ax/dx changes are applied.
    const unsigned long snap = fregs_make_pt_regs(fregs);
    struct kprobe *prev = t->current_kprobe;
    const unsigned long status = t->kprobe_status;
    t->current_kprobe = &rp->kp;
    t->kprobe_status = KPROBE_HIT_ACTIVE;
    const uint64_t mask = unhide_return_addresses(t, ftrace_regs_get_stack_pointer(fregs));
    rp->handler(ri, arch_ftrace_get_regs(fregs));
    rehide_return_addresses(t, mask);
    t->current_kprobe = prev;
    t->kprobe_status = status;
    fregs_undo_pt_regs(fregs, snap);
    // Given back last: a handler cut short by a jump leaves the frame to be dropped as gone,
    // and krp_unwound() gives the instance back then.
    ctl->inflight.fetch_sub(1, std::memory_order_relaxed);
}

DPROBE_NOPROBE void krp_missed(ftrace_ops *ops)
{
    auto *ctl = static_cast<kretprobe_ctl *>(ops->priv);
    if (ctl->rp) __atomic_add_fetch(&ctl->rp->kp.nmissed, 1, __ATOMIC_RELAXED);
}

// The function left without returning (longjmp, an exception, thread exit): the instance
// is recycled and counted; the handler does not run for it.
DPROBE_NOPROBE void krp_unwound(ftrace_ops *ops, void *)
{
    auto *ctl = static_cast<kretprobe_ctl *>(ops->priv);
    ctl->inflight.fetch_sub(1, std::memory_order_relaxed);
    if (ctl->rp) __atomic_add_fetch(&ctl->rp->nmissed, 1, __ATOMIC_RELAXED);
}

// krp_entry() was cut short by a jump out of a signal handler: the instance it reserved, if
// it got that far, is given back.
DPROBE_NOPROBE void krp_abandoned(ftrace_ops *ops, void *data)
{
    auto *ctl = static_cast<kretprobe_ctl *>(ops->priv);
    auto *ri = static_cast<struct kretprobe_instance *>(data);
    if (!ri || !ri->rp) return;
    ctl->inflight.fetch_sub(1, std::memory_order_relaxed);
    __atomic_add_fetch(&ri->rp->nmissed, 1, __ATOMIC_RELAXED);
}

int default_maxactive()
{
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    if (cpus < 1) cpus = 1;
    return static_cast<int>(cpus * 2 > 10 ? cpus * 2 : 10);
}

kretprobe_ctl *alloc_ctl()
{
    if (kretprobe_ctl *c = free_ctls) {
        free_ctls = c->next_free;
        c->next_free = nullptr;
        return c;
    }
    return new (std::nothrow) kretprobe_ctl;
}

void free_ctl(kretprobe_ctl *c)
{
    c->rp = nullptr;
    c->next_free = free_ctls;
    free_ctls = c;
}

// Attach or detach the ops of a kretprobe on a site to match its state.
void sync_ftrace(kretprobe_ctl *ctl, bool want)
{
    ftrace_site *s = record_site(&ctl->rp->kp);
    if (!s) return;
    if (want && !ctl->attached) {
        ftrace_site *one[1] = {s};
        if (ftrace_ops_attach(&ctl->ops, one) == 0) ctl->attached = s;
    } else if (!want && ctl->attached) {
        ftrace_site *one[1] = {ctl->attached};
        ftrace_ops_detach(&ctl->ops, one);
        ctl->attached = nullptr;
    }
}

} // namespace

DPROBE_NOPROBE void kretprobe_int3_entry(struct kretprobe *rp, struct pt_regs *regs, ucontext_t *uc)
{
    kretprobe_ctl *ctl = ctl_of(rp);
    if (!ctl) return;
    struct ftrace_regs fregs;
    auto *d = reinterpret_cast<unsigned long *>(&fregs.regs);
    const auto *s = reinterpret_cast<const unsigned long *>(regs);
    for (size_t i = 0; i < sizeof(struct pt_regs) / sizeof(long); ++i)
        d[i] = s[i];
    fregs.vec = uc->uc_mcontext.fpregs ? &uc->uc_mcontext.fpregs->_xmm[0] : nullptr;
    fregs.vec_size = 16;
    set_int3_fregs(&fregs);
    dprobe_ftrace_entry(&ctl->psite, &fregs);
    set_int3_fregs(nullptr);
    for (size_t i = 0; i < sizeof(struct pt_regs) / sizeof(long); ++i)
        const_cast<unsigned long *>(s)[i] = d[i];
    // dispatch replaced the return address at *sp with the return trampoline (or did not).
}

// --- registration (under kprobe_mutex) -----------------------------------------------------

int kretprobe_prepare(struct kretprobe *rp)
{
    if (rp->data_size > KRETPROBE_MAX_DATA_SIZE) return -E2BIG;
    kretprobe_ctl *ctl = alloc_ctl();
    if (!ctl) return -ENOMEM;
    const size_t bytes = sizeof(struct kretprobe_instance) + rp->data_size;
    const auto words = static_cast<uint32_t>((bytes + sizeof(long) - 1) / sizeof(long));
    // The private site's users list: this ops alone (replaced if the size changed).
    site_users *u = ctl->psite.users.load(std::memory_order_relaxed);
    if (!u || u->exit_words != 2 + words) {
        auto *nu =
            static_cast<site_users *>(std::malloc(sizeof(site_users) + sizeof(ftrace_ops *)));
        if (!nu) {
            free_ctl(ctl);
            return -ENOMEM;
        }
        nu->n = 1;
        nu->exit_words = 2 + words;
        nu->ops[0] = &ctl->ops;
        // Nobody can be reading the old list: the ctl was retired and synchronized.
        ctl->psite.users.store(nu, std::memory_order_release);
        std::free(u);
    }
    ctl->ops.entry = krp_entry;
    ctl->ops.exit = krp_exit;
    ctl->ops.missed = krp_missed;
    ctl->ops.unwound = krp_unwound;
    ctl->ops.abandoned = krp_abandoned;
    ctl->ops.priv = ctl;
    ctl->ops.data_words = words;
    // The handler provably leaves the x87 stack alone: a long double result stays on it.
    ctl->ops.x87_safe =
        !rp->handler || arch::ext_state_clean(reinterpret_cast<uintptr_t>(rp->handler), false,
                                              arch::ext_scope::x87);
    // Light (no vector register saved on a site) when this file's entry and exit, whose
    // indirect calls are the handlers, and the handlers leave the extended state alone.
    const auto clean = [](auto fn, bool vetted) {
        return !fn || arch::ext_state_clean(reinterpret_cast<uintptr_t>(fn), vetted);
    };
    ctl->ops.pt_regs = true;
    ctl->ops.light = clean(&krp_entry, true) && clean(&krp_exit, true) &&
                     clean(rp->entry_handler, false) && clean(rp->handler, false);
    ctl->rp = rp;
    ctl->inflight.store(0);
    ctl->maxactive = rp->maxactive > 0 ? rp->maxactive : default_maxactive();
    ctl->attached = nullptr;
    rp->nmissed = 0;
    rp->rh = ctl;
    return 0;
}

void kretprobe_set_site_ip(struct kretprobe *rp, uintptr_t ip)
{
    ctl_of(rp)->psite.ip = ip;
    ctl_of(rp)->psite.func = ip;
}

void kretprobe_sync(struct kretprobe *rp, bool want)
{
    if (kretprobe_ctl *ctl = ctl_of(rp)) sync_ftrace(ctl, want);
}

bool kretprobe_sync_pair(struct kretprobe *rp, bool want, ftrace_ops_site *out)
{
    kretprobe_ctl *ctl = ctl_of(rp);
    if (!ctl) return false;
    if (want && !ctl->attached) {
        ftrace_site *s = record_site(&rp->kp);
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

void kretprobe_sync_done(struct kretprobe *rp, const ftrace_ops_site &pair, bool attached)
{
    if (kretprobe_ctl *ctl = ctl_of(rp)) ctl->attached = attached ? pair.site : nullptr;
}

// After the entry probes are gone and synchronized: no exit of earlier calls may run (one
// wait for all of them).
void kretprobes_release(std::span<struct kretprobe *const> rps)
{
    std::vector<ftrace_ops *> ops;
    std::vector<kretprobe_ctl *> ctls;
    for (struct kretprobe *rp : rps) {
        kretprobe_ctl *ctl = ctl_of(rp);
        if (!ctl) continue;
        sync_ftrace(ctl, false);
        ops.push_back(&ctl->ops);
        ctls.push_back(ctl);
    }
    ftrace_ops_retire(std::span<ftrace_ops *const>(ops));
    for (kretprobe_ctl *ctl : ctls) {
        ctl->rp->rh = nullptr;
        free_ctl(ctl);
    }
}

} // namespace dprobe::kp

extern "C" {

DPROBE_NOPROBE struct kretprobe *get_kretprobe(struct kretprobe_instance *ri)
{
    return ri ? ri->rp : nullptr;
}

DPROBE_NOPROBE unsigned long get_kretprobe_retaddr(struct kretprobe_instance *ri)
{
    return ri ? reinterpret_cast<unsigned long>(ri->ret_addr) : 0;
}

int register_kretprobe(struct kretprobe *rp)
{
    if (!rp) return -EINVAL;
    return register_kretprobes(&rp, 1);
}

// Like register_kprobes(): every entry probe armed in one batch; on the first failure none
// stays registered.
int register_kretprobes(struct kretprobe **rps, int num)
{
    using namespace dprobe::kp;
    if (!rps || num <= 0) return -EINVAL;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    std::vector<struct kprobe *> kps;
    kps.reserve(static_cast<size_t>(num));
    int err = 0;
    for (int i = 0; i < num && !err; ++i) {
        struct kretprobe *rp = rps[i];
        if (!rp)
            err = -EINVAL;
        else if (kprobe_registered_locked(&rp->kp) ||
                 std::find(kps.begin(), kps.end(), &rp->kp) != kps.end())
            err = -EEXIST;
        else if ((err = kprobe_on_func_entry(rp->kp.addr, rp->kp.symbol_name, rp->kp.offset)))
            ;
        else if (!(err = kretprobe_prepare(rp)))
            kps.push_back(&rp->kp);
    }
    if (!err) {
        // The functions may be plain ones (an int3 entry): their callers' vector registers
        // are kept across the exit handler (arch/x86_64/ftrace_tramp.S).
        dprobe::arch::return_keeps_all_xmm();
        err = register_kprobes_locked(kps.data(), static_cast<int>(kps.size()), kind_kretprobe);
    }
    if (err) {
        std::vector<struct kretprobe *> prepared;
        for (struct kprobe *p : kps)
            prepared.push_back(container_of_kretprobe(p));
        kretprobes_release(prepared);
    }
    return err;
}

void unregister_kretprobe(struct kretprobe *rp)
{
    if (rp) unregister_kretprobes(&rp, 1);
}

void unregister_kretprobes(struct kretprobe **rps, int num)
{
    using namespace dprobe::kp;
    if (!rps || num <= 0) return;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    std::vector<struct kprobe *> kps;
    for (int i = 0; i < num; ++i)
        if (rps[i] && kprobe_registered_locked(&rps[i]->kp)) kps.push_back(&rps[i]->kp);
    unregister_kprobes_locked(kps.data(), static_cast<int>(kps.size()));
}

} // extern "C"
