// Arming kprobes in batches: kernel/kprobes.c's arm_kprobe()/disarm_kprobe() and its
// optimizer (kprobe_optimizer(): optimize_kprobes()/unoptimize_kprobes() over lists), with
// x86's text_poke_queue()/text_poke_finish() batching.
//
// A change of probes (registration, unregistration, enable/disable, the knobs) names the
// records it touched in an arm_batch; commit() brings all of them in line with their probes:
//   1. unoptimize what may not stay optimized: records being disarmed or given a post
//      handler, regions that will cover a newly armed int3 (one text patch for all jmps);
//   2. arm and disarm the int3 records (one text patch: one byte each, atomic stores);
// (the bytes of each step are the arch verbs': arch_arm_kprobe()/arch_disarm_kprobe(),
// arch_optimize_kprobes()/arch_unoptimize_kprobes() through core/optprobe);
//   3. attach and detach the ftrace ops of records on patch sites (one text patch, one wait);
//   4. optimize the candidates: the touched records and their neighbours, whose regions
//      may have been blocked or unblocked by a touched address (one stop of the threads
//      for every jmp, after one wait for the threads inside the int3 hook).
// N probes registered together thus cost a few cross-core syncs and one stop, not N of
// each, and the work is proportional to the records touched, not to every record.
//
// Invariants (kprobe_mutex() held): a record's armed and optimized flags say what the text
// holds, whatever step failed; optimized regions never overlap and hold no armed int3 of
// another record; a gone record's code is never written.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/kprobes_arch.h"
#include "core/optprobe.h"
#include "core/text_poke.h"
#include "kprobe/kprobe_internal.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace dprobe::kp
{

// Whether REC's probes allow a jmp: an int3 record of plain kprobes without post handlers,
// with optimization and kprobes on. (The region checks are optprobe_prepare()'s.)
bool opt_allowed(const kp_record *rec)
{
    const kp_registry &g = registry();
    if (!g.optimization_on || g.all_disarmed || rec->mode != kp_mode::int3 || rec->gone.load())
        return false;
    const kp_children *cl = rec->children.load(std::memory_order_relaxed);
    if (!cl || cl->any_post) return false;
    for (uint32_t i = 0; i < cl->n; ++i)
        if (cl->kp[i]->ainsn.kind != kind_kprobe)
            return false; // a kretprobe's int3 entry needs the trap's context
    return true;
}

void set_opt_flags(kp_record *rec, bool on)
{
    const kp_children *cl = rec->children.load(std::memory_order_relaxed);
    for (uint32_t i = 0; cl && i < cl->n; ++i) {
        if (on)
            __atomic_or_fetch(&cl->kp[i]->flags, KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELEASE);
        else
            __atomic_and_fetch(&cl->kp[i]->flags, ~KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELEASE);
    }
}

namespace
{

bool any_enabled(const kp_record *rec, child_kind kind)
{
    const kp_children *cl = rec->children.load(std::memory_order_relaxed);
    for (uint32_t i = 0; cl && i < cl->n; ++i)
        if (cl->kp[i]->ainsn.kind == kind && child_enabled(cl->kp[i])) return true;
    return false;
}

bool live(const kp_record *rec)
{
    return !registry().all_disarmed && !rec->gone.load();
}

// Whether the int3 record's byte should be an int3 (some kprobe, kretprobe entry or jprobe
// enabled).
bool wants_int3(const kp_record *rec)
{
    return live(rec) && (any_enabled(rec, kind_kprobe) || any_enabled(rec, kind_kretprobe) ||
                         any_enabled(rec, kind_jprobe));
}

// The bytes [a, a + len) hold an armed int3 of another record (the kernel's -EEXIST).
bool armed_probe_within(const kp_record *self, uintptr_t a, size_t len)
{
    bool found = false;
    for_each_record_in(a, a + len, [&](const kp_record *r) {
        found |= r != self && r->mode == kp_mode::int3 && r->armed.load();
    });
    return found;
}

// Records whose optimized region covers ADDR past its first byte.
template <class F> void for_each_covering(uintptr_t addr, F f)
{
    const uintptr_t lo = addr > max_region_len ? addr - max_region_len : 0;
    for_each_record_in(lo, addr, [&](kp_record *r) {
        if (r->optimized.load() && addr < r->addr + r->opt->len) f(r);
    });
}

void set_boost_target(kp_record *rec, uintptr_t to)
{
    arch::kprobe_slot_set_boost_ret(rec->slot.rw, to);
}

// The same for the jump a single-stepped thread takes back (see ss_done()).
void set_ss_target(kp_record *rec, uintptr_t to)
{
    if (rec->has_ss && rec->ss_ret) arch::kprobe_slot_set_ss_ret(rec->slot.rw, to);
}

// Overlapping regions (a probe at A whose region covers B, one at B: optimized in turn). A
// thread can be anywhere in A's detour long after A's jmp was taken away - preempted in it,
// or about to return into it from a signal handler - and the detour ends with a jump back
// into the middle of B's region, where B's jmp now stands: the kernel waits for every task
// to leave such code (synchronize_rcu_tasks) before it optimizes; a stopped thread's place
// in a detour cannot be moved anywhere equivalent. So while B is optimized, the jump back of
// every other detour into B's region goes to B's detour copy of the same instruction, which
// is the same code; re-aimed in the stop that writes B's jmp, and back once B's region holds
// its instructions again.
std::vector<text_poke_req> aim_backs_at(const std::vector<kp_record *> &recs,
                                        std::vector<std::pair<kp_record *, kp_record *>> *pairs)
{
    // Every detour's jump back, by where it goes: one pass over the records, then a search
    // per region (a batch may optimize thousands).
    std::vector<std::pair<uintptr_t, kp_record *>> backs;
    for (kp_record *a = first_record(); a; a = a->all_next)
        if (a->opt && !a->back_via)
            if (const uintptr_t back = arch::detour_back_target(a->opt->d))
                backs.push_back({back, a});
    std::sort(backs.begin(), backs.end());
    std::vector<text_poke_req> reqs;
    for (kp_record *b : recs) {
        const optprobe &bo = *b->opt;
        auto it = std::upper_bound(backs.begin(), backs.end(), bo.addr,
                                   [](uintptr_t v, const auto &e) { return v < e.first; });
        // The regions of one batch do not overlap: a jump back lies in one of them at most.
        for (; it != backs.end() && it->first < bo.addr + bo.len; ++it) {
            kp_record *a = it->second;
            const uintptr_t to = bo.d.copy_of(it->first);
            text_poke_req q;
            if (to && arch::detour_back_req(a->opt->d, to, &q)) {
                reqs.push_back(q);
                pairs->push_back({a, b}); // a->back_via, once the batch is written
            }
        }
    }
    return reqs;
}

// The jumps back re-aimed at the detours of RECS, aimed at the code again (RECS' regions hold
// their instructions now). If that fails they stay re-aimed, which is still the same code.
void aim_backs_home(const std::vector<kp_record *> &recs)
{
    std::vector<text_poke_req> reqs;
    std::vector<kp_record *> homed;
    std::vector<kp_record *> gone(recs.begin(), recs.end());
    std::sort(gone.begin(), gone.end());
    for (kp_record *a = first_record(); a; a = a->all_next) {
        if (!a->back_via || !std::binary_search(gone.begin(), gone.end(), a->back_via)) continue;
        text_poke_req q;
        if (arch::detour_back_req(a->opt->d, arch::detour_back_target(a->opt->d), &q)) {
            reqs.push_back(q);
            homed.push_back(a);
        }
    }
    if (!reqs.empty() && text_poke_batch(reqs) == 0)
        for (kp_record *a : homed)
            a->back_via = nullptr;
}

// Back to int3 probes: int3 + the original tail over each jmp of RECS, in one text patch.
int unoptimize(const std::vector<kp_record *> &recs)
{
    if (recs.empty()) return 0;
    std::vector<optprobe *> ops;
    ops.reserve(recs.size());
    for (kp_record *r : recs)
        ops.push_back(r->opt.get());
    // Hits during the rewrite continue in the detour's copy (a jmp back from the boost copy
    // could land in the half-restored region); after it, in the boost copy again.
    if (int err = optprobe_disarm_many(ops, true)) return err;
    for (kp_record *r : recs) {
        r->opt_copy.store(0);
        if (r->boostable) set_boost_target(r, r->insn.next());
        set_ss_target(r, r->insn.next());
        r->optimized.store(false);
        set_opt_flags(r, false);
    }
    // Only now: until the region holds its instructions again, nothing may jump into it.
    aim_backs_home(recs);
    return 0;
}

// The light detour's own code (the core's light dispatch and the kprobe layer's light
// handler) must leave the extended state alone too: checked once, on the code as built.
// Their indirect calls are the handler calls, which are scanned per probe.
bool light_dispatch_clean()
{
    static const bool clean =
        arch::ext_state_clean(reinterpret_cast<uintptr_t>(&dprobe_optprobe_dispatch_light), true) &&
        arch::ext_state_clean(reinterpret_cast<uintptr_t>(&kprobe_opt_handler_light), true);
    return clean;
}

// The full dispatch (the core's and the kprobe layer's handler) touches no extended state
// beyond the vector registers 0-15: checked once, on the code as built, for the vector
// caller. Their indirect calls are the handler calls, which are scanned per probe.
bool vector_dispatch_clean()
{
    static const bool clean =
        arch::ext_state_clean(reinterpret_cast<uintptr_t>(&dprobe_optprobe_dispatch_vec), true,
                              arch::ext_scope::vector) &&
        arch::ext_state_clean(reinterpret_cast<uintptr_t>(&kprobe_opt_handler_vec), true,
                              arch::ext_scope::vector);
    return clean;
}

// An optimized record's detour goes light when every pre handler it calls is known to leave
// the extended state alone (the light handler re-checks the list it sees on each hit), and
// to the vector caller when they touch no more than the vector registers 0-15 and the MXCSR
// (a list that changes goes through this again before its handlers can run).
void update_light(kp_record *rec)
{
    const kp_children *cl = rec->children.load(std::memory_order_relaxed);
    arch::optprobe_mode want = arch::optprobe_mode::full;
    if (cl && cl->all_ext_clean && light_dispatch_clean())
        want = arch::optprobe_mode::light;
    else if (cl && cl->all_vec_clean && vector_dispatch_clean())
        want = arch::optprobe_mode::vector;
    if (want != rec->opt->mode)
        optprobe_set_mode(*rec->opt, want,
                          want == arch::optprobe_mode::vector ? kprobe_opt_handler_vec
                                                              : kprobe_opt_handler_light);
}

// Whether REC may get its jmp now, preparing its detour on first use.
bool optimizable(kp_record *rec)
{
    if (rec->optimized.load() || rec->opt_refused || !rec->armed.load() || !opt_allowed(rec))
        return false;
    if (!rec->opt) {
        std::vector<uint8_t> code(rec->fsize);
        std::memcpy(code.data(), reinterpret_cast<const void *>(rec->func), rec->fsize);
        recover_original_bytes(rec->func, code.data(), code.size());
        std::string why;
        rec->opt = optprobe_prepare(rec->func, rec->fsize, code.data(), rec->addr,
                                    kprobe_opt_handler, rec, &why);
        if (!rec->opt) {
            rec->opt_refused = true;
            rec->opt_why = why.empty() ? "refused" : why;
            return false;
        }
    }
    if (armed_probe_within(rec, rec->addr, rec->opt->len))
        return false; // re-tried when that probe goes
    const optprobe &op = *rec->opt;
    if (rec->emulate && rec->insn.next() < op.addr + op.len) {
        // An emulated branch that falls through into the region: a thread the hook already
        // sent there could not be redirected.
        rec->opt_refused = true;
        rec->opt_why = "an emulated branch followed by more of the region";
        return false;
    }
    return true;
}

// Writes the jmps of RECS (all optimizable) during one stop of the threads.
void optimize(const std::vector<kp_record *> &recs)
{
    if (recs.empty()) return;
    // Threads that trap from now on continue in the detour's copy; wait (once) for those
    // still in the hook, which may have sent theirs to the boost copy.
    for (kp_record *r : recs)
        r->opt_copy.store(r->opt->d.copy());
    kprobe_synchronize();
    // Besides the regions' own moves: the threads between the hook and the end of a boost
    // copy (its jmp back would land inside the region) go to the same places of the
    // detour's copy.
    std::vector<optprobe *> ops;
    std::vector<rip_move> extra;
    ops.reserve(recs.size());
    for (kp_record *r : recs) {
        const optprobe &op = *r->opt;
        ops.push_back(r->opt.get());
        if (const uintptr_t to = op.d.copy_of(r->insn.next())) set_ss_target(r, to);
        if (!r->boostable) continue;
        extra.push_back({r->boost_addr, op.d.copy()});
        if (const uintptr_t to = op.d.copy_of(r->insn.next())) set_boost_target(r, to);
    }
    // Optimized before the threads resume: one stopped with a SIGTRAP pending from an int3
    // inside a region (another probe's, since removed) is sent to the detour's copy by the
    // hook when the signal arrives, which happens as soon as it is released.
    for (kp_record *r : recs)
        r->optimized.store(true, std::memory_order_release);
    std::vector<std::pair<kp_record *, kp_record *>> backs;
    const std::vector<text_poke_req> back_reqs = aim_backs_at(recs, &backs);
    if (optprobe_arm_many(ops, extra, back_reqs) != 0) {
        for (kp_record *r : recs) {
            r->optimized.store(false);
            r->opt_copy.store(0);
            if (r->boostable) set_boost_target(r, r->insn.next());
            set_ss_target(r, r->insn.next());
        }
        return;
    }
    for (auto [a, b] : backs)
        a->back_via = b;
    for (kp_record *r : recs) {
        update_light(r);
        set_opt_flags(r, true);
    }
}

void dedupe(std::vector<kp_record *> &v)
{
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
}

} // namespace

int arm_batch::commit()
{
    if (all_) {
        recs_.clear();
        for (kp_record *r = first_record(); r; r = r->all_next)
            recs_.push_back(r);
    }
    dedupe(recs_);

    // 1. Unoptimize: records that will not stay armed or may not keep a jmp, and regions
    //    that will cover a newly armed int3.
    std::vector<kp_record *> unopt;
    for (kp_record *r : recs_) {
        if (r->mode != kp_mode::int3 || r->gone.load()) continue;
        const bool want = wants_int3(r);
        if (r->optimized.load() && (!want || !opt_allowed(r))) unopt.push_back(r);
        if (want && !r->armed.load())
            for_each_covering(r->addr, [&](kp_record *c) { unopt.push_back(c); });
    }
    dedupe(unopt);
    if (int err = unoptimize(unopt)) return err;

    // 2. The int3 bytes, in one text patch.
    std::vector<text_poke_req> pokes;
    std::vector<kp_record *> arming, disarming;
    for (kp_record *r : recs_) {
        if (r->mode != kp_mode::int3 || r->gone.load()) continue;
        const bool want = wants_int3(r);
        if (want == r->armed.load()) continue;
        pokes.push_back(want ? arch::arm_kprobe(r->addr) : arch::disarm_kprobe(r->addr, r->opcode));
        (want ? arming : disarming).push_back(r);
    }
    for (kp_record *r : arming)
        r->armed.store(true);
    if (int err = text_poke_batch(pokes)) {
        for (kp_record *r : arming)
            r->armed.store(false);
        return err;
    }
    for (kp_record *r : disarming)
        r->armed.store(false);

    // 3. Records on patch sites: one ops for the plain kprobes of each, one per kretprobe
    //    and per jprobe.
    std::vector<ftrace_ops_site> attach, detach;
    std::vector<kp_record *> attaching, detaching;
    std::vector<std::pair<struct kprobe *, ftrace_ops_site>> own_attach, own_detach;
    // A kretprobe's or a jprobe's own ops.
    auto queue_own = [&](struct kprobe *p, bool want) {
        ftrace_ops_site pair;
        const bool change = p->ainsn.kind == kind_kretprobe
                                ? kretprobe_sync_pair(container_of_kretprobe(p), want, &pair)
                                : jprobe_sync_pair(container_of_jprobe(p), want, &pair);
        if (!change) return;
        (want ? attach : detach).push_back(pair);
        (want ? own_attach : own_detach).emplace_back(p, pair);
    };
    auto own_done = [](struct kprobe *p, const ftrace_ops_site &pair, bool attached) {
        if (p->ainsn.kind == kind_kretprobe)
            kretprobe_sync_done(container_of_kretprobe(p), pair, attached);
        else
            jprobe_sync_done(container_of_jprobe(p), pair, attached);
    };
    for (kp_record *r : recs_) {
        if (r->mode != kp_mode::ftrace) continue;
        // The record's ops serves its plain kprobes.
        const bool want = live(r) && any_enabled(r, kind_kprobe);
        if (want && !r->armed.load()) {
            attach.push_back({&r->ops, r->site});
            attaching.push_back(r);
        } else if (!want && r->armed.load()) {
            detach.push_back({&r->ops, r->site});
            detaching.push_back(r);
        }
        const kp_children *cl = r->children.load(std::memory_order_relaxed);
        for (uint32_t i = 0; cl && i < cl->n; ++i)
            if (cl->kp[i]->ainsn.kind != kind_kprobe)
                queue_own(cl->kp[i], live(r) && child_enabled(cl->kp[i]));
    }
    for (struct kprobe *p : departed_)
        queue_own(p, false);
    if (!detach.empty()) {
        ftrace_ops_detach_each(detach);
        for (kp_record *r : detaching)
            r->armed.store(false);
        for (auto &[p, pair] : own_detach)
            own_done(p, pair, false);
    }
    int err = 0;
    if (!attach.empty()) {
        err = ftrace_ops_attach_each(attach);
        if (err == 0) {
            for (kp_record *r : attaching)
                r->armed.store(true);
            for (auto &[p, pair] : own_attach)
                own_done(p, pair, true);
        }
    }

    // 4. The optimizer, over the touched records and the records whose region may cover one
    //    of them (a probe armed or disarmed there blocks or unblocks them).
    std::vector<kp_record *> cand;
    for (kp_record *r : recs_) {
        if (r->mode != kp_mode::int3 || r->gone.load()) continue;
        cand.push_back(r);
        if (!all_)
            for_each_record_in(r->addr > max_region_len ? r->addr - max_region_len : 0, r->addr,
                               [&](kp_record *n) {
                                   if (n->mode == kp_mode::int3) cand.push_back(n);
                               });
    }
    dedupe(cand);
    std::vector<kp_record *> drop, go;
    for (kp_record *r : cand)
        if (r->optimized.load() &&
            (!opt_allowed(r) || !r->armed.load() || armed_probe_within(r, r->addr, r->opt->len)))
            drop.push_back(r);
    unoptimize(drop); // on failure they stay optimized, which their flags say
    for (kp_record *r : cand)
        if (optimizable(r)) go.push_back(r);
    optimize(go);
    // Keep the OPTIMIZED flag on every probe of an optimized record (new ones included) and
    // its detour's weight in line with its handlers.
    for (kp_record *r : cand)
        if (r->optimized.load()) {
            update_light(r);
            set_opt_flags(r, true);
        }
    return err;
}

} // namespace dprobe::kp
