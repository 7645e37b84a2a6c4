// State shared by the kprobe layer's files: per-address records, the lock-free lookup used by
// the SIGTRAP hook, the per-thread read side, and the kretprobe glue.
//
// Lifetime rules (why the hot path needs no reference counts):
//  - A kp_record (one per probed address) is never freed. Its instruction slot is never
//    freed or rewritten either, so a thread still running a copy, or stepping through it,
//    after the probe went away always finds the same code. Memory is bounded by the number
//    of distinct addresses ever probed, not by register/unregister cycles.
//  - The list of kprobes at an address (kp_children) is immutable and replaced as a whole;
//    an old list is freed after kprobe_synchronize(), which waits for every thread inside
//    the int3 hook (kp_read_lock) and inside ftrace dispatch.
//
// Arming (kprobe_arm.cpp): every change of probes or knobs names the records it touched in
// an arm_batch, whose commit() brings them (and their neighbours' optimization) in line with
// their probes with one text patch per step for all of them.
//
// Jump optimization (optprobes, kprobe_arm.cpp): an armed int3 record with no post handler
// and no kretprobe among its probes is the candidate; its detour (core/optprobe) is prepared
// once and reused. The jmp replaces the int3 and the following bytes (KPROBE_FLAG_OPTIMIZED
// on the probes, printed by kprobes_list_text()) and is undone (int3 + original tail) before
// the record is disarmed, before a probe is armed inside the region, and when a post handler
// joins; recover_original_bytes() returns the bytes under the jmp. The int3 hook keeps working for
// a thread that trapped before the jmp was written (it restarts at the address, or, inside another
// record's region, at the detour's copy of the instruction); opt_copy and the boost copy's indirect
// return keep threads that are between the hook and the original code off the jmp's bytes.
#pragma once

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/insn.h"
#include "core/exec_mem.h"
#include "core/ftrace.h"
#include "core/optprobe.h"
#include "core/symbols.h"
#include "core/task_ctx.h"

#include <dprobe/kprobes.h>

#include <atomic>
#include <csignal>
#include <map>
#include <span>
#include <vector>
#include <ucontext.h>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace dprobe::kp
{

enum child_kind : unsigned { kind_kprobe = 0, kind_kretprobe = 1, kind_jprobe = 2 };

// Immutable list of the probes registered at one address, in registration order.
struct kp_children {
    uint32_t n;
    bool any_post; // some plain kprobe of the list has a post handler (enabled or not)
    // Every pre handler of the list provably leaves the extended register state alone
    // (arch::ext_state_clean): an optimized record may use the light detour.
    bool all_ext_clean;
    // Every child is a kprobe whose handlers touch no extended state but the vector
    // registers 0-15 and the MXCSR (arch::ext_scope::vector): the vector caller may serve it.
    bool all_vec_clean;
    struct kprobe *kp[];
};

enum class kp_mode : uint8_t { int3, ftrace };

// The record's instruction slot (arch::prepare_kprobe_copies(), KPROBE_SLOT_SIZE bytes): the
// boost copy (the instruction + a jmp back through a word the optimizer may redirect) and the
// ss copy (the instruction + an int3, which tells the hook the instruction has run).
struct kp_record {
    uintptr_t addr = 0;
    kp_mode mode = kp_mode::int3;
    uint64_t obj_id = 0;
    std::atomic<kp_children *> children{nullptr};
    std::atomic<bool> armed{false}; // int3: the byte at addr is ours; ftrace: ops attached
    std::atomic<bool> gone{false};

    // int3 path.
    arch::insn insn;        // the original instruction
    uint8_t opcode = 0;     // its first byte
    bool emulate = false;   // branches: applied to the registers, no copy runs
    bool boostable = false; // the boost copy exists (copy + jmp back)
    bool has_ss = false;    // the ss copy exists (copy + int3)
    exec_chunk slot;
    uintptr_t boost_addr = 0, ss_addr = 0, ss_int3 = 0;
    uintptr_t ss_ret = 0;  // the ss return jump (arch/x86_64/kprobes_arch.h)
    uint8_t boost_len = 0; // the copy, without the jmp back

    // ftrace path: one ops for the plain kprobes at the site.
    ftrace_site *site = nullptr;
    ftrace_ops ops;

    // Jump optimization (int3 path only). The function holding addr, for the region checks.
    uintptr_t func = 0;
    size_t fsize = 0;
    // The detour, prepared on the first optimization and then reused for every
    // optimize/unoptimize cycle; never freed (a thread may still be inside it).
    std::unique_ptr<optprobe> opt;
    bool opt_refused = false; // optprobe_prepare() said no (opt_why): stays int3
    std::string opt_why;
    std::atomic<bool> optimized{false}; // the jmp is written (the int3 is not)
    // While non-zero, an int3 hit without post handlers continues in the detour's relocated
    // copy of the region (the kernel's setup_detour_execution) instead of the boost copy,
    // whose jmp back may land inside the region once the jmp is written.
    std::atomic<uintptr_t> opt_copy{0};
    // The optimized record whose jmp covers the place this record's detour jumps back to
    // (the regions overlap: they are optimized in turn): the jump back then goes to that
    // record's detour copy of the same instruction (kprobe_arm.cpp). Under kprobe_mutex.
    kp_record *back_via = nullptr;

    kp_record *hash_next = nullptr;    // by addr
    kp_record *ss_hash_next = nullptr; // by ss_int3
    kp_record *all_next = nullptr;     // every record, for the fault hook and disarm-all
};

// Registration-side state, under kprobe_mutex().
struct kp_registry {
    bool all_disarmed = false;   // kprobes/enabled is 0
    bool optimization_on = true; // debug.kprobes-optimization
    // Every record not gone, by address: the optimizer's range questions (which probes lie
    // in a region, which regions may cover an address) cost O(log n), not a walk.
    std::multimap<uintptr_t, kp_record *> by_addr;
};
kp_registry &registry();

// The most bytes an optimized region covers (arch::DETOUR_MAX_REGION): a record whose
// region may cover ADDR starts within this many bytes before it.
constexpr size_t max_region_len = arch::DETOUR_MAX_REGION;

// Calls F(rec) for every record (not gone) whose address is in [LO, HI), in address order.
template <class F> void for_each_record_in(uintptr_t lo, uintptr_t hi, F f)
{
    auto &idx = registry().by_addr;
    for (auto it = idx.lower_bound(lo); it != idx.end() && it->first < hi; ++it)
        f(it->second);
}

// Whether REC's probes allow a jmp (int3 record, plain kprobes without post handlers, the
// knobs on); the region checks are optprobe_prepare()'s.
bool opt_allowed(const kp_record *rec);
// KPROBE_FLAG_OPTIMIZED on (or off) every probe of REC.
void set_opt_flags(kp_record *rec, bool on);

// A set of records whose arming must be brought in line with their probes (kprobe_arm.cpp).
class arm_batch
{
  public:
    // REC's probes, or their states, changed.
    void add(kp_record *rec) { recs_.push_back(rec); }
    // A knob changed: every record.
    void add_all() { all_ = true; }
    // P, a kretprobe or jprobe no longer among its record's probes, must lose its ftrace ops.
    void depart(struct kprobe *p) { departed_.push_back(p); }
    // Arms and disarms int3 records (one text patch), attaches and detaches the ftrace ops
    // of records on sites (one text patch, one wait), then unoptimizes and optimizes what
    // the changes call for (one text patch, one stop of the threads). Returns 0 or the
    // first error of the arming steps (optimization failures leave probes on int3, as the
    // kernel's optimizer does). The records' flags always say what the text holds.
    int commit();

  private:
    std::vector<kp_record *> recs_;
    std::vector<struct kprobe *> departed_;
    bool all_ = false;
};

// Lock-free lookups for the hooks (records are never removed: a gone record stays, flagged).
kp_record *lookup_record(uintptr_t addr) noexcept;
kp_record *lookup_ss_record(uintptr_t int3_addr) noexcept;
kp_record *first_record() noexcept;
// Publishing (under the registration mutex).
void publish_record(kp_record *r);
void publish_ss(kp_record *r);

// The read side of the hook: task_ctx::kprobe_int3_seq, odd while the thread is inside the
// int3 hook.
inline std::atomic_ref<unsigned long> kp_seq_ref(task_ctx *t) noexcept
{
    return std::atomic_ref<unsigned long>(t->kprobe_int3_seq);
}
inline unsigned long kp_seq(task_ctx *t, std::memory_order mo) noexcept
{
    return kp_seq_ref(t).load(mo);
}
inline void kp_read_lock(task_ctx *t) noexcept
{
    kp_seq_ref(t).store(kp_seq(t, std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
}
inline void kp_read_unlock(task_ctx *t) noexcept
{
    std::atomic_signal_fence(std::memory_order_seq_cst);
    kp_seq_ref(t).store(kp_seq(t, std::memory_order_relaxed) + 1, std::memory_order_release);
}
// Nesting-aware read side for the kprobe layer's code (kprobe_int3.cpp).
void kp_enter(task_ctx *t) noexcept;
void kp_leave(task_ctx *t) noexcept;
// Waits until no thread is inside the int3 hook or ftrace dispatch code it was in before.
void kprobe_synchronize();

// Signal hooks (kprobe_int3.cpp).
bool kprobe_trap_hook(int sig, siginfo_t *info, ucontext_t *uc);
bool kprobe_fault_hook(int sig, siginfo_t *info, ucontext_t *uc);
// The handler of an optimized record's detour (ARG is the kp_record): the int3 path's pre
// handler part, without the trap.
void kprobe_opt_handler(void *arg, struct pt_regs *regs) noexcept;
// The same for a light detour (optprobe_set_mode): 1 when the full one must run instead.
int kprobe_opt_handler_light(void *arg, struct pt_regs *regs) noexcept;
// The same for a vector detour: 1 when a probe that joined needs the whole state saved.
int kprobe_opt_handler_vec(void *arg, struct pt_regs *regs) noexcept;
// Whether P (registered) is optimized with a light detour (core/optprobe.h), for tests.
bool kprobe_light_detour(const struct kprobe *p);
// Whether P's record is optimized with the vector caller (arch::optprobe_mode::vector).
bool kprobe_vector_detour(const struct kprobe *p);
// The ftrace ops callback of plain kprobes on a patch site.
int kprobe_ftrace_entry(ftrace_ops *ops, unsigned long ip, unsigned long parent_ip,
                        struct ftrace_regs *fregs, void *data);
void kprobe_ftrace_missed(ftrace_ops *ops);

// kretprobe glue (kretprobe.cpp).
inline struct kretprobe *container_of_kretprobe(struct kprobe *p) noexcept
{
    static_assert(offsetof(struct kretprobe, kp) == 0);
    return reinterpret_cast<struct kretprobe *>(p);
}
// int3 entry of a kretprobe: REGS is the hook's pt_regs (ip = addr + 1), UC the context.
// Hands a ftrace_regs built from them to ftrace dispatch with the kretprobe's private site;
// register changes made by the entry handler come back in REGS.
void kretprobe_int3_entry(struct kretprobe *rp, struct pt_regs *regs, ucontext_t *uc);
// The ftrace_regs the int3 path is handing to dispatch on this thread (else nullptr).
struct ftrace_regs *int3_fregs() noexcept;
void set_int3_fregs(struct ftrace_regs *f) noexcept;

// A trampoline's ftrace_regs made a pt_regs kprobe handlers can use in place, and back
// (arch/x86_64/ftrace_arch.h).
using arch::fregs_make_pt_regs;
using arch::fregs_undo_pt_regs;

// jprobe glue (jprobe.cpp).
inline struct jprobe *container_of_jprobe(struct kprobe *p) noexcept
{
    static_assert(offsetof(struct jprobe, kp) == 0);
    return reinterpret_cast<struct jprobe *>(p);
}
// Registration steps (jprobe.cpp), under kprobe_mutex(): the jprobe's own state (its
// ftrace_ops for sites); the stack arguments its handler gets (STACK_LEN bytes, EXACT when
// DWARF told them), known once its place is; attaching and detaching its ops to and from
// its record's site as kretprobes do (jprobe_sync_pair/_done for a batch); and, after the
// probes left their records and were waited for, the state's release.
int jprobe_prepare(struct jprobe *jp);
void jprobe_set_stack(struct jprobe *jp, unsigned long stack_len, bool exact);
bool jprobe_sync_pair(struct jprobe *jp, bool want, ftrace_ops_site *out);
void jprobe_sync_done(struct jprobe *jp, const ftrace_ops_site &pair, bool attached);
void jprobe_sync(struct jprobe *jp, bool want);
void jprobes_release(std::span<struct jprobe *const> jps);
// A hit of the jprobe P: its handler runs with REGS (the function's entry registers) and the
// vector registers VEC (VEC_SIZE bytes apart, at full width when WIDE) loaded, on a copy of
// the stack arguments; returns when it called jprobe_return() or returned.
void jprobe_run(struct kprobe *p, const struct pt_regs *regs, const void *vec,
                unsigned long vec_size, bool wide) noexcept;
// Bytes of stack-passed arguments of the function at FUNC, from the DWARF of OBJ
// (jprobe_args.cpp), or -1 when unknown (no DWARF for it, a type not understood).
long jprobe_stack_bytes(const loaded_object &obj, uintptr_t func);

// kretprobe registration steps (kretprobe.cpp), under kprobe_mutex().
int kretprobe_prepare(struct kretprobe *rp); // checks, ctl allocation
void kretprobe_set_site_ip(struct kretprobe *rp, uintptr_t ip);
void kretprobe_sync(struct kretprobe *rp, bool want); // ftrace mode: attach/detach its ops
// The same as a pair for a batch (ftrace_ops_attach_each): false when RP is as WANT already.
bool kretprobe_sync_pair(struct kretprobe *rp, bool want, ftrace_ops_site *out);
// The batch applied PAIR (or, for an attach, failed: ATTACHED false).
void kretprobe_sync_done(struct kretprobe *rp, const ftrace_ops_site &pair, bool attached);
// After the entry probes are gone: no exit of earlier calls runs any more (one wait).
void kretprobes_release(std::span<struct kretprobe *const> rps);

// Registration internals (kprobes.cpp) used by kretprobe.cpp.
std::mutex &kprobe_mutex();
// Registers KPS[0..NUM) and arms them in one batch; on the first failure none of them stays
// registered (kretprobes keep their prepared control block: the caller releases it).
int register_kprobes_locked(struct kprobe *const *kps, int num, child_kind kind);
bool kprobe_registered_locked(const struct kprobe *p);
void unregister_kprobes_locked(struct kprobe *const *kps, int num);
// The kretprobe's ops attach to the site itself when the probe is FTRACE.
ftrace_site *record_site(const struct kprobe *p) noexcept;

// Blacklist (blacklist.cpp).
bool in_blacklist(uintptr_t addr);
void blacklist_refresh();

// Instruction bytes as they were before any probe was armed (for boundary decoding).
void recover_original_bytes(uintptr_t addr, uint8_t *buf, size_t len);

// Waits for the readers of replaced kp_children lists and frees them.
void synchronize_and_collect();

inline bool child_enabled(const struct kprobe *p) noexcept
{
    return !(__atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) &
             (KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE));
}

// Counters of the int3 path (whose hits cost microseconds anyway), for tests.
struct kp_stats {
    std::atomic<unsigned long> int3_hits{0}, ss_hits{0}, reenter{0};
};
kp_stats &stats() noexcept;
// Hits of optimized probes, counted per thread in task_ctx::kprobe_opt_hits (a shared
// atomic counter would cost a locked instruction, a few ns, on every hit).
inline void count_opt_hit(task_ctx *t) noexcept
{
    std::atomic_ref<unsigned long> c(t->kprobe_opt_hits);
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
// Their sum over every thread (contexts are recycled with their count, never freed).
unsigned long opt_hits_total() noexcept;

} // namespace dprobe::kp
