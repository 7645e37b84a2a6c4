// The hot path: what the trampolines call when a patched site runs and when a hooked
// function returns. No allocation, no locks, no libc beyond what signal handlers may use.
#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/task_ctx.h"

#include <dprobe/ptrace.h>

using namespace dprobe;

namespace {

DPROBE_NOPROBE inline unsigned long *frame_at_top(task_ctx *t, uint32_t *nwords)
{
    uint32_t n = static_cast<uint32_t>(t->shadow[t->shadow_top - 1]);
    *nwords = n;
    return &t->shadow[t->shadow_top - n];
}

// Drops frames whose functions are gone without returning (longjmp, exceptions, thread
// cancellation...): their return-address slot lies below the current stack pointer, or is
// the slot a new call just reused (it no longer holds the return trampoline).
DPROBE_NOPROBE void reap_stale_frames(task_ctx *t, uintptr_t sp, uintptr_t tramp)
{
    while (t->shadow_top) {
        uint32_t n;
        unsigned long *f = frame_at_top(t, &n);
        uintptr_t retp = f[sf_retp];
        if (retp > sp)
            break;
        if (retp == sp && *reinterpret_cast<uintptr_t *>(retp) == tramp)
            break; // a tail call reuses the hooked caller's slot: still live
        t->shadow_top -= n;
    }
}

// The real address behind a return address that may be the trampoline itself (a hooked
// function tail-called another hooked function).
DPROBE_NOPROBE uintptr_t real_return_address(task_ctx *t, uintptr_t addr, uintptr_t tramp)
{
    uint32_t top = t->shadow_top;
    while (addr == tramp && top) {
        uint32_t n = static_cast<uint32_t>(t->shadow[top - 1]);
        addr = t->shadow[top - n + sf_ret];
        top -= n;
    }
    return addr;
}

DPROBE_NOPROBE void count_missed(const site_users *u, bool exit_only)
{
    for (uint32_t i = 0; i < u->n; ++i) {
        ftrace_ops *o = u->ops[i];
        if ((!exit_only || o->exit) && o->missed)
            o->missed(o);
    }
}

} // namespace

extern "C" DPROBE_NOPROBE void dprobe_ftrace_entry(ftrace_site *site,
                                                   struct ftrace_regs *fregs) noexcept
{
    task_ctx *t = current_task_ctx();
    if (unlikely(!t))
        return;
    if (unlikely(!dispatch_enter(t))) {
        // Recursion: a handler (or something it called) hit a probed function. The outer
        // dispatch keeps the users list alive.
        if (const site_users *u = site->users.load(std::memory_order_acquire))
            count_missed(u, false);
        return;
    }
    const site_users *u = site->users.load(std::memory_order_acquire);
    if (unlikely(!u)) {
        dispatch_exit(t);
        return;
    }
    const uintptr_t tramp = arch::return_to_handler_addr;
    const uintptr_t sp = fregs->regs.sp;
    auto *retp = reinterpret_cast<uintptr_t *>(sp);
    const uintptr_t ip = site->ip;
    uintptr_t parent_ip = *retp;

    bool hook_exit = false;
    uint32_t base = 0, w = 0;
    if (u->exit_words) {
        if (t->shadow_top)
            reap_stale_frames(t, sp, tramp);
        if (unlikely(parent_ip == tramp))
            parent_ip = real_return_address(t, parent_ip, tramp);
        base = t->shadow_top;
        if (likely(base + sf_users + u->exit_words + 1 <= shadow_stack_words)) {
            hook_exit = true;
            w = base + sf_users;
        } else {
            ++t->shadow_overflows;
            count_missed(u, true);
        }
    }
    uint32_t accepted = 0;
    for (uint32_t i = 0; i < u->n; ++i) {
        ftrace_ops *o = u->ops[i];
        if (o->exit) {
            if (!hook_exit)
                continue;
            void *data = o->data_words ? &t->shadow[w + 2] : nullptr;
            uint64_t gen = o->gen.load(std::memory_order_acquire);
            int r = o->entry ? o->entry(o, ip, parent_ip, fregs, data) : 0;
            if (r == 0) {
                // The data size travels in the frame: the ops may be reused with another
                // size by the time this frame returns.
                t->shadow[w] = reinterpret_cast<unsigned long>(o);
                t->shadow[w + 1] = (gen << 16) | o->data_words;
                w += 2 + o->data_words;
                ++accepted;
            }
        } else if (o->entry) {
            o->entry(o, ip, parent_ip, fregs, nullptr);
        }
    }
    if (accepted) {
        unsigned long *f = &t->shadow[base];
        f[sf_ret] = *retp; // may be the trampoline (tail call); the exit resolves it
        f[sf_ip] = ip;
        f[sf_retp] = sp;
        f[sf_nusers] = accepted;
        t->shadow[w] = w + 1 - base;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        t->shadow_top = w + 1;
        std::atomic_signal_fence(std::memory_order_seq_cst);
        *retp = tramp;
    }
    dispatch_exit(t);
}

extern "C" DPROBE_NOPROBE uintptr_t dprobe_ftrace_return(struct ftrace_regs *fregs) noexcept
{
    task_ctx *t = peek_task_ctx();
    const uintptr_t tramp = arch::return_to_handler_addr;
    const uintptr_t slot = fregs->regs.sp - 8;
    if (unlikely(!t))
        __builtin_trap(); // a hooked return always has a frame on this thread
    // Frames above the returning one belong to functions that never returned.
    while (t->shadow_top) {
        uint32_t n;
        unsigned long *f = frame_at_top(t, &n);
        if (f[sf_retp] >= slot)
            break;
        t->shadow_top -= n;
    }
    if (unlikely(!t->shadow_top))
        __builtin_trap();
    uint32_t n;
    unsigned long *f = frame_at_top(t, &n);
    const uintptr_t ret = f[sf_ret];
    // Unwinders walking out of a handler read the return address from this slot.
    *reinterpret_cast<uintptr_t *>(slot) = ret;
    if (likely(dispatch_enter(t))) {
        const uintptr_t ip = f[sf_ip];
        const uintptr_t real_ret =
            ret == tramp ? real_return_address(t, ret, tramp) : ret;
        fregs->regs.ip = real_ret;
        uint32_t users = static_cast<uint32_t>(f[sf_nusers]);
        unsigned long *w = f + sf_users;
        for (uint32_t i = 0; i < users; ++i) {
            auto *o = reinterpret_cast<ftrace_ops *>(w[0]);
            const unsigned long words = w[1] & 0xffff;
            // An ops retired since the entry (unregistered, or reused) gets no exit call.
            if ((o->gen.load(std::memory_order_acquire) << 16 >> 16) == (w[1] >> 16))
                o->exit(o, ip, real_ret, fregs, words ? &w[2] : nullptr);
            w += 2 + words;
        }
        dispatch_exit(t);
    }
    t->shadow_top -= n;
    return ret;
}
