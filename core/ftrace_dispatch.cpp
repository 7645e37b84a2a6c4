// The hot path: what the trampolines call when a patched site runs and when a hooked
// function returns. No allocation, no locks, no libc beyond what signal handlers may use.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/ftrace_frame.h"
#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/shadow_stack.h"
#include "core/task_ctx.h"

#include <cstddef>
#include <dprobe/ptrace.h>

using namespace dprobe;

// What the direct dispatch (arch/x86_64/ftrace_direct.inc) reads of these records.
static_assert(offsetof(ftrace_site, users) == SITE_USERS && offsetof(ftrace_site, ip) == SITE_IP);
static_assert(offsetof(site_users, n) == SU_N && offsetof(site_users, light) == SU_LIGHT &&
              offsetof(site_users, pt_regs) == SU_LIGHT + 1 && offsetof(site_users, ops) == SU_OPS);
static_assert(offsetof(ftrace_ops, exit) == OPS_EXIT && offsetof(ftrace_ops, priv) == OPS_PRIV &&
              offsetof(ftrace_ops, direct) + offsetof(ftrace_direct, call) == OPS_DIRECT_CALL &&
              offsetof(ftrace_ops, direct) + offsetof(ftrace_direct, entry) == OPS_DIRECT_ENTRY &&
              offsetof(ftrace_ops, direct) + offsetof(ftrace_direct, exit) == OPS_DIRECT_EXIT &&
              offsetof(ftrace_ops, direct) + offsetof(ftrace_direct, gate) == OPS_DIRECT_GATE &&
              offsetof(ftrace_ops, direct) + offsetof(ftrace_direct, gate_mask) ==
                  OPS_DIRECT_GATE_MASK &&
              sizeof(ftrace_direct::gate_mask) == 4 && sizeof(*ftrace_direct::gate) == 4 &&
              offsetof(ftrace_ops, data_words) == OPS_DATA_WORDS &&
              offsetof(ftrace_ops, light) == OPS_LIGHT && offsetof(ftrace_ops, gen) == OPS_GEN &&
              sizeof(ftrace_ops::data_words) == 4 && sizeof(ftrace_ops::light) == 1);
static_assert(offsetof(task_ctx, seq) == TC_SEQ &&
              offsetof(task_ctx, dispatch_kp) == TC_DISPATCH_KP &&
              offsetof(task_ctx, dispatch_kprobe_busy) == TC_DISPATCH_KPROBE_BUSY &&
              offsetof(task_ctx, entry_pending) == TC_ENTRY_PENDING &&
              offsetof(task_ctx, entry_ops) == TC_ENTRY_OPS &&
              offsetof(task_ctx, shadow_top) == TC_SHADOW_TOP &&
              offsetof(task_ctx, current_kprobe) == TC_CURRENT_KPROBE &&
              offsetof(task_ctx, kprobe_busy) == TC_KPROBE_BUSY &&
              offsetof(task_ctx, shadow) == TC_SHADOW && shadow_stack_words == TC_SHADOW_WORDS &&
              sizeof(task_ctx::entry_pending) == 4 && sizeof(task_ctx::shadow_top) == 4 &&
              sizeof(task_ctx::kprobe_busy) == 4 && sizeof(task_ctx::dispatch_kprobe_busy) == 4);
static_assert(sf_ret == SF_RET && sf_ip == SF_IP && sf_retp == SF_RETP && sf_hook == SF_HOOK &&
              sf_nusers == SF_NUSERS && sf_users == SF_USERS);

namespace
{

DPROBE_NOPROBE inline unsigned long *frame_at_top(task_ctx *t, uint32_t *nwords)
{
    return shadow_frame_below(t, t->shadow_top, nwords);
}

DPROBE_NOPROBE void count_missed(const site_users *u, bool exit_only)
{
    for (uint32_t i = 0; i < u->n; ++i) {
        ftrace_ops *o = u->ops[i];
        if ((!exit_only || o->exit) && o->missed) o->missed(o);
    }
}

// Whether the light path may run O's handlers (ftrace_ops::light: scanned clean when O was
// set up): its direct handlers, or its entry() and exit().
DPROBE_NOPROBE __attribute__((always_inline)) inline bool light_ops(const ftrace_ops *o)
{
    return o->light;
}

// Whether O's direct handlers are in use and it is off (ftrace_direct::gate): then neither
// they nor entry() and exit() run.
DPROBE_NOPROBE __attribute__((always_inline)) inline bool direct_off(const ftrace_direct &d)
{
    return __atomic_load_n(d.gate, __ATOMIC_ACQUIRE) & d.gate_mask;
}

// An ops' entry handler: its direct one, called with its priv, when its owner gave direct
// handlers (ftrace_direct), else entry(). The same on the light path: a light ops' direct
// handlers and entry() were scanned clean, and this code calls nothing else.
DPROBE_NOPROBE __attribute__((always_inline)) inline int ops_entry(ftrace_ops *o, unsigned long ip,
                                                                   unsigned long parent_ip,
                                                                   struct ftrace_regs *fregs,
                                                                   void *data)
{
    if (const ftrace_direct &d = o->direct; d.gate) {
        if (direct_off(d)) return 1;
        return d.entry ? d.entry(o->priv, ip, parent_ip, fregs, data) : 0;
    }
    return o->entry(o, ip, parent_ip, fregs, data);
}

DPROBE_NOPROBE __attribute__((always_inline)) inline void ops_exit(ftrace_ops *o, unsigned long ip,
                                                                   unsigned long ret_ip,
                                                                   struct ftrace_regs *fregs,
                                                                   void *data)
{
    if (const ftrace_direct &d = o->direct; d.gate) {
        if (!direct_off(d) && d.exit) d.exit(o->priv, ip, ret_ip, fregs, data);
        return;
    }
    o->exit(o, ip, ret_ip, fregs, data);
}

} // namespace

namespace
{

// What the light entry answers when it cannot run the hit without code that may touch the
// extended state (allocating a thread's context, recursion, a gone or tail-called frame, a
// full shadow stack, a user whose handlers were not scanned clean): nothing has run, and
// the trampoline runs the full dispatch with the vector registers saved.
constexpr int entry_not_now = 2;

// Runs the entry handlers of SITE. When an exit handler wants this activation's return, a
// shadow frame records it, and: BALANCED, the trampoline will call the function's body (the
// return address moves to the frame; its slot gets the call's); otherwise the return
// address is replaced by the return trampoline's. Returns whether the exit is hooked.
//
// LIGHT: called from the trampoline without the vector registers saved, for a site whose
// users' handlers provably leave the extended state alone (site_users::light). This code
// must leave it alone too (the file is built with -mgeneral-regs-only, and
// ftrace_light_dispatch_clean() scans it): every branch that would call out of it answers
// entry_not_now instead, before any handler ran.
template <bool light>
DPROBE_NOPROBE __attribute__((always_inline)) inline int
ftrace_entry(ftrace_site *site, struct ftrace_regs *fregs, bool balanced, unsigned seen = 0)
{
    task_ctx *t;
    const site_users *u;
    if constexpr (light) {
        t = peek_task_ctx();
        if (unlikely(!t) || !dispatch_enter_clean(t, fregs->regs.sp)) return entry_not_now;
        u = site->users.load(std::memory_order_acquire);
        // Every ops light_ops(); SEEN: the site's light byte as the trampoline read it, which
        // says whether it stored the callee-saved registers for users wanting a pt_regs.
        if (unlikely(!u || !u->light || (u->pt_regs && !(seen & SITE_LIGHT_PT_REGS)))) {
            dispatch_exit(t);
            return entry_not_now;
        }
    } else {
        t = current_task_ctx();
        if (unlikely(!t)) return 0;
        if (unlikely(!dispatch_enter(t, fregs->regs.sp))) {
            // Recursion: a handler (or something it called) hit a probed function. The outer
            // dispatch keeps the users list alive.
            if (const site_users *su = site->users.load(std::memory_order_acquire))
                count_missed(su, false);
            return 0;
        }
        u = site->users.load(std::memory_order_acquire);
        if (unlikely(!u)) {
            dispatch_exit(t);
            return 0;
        }
    }
    const uintptr_t sp = fregs->regs.sp;
    auto *retp = reinterpret_cast<uintptr_t *>(sp);
    const uintptr_t ip = site->ip;
    uintptr_t parent_ip = *retp;

    bool hook_exit = false;
    uint32_t base = 0, w = 0;
    if (u->exit_words) {
        const bool tail = arch::is_return_hook(parent_ip);
        bool reap = false;
        // Frames whose slot is at or below this entry's are gone without returning (or
        // belong to another stack): the slow path sorts them out.
        if (t->shadow_top) {
            uint32_t n;
            const uintptr_t top_slot = frame_at_top(t, &n)[sf_retp];
            reap = unlikely(top_slot < sp || (top_slot == sp && !tail));
        }
        if constexpr (light) {
            if (unlikely(tail || reap ||
                         t->shadow_top + sf_users + u->exit_words + 1 > shadow_stack_words)) {
                dispatch_exit(t);
                return entry_not_now;
            }
        } else {
            if (reap) shadow_reap(t, sp);
            if (unlikely(tail)) {
                // A hooked function tail-called this one: its frame has this slot too.
                for (uint32_t top = t->shadow_top; top;) {
                    uint32_t n;
                    unsigned long *f = shadow_frame_below(t, top, &n);
                    if (f[sf_retp] == sp) {
                        parent_ip = shadow_real_return(t, top - n);
                        break;
                    }
                    top -= n;
                }
            }
        }
        base = t->shadow_top;
        if (likely(base + sf_users + u->exit_words + 1 <= shadow_stack_words)) {
            hook_exit = true;
            w = base + sf_users;
        } else if constexpr (!light) {
            ++t->shadow_overflows;
            count_missed(u, true);
        }
    }
    uint32_t accepted = 0;
    unsigned long *f = &t->shadow[base];
    if (hook_exit) {
        // The frame is built above shadow_top; a signal handler that interrupts an entry()
        // and jumps out leaves it half built: entry_pending lets the next section clean up
        // what was accepted (dispatch_recover()).
        f[sf_nusers] = 0;
        t->entry_pending = base + 1;
    }
    // The handlers of a light hit run with the extended state unsaved: a probe hit inside
    // them that is not light saves it all (see arch/x86_64/ext_state.h).
    if constexpr (light) ++dprobe_ext_unsaved;
    const auto run = [&](ftrace_ops * o) __attribute__((always_inline))
    {
        if (o->exit) {
            if (!hook_exit) return;
            void *data = nullptr;
            if (o->data_words) {
                data = &t->shadow[w + 2];
                t->shadow[w + 2] = 0;
            }
            uint64_t gen = o->gen.load(std::memory_order_acquire);
            int r = 0;
            if (o->entry) {
                t->entry_ops = o;
                std::atomic_signal_fence(std::memory_order_seq_cst);
                r = ops_entry(o, ip, parent_ip, fregs, data);
            }
            if (r == 0) {
                // The data size travels in the frame: the ops may be reused with another
                // size by the time this frame returns.
                t->shadow[w] = reinterpret_cast<unsigned long>(o);
                t->shadow[w + 1] = (gen << 16) | o->data_words;
                w += 2 + o->data_words;
                std::atomic_signal_fence(std::memory_order_seq_cst);
                f[sf_nusers] = ++accepted;
            }
            std::atomic_signal_fence(std::memory_order_seq_cst);
            t->entry_ops = nullptr;
        } else if (o->entry) {
            ops_entry(o, ip, parent_ip, fregs, nullptr);
        }
    };
    // A site with one user (the common case: one fprobe, or one kprobe on the site) runs it
    // without the loop (the kernel's per-ops trampolines).
    if (likely(u->n == 1))
        run(u->ops[0]);
    else
        for (uint32_t i = 0; i < u->n; ++i)
            run(u->ops[i]);
    if constexpr (light) --dprobe_ext_unsaved;
    if (accepted) {
        const uintptr_t hook = !balanced ? arch::return_to_handler_addr
                               : light   ? arch::fgraph_return_light_addr
                                         : arch::fgraph_return_addr;
        f[sf_ret] = *retp; // may be a return trampoline (tail call); the exit resolves it
        f[sf_ip] = ip;
        f[sf_retp] = sp;
        f[sf_hook] = hook;
        t->shadow[w] = w + 1 - base;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        t->shadow_top = w + 1;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        // Balanced: the slot keeps the real address until the trampoline's call replaces
        // it with the same value this would write.
        if (!balanced) *retp = hook;
    }
    t->entry_pending = 0;
    dispatch_exit(t);
    return accepted != 0;
}

// Runs the exit handlers of the hooked return whose slot is below FREGS's stack pointer,
// pops its frame and returns the address to go back to.
//
// LIGHT: from the light return trampoline, vector registers unsaved, for a frame the light
// entry built; answers 0 (nothing done, nothing run) where the full path is needed.
template <bool light>
DPROBE_NOPROBE __attribute__((always_inline)) inline uintptr_t
ftrace_return(struct ftrace_regs *fregs)
{
    task_ctx *t = peek_task_ctx();
    const uintptr_t slot = fregs->regs.sp - 8;
    bool entered;
    uint32_t n = 0, base = UINT32_MAX;
    if constexpr (light) {
        if (unlikely(!t) || !dispatch_enter_clean(t, slot)) return 0;
        entered = true;
        if (likely(t->shadow_top)) {
            unsigned long *f = frame_at_top(t, &n);
            if (likely(f[sf_retp] == slot)) base = t->shadow_top - n;
        }
        bool ok = base != UINT32_MAX && !arch::is_return_hook(t->shadow[base + sf_ret]);
        if (likely(ok)) {
            const unsigned long *w = &t->shadow[base + sf_users];
            for (uint32_t i = 0, users = static_cast<uint32_t>(t->shadow[base + sf_nusers]);
                 ok && i < users; ++i) {
                ok = light_ops(reinterpret_cast<const ftrace_ops *>(w[0]));
                w += 2 + (w[1] & 0xffff);
            }
        }
        if (unlikely(!ok)) {
            dispatch_exit(t);
            return 0;
        }
    } else {
        if (unlikely(!t))
            shadow_lost_return(t, slot); // a hooked return always has a frame on this thread
        // Not entered: this thread is inside dispatch already (interrupted by a signal whose
        // handler returns here); the shadow stack is as stable as inside, but no exit runs.
        entered = dispatch_enter(t, slot);
        if (likely(t->shadow_top)) {
            unsigned long *f = frame_at_top(t, &n);
            if (likely(f[sf_retp] == slot)) base = t->shadow_top - n;
        }
        if (unlikely(base == UINT32_MAX)) {
            base = shadow_find_return(t, slot, &n);
            if (base == UINT32_MAX) {
                // Dropped as gone by mistake (a stack switch dprobe could not see): return
                // to the caller it had. The exit was counted as missed when the frame was
                // dropped.
                const uintptr_t ret = shadow_dropped_return(t, slot);
                if (!ret) shadow_lost_return(t, slot);
                *reinterpret_cast<uintptr_t *>(slot) = ret;
                fregs->regs.ip = ret;
                if (entered) dispatch_exit(t);
                return ret;
            }
        }
    }
    unsigned long *f = &t->shadow[base];
    const uintptr_t ret = f[sf_ret];
    // Unwinders walking out of a handler read the return address from this slot.
    *reinterpret_cast<uintptr_t *>(slot) = ret;
    if (likely(entered)) {
        const uintptr_t ip = f[sf_ip];
        uintptr_t real_ret = ret;
        if constexpr (!light)
            if (arch::is_return_hook(ret)) real_ret = shadow_real_return(t, base);
        fregs->regs.ip = real_ret;
        uint32_t users = static_cast<uint32_t>(f[sf_nusers]);
        unsigned long *w = f + sf_users;
        // A long double result sits on the x87 stack; handlers get the empty stack the ABI
        // promises unless they provably leave it alone (reading the x87 status word costs
        // more than everything else here together). Light handlers do.
        arch::x87_stack x87;
        if constexpr (light) ++dprobe_ext_unsaved;
        const auto run = [&]() __attribute__((always_inline))
        {
            auto *o = reinterpret_cast<ftrace_ops *>(w[0]);
            const unsigned long words = w[1] & 0xffff;
            // An ops retired since the entry (unregistered, or reused) gets no exit call.
            if ((o->gen.load(std::memory_order_acquire) << 16 >> 16) == (w[1] >> 16)) {
                if constexpr (!light)
                    if (!o->x87_safe) x87.set_aside();
                ops_exit(o, ip, real_ret, fregs, words ? &w[2] : nullptr);
                // Done: should a signal handler leave this section with a jump, the frame
                // is dropped later as gone, and this user must not hear of it again.
                std::atomic_signal_fence(std::memory_order_seq_cst);
                w[1] = words;
            }
            w += 2 + words;
        };
        if (likely(users == 1)) {
            run(); // one user: no loop (see ftrace_entry)
        } else {
            for (uint32_t i = 0; i < users; ++i)
                run();
        }
        if constexpr (light)
            --dprobe_ext_unsaved;
        else
            x87.put_back();
    }
    if (likely(base + n == t->shadow_top)) {
        std::atomic_signal_fence(std::memory_order_seq_cst);
        t->shadow_top = base; // the top frame: nothing above it to move down
    } else if constexpr (!light) {
        shadow_remove(t, base, n);
    }
    if (likely(entered)) dispatch_exit(t);
    return ret;
}

} // namespace

// Not noexcept, and with no cleanup of their own: these functions have no LSDA, so an
// unwinder passes through them as through the trampolines (whose CFI leads to the probed
// function's caller or to the real return address). A handler may reach a cancellation
// point or call pthread_exit; asynchronous cancellation may land anywhere in here; the
// thread then unwinds out of dprobe's frames and ends, and its context is reset when it
// does (task_ctx.cpp). A noexcept function with calls would make the C++ personality call
// std::terminate instead. Handlers must not throw anything else.
extern "C" DPROBE_NOPROBE void dprobe_ftrace_entry(ftrace_site *site, struct ftrace_regs *fregs)
{
    ftrace_entry<false>(site, fregs, false);
}

extern "C" DPROBE_NOPROBE int dprobe_fgraph_entry(ftrace_site *site, struct ftrace_regs *fregs)
{
    return ftrace_entry<false>(site, fregs, true);
}

extern "C" DPROBE_NOPROBE uintptr_t dprobe_ftrace_return(struct ftrace_regs *fregs)
{
    return ftrace_return<false>(fregs);
}

// The light path (site_users::light): 0 or 1 as dprobe_fgraph_entry, or entry_not_now.
extern "C" DPROBE_NOPROBE int dprobe_fgraph_entry_light(ftrace_site *site,
                                                        struct ftrace_regs *fregs, unsigned seen)
{
    return ftrace_entry<true>(site, fregs, true, seen);
}

// The light return: the real return address, or 0 when the full path must run.
extern "C" DPROBE_NOPROBE uintptr_t dprobe_ftrace_return_light(struct ftrace_regs *fregs)
{
    return ftrace_return<true>(fregs);
}

namespace dprobe
{

bool ftrace_light_dispatch_clean()
{
    static const bool clean =
        arch::ext_state_clean(reinterpret_cast<uintptr_t>(&dprobe_fgraph_entry_light), true) &&
        arch::ext_state_clean(reinterpret_cast<uintptr_t>(&dprobe_ftrace_return_light), true);
    return clean;
}

} // namespace dprobe
