// The int3 path of kprobes (arch/x86/kernel/kprobes/core.c's kprobe_int3_handler and
// friends), and the handler of kprobes riding on patch sites (kprobes/ftrace.c).
//
// A hit: int3 -> SIGTRAP -> kprobe_trap_hook -> pre handlers with regs->ip just past the int3 ->
//  - branches (jmp/jcc/call/ret/loop, indirect through registers or memory) are emulated on
//    the registers, then post handlers run at once;
//  - other instructions run from the record's slot: the boost copy (copy + jmp back, one trap)
//    when no probe at the address has a post handler, else the ss copy (copy + int3); its
//    int3 brings the thread back here (ss_done), where the post handlers run and the thread
//    continues after the original instruction. This is the kernel's post-5.13 scheme (an
//    int3 after the copy instead of TF), which also survives popf and signals in between.
// Everything here is async-signal-safe, allocation-free and calls no libc function, so a
// probe on a libc function that this code used cannot recurse.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/jprobes_arch.h"
#include "arch/x86_64/kprobes_int3.h"
#include "arch/x86_64/text_patching.h"
#include "arch/x86_64/uctx.h"
#include "core/compiler.h"
#include "kprobe/kprobe_internal.h"

#include <csignal>

namespace dprobe::kp
{

namespace
{

// The probes of one hit whose pre phase ran (they were enabled when the pre handlers were
// called) and that have a post handler: only they get their post handler after the step, so
// a probe enabled or registered in between never sees a post without its pre (the kernel's
// aggr_post_handler looks at the flag alone). More than fit: every enabled one.
struct post_set {
    static constexpr uint32_t capacity = 4;
    uint32_t n;
    struct kprobe *kp[capacity];
    void add(struct kprobe *p) noexcept
    {
        if (n < capacity) kp[n] = p;
        ++n;
    }
    bool has(const struct kprobe *p) const noexcept
    {
        if (n > capacity) return true;
        for (uint32_t i = 0; i < n; ++i)
            if (kp[i] == p) return true;
        return false;
    }
    bool empty() const noexcept { return n == 0; }
    // Member by member: a loop or a struct copy may become a call of memcpy, which may be
    // probed.
    void copy_from(const post_set &o) noexcept
    {
        static_assert(capacity == 4);
        n = o.n;
        kp[0] = o.kp[0];
        kp[1] = o.kp[1];
        kp[2] = o.kp[2];
        kp[3] = o.kp[3];
    }
};

struct ss_entry {
    kp_record *rec;
    bool reenter; // stepping without handlers: no post handler at the end
    post_set post;
};

// Per-thread state of the int3 path that the task_ctx does not carry.
struct kp_thread {
    uint32_t depth; // > 0 while this thread runs the hook (handlers included)
    uint32_t ss_n;
    ss_entry ss[16];                // pending ss copies (nested by signals), innermost last
    struct ftrace_regs *int3_fregs; // the fregs a kretprobe int3 entry hands to dispatch
};

__thread kp_thread tls_kp __attribute__((tls_model("initial-exec")));

DPROBE_NOPROBE void push_ss(kp_record *rec, bool reenter, const post_set *post) noexcept
{
    kp_thread &th = tls_kp;
    if (th.ss_n == sizeof th.ss / sizeof th.ss[0])
        th.ss_n = 0; // only steps abandoned by longjmps out of faults pile up like this
    ss_entry &e = th.ss[th.ss_n++];
    e.rec = rec;
    e.reenter = reenter;
    if (post)
        e.post.copy_from(*post);
    else
        e.post.n = 0;
}

// Pops the innermost pending step of REC (and the stale ones above it) into *POST (when
// given). Returns whether it was a reentry step; a step nobody recorded counts as one (no
// post handler).
DPROBE_NOPROBE bool pop_ss(kp_record *rec, post_set *post = nullptr) noexcept
{
    kp_thread &th = tls_kp;
    for (uint32_t i = th.ss_n; i-- > 0;) {
        if (th.ss[i].rec == rec) {
            const ss_entry &e = th.ss[i];
            if (post) post->copy_from(e.post);
            th.ss_n = i;
            return e.reenter;
        }
    }
    return true;
}

DPROBE_NOPROBE void count_missed(const kp_children *cl) noexcept
{
    if (!cl) return;
    for (uint32_t i = 0; i < cl->n; ++i)
        __atomic_add_fetch(&cl->kp[i]->nmissed, 1, __ATOMIC_RELAXED);
}

// Runs the instruction without handlers (a reentered probe, or one whose handlers are gone).
DPROBE_NOPROBE void run_bare(kp_record *rec, ucontext_t *uc) noexcept
{
    if (rec->emulate) {
        struct pt_regs regs;
        arch::uc_to_pt_regs(uc, &regs);
        if (arch::kprobe_emulate_insn(rec->insn, &regs)) {
            arch::pt_regs_to_uc(&regs, uc);
            return;
        }
    }
    if (const uintptr_t copy = rec->opt_copy.load(std::memory_order_acquire)) {
        arch::uc_set_ip(uc, copy);
    } else if (rec->boostable) {
        arch::uc_set_ip(uc, rec->boost_addr);
    } else {
        push_ss(rec, true, nullptr);
        arch::uc_set_ip(uc, rec->ss_addr);
    }
}

// The post handlers of the probes in POST that are still enabled.
DPROBE_NOPROBE void run_post_handlers(task_ctx *t, const kp_children *cl, struct pt_regs *regs,
                                      const post_set &post) noexcept
{
    t->kprobe_status = KPROBE_HIT_SSDONE;
    for (uint32_t i = 0; i < cl->n; ++i) {
        struct kprobe *p = cl->kp[i];
        if (p->ainsn.kind != kind_kprobe || !p->post_handler || !child_enabled(p) || !post.has(p))
            continue;
        t->current_kprobe = p;
        p->post_handler(p, regs, 0);
    }
}

// Where a thread continues at NEXT after running REC's instruction out of line: inside a
// region that is optimized or being optimized (opt_copy is published before the optimizer
// waits for the threads in the hook and writes the jmp), the same instruction in the
// detour's copy, which is valid code either way.
DPROBE_NOPROBE uintptr_t continue_at(const kp_record *rec, uintptr_t next) noexcept
{
    const optprobe *op = rec->opt.get();
    if (op &&
        (rec->opt_copy.load(std::memory_order_acquire) ||
         rec->optimized.load(std::memory_order_acquire)) &&
        next > op->addr && next < op->addr + op->len)
        if (const uintptr_t to = op->d.copy_of(next)) return to;
    return next;
}

// The ss copy's int3: the instruction ran; post handlers, then continue after it.
DPROBE_NOPROBE bool ss_done(kp_record *rec, ucontext_t *uc) noexcept
{
    kp_thread &th = tls_kp;
    post_set post = {};
    const bool reenter = pop_ss(rec, &post);
    task_ctx *t = reenter ? peek_task_ctx() : current_task_ctx();
    // NEXT is chosen inside the read side: a step that ends while the jmp of an optimized
    // probe is being written over NEXT (the post handler that kept that probe on int3 just
    // left) must go to the detour's copy, and the optimizer waits for this thread, after
    // publishing opt_copy, before it writes the jmp.
    if (t) kp_enter(t);
    const uintptr_t next = continue_at(rec, rec->insn.next());
    // The original next instruction is reached through the ss return jump: this thread gets
    // there only after its return from the signal handler, out of the read side, and by
    // then an optimizer that did not see it may have written a jmp over it; the jump's word
    // points into that jmp's detour before the jmp is written (kprobe_arm.cpp).
    const uintptr_t resume = next == rec->insn.next() && rec->ss_ret ? rec->ss_ret : next;
    if (!t || reenter || th.depth > 1 || kprobe_busy_on(t)) {
        arch::uc_set_ip(uc, resume);
        if (t) kp_leave(t);
        return true;
    }
    const kp_children *cl = rec->children.load(std::memory_order_acquire);
    if (cl) {
        struct pt_regs regs;
        arch::uc_to_pt_regs(uc, &regs);
        instruction_pointer_set(&regs, next);
        run_post_handlers(t, cl, &regs, post);
        if (instruction_pointer(&regs) == next) instruction_pointer_set(&regs, resume);
        arch::pt_regs_to_uc(&regs, uc);
    } else {
        arch::uc_set_ip(uc, resume);
    }
    t->current_kprobe = nullptr;
    t->kprobe_status = 0;
    kp_leave(t);
    stats().ss_hits.fetch_add(1, std::memory_order_relaxed);
    return true;
}

} // namespace

// The read side nests (a signal handler's hit inside the hook, get_kprobe() from a
// handler): only the outermost level moves the sequence number.
DPROBE_NOPROBE void kp_enter(task_ctx *t) noexcept
{
    if (tls_kp.depth++ == 0) kp_read_lock(t);
}

DPROBE_NOPROBE void kp_leave(task_ctx *t) noexcept
{
    if (--tls_kp.depth == 0) kp_read_unlock(t);
}

DPROBE_NOPROBE struct ftrace_regs *int3_fregs() noexcept
{
    return tls_kp.int3_fregs;
}
DPROBE_NOPROBE void set_int3_fregs(struct ftrace_regs *f) noexcept
{
    tls_kp.int3_fregs = f;
}

DPROBE_NOPROBE bool kprobe_trap_hook(int, siginfo_t *info, ucontext_t *uc)
{
    if (!arch::kprobe_trap_is_int3(info)) return false; // a single-step, a raise(SIGTRAP), ...
    const uintptr_t at = arch::kprobe_trap_addr(uc);
    kp_record *rec = lookup_record(at);
    if (!rec) {
        if (kp_record *ss = lookup_ss_record(at)) return ss_done(ss, uc);
        return false;
    }
    kp_thread &th = tls_kp;
    task_ctx *t = current_task_ctx();
    if (unlikely(!t)) {
        if (!arch::breakpoint_at(at))
            arch::uc_set_ip(uc, at);
        else
            run_bare(rec, uc);
        return true;
    }
    kp_enter(t);
    // (Inside the read side: the optimizer waits for this thread before writing a jmp over
    // the address it is sent back to.)
    if (!arch::breakpoint_at(at)) {
        // Disarmed after this thread trapped: run what is there now (the kernel does this).
        // Inside another probe's optimized region, that is the detour's copy of the
        // instruction (the thread may have been stopped with its SIGTRAP pending while the
        // jmp was written over the address).
        uintptr_t to = at;
        for (const kp_record *r = first_record(); r && to == at; r = r->all_next)
            if (r != rec && r->optimized.load(std::memory_order_acquire) && at > r->addr &&
                at < r->addr + r->opt->len)
                to = continue_at(r, at);
        arch::uc_set_ip(uc, to);
        kp_leave(t);
        return true;
    }
    stats().int3_hits.fetch_add(1, std::memory_order_relaxed);
    const kp_children *cl = rec->children.load(std::memory_order_acquire);
    if (th.depth > 1 || kprobe_busy_on(t) || !cl) {
        // Hit while a kprobe handler (or this hook) runs on this thread: not handled.
        if (th.depth > 1 || kprobe_busy_on(t)) {
            count_missed(cl);
            stats().reenter.fetch_add(1, std::memory_order_relaxed);
        }
        const unsigned long status = t->kprobe_status;
        t->kprobe_status = KPROBE_REENTER;
        run_bare(rec, uc);
        t->kprobe_status = status;
        kp_leave(t);
        return true;
    }

    struct pt_regs regs;
    arch::uc_to_pt_regs(uc, &regs); // regs.ip == kprobe_hit_ip(at), as after the kernel's int3
    t->kprobe_status = KPROBE_HIT_ACTIVE;
    bool skip = false;
    post_set post = {};
    for (uint32_t i = 0; i < cl->n && !skip; ++i) {
        struct kprobe *p = cl->kp[i];
        if (!child_enabled(p)) continue;
        t->current_kprobe = p;
        if (p->ainsn.kind == kind_kprobe && p->post_handler) post.add(p);
        if (p->ainsn.kind == kind_kretprobe) {
            kretprobe_int3_entry(container_of_kretprobe(p), &regs, uc);
            instruction_pointer_set(&regs, arch::kprobe_hit_ip(at));
        } else if (p->ainsn.kind == kind_jprobe) {
            // On the signal stack; the kernel saved the whole state, sigreturn restores it.
            // The vector arguments whole (ymm, zmm) from the frame's XSAVE area.
            alignas(64) unsigned char vbuf[arch::JPROBE_VEC_BUF];
            const arch::jprobe_vectors v = arch::uc_jprobe_vectors(uc, vbuf);
            jprobe_run(p, &regs, v.vec, v.size, v.wide);
        } else if (p->pre_handler && p->pre_handler(p, &regs)) {
            skip = true; // the handler moved regs->ip: no step, no post handler
        }
    }
    if (skip) {
        arch::pt_regs_to_uc(&regs, uc);
    } else if (rec->emulate && arch::kprobe_emulate_insn(rec->insn, &regs)) {
        if (!post.empty()) run_post_handlers(t, cl, &regs, post);
        arch::pt_regs_to_uc(&regs, uc);
    } else if (const uintptr_t copy = rec->opt_copy.load(std::memory_order_acquire);
               copy && post.empty()) {
        // Being optimized: the region runs from the detour (no post handler to call).
        arch::pt_regs_to_uc(&regs, uc);
        arch::uc_set_ip(uc, copy);
    } else if (rec->boostable && (!rec->has_ss || post.empty())) {
        // (An emulated branch whose target could not be read has no ss copy: its copy runs
        // and faults where the original would have; no post handler then.)
        arch::pt_regs_to_uc(&regs, uc);
        arch::uc_set_ip(uc, rec->boost_addr);
    } else {
        arch::pt_regs_to_uc(&regs, uc);
        push_ss(rec, false, &post);
        arch::uc_set_ip(uc, rec->ss_addr);
    }
    t->current_kprobe = nullptr;
    t->kprobe_status = 0;
    kp_leave(t);
    return true;
}

namespace
{

// The optimized hit (the kernel's optimized_callback()). LIGHT: called from a light detour,
// which saved no extended state: answers 1, before any handler ran, when the list of probes
// holds one whose handler is not known to leave that state alone (it joined after the
// detour went light); the detour then saves it and calls the full version.
template <bool light, bool vector = false>
DPROBE_NOPROBE __attribute__((always_inline)) inline int opt_hit(task_ctx *t, kp_record *rec,
                                                                 struct pt_regs *regs) noexcept
{
    kp_enter(t);
    const kp_children *cl = rec->children.load(std::memory_order_acquire);
    if ((light && cl && !cl->all_ext_clean) || (vector && cl && !cl->all_vec_clean)) {
        kp_leave(t);
        return 1;
    }
    if (tls_kp.depth > 1 || kprobe_busy_on(t) || !cl) {
        if (tls_kp.depth > 1 || kprobe_busy_on(t)) {
            count_missed(cl);
            stats().reenter.fetch_add(1, std::memory_order_relaxed);
        }
        kp_leave(t);
        return 0;
    }
    count_opt_hit(t);
    const unsigned long ip = instruction_pointer(regs);
    t->kprobe_status = KPROBE_HIT_ACTIVE;
    if (light) ++dprobe_ext_unsaved; // fprobes hit by the handlers save it themselves
    for (uint32_t i = 0; i < cl->n; ++i) {
        struct kprobe *p = cl->kp[i];
        if (p->ainsn.kind != kind_kprobe || !child_enabled(p)) continue;
        t->current_kprobe = p;
        // A non-zero return ends the chain (aggr_pre_handler); the ip it set is ignored.
        const bool stop = p->pre_handler && p->pre_handler(p, regs);
        instruction_pointer_set(regs, ip);
        if (stop) break;
    }
    if (light) --dprobe_ext_unsaved;
    t->current_kprobe = nullptr;
    t->kprobe_status = 0;
    kp_leave(t);
    return 0;
}

} // namespace

// An optimized record's detour calls this with the saved registers (regs->ip ==
// arch::kprobe_hit_ip(addr)).
// Changes of regs->ip are ignored, as with the kernel's optimized probes.
DPROBE_NOPROBE void kprobe_opt_handler(void *arg, struct pt_regs *regs) noexcept
{
    task_ctx *t = current_task_ctx();
    if (likely(t)) opt_hit<false>(t, static_cast<kp_record *>(arg), regs);
}

// The same from a light detour (kp_children::all_ext_clean). A thread's first hit
// allocates its context, which is not known to leave the extended state alone: 1 then.
DPROBE_NOPROBE int kprobe_opt_handler_light(void *arg, struct pt_regs *regs) noexcept
{
    task_ctx *t = peek_task_ctx();
    if (unlikely(!t)) return 1;
    return opt_hit<true>(t, static_cast<kp_record *>(arg), regs);
}

// The same from a vector detour (kp_children::all_vec_clean): the vector registers 0-15 and
// the MXCSR are saved, nothing else of the extended state. A thread's first hit allocates
// its context (through libc code that may use any vector register): 1 then.
DPROBE_NOPROBE int kprobe_opt_handler_vec(void *arg, struct pt_regs *regs) noexcept
{
    task_ctx *t = peek_task_ctx();
    if (unlikely(!t)) return 1;
    return opt_hit<false, true>(t, static_cast<kp_record *>(arg), regs);
}

// A fault in a slot copy: show the program the original instruction's address, as if the
// instruction had faulted in place (the kernel's uprobes do the same). Never claims it.
DPROBE_NOPROBE bool kprobe_fault_hook(int, siginfo_t *, ucontext_t *uc)
{
    const uintptr_t ip = arch::uc_ip(uc);
    for (kp_record *r = first_record(); r; r = r->all_next) {
        if (!r->slot) continue;
        if (r->boostable && arch::kprobe_boost_fault(r->insn, r->boost_addr, r->boost_len, uc))
            break;
        if (r->has_ss && ip == r->ss_addr) {
            pop_ss(r);
            arch::uc_set_ip(uc, r->addr);
            break;
        }
        // An instruction of an optimized region, run from the detour's relocated copy.
        const optprobe *op = r->opt.get();
        if (op && op->d.in_copy(ip)) {
            if (const uintptr_t orig = op->d.orig_of(ip)) {
                arch::uc_set_ip(uc, orig);
                break;
            }
        }
    }
    return false;
}

// Plain kprobes on a patch site (the kernel's kprobe_ftrace_handler): called from ftrace
// dispatch, so it is already inside the dispatch read side.
DPROBE_NOPROBE int kprobe_ftrace_entry(ftrace_ops *ops, unsigned long ip, unsigned long,
                                       struct ftrace_regs *fregs, void *)
{
    auto *rec = static_cast<kp_record *>(ops->priv);
    const kp_children *cl = rec->children.load(std::memory_order_acquire);
    task_ctx *t = peek_task_ctx();
    if (!cl || !t) return 1;
    if (kprobe_busy_on(t)) {
        for (uint32_t i = 0; i < cl->n; ++i)
            if (cl->kp[i]->ainsn.kind == kind_kprobe)
                __atomic_add_fetch(&cl->kp[i]->nmissed, 1, __ATOMIC_RELAXED);
        return 1;
    }
    struct pt_regs *regs = &fregs->regs;
    const unsigned long snap = fregs_make_pt_regs(fregs);
    const unsigned long orig_ip = instruction_pointer(regs);
    instruction_pointer_set(regs, arch::kprobe_hit_ip(ip)); // as if the int3 had trapped
    t->kprobe_status = KPROBE_HIT_ACTIVE;
    bool skip = false;
    post_set post = {};
    for (uint32_t i = 0; i < cl->n && !skip; ++i) {
        struct kprobe *p = cl->kp[i];
        // (kretprobes and jprobes have ftrace ops of their own)
        if (p->ainsn.kind != kind_kprobe || !child_enabled(p)) continue;
        t->current_kprobe = p;
        if (p->post_handler) post.add(p);
        if (p->pre_handler && p->pre_handler(p, regs))
            skip = true; // the trampoline continues at the handler's regs->ip
    }
    if (!skip) {
        // Emulate stepping over the site's NOP.
        instruction_pointer_set(regs, arch::kprobe_ftrace_step_ip(ip, rec->site->len));
        if (!post.empty()) run_post_handlers(t, cl, regs, post);
        instruction_pointer_set(regs, orig_ip);
    }
    fregs_undo_pt_regs(fregs, snap);
    t->current_kprobe = nullptr;
    t->kprobe_status = 0;
    return 1;
}

// A hit on the site that dispatch did not hand to the ops (recursion: a handler of this or
// another probe called the function).
DPROBE_NOPROBE void kprobe_ftrace_missed(ftrace_ops *ops)
{
    auto *rec = static_cast<kp_record *>(ops->priv);
    const kp_children *cl = rec->children.load(std::memory_order_acquire);
    for (uint32_t i = 0; cl && i < cl->n; ++i)
        if (cl->kp[i]->ainsn.kind == kind_kprobe)
            __atomic_add_fetch(&cl->kp[i]->nmissed, 1, __ATOMIC_RELAXED);
}

} // namespace dprobe::kp
