// The end of dprobe in a process (see unload.h): the stopped threads looked at, hooked
// return addresses written back, the core's memory freed.
//
// The look runs in stop_machine's child (same memory, other threads stopped): everything it
// reads is prepared before, it allocates nothing and calls no C library function.
#include "core/unload.h"

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/raw_syscall.h"
#include "arch/x86_64/uctx.h"
#include "core/compiler.h"
#include "core/exec_mem.h"
#include "core/proc_maps.h"
#include "core/ring_buffer.h"
#include "core/shadow_stack.h"
#include "core/stop_machine.h"
#include "core/task_ctx.h"
#include "core/text_poke.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <vector>

namespace dprobe
{
namespace
{

struct range {
    uintptr_t lo, hi;
    bool writable;
};

// What the stopped side reads (prepared before), and what it found.
struct quiesce {
    std::vector<range> code; // dprobe's code: its object's text, executable memory
    std::vector<range> maps; // every mapping, sorted
    uintptr_t restorers[4] = {};
    size_t nrestorers = 0;
    pid_t caller_tid = 0;
    unload_caller caller;
    // Found: the first thread that is inside dprobe's code, and how.
    pid_t busy_tid = 0;
    uintptr_t busy_at = 0;
    const char *busy_how = nullptr;
    size_t unhooked = 0;
};

bool in(const std::vector<range> &v, uintptr_t a)
{
    size_t lo = 0, hi = v.size();
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].hi <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v.size() && v[lo].lo <= a;
}

const range *mapping_of(const quiesce &q, uintptr_t a)
{
    size_t lo = 0, hi = q.maps.size();
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (q.maps[mid].hi <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < q.maps.size() && q.maps[lo].lo <= a ? &q.maps[lo] : nullptr;
}

task_ctx *ctx_of(pid_t tid)
{
    for (task_ctx *t = task_ctx_list(); t; t = t->next)
        if (t->in_use.load(std::memory_order_acquire) && t->tid == tid) return t;
    return nullptr;
}

bool busy(quiesce &q, pid_t tid, uintptr_t at, const char *how)
{
    if (!q.busy_how) {
        q.busy_tid = tid;
        q.busy_at = at;
        q.busy_how = how;
    }
    return false;
}

// Whether the thread TID, stopped at IP with stack pointer SP, can no longer run dprobe's
// code; records why not in Q otherwise.
bool thread_clear(quiesce &q, pid_t tid, uintptr_t ip, uintptr_t sp, bool stepping, bool trap)
{
    if (trap) return busy(q, tid, ip, "has a breakpoint trap of dprobe's on its way");
    if (stepping) return busy(q, tid, ip, "is being single-stepped out of line");
    if (in(q.code, ip)) return busy(q, tid, ip, "is running dprobe's code");
    if (task_ctx *t = ctx_of(tid)) {
        if (t->seq.load(std::memory_order_acquire) & 1)
            return busy(q, tid, ip, "is inside a probe handler");
        if (std::atomic_ref<unsigned long>(t->kprobe_int3_seq).load() & 1)
            return busy(q, tid, ip, "is inside the kprobe trap handler");
    }
    // A signal handler of the program's may have interrupted dprobe's code: its frame on the
    // stack holds where, and the handler's return would go back there.
    const range *stack = mapping_of(q, sp);
    if (!stack || !q.nrestorers) return true;
    for (uintptr_t a = (sp + 7) & ~uintptr_t{7}; a + 8 <= stack->hi; a += 8) {
        const uintptr_t w = stack_slot_read(a);
        for (size_t i = 0; i < q.nrestorers; i++) {
            uintptr_t at = 0;
            if (w == q.restorers[i] && arch::sigframe_at(a, stack->hi, w, &at) && in(q.code, at))
                return busy(q, tid, at, "runs a signal handler that interrupted dprobe's code");
        }
    }
    return true;
}

// Whether a return-address slot at SLOT may be written for a thread whose stack pointer is
// SP: in a writable mapping, and not below SP on SP's own stack (a frame gone there left a
// stale value; other stacks, such as a suspended coroutine's, keep live frames anywhere).
bool slot_live(const quiesce &q, uintptr_t slot, uintptr_t sp)
{
    const range *m = mapping_of(q, slot);
    if (!m || !m->writable || slot + 8 > m->hi) return false;
    const range *own = mapping_of(q, sp);
    return !(own == m && slot < sp);
}

// Writes back every return address the thread's shadow stack says is hooked.
void unhook(quiesce &q, task_ctx *t, uintptr_t sp)
{
    uint32_t top = t->shadow_top;
    uintptr_t last_slot = 0;
    while (top) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        top -= n;
        if (f[sf_retp] == last_slot) continue; // a tail-call chain shares one slot
        last_slot = f[sf_retp];
        if (slot_live(q, f[sf_retp], sp) && stack_slot_read(f[sf_retp]) == f[sf_hook]) {
            stack_slot_write(f[sf_retp], shadow_real_return(t, top));
            q.unhooked++;
        }
    }
    // Frames dropped as gone whose slot still returns into a trampoline (a stack switch
    // dprobe could not see): their return address is remembered in the ring.
    for (uint32_t i = 0; i < shadow_dropped_ring; i++) {
        const uintptr_t slot = t->dropped[i][0], real = t->dropped[i][1];
        if (!slot || !real || !slot_live(q, slot, sp)) continue;
        if (arch::is_return_hook(stack_slot_read(slot))) {
            stack_slot_write(slot, real);
            q.unhooked++;
        }
    }
}

// The gate of the last text restore: true, with the hooked returns written back, when no
// thread can still run dprobe's code.
bool look(stopped_thread *threads, size_t n, void *arg)
{
    auto &q = *static_cast<quiesce *>(arg);
    bool clear = true;
    for (size_t i = 0; i < n; i++) {
        const stopped_thread &t = threads[i];
        clear &= thread_clear(q, t.tid, arch::user_regs_ip(t.regs), arch::user_regs_sp(t.regs),
                              arch::user_regs_single_stepping(t.regs), t.in_trap);
    }
    if (q.caller.ip) clear &= thread_clear(q, q.caller_tid, q.caller.ip, q.caller.sp, false, false);
    if (!clear) return false;
    for (size_t i = 0; i < n; i++)
        if (task_ctx *c = ctx_of(threads[i].tid)) unhook(q, c, arch::user_regs_sp(threads[i].regs));
    if (task_ctx *c = ctx_of(q.caller_tid))
        unhook(q, c, q.caller.ip ? q.caller.sp : current_stack_pointer());
    return true;
}

// dprobe's code: every executable mapping of the object this file is in, and the
// executable memory.
void code_ranges(quiesce &q, const std::vector<proc_map> &maps)
{
    Dl_info self{};
    if (dladdr(reinterpret_cast<void *>(&code_ranges), &self) && self.dli_fname)
        for (const proc_map &m : maps)
            if ((m.prot() & PROT_EXEC) && !m.path.empty() && m.path == self.dli_fname)
                q.code.push_back({m.start, m.end, false});
    for (auto [lo, len] : exec_mem_ranges())
        q.code.push_back({lo, lo + len, false});
    std::sort(q.code.begin(), q.code.end(),
              [](const range &a, const range &b) { return a.lo < b.lo; });
}

// The signal return trampolines of the handlers installed now (glibc's __restore_rt): a
// handler's frame starts with one of them.
void find_restorers(quiesce &q)
{
    for (int sig = 1; sig < NSIG && q.nrestorers < std::size(q.restorers); sig++) {
        struct sigaction sa {
        };
        if (sigaction(sig, nullptr, &sa) != 0 || !sa.sa_restorer) continue;
        const auto r = reinterpret_cast<uintptr_t>(sa.sa_restorer);
        if (std::find(q.restorers, q.restorers + q.nrestorers, r) == q.restorers + q.nrestorers)
            q.restorers[q.nrestorers++] = r;
    }
}

} // namespace

int unload_quiesce(const unload_caller &caller, std::string *why)
{
    quiesce q;
    const std::vector<proc_map> maps = read_proc_maps();
    for (const proc_map &m : maps)
        q.maps.push_back({m.start, m.end, (m.prot() & PROT_WRITE) != 0});
    std::sort(q.maps.begin(), q.maps.end(),
              [](const range &a, const range &b) { return a.lo < b.lo; });
    code_ranges(q, maps);
    find_restorers(q);
    q.caller = caller;
    q.caller_tid = static_cast<pid_t>(arch::raw_syscall(SYS_gettid));
    const int err = text_poke_restore_all(look, &q);
    if (q.busy_how) {
        char at[32];
        std::snprintf(at, sizeof at, "%#lx", static_cast<unsigned long>(q.busy_at));
        *why = "thread " + std::to_string(q.busy_tid) + " " + q.busy_how + " (at " + at + ")";
        return -EAGAIN;
    }
    if (err) {
        *why = std::string("cannot stop the threads to restore the code: ") + std::strerror(-err);
        return err;
    }
    return 0;
}

void unload_release()
{
    ring_buffer_release_all();
    task_ctx_release_all();
    exec_mem_release_all();
}

} // namespace dprobe
