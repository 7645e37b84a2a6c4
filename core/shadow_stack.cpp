// Slow paths of the shadow stack (see shadow_stack.h). They run when a hooked function was
// left without returning, or when the thread switched stacks: rarely, but inside dispatch,
// so the rules of the hot path hold (no allocation, no locks, no probed libc calls).
#include "core/shadow_stack.h"

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/raw_syscall.h"
#include "core/compiler.h"
#include "core/ftrace.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sys/syscall.h>

namespace dprobe
{

namespace
{

// Stacks of user contexts seen by swapcontext/setcontext, newest last (a ring). Readers
// (any thread, in signal context) use the per-entry sequence to skip an entry being
// rewritten.
constexpr uint32_t max_known_stacks = 256;
struct known_stack {
    std::atomic<uint32_t> seq{0};
    std::atomic<uintptr_t> lo{0}, hi{0};
};
known_stack known_stacks[max_known_stacks];
std::atomic<uint32_t> known_next{0};

// The id of the known stack holding A (its low end), or 0.
DPROBE_NOPROBE uintptr_t known_stack_of(uintptr_t a) noexcept
{
    const uint32_t n = known_next.load(std::memory_order_acquire);
    const uint32_t count = n < max_known_stacks ? n : max_known_stacks;
    for (uint32_t i = 0; i < count; ++i) {
        const known_stack &k = known_stacks[(n - 1 - i) % max_known_stacks];
        const uint32_t s = k.seq.load(std::memory_order_acquire);
        if (s & 1) continue;
        const uintptr_t lo = k.lo.load(std::memory_order_relaxed);
        const uintptr_t hi = k.hi.load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (k.seq.load(std::memory_order_relaxed) != s) continue;
        if (a >= lo && a < hi) return lo;
    }
    return 0;
}

// sigaltstack(2) without libc (a user may probe libc's wrapper).
DPROBE_NOPROBE long raw_sigaltstack(stack_t *old) noexcept
{
    return arch::raw_syscall(SYS_sigaltstack, 0, reinterpret_cast<long>(old));
}

DPROBE_NOPROBE void remember_dropped(task_ctx *t, const unsigned long *f) noexcept
{
    uintptr_t *e = t->dropped[t->dropped_next % shadow_dropped_ring];
    e[0] = f[sf_retp];
    e[1] = f[sf_ret];
    ++t->dropped_next;
}

// Drops the frame at BASE (NWORDS words): reported, remembered, removed.
DPROBE_NOPROBE void drop(task_ctx *t, uint32_t base, uint32_t nwords)
{
    unsigned long *f = &t->shadow[base];
    shadow_frame_unwound(f);
    remember_dropped(t, f);
    shadow_remove(t, base, nwords);
}

} // namespace

DPROBE_NOPROBE void shadow_frame_unwound(unsigned long *f)
{
    const uint32_t users = static_cast<uint32_t>(f[sf_nusers]);
    unsigned long *w = f + sf_users;
    for (uint32_t i = 0; i < users; ++i) {
        auto *o = reinterpret_cast<ftrace_ops *>(w[0]);
        const unsigned long words = w[1] & 0xffff;
        // An ops retired since the entry is told nothing (as for exits).
        if (o->unwound && (o->gen.load(std::memory_order_acquire) << 16 >> 16) == (w[1] >> 16))
            o->unwound(o, words ? &w[2] : nullptr);
        w += 2 + words;
    }
}

DPROBE_NOPROBE void dispatch_recover(task_ctx *t) noexcept
{
    const uint32_t base = t->entry_pending - 1;
    ftrace_ops *running = t->entry_ops;
    t->entry_pending = 0;
    t->entry_ops = nullptr;
    // Published (shadow_top moved past it): an ordinary frame, which returns or is dropped
    // as gone like any other.
    if (t->shadow_top != base) return;
    // The users accepted so far are in the frame; the one whose entry() ran when the section
    // was left, if it got that far, is the last of them.
    unsigned long *f = &t->shadow[base];
    const uint32_t users = static_cast<uint32_t>(f[sf_nusers]);
    unsigned long *w = f + sf_users;
    ftrace_ops *last = nullptr;
    for (uint32_t i = 0; i < users; ++i) {
        last = reinterpret_cast<ftrace_ops *>(w[0]);
        w += 2 + (w[1] & 0xffff);
    }
    shadow_frame_unwound(f);
    // Not accepted yet: its data area is where the next user would have been.
    if (running && running != last && running->abandoned)
        running->abandoned(running, running->data_words ? &w[2] : nullptr);
}

DPROBE_NOPROBE void shadow_remove(task_ctx *t, uint32_t base, uint32_t nwords)
{
    const uint32_t top = t->shadow_top;
    for (uint32_t i = base; i + nwords < top; ++i)
        t->shadow[i] = t->shadow[i + nwords];
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t->shadow_top = top - nwords;
}

DPROBE_NOPROBE altstack_info shadow_altstack() noexcept
{
    altstack_info a;
    stack_t ss;
    if (raw_sigaltstack(&ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
        a.lo = reinterpret_cast<uintptr_t>(ss.ss_sp);
        a.hi = a.lo + ss.ss_size;
        a.on = ss.ss_flags & SS_ONSTACK;
    }
    return a;
}

DPROBE_NOPROBE frame_state shadow_frame_state(const altstack_info &alt, uintptr_t sp,
                                              uintptr_t slot) noexcept
{
    // Stack classes: 1 = the sigaltstack, a known coroutine stack's low end, 0 = the rest.
    auto cls = [&](uintptr_t a) -> uintptr_t {
        if (a >= alt.lo && a < alt.hi) return 1;
        return known_stack_of(a);
    };
    const uintptr_t c_slot = cls(slot);
    // Nothing lives on the sigaltstack while the thread runs elsewhere (a handler left
    // with siglongjmp leaves its frames there).
    if (c_slot == 1 && !alt.on) return frame_state::gone;
    if (c_slot != cls(sp)) return frame_state::other_stack;
    return slot < sp ? frame_state::gone : frame_state::live;
}

DPROBE_NOPROBE void shadow_reap(task_ctx *t, uintptr_t sp)
{
    const altstack_info alt = shadow_altstack();
    uint32_t top = t->shadow_top;
    while (top) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        const uintptr_t retp = f[sf_retp];
        const uint32_t base = top - n;
        // A tail call reuses the hooked caller's slot: still live.
        if (retp == sp && arch::is_return_hook(*reinterpret_cast<uintptr_t *>(retp))) break;
        const frame_state st = shadow_frame_state(alt, sp, retp);
        if (st == frame_state::live && retp != sp)
            break; // live on this stack: so is everything below it on this stack
        if (st == frame_state::other_stack) {
            top = base;
            continue;
        }
        drop(t, base, n);
        top = base;
    }
}

DPROBE_NOPROBE uint32_t shadow_find_return(task_ctx *t, uintptr_t slot, uint32_t *nwords)
{
    uint32_t top = t->shadow_top, base = UINT32_MAX;
    while (top) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        if (f[sf_retp] == slot) {
            base = top - n;
            break;
        }
        top -= n;
    }
    if (base == UINT32_MAX) return base;
    // The frames above it: gone if on the same stack (left by longjmp or an exception
    // that was not seen), kept if on another one (a coroutine or signal stack).
    const altstack_info alt = shadow_altstack();
    const uint32_t match_words = static_cast<uint32_t>(t->shadow[top - 1]);
    top = t->shadow_top;
    while (top > base + match_words) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        if (shadow_frame_state(alt, slot + 8, f[sf_retp]) != frame_state::other_stack)
            drop(t, top - n, n);
        top -= n;
    }
    *nwords = match_words;
    return base;
}

DPROBE_NOPROBE uintptr_t shadow_dropped_return(task_ctx *t, uintptr_t slot) noexcept
{
    const uint32_t n = t->dropped_next;
    for (uint32_t i = 0; i < shadow_dropped_ring && i < n; ++i) {
        uintptr_t *e = t->dropped[(n - 1 - i) % shadow_dropped_ring];
        if (e[0] == slot && e[1]) {
            const uintptr_t ret = e[1];
            e[0] = e[1] = 0;
            return ret;
        }
    }
    return 0;
}

namespace
{

// Appends S, V in hex, or dec(V), to a fixed buffer: no libc, which may be what broke. A
// message too long for it is cut, and still ends with a newline (end()).
struct message {
    char buf[512];
    unsigned n = 0;
    static constexpr unsigned room = sizeof buf - 5; // for "...\n"
    message &operator<<(const char *s) noexcept
    {
        while (*s && n < room)
            buf[n++] = *s++;
        return *this;
    }
    message &digits(unsigned long v, unsigned base) noexcept
    {
        char d[24];
        unsigned k = 0;
        do {
            d[k++] = "0123456789abcdef"[v % base];
            v /= base;
        } while (v && k < sizeof d);
        while (k && n < room)
            buf[n++] = d[--k];
        return *this;
    }
    message &operator<<(unsigned long v) noexcept { return (*this << "0x").digits(v, 16); }
    message &dec(unsigned long v) noexcept { return digits(v, 10); }
    void end() noexcept
    {
        if (n == room)
            for (char c : {'.', '.', '.'})
                buf[n++] = c;
        buf[n++] = '\n';
    }
};

} // namespace

DPROBE_NOPROBE void shadow_lost_return(task_ctx *t, uintptr_t slot) noexcept
{
    message m;
    m << "dprobe: thread ";
    m.dec(static_cast<unsigned long>(arch::raw_syscall(SYS_gettid)));
    m << " returned through a return trampoline from the slot at " << slot;
    if (!t) {
        m << ", but it has no dprobe context";
    } else {
        m << ", which none of its ";
        m.dec(t->shadow_top);
        m << " shadow-stack words nor its last dropped frames belongs to";
        if (t->shadow_top) {
            uint32_t n;
            const unsigned long *f = shadow_frame_below(t, t->shadow_top, &n);
            m << " (newest frame: function " << f[sf_ip] << ", slot " << f[sf_retp] << ")";
        }
    }
    m << "; the caller is unknown: aborting (code that moves or replays return addresses, as"
         " a JIT runtime's hand-written stubs may, cannot be traced: leave its functions out,"
         " record -N)";
    m.end();
    arch::raw_syscall(SYS_write, 2, reinterpret_cast<long>(m.buf), m.n);
    std::abort();
}

DPROBE_NOPROBE uintptr_t shadow_real_return(task_ctx *t, uint32_t base) noexcept
{
    const uintptr_t retp = t->shadow[base + sf_retp];
    uintptr_t ret = t->shadow[base + sf_ret];
    uint32_t top = base;
    while (arch::is_return_hook(ret) && top) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        if (f[sf_retp] == retp) ret = f[sf_ret];
        top -= n;
    }
    return ret;
}

DPROBE_NOPROBE bool dispatch_abandoned(task_ctx *t, uintptr_t base) noexcept
{
    // Code nested in the section (a handler calling a probed function, a signal handler)
    // runs below the section's frames on the same stack, or on another stack (the
    // sigaltstack): its base is below the section's, or on an other stack. Code at or above
    // the section's base on the same stack, or off the sigaltstack the section was on, runs
    // after the section was left by a jump. (Deeper code after such a jump looks nested:
    // its hits count as missed until the thread comes back up to that depth.)
    // The child of posix_spawn, running in this thread's memory on a stack of its own:
    // never (the section that marks the spawn ends when the parent resumes).
    if (t->spawning) return false;
    const uintptr_t old = seq_base(t->seq.load(std::memory_order_relaxed));
    // Below it: nested if on the same stack, and at worst a section left for a lower stack
    // (seen as nested: missed hits, nothing unsafe). The common case (a handler calling a
    // probed function) costs no system call.
    if (base < old) return false;
    switch (shadow_frame_state(shadow_altstack(), base, old)) {
    case frame_state::other_stack:
        return false;
    case frame_state::gone:
        return true;
    case frame_state::live:
        break;
    }
    return old == base;
}

void shadow_note_stack(uintptr_t lo, uintptr_t hi) noexcept
{
    if (lo >= hi) return;
    // Already known (the same coroutine resumed again)?
    const uint32_t n = known_next.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < max_known_stacks && i < n; ++i) {
        const known_stack &k = known_stacks[(n - 1 - i) % max_known_stacks];
        if (k.lo.load(std::memory_order_relaxed) == lo &&
            k.hi.load(std::memory_order_relaxed) == hi)
            return;
    }
    known_stack &k =
        known_stacks[known_next.fetch_add(1, std::memory_order_acq_rel) % max_known_stacks];
    k.seq.fetch_add(1, std::memory_order_acq_rel);
    k.lo.store(lo, std::memory_order_relaxed);
    k.hi.store(hi, std::memory_order_relaxed);
    k.seq.fetch_add(1, std::memory_order_release);
}

} // namespace dprobe
