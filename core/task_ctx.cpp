#include "core/task_ctx.h"

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/raw_syscall.h"
#include "core/membarrier.h"
#include "core/shadow_stack.h"

#include <cstddef>
#include <cstring>
#include <dprobe/compiler.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dprobe
{

std::atomic<task_ctx *> ctx_head{nullptr};

namespace
{

pthread_key_t exit_key;
pthread_once_t key_once = PTHREAD_ONCE_INIT;

void on_thread_exit(void *p)
{
    auto *t = static_cast<task_ctx *>(p);
    // The hooked functions the thread was in when it ended (pthread_exit, cancellation)
    // will not return: report them as gone. (An unregister waiting for this thread waits
    // until in_use drops, so the ops are still valid here.)
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // It may have ended in the middle of an entry (a handler called pthread_exit).
    if ((t->seq.load(std::memory_order_relaxed) & 1) && t->entry_pending) dispatch_recover(t);
    uint32_t top = t->shadow_top;
    while (top) {
        uint32_t n;
        shadow_frame_unwound(shadow_frame_below(t, top, &n));
        top -= n;
    }
    if (tls_task_ctx == t) tls_task_ctx = nullptr;
    t->shadow_top = 0;
    t->current_kprobe = nullptr;
    t->kprobe_status = 0;
    t->kprobe_busy = 0;
    // The kprobe layer's read-side count: even, like the one below (a thread may end in a
    // kprobe handler).
    std::atomic_ref<unsigned long> kseq(t->kprobe_int3_seq);
    if (unsigned long k = kseq.load(std::memory_order_relaxed); k & 1)
        kseq.store(k + 1, std::memory_order_release);
    // A thread that ended inside dispatch code (a handler called pthread_exit or reached a
    // cancellation point) left its sequence odd: make it even for the next owner.
    const uint64_t s = t->seq.load(std::memory_order_relaxed);
    if (s & 1) t->seq.store(seq_word(seq_base(s), s + 1), std::memory_order_release);
    t->in_use.store(0, std::memory_order_release);
}

// After fork() only the forking thread exists: every other context is free, even one
// whose owner was inside dispatch code or the int3 hook at the time. Its kprobe read-side
// count is made even too, as at a thread's exit: a thread of the child that took the
// context over (the agent's streamer) would otherwise hold it odd for good, and the
// child's next unregister_kprobes waited for it forever (a forked child's detach hung).
void after_fork_child()
{
    for (task_ctx *t = ctx_head.load(); t; t = t->next) {
        if (t == tls_task_ctx) {
            t->tid = static_cast<pid_t>(syscall(SYS_gettid));
            continue;
        }
        t->seq.store(0, std::memory_order_relaxed);
        t->shadow_top = 0;
        t->entry_pending = 0;
        t->current_kprobe = nullptr;
        t->kprobe_status = 0;
        t->kprobe_busy = 0;
        std::atomic_ref<unsigned long> kseq(t->kprobe_int3_seq);
        if (unsigned long k = kseq.load(std::memory_order_relaxed); k & 1)
            kseq.store(k + 1, std::memory_order_relaxed);
        t->in_use.store(0, std::memory_order_relaxed);
    }
}

std::atomic<bool> key_ready{false};

void make_key()
{
    pthread_key_create(&exit_key, on_thread_exit);
    pthread_atfork(nullptr, nullptr, after_fork_child);
    key_ready.store(true, std::memory_order_release);
}

// At load time, so that a thread's first probe hit (possibly in a signal handler that
// leaves with siglongjmp) does not run pthread_once and pthread_atfork, which take libc
// locks a jump would leave held.
__attribute__((constructor)) void make_key_early()
{
    pthread_once(&key_once, make_key);
}

task_ctx *claim_free() noexcept
{
    for (task_ctx *t = ctx_head.load(std::memory_order_acquire); t; t = t->next) {
        uint32_t expected = 0;
        if (t->in_use.load(std::memory_order_relaxed) == 0 &&
            t->in_use.compare_exchange_strong(expected, 1))
            return t;
    }
    return nullptr;
}

} // namespace

__thread task_ctx *tls_task_ctx __attribute__((tls_model("initial-exec")));

namespace
{
// Set while this thread runs pthread_once for the key, which happens only if its first
// probe hit comes before dprobe's constructor ran (in another object's constructor). Those
// libc functions may be probed themselves (a glob over all of libc): a hit meanwhile finds
// no context and is dropped (uncounted: without a context the probe's users cannot be read
// safely) instead of recursing.
__thread bool tls_allocating __attribute__((tls_model("initial-exec")));
} // namespace

// Runs on a thread's first probe hit, possibly in a signal handler that interrupted another
// run of it, and a handler may leave with siglongjmp: up to the context being published it
// uses raw system calls and atomics only.
task_ctx *alloc_task_ctx() noexcept
{
    if (!key_ready.load(std::memory_order_acquire)) {
        if (tls_allocating) return nullptr;
        tls_allocating = true;
        pthread_once(&key_once, make_key);
        tls_allocating = false;
    }
    task_ctx *t = claim_free();
    if (!t) {
        // Raw system calls: mmap and gettid of libc may be probed.
        long p = arch::raw_syscall(SYS_mmap, 0, sizeof(task_ctx), PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p < 0 && p > -4096) return nullptr;
        t = reinterpret_cast<task_ctx *>(p); // zero-filled by mmap
        t->in_use.store(1, std::memory_order_relaxed);
        task_ctx *head = ctx_head.load(std::memory_order_relaxed);
        do {
            t->next = head;
        } while (!ctx_head.compare_exchange_weak(head, t, std::memory_order_release,
                                                 std::memory_order_relaxed));
    }
    t->tid = static_cast<pid_t>(arch::raw_syscall(SYS_gettid));
    t->shadow_top = 0;
    t->entry_pending = 0;
    t->entry_ops = nullptr;
    t->current_kprobe = nullptr;
    t->kprobe_status = 0;
    t->kprobe_busy = 0;
    // A signal handler that interrupted this allocation may have made and published a
    // context of its own meanwhile: keep that one (atomic against this thread's handlers).
    task_ctx *expected = nullptr;
    if (!__atomic_compare_exchange_n(&tls_task_ctx, &expected, t, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED)) {
        t->in_use.store(0, std::memory_order_release);
        return expected;
    }
    // After publishing: a probe on pthread_setspecific finds the context.
    pthread_setspecific(exit_key, t);
    return t;
}

void task_ctx_release_all() noexcept
{
    if (key_ready.load(std::memory_order_acquire)) pthread_key_delete(exit_key);
    key_ready.store(false, std::memory_order_release);
    tls_task_ctx = nullptr; // the other threads' pointers go with this object's TLS
    task_ctx *t = ctx_head.exchange(nullptr, std::memory_order_acq_rel);
    while (t) {
        task_ctx *next = t->next;
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(t), sizeof(task_ctx));
        t = next;
    }
}

task_ctx *task_ctx_list() noexcept
{
    return ctx_head.load(std::memory_order_acquire);
}

void synchronize_dispatch()
{
    membarrier_everywhere(false);
    task_ctx *self = tls_task_ctx;
    for (task_ctx *t = ctx_head.load(std::memory_order_acquire); t; t = t->next) {
        if (t == self)
            continue; // a handler unregistering its own probe: it is not "inside" for itself
        const uint64_t s = t->seq.load(std::memory_order_acquire);
        if (!(s & 1)) continue;
        while (t->seq.load(std::memory_order_acquire) == s &&
               t->in_use.load(std::memory_order_acquire))
            sched_yield();
    }
    membarrier_everywhere(false);
}

} // namespace dprobe

// --- For debuggers -----------------------------------------------------------------------
//
// A hooked function returns into the return trampoline; its real caller is on its thread's
// shadow stack. gdb's frame unwinder for dprobe (scripts/gdb/dprobe-gdb.py, auto-loaded
// from the .debug_gdb_scripts section of ftrace_tramp.S) finds it from this description:
// the list of contexts (a thread's is the one in use with its tid, so no thread-local
// storage has to be read, which a debugger can do only through libthread_db), the fields
// it reads, and the trampolines' frame layout. Exported, constant-initialized and in this
// file, so that it is there in a stripped libdprobe.so, in a core dump taken before any
// constructor ran, and in a program linked with the static archive (which pulls this
// object in whenever a probe can fire). Every field is a 64-bit word; a change of meaning
// bumps the version.

namespace
{
struct debugger_info {
    uint64_t magic; // "dprobedb", little-endian
    uint64_t version;
    uint64_t words;       // of this struct
    const void *ctx_head; // task_ctx * (the list, through task_ctx::next)
    uint64_t ctx_next, ctx_in_use, ctx_tid, ctx_shadow_top, ctx_shadow, ctx_dropped_next,
        ctx_dropped;          // offsets in task_ctx (in_use and tid: 32-bit fields)
    uint64_t dropped_ring;    // entries of task_ctx::dropped, {slot, real return address} each
    uint64_t sf_ret, sf_retp; // word indexes in a shadow frame; its last word is its size
    const uintptr_t *tramps;  // arch: dprobe_return_tramp_layout
    uint64_t ntramps, tramp_words;
    const uintptr_t *entry_tramps; // arch: dprobe_entry_tramp_layout
    uint64_t nentry_tramps, entry_tramp_words;
};
} // namespace

extern "C" DPROBE_API __attribute__((used)) const debugger_info dprobe_debugger_info = {
    0x626465626f727064ull, // "dprobedb"
    2,
    sizeof(debugger_info) / 8,
    &dprobe::ctx_head,
    offsetof(dprobe::task_ctx, next),
    offsetof(dprobe::task_ctx, in_use),
    offsetof(dprobe::task_ctx, tid),
    offsetof(dprobe::task_ctx, shadow_top),
    offsetof(dprobe::task_ctx, shadow),
    offsetof(dprobe::task_ctx, dropped_next),
    offsetof(dprobe::task_ctx, dropped),
    dprobe::shadow_dropped_ring,
    dprobe::sf_ret,
    dprobe::sf_retp,
    dprobe_return_tramp_layout,
    RETURN_LAYOUT_COUNT,
    RETURN_LAYOUT_WORDS,
    dprobe_entry_tramp_layout,
    ENTRY_LAYOUT_COUNT,
    ENTRY_LAYOUT_WORDS,
};
