// kprobe registration (kernel/kprobes.c's role): address resolution and safety checks,
// per-address records shared by every probe at the address (the kernel's aggregate probes),
// arming and disarming, quiescence on unregister, [GONE] on dlclose, and kprobes/list.
#include "arch/x86_64/ext_state.h"
#include "arch/x86_64/insn.h"
#include "arch/x86_64/kprobes_arch.h"
#include "arch/x86_64/uaccess.h"
#include "core/compiler.h"
#include "core/signal_chain.h"
#include "core/symbols.h"
#include "core/sym_cfi.h"
#include "core/optprobe.h"
#include "core/text_poke.h"
#include "kprobe/kprobe_internal.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <sched.h>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace dprobe::kp
{

namespace
{

// The hooks' lock-free tables (records are never removed from them): 16K buckets keep
// chains short with 100,000 probed addresses; pages are touched only as they fill.
constexpr size_t nbuckets = 16384;
std::atomic<kp_record *> by_addr[nbuckets];
std::atomic<kp_record *> by_ss[nbuckets];
std::atomic<kp_record *> all_records{nullptr};

DPROBE_NOPROBE inline size_t bucket(uintptr_t a) noexcept
{
    return static_cast<size_t>((a ^ (a >> 10) ^ (a >> 20)) % nbuckets);
}

// Everything below is under kprobe_mutex().
std::unordered_set<const struct kprobe *> registered;
// Lists replaced since the last synchronize. Never destroyed: the program's threads may
// still register and unregister probes while exit() runs the static destructors, and the
// lists it holds must stay reachable (LeakSanitizer reported them once it was destroyed).
std::vector<kp_children *> &garbage = *new std::vector<kp_children *>;
bool hooks_installed = false;
// The list of objects refresh_gone() last looked at (kept alive: no address reuse).
std::shared_ptr<const std::vector<object_ptr>> objects_seen;
struct kprobe busy_probe;

// Names and places kept for [GONE] probes, whose object kallsyms no longer knows.
struct record_info {
    std::string sym;
    uintptr_t sym_addr = 0;
    std::string modname; // "" for the main program
};
std::unordered_map<const kp_record *, record_info> infos;

void install_hooks()
{
    if (hooks_installed) return;
    signal_chain_add_hook(SIGTRAP, kprobe_trap_hook);
    // The int3 hook reads branch targets with the nofault copy before emulating.
    signal_chain_add_hook(SIGSEGV, uaccess_fixup_fault);
    signal_chain_add_hook(SIGBUS, uaccess_fixup_fault);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL})
        signal_chain_add_hook(sig, kprobe_fault_hook);
    hooks_installed = true;
}

kp_record *find_live_record(uintptr_t addr)
{
    auto [lo, hi] = registry().by_addr.equal_range(addr);
    for (auto it = lo; it != hi; ++it)
        if (!it->second->gone.load(std::memory_order_relaxed)) return it->second;
    return nullptr;
}

kp_children *make_children(const kp_children *old, struct kprobe *add, const struct kprobe *drop)
{
    uint32_t n = old ? old->n : 0;
    std::vector<struct kprobe *> v;
    for (uint32_t i = 0; i < n; ++i)
        if (old->kp[i] != drop) v.push_back(old->kp[i]);
    if (add) v.push_back(add);
    if (v.empty()) return nullptr;
    auto *cl = static_cast<kp_children *>(
        std::malloc(sizeof(kp_children) + v.size() * sizeof(struct kprobe *)));
    if (!cl) throw std::bad_alloc();
    cl->n = static_cast<uint32_t>(v.size());
    cl->any_post = false;
    cl->all_ext_clean = true;
    cl->all_vec_clean = true;
    const auto vec_clean = [](auto *handler) {
        return !handler || arch::ext_state_clean(reinterpret_cast<uintptr_t>(handler), false,
                                                 arch::ext_scope::vector);
    };
    for (struct kprobe *p : v) {
        cl->any_post |= p->ainsn.kind == kind_kprobe && p->post_handler;
        if (p->ainsn.kind == kind_kprobe && p->pre_handler)
            cl->all_ext_clean &= arch::ext_state_clean(reinterpret_cast<uintptr_t>(p->pre_handler));
        if (p->ainsn.kind == kind_jprobe) cl->all_ext_clean = false; // loads xmm0-7
        cl->all_vec_clean &=
            p->ainsn.kind == kind_kprobe && vec_clean(p->pre_handler) && vec_clean(p->post_handler);
    }
    std::copy(v.begin(), v.end(), cl->kp);
    return cl;
}

void retire_children(kp_children *cl)
{
    if (cl) garbage.push_back(cl);
}

void unindex_record(kp_record *r)
{
    auto &idx = registry().by_addr;
    auto [lo, hi] = idx.equal_range(r->addr);
    for (auto it = lo; it != hi; ++it)
        if (it->second == r) {
            idx.erase(it);
            return;
        }
}

// Records of objects that were dlclose'd: flag them and their probes gone, never write there.
void refresh_gone()
{
    ftrace_update_objects();
    auto objs = kallsyms::instance().objects();
    if (objs == objects_seen) return; // no object came or went since the last look
    objects_seen = objs;
    std::unordered_set<uint64_t> ids;
    for (const auto &o : *objs)
        ids.insert(o->id);
    for (kp_record *r = all_records.load(); r; r = r->all_next) {
        if (r->gone.load() || ids.count(r->obj_id)) continue;
        r->gone.store(true);
        unindex_record(r);
        const kp_children *cl = r->children.load();
        for (uint32_t i = 0; cl && i < cl->n; ++i) {
            __atomic_or_fetch(&cl->kp[i]->flags, KPROBE_FLAG_GONE, __ATOMIC_RELEASE);
            if (cl->kp[i]->ainsn.kind == kind_kretprobe)
                kretprobe_sync(container_of_kretprobe(cl->kp[i]), false);
            else if (cl->kp[i]->ainsn.kind == kind_jprobe)
                jprobe_sync(container_of_jprobe(cl->kp[i]), false);
        }
        if (r->mode == kp_mode::ftrace && r->armed.load()) {
            ftrace_site *one[1] = {r->site};
            ftrace_ops_detach(&r->ops, one);
        }
        r->armed.store(false);
        if (r->optimized.load()) {
            r->optimized.store(false); // the code is gone: nothing to write back
            set_opt_flags(r, false);
        }
    }
}

struct resolved {
    uintptr_t addr = 0;
    uintptr_t func = 0;
    uint64_t fsize = 0;
    object_ptr obj;
    std::string sym;
    bool on_entry = false;
};

bool is_func(const ksym *s)
{
    return s->type == STT_FUNC || s->type == STT_GNU_IFUNC;
}

// The kernel's _kprobe_addr() + arch_adjust_kprobe_addr().
int resolve(const kprobe_opcode_t *addr, const char *symbol_name, unsigned long offset, resolved &r)
{
    if ((addr && symbol_name) || (!addr && !symbol_name)) return -EINVAL;
    auto &ks = kallsyms::instance();
    const ksym *s = nullptr;
    if (symbol_name) {
        // As the dynamic linker binds the name (a compatibility version loses).
        auto hits = bindable_funcs(ks.lookup_func(symbol_name));
        if (hits.empty()) return -ENOENT;
        s = hits.front().sym;
        r.obj = hits.front().obj;
        if (s->type == STT_GNU_IFUNC) {
            // The symbol is the resolver; probe the implementation the program calls.
            std::string_view bare = symbol_name;
            if (auto c = bare.find(':'); c != std::string_view::npos) bare.remove_prefix(c + 1);
            if (void *impl = dlsym(RTLD_DEFAULT, std::string(bare).c_str())) {
                const auto ia = reinterpret_cast<uintptr_t>(impl);
                auto h = ks.lookup_addr(ia);
                if (h && is_func(h->sym) && h->sym->addr == ia) {
                    s = h->sym;
                    r.obj = h->obj;
                } else if (ia != s->addr && ks.object_of(ia)) {
                    // An implementation without a symbol (a stripped libc): only its entry
                    // can be checked, so only its entry can be probed.
                    r.obj = ks.object_of(ia);
                    r.func = ia;
                    r.fsize = arch::KPROBE_ENTRY_SPAN;
                    r.sym = std::string(bare);
                    offset = arch::adjust_kprobe_offset(ia, r.fsize, offset, &r.on_entry);
                    if (!r.on_entry) return -EINVAL;
                    r.addr = ia + offset;
                    return 0;
                }
            }
        }
    }
    // An address, or sym+offset past the symbol's end: the function that contains it (as
    // the kernel's _kprobe_addr() re-derives the symbol of sym+offset); in a stripped
    // object, the function its call-frame information bounds.
    uintptr_t at = !symbol_name        ? reinterpret_cast<uintptr_t>(addr)
                   : offset >= s->size ? s->addr + offset
                                       : 0;
    if (at) {
        auto h = ks.lookup_addr(at);
        if (h && is_func(h->sym)) {
            s = h->sym;
            r.obj = h->obj;
        } else if (auto c = cfi_function_at(at)) {
            s = nullptr;
            r.obj = ks.object_of(at);
            r.func = c->start;
            r.fsize = c->size;
        } else {
            return -EINVAL; // not in a known function: cannot check the boundary
        }
        offset = at - (s ? s->addr : r.func);
    }
    if (s) {
        r.func = s->addr;
        r.fsize = s->size;
        r.sym = s->name;
    }
    offset = arch::adjust_kprobe_offset(r.func, r.fsize, offset, &r.on_entry);
    if (offset >= r.fsize) return -EINVAL;
    r.addr = r.func + offset;
    return 0;
}

int build_int3_record(const resolved &r, kp_record *rec)
{
    std::vector<uint8_t> code(r.fsize);
    std::memcpy(code.data(), reinterpret_cast<const void *>(r.func), r.fsize);
    recover_original_bytes(r.func, code.data(), code.size());
    arch::kprobe_insn ki;
    if (int err = arch::prepare_kprobe(code.data(), r.func, r.fsize, r.addr, &ki)) return err;
    rec->insn = ki.i;
    rec->opcode = ki.opcode;
    rec->emulate = ki.emulate;
    exec_chunk slot = exec_alloc(ki.reach_lo, ki.reach_hi, arch::KPROBE_SLOT_SIZE);
    if (!slot) return ki.slot_optional ? 0 : -ENOMEM;
    arch::kprobe_slot ks;
    if (int err = arch::prepare_kprobe_copies(ki, slot.rw, slot.rx, &ks)) {
        exec_free(slot); // never published
        return err;
    }
    rec->boostable = ks.boostable;
    rec->boost_addr = ks.boost_addr;
    rec->boost_len = ks.boost_len;
    rec->has_ss = ks.has_ss;
    rec->ss_addr = ks.ss_addr;
    rec->ss_int3 = ks.ss_int3;
    rec->ss_ret = ks.ss_ret;
    rec->slot = slot;
    return 0;
}

// An int3 probe (registered) within the bytes a jump site at ADDR could cover.
bool int3_probe_near(uintptr_t addr)
{
    bool near = false;
    for_each_record_in(addr, addr + max_region_len, [&](const kp_record *r) {
        near |= r->mode == kp_mode::int3 && (r->armed.load() || r->children.load());
    });
    return near;
}

// An int3 at R's address inside the entry of a jump site that is enabled, or whose users will
// enable it, would be buried by its jmp (or break it): -EILSEQ, as the kernel refuses a probe
// inside an ftrace NOP. (A jump site nobody uses has written nothing: the int3 may go there,
// and the site stays disabled while it does, see ftrace_set_text_busy.)
int int3_clear_of_jump_sites(const resolved &r)
{
    ftrace_site *s = ftrace_location(r.func);
    if (!s || s->gone || s->kind != site_kind::jump) return 0;
    if (r.addr < s->ip || r.addr >= s->ip + s->len) return 0;
    return s->patched || s->users.load() ? -EILSEQ : 0;
}

int create_record(const resolved &r, child_kind kind, kp_record **out)
{
    auto rec = std::make_unique<kp_record>();
    rec->addr = r.addr;
    rec->obj_id = r.obj->id;
    rec->func = r.func;
    rec->fsize = r.fsize;
    ftrace_site *s = ftrace_location(r.func);
    if (!s) s = ftrace_location(r.addr);
    if (!s && (kind == kind_kretprobe || kind == kind_jprobe) && registry().optimization_on &&
        r.on_entry && !int3_probe_near(r.addr)) {
        // A function without a compiled-in site: ride on a jump site (no trap) when its entry
        // allows one (with optimization on: the jump site is the optimized entry probe);
        // else the int3 entry below. (Not over int3 probes: the jump site's
        // detour copies the entry's live bytes.)
        s = ftrace_location_or_jump(r.func);
        if (s && (s->gone || !s->usable || s->ip != r.addr)) s = nullptr;
    }
    if (s && !s->gone && r.addr > s->ip && r.addr < s->ip + s->len) {
        // Inside the site's NOP (the kernel's check_ftrace_location). A jump site nobody
        // uses has written nothing: the int3 probe may go there (and keeps kretprobes on
        // the int3 entry while it exists, see int3_probe_near).
        // One that users wait on (attached, to be enabled) will write its jmp: not there.
        if (s->kind != site_kind::jump || s->patched || s->users.load()) return -EILSEQ;
        s = nullptr;
    }
    if (s && !s->gone && s->usable && s->ip == r.addr) {
        rec->mode = kp_mode::ftrace;
        rec->site = s;
        rec->opcode = *reinterpret_cast<const uint8_t *>(r.addr);
        rec->ops.entry = kprobe_ftrace_entry;
        rec->ops.missed = kprobe_ftrace_missed;
        rec->ops.priv = rec.get();
    } else if (int err = build_int3_record(r, rec.get())) {
        return err;
    }
    record_info info;
    info.sym = r.sym;
    info.sym_addr = r.func;
    if (!r.obj->is_main) info.modname = r.obj->name;
    kp_record *p = rec.release();
    infos[p] = std::move(info);
    publish_record(p);
    if (p->has_ss) publish_ss(p);
    *out = p;
    return 0;
}

} // namespace

// --- lookups (hot path) ----------------------------------------------------------------------

DPROBE_NOPROBE kp_record *lookup_record(uintptr_t addr) noexcept
{
    for (kp_record *r = by_addr[bucket(addr)].load(std::memory_order_acquire); r; r = r->hash_next)
        if (r->addr == addr && r->mode == kp_mode::int3 && !r->gone.load(std::memory_order_relaxed))
            return r;
    return nullptr;
}

DPROBE_NOPROBE kp_record *lookup_ss_record(uintptr_t int3_addr) noexcept
{
    for (kp_record *r = by_ss[bucket(int3_addr)].load(std::memory_order_acquire); r;
         r = r->ss_hash_next)
        if (r->ss_int3 == int3_addr) return r;
    return nullptr;
}

DPROBE_NOPROBE kp_record *first_record() noexcept
{
    return all_records.load(std::memory_order_acquire);
}

namespace
{

// core's question before it makes or enables a jump site (ftrace_set_text_busy): does an
// int3 record with probes, or still armed, sit at an address in [LO, HI)? Lock-free (core
// asks with its site lock held, which registration takes under kprobe_mutex): the address
// hash and its records are never freed.
DPROBE_NOPROBE bool kprobe_text_busy(uintptr_t lo, uintptr_t hi) noexcept
{
    for (uintptr_t a = lo; a < hi; ++a)
        for (kp_record *r = by_addr[bucket(a)].load(std::memory_order_acquire); r;
             r = r->hash_next) {
            if (r->addr != a || r->mode != kp_mode::int3 || r->gone.load()) continue;
            if (r->armed.load() || r->children.load(std::memory_order_acquire)) return true;
        }
    return false;
}

__attribute__((constructor)) void tell_ftrace_about_kprobes()
{
    ftrace_set_text_busy(kprobe_text_busy);
}

} // namespace

void publish_record(kp_record *r)
{
    auto &b = by_addr[bucket(r->addr)];
    r->hash_next = b.load(std::memory_order_relaxed);
    b.store(r, std::memory_order_release);
    r->all_next = all_records.load(std::memory_order_relaxed);
    all_records.store(r, std::memory_order_release);
    registry().by_addr.emplace(r->addr, r);
}

void publish_ss(kp_record *r)
{
    auto &b = by_ss[bucket(r->ss_int3)];
    r->ss_hash_next = b.load(std::memory_order_relaxed);
    b.store(r, std::memory_order_release);
}

DPROBE_NOPROBE kp_stats &stats() noexcept
{
    static kp_stats s;
    return s;
}

// --- quiescence --------------------------------------------------------------------------------

void kprobe_synchronize()
{
    // Also the full barrier on every thread that orders our unpublishing against their
    // read-side markers (see task_ctx.h).
    synchronize_dispatch();
    task_ctx *self = peek_task_ctx();
    for (task_ctx *t = task_ctx_list(); t; t = t->next) {
        if (t == self) continue;
        const uintptr_t s = kp_seq(t, std::memory_order_acquire);
        if (!(s & 1)) continue;
        while (kp_seq(t, std::memory_order_acquire) == s &&
               t->in_use.load(std::memory_order_acquire))
            sched_yield();
    }
}

// --- registration --------------------------------------------------------------------------------

std::mutex &kprobe_mutex()
{
    static std::mutex m;
    return m;
}

ftrace_site *record_site(const struct kprobe *p) noexcept
{
    auto *rec = static_cast<const kp_record *>(p->ainsn.rec);
    return rec && rec->mode == kp_mode::ftrace ? rec->site : nullptr;
}

kp_registry &registry()
{
    static kp_registry &g = *new kp_registry; // never destroyed: see `garbage`
    return g;
}

void synchronize_and_collect()
{
    kprobe_synchronize();
    for (auto *cl : garbage)
        std::free(cl);
    garbage.clear();
}

void recover_original_bytes(uintptr_t addr, uint8_t *buf, size_t len)
{
    const uintptr_t lo = addr > max_region_len ? addr - max_region_len : 0;
    for_each_record_in(lo, addr + len, [&](const kp_record *r) {
        if (r->mode != kp_mode::int3) return;
        if (r->optimized.load()) {
            // The jmp (and the int3 filler after it) covers the whole region.
            for (size_t i = 0; i < r->opt->len; ++i)
                if (r->addr + i >= addr && r->addr + i < addr + len)
                    buf[r->addr + i - addr] = r->opt->d.region.orig[i];
        } else if (r->addr >= addr && r->addr < addr + len) {
            buf[r->addr - addr] = r->opcode;
        }
    });
}

bool kprobe_registered_locked(const struct kprobe *p)
{
    return registered.count(p) != 0;
}

namespace
{

// Takes P off its record (unregistration, or a batch rolled back); the caller commits B.
void remove_child(struct kprobe *p, arm_batch &b)
{
    auto *rec = static_cast<kp_record *>(p->ainsn.rec);
    kp_children *old = rec->children.load(std::memory_order_relaxed);
    rec->children.store(make_children(old, nullptr, p), std::memory_order_release);
    retire_children(old);
    registered.erase(p);
    if (p->ainsn.kind != kind_kprobe) b.depart(p);
    b.add(rec);
}

// The kernel's register_kprobe() up to arm_kprobe(): checks, the record (found or made),
// P among its probes. Arming is the caller's batch.
int add_probe(struct kprobe *p, child_kind kind, arm_batch &b)
{
    if (registered.count(p)) return -EEXIST;
    resolved r;
    if (int err = resolve(p->addr, p->symbol_name, p->offset, r)) return err;
    p->addr = reinterpret_cast<kprobe_opcode_t *>(r.addr);
    p->flags &= KPROBE_FLAG_DISABLED;
    if (r.on_entry) p->flags |= KPROBE_FLAG_ON_FUNC_ENTRY;
    if (!r.obj->is_text(r.addr)) return -EINVAL;
    if (in_blacklist(r.addr)) return -EINVAL;
    long jp_stack = JPROBE_MAX_STACK_SIZE; // unknown: the most a handler may see
    bool jp_exact = false;
    if (kind == kind_jprobe) {
        const long n = jprobe_stack_bytes(*r.obj, r.func);
        if (n > JPROBE_MAX_STACK_SIZE) return -E2BIG;
        if (n >= 0) jp_stack = (n + 15) / 16 * 16;
        jp_exact = n >= 0;
    }
    kp_record *rec = find_live_record(r.addr);
    if (rec && rec->mode == kp_mode::int3)
        if (int err = int3_clear_of_jump_sites(r)) return err; // made when none was in use
    if (!rec)
        if (int err = create_record(r, kind, &rec)) return err;
    if (kind == kind_kretprobe) kretprobe_set_site_ip(container_of_kretprobe(p), r.addr);
    p->opcode = rec->opcode;
    p->ainsn.rec = rec;
    p->ainsn.kind = kind;
    p->ainsn.boostable = rec->boostable && !rec->emulate;
    p->ainsn.stack_len = kind == kind_jprobe ? static_cast<unsigned>(jp_stack) : 0;
    if (kind == kind_jprobe)
        jprobe_set_stack(container_of_jprobe(p), static_cast<unsigned long>(jp_stack), jp_exact);
    if (rec->mode == kp_mode::ftrace) p->flags |= KPROBE_FLAG_FTRACE;
    p->nmissed = 0;
    kp_children *old = rec->children.load(std::memory_order_relaxed);
    rec->children.store(make_children(old, p, nullptr), std::memory_order_release);
    retire_children(old);
    registered.insert(p);
    b.add(rec);
    return 0;
}

// Takes DONE off their records and disarms what they armed, waiting for their handlers.
void remove_probes(const std::vector<struct kprobe *> &done)
{
    arm_batch undo;
    for (struct kprobe *p : done)
        remove_child(p, undo);
    undo.commit();
    synchronize_and_collect();
    for (struct kprobe *p : done)
        p->ainsn.rec = nullptr;
}

} // namespace

int register_kprobes_locked(struct kprobe *const *kps, int num, child_kind kind)
{
    install_hooks();
    refresh_gone();
    arm_batch b;
    std::vector<struct kprobe *> done;
    done.reserve(static_cast<size_t>(num));
    int err = 0;
    for (int i = 0; i < num && !err; ++i) {
        if (!kps[i])
            err = -EINVAL;
        else if (!(err = add_probe(kps[i], kind, b)))
            done.push_back(kps[i]);
    }
    // Every probe armed at once: one text patch per step, one stop for the jmps.
    if (!err) err = b.commit();
    if (err) {
        remove_probes(done);
        return err;
    }
    if (garbage.size() > 64) synchronize_and_collect();
    return 0;
}

void unregister_kprobes_locked(struct kprobe *const *kps, int num)
{
    refresh_gone();
    arm_batch b;
    std::vector<struct kprobe *> done;
    std::vector<struct kretprobe *> krps;
    std::vector<struct jprobe *> jps;
    for (int n = 0; n < num; ++n) {
        struct kprobe *p = kps[n];
        if (!p || !registered.count(p)) continue; // unknown: silently ignored, as in the kernel
        remove_child(p, b);
        done.push_back(p);
        if (p->ainsn.kind == kind_kretprobe) krps.push_back(container_of_kretprobe(p));
        if (p->ainsn.kind == kind_jprobe) jps.push_back(container_of_jprobe(p));
    }
    if (done.empty()) return;
    b.commit();
    synchronize_and_collect();
    kretprobes_release(krps);
    jprobes_release(jps);
    for (struct kprobe *p : done)
        p->ainsn.rec = nullptr;
}

// enable_kprobe()/disable_kprobe() for many probes, armed or disarmed in one batch. All or
// nothing: on failure the probes keep their states.
int set_kprobes_disabled(struct kprobe *const *kps, int num, bool disable)
{
    refresh_gone();
    for (int i = 0; i < num; ++i)
        if (!kps[i] || !registered.count(kps[i]) || (!disable && kprobe_gone(kps[i])))
            return -EINVAL;
    arm_batch b;
    std::vector<std::pair<struct kprobe *, unsigned>> saved;
    saved.reserve(static_cast<size_t>(num));
    for (int i = 0; i < num; ++i) {
        struct kprobe *p = kps[i];
        saved.emplace_back(p, __atomic_load_n(&p->flags, __ATOMIC_RELAXED) & KPROBE_FLAG_DISABLED);
        if (disable)
            __atomic_or_fetch(&p->flags, KPROBE_FLAG_DISABLED, __ATOMIC_RELEASE);
        else
            __atomic_and_fetch(&p->flags, ~KPROBE_FLAG_DISABLED, __ATOMIC_RELEASE);
        b.add(static_cast<kp_record *>(p->ainsn.rec));
    }
    int err = b.commit();
    if (err && !disable) {
        // Back to the states they had (disarming cannot fail half-way the same way: what
        // was disarmed stays so, and the flags say it).
        arm_batch undo;
        for (auto &[p, was] : saved) {
            if (was) __atomic_or_fetch(&p->flags, KPROBE_FLAG_DISABLED, __ATOMIC_RELEASE);
            undo.add(static_cast<kp_record *>(p->ainsn.rec));
        }
        undo.commit();
    }
    return err;
}

} // namespace dprobe::kp

using namespace dprobe;
using namespace dprobe::kp;

extern "C" {

int register_kprobe(struct kprobe *p)
{
    if (!p) return -EINVAL;
    return register_kprobes(&p, 1);
}

void unregister_kprobe(struct kprobe *p)
{
    if (p) unregister_kprobes(&p, 1);
}

// Checked and added one by one, in order (the first failure rolls every earlier one back),
// then armed together: one text patch per step and one stop of the threads for the jmps of
// the optimized ones, however many there are.
int register_kprobes(struct kprobe **kps, int num)
{
    if (!kps || num <= 0) return -EINVAL;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    return register_kprobes_locked(kps, num, kind_kprobe);
}

void unregister_kprobes(struct kprobe **kps, int num)
{
    if (!kps || num <= 0) return;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    unregister_kprobes_locked(kps, num);
}

int disable_kprobe(struct kprobe *kp)
{
    return disable_kprobes(&kp, 1);
}

int enable_kprobe(struct kprobe *kp)
{
    return enable_kprobes(&kp, 1);
}

int enable_kprobes(struct kprobe **kps, int num)
{
    if (!kps || num <= 0) return -EINVAL;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    return set_kprobes_disabled(kps, num, false);
}

int disable_kprobes(struct kprobe **kps, int num)
{
    if (!kps || num <= 0) return -EINVAL;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    return set_kprobes_disabled(kps, num, true);
}

DPROBE_NOPROBE struct kprobe *get_kprobe(void *addr)
{
    task_ctx *t = current_task_ctx();
    if (t) kp_enter(t);
    struct kprobe *p = nullptr;
    const auto a = reinterpret_cast<uintptr_t>(addr);
    for (kp_record *r = by_addr[bucket(a)].load(std::memory_order_acquire); r && !p;
         r = r->hash_next) {
        if (r->addr != a || r->gone.load(std::memory_order_relaxed)) continue;
        if (const kp_children *cl = r->children.load(std::memory_order_acquire)) p = cl->kp[0];
    }
    if (t) kp_leave(t);
    return p;
}

DPROBE_NOPROBE struct kprobe *kprobe_running(void)
{
    task_ctx *t = peek_task_ctx();
    return t ? t->current_kprobe : nullptr;
}

DPROBE_NOPROBE void kprobe_busy_begin(void)
{
    if (task_ctx *t = current_task_ctx()) {
        t->current_kprobe = &busy_probe;
        t->kprobe_status = KPROBE_HIT_ACTIVE;
    }
}

DPROBE_NOPROBE void kprobe_busy_end(void)
{
    if (task_ctx *t = peek_task_ctx()) {
        t->current_kprobe = nullptr;
        t->kprobe_status = 0;
    }
}

int kprobe_on_func_entry(kprobe_opcode_t *addr, const char *sym, unsigned long offset)
{
    ftrace_update_objects();
    resolved r;
    int err = resolve(addr, sym, offset, r);
    if (err == -ENOENT) return -ENOENT;
    if (err || !r.on_entry) return -EINVAL;
    return 0;
}

int kprobe_insn_boundary(kprobe_opcode_t *addr, const char *sym, unsigned long offset)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    ftrace_update_objects();
    resolved r;
    if (int err = resolve(addr, sym, offset, r)) return err;
    std::vector<uint8_t> code(r.fsize);
    std::memcpy(code.data(), reinterpret_cast<const void *>(r.func), r.fsize);
    recover_original_bytes(r.func, code.data(), code.size());
    return arch::insn_boundary(code.data(), r.func, r.fsize, r.addr) ? 0 : -EILSEQ;
}

int within_kprobe_blacklist(unsigned long addr)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    ftrace_update_objects();
    return in_blacklist(addr);
}

void dump_kprobe(struct kprobe *kp)
{
    char buf[256];
    sprint_symbol(buf, sizeof buf, reinterpret_cast<uintptr_t>(kp->addr), true);
    std::fprintf(stderr, "Dumping kprobe:\nName: %s\nOffset: %x\nAddress: %s\n",
                 kp->symbol_name ? kp->symbol_name : "(null)", kp->offset, buf);
}

int kprobes_set_enabled(int enabled)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    refresh_gone();
    registry().all_disarmed = !enabled;
    arm_batch b;
    b.add_all();
    return b.commit();
}

int kprobes_enabled(void)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    return !registry().all_disarmed;
}

int kprobes_set_optimization(int on)
{
    if (on != 0 && on != 1) return -EINVAL;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    refresh_gone();
    registry().optimization_on = on;
    arm_batch b;
    b.add_all();
    b.commit();
    return 0;
}

int kprobes_optimization(void)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    return registry().optimization_on;
}

} // extern "C"

namespace dprobe
{

// report_probe() of kernel/kprobes.c.
std::string kprobes_list_text()
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    refresh_gone();
    std::vector<kp_record *> recs;
    for (kp_record *r = all_records.load(); r; r = r->all_next)
        if (r->children.load()) recs.push_back(r);
    std::sort(recs.begin(), recs.end(),
              [](const kp_record *a, const kp_record *b) { return a->addr < b->addr; });
    std::string out;
    char line[1024];
    for (kp_record *r : recs) {
        const record_info &info = infos[r];
        const kp_children *cl = r->children.load();
        for (uint32_t i = 0; i < cl->n; ++i) {
            struct kprobe *p = cl->kp[i];
            const char *type = p->ainsn.kind == kind_kretprobe ? "r"
                               : p->ainsn.kind == kind_jprobe  ? "j"
                                                               : "k";
            const auto addr = reinterpret_cast<uintptr_t>(p->addr);
            int n;
            if (!info.sym.empty())
                n = std::snprintf(line, sizeof line, "%016" PRIxPTR "  %s  %s+0x%x  %s ", addr,
                                  type, info.sym.c_str(),
                                  static_cast<unsigned>(addr - info.sym_addr),
                                  info.modname.empty() ? " " : info.modname.c_str());
            else {
                char sym[512];
                sprint_symbol(sym, sizeof sym, addr);
                n = std::snprintf(line, sizeof line, "%016" PRIxPTR "  %s  %s ", addr, type, sym);
            }
            out.append(line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
            const unsigned f = p->flags;
            if (f & KPROBE_FLAG_GONE) out += "[GONE]";
            if ((f & KPROBE_FLAG_DISABLED) && !(f & KPROBE_FLAG_GONE)) out += "[DISABLED]";
            if ((f & KPROBE_FLAG_OPTIMIZED) && !(f & (KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE)))
                out += "[OPTIMIZED]";
            if (f & KPROBE_FLAG_FTRACE) out += "[FTRACE]";
            out += '\n';
        }
    }
    return out;
}

std::string kprobe_optimization_status(const struct kprobe *p)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    if (!registered.count(p)) return "not registered";
    auto *rec = static_cast<const kp_record *>(p->ainsn.rec);
    if (rec->mode != kp_mode::int3) return "on a patch site (no trap to optimize)";
    if (rec->optimized.load()) return "optimized";
    if (rec->opt_refused) return rec->opt_why;
    if (!registry().optimization_on) return "optimization is off";
    if (!opt_allowed(rec)) return "a post handler, a kretprobe, or kprobes disabled";
    if (!rec->armed.load()) return "disabled";
    return "another probe inside the region";
}

namespace kp
{

unsigned long opt_hits_total() noexcept
{
    unsigned long n = 0;
    for (task_ctx *t = task_ctx_list(); t; t = t->next)
        n += std::atomic_ref<unsigned long>(t->kprobe_opt_hits).load(std::memory_order_relaxed);
    return n;
}

bool kprobe_light_detour(const struct kprobe *p)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    if (!registered.count(p)) return false;
    auto *rec = static_cast<const kp_record *>(p->ainsn.rec);
    return rec->mode == kp_mode::int3 && rec->optimized.load() && rec->opt && rec->opt->light;
}

bool kprobe_vector_detour(const struct kprobe *p)
{
    std::lock_guard<std::mutex> g(kprobe_mutex());
    if (!registered.count(p)) return false;
    auto *rec = static_cast<const kp_record *>(p->ainsn.rec);
    return rec->mode == kp_mode::int3 && rec->optimized.load() && rec->opt &&
           rec->opt->mode == arch::optprobe_mode::vector;
}

} // namespace kp

} // namespace dprobe
