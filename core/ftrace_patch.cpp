// Attaching ops to sites and switching sites between NOP and call (ftrace_replace_code).
#include "core/ftrace_internal.h"

#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/ftrace_make.h"
#include "core/sym_producer.h"
#include "core/task_ctx.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>

namespace dprobe
{
namespace
{

site_users *make_users(const site_users *old, ftrace_ops *add, const ftrace_ops *remove)
{
    uint32_t n = old ? old->n : 0;
    uint32_t cap = n + (add ? 1 : 0);
    if (cap == 0) return nullptr;
    void *mem = std::malloc(sizeof(site_users) + cap * sizeof(ftrace_ops *));
    if (!mem) throw std::bad_alloc();
    auto *u = static_cast<site_users *>(mem);
    u->n = 0;
    u->exit_words = 0;
    for (uint32_t i = 0; i < n; ++i)
        if (old->ops[i] != remove) u->ops[u->n++] = old->ops[i];
    if (add) u->ops[u->n++] = add;
    bool light = true;
    u->pt_regs = false;
    for (uint32_t i = 0; i < u->n; ++i) {
        if (u->ops[i]->exit) u->exit_words += 2 + u->ops[i]->data_words;
        light &= u->ops[i]->light;
        u->pt_regs |= u->ops[i]->pt_regs;
    }
    if (u->n == 0) {
        std::free(u);
        return nullptr;
    }
    u->light = light && ftrace_light_dispatch_clean();
    return u;
}

// Publishes a site's users list, and the trampolines' hint of whether it is light (a hit
// between the two stores takes the full path, or tries the light one, which checks the
// list it reads). Returns the list it replaced.
site_users *set_users(ftrace_site *s, site_users *u)
{
    site_users *old = s->users.exchange(u, std::memory_order_acq_rel);
    // The direct facility (ftrace_direct): an ops with code of its own is asked first, light
    // or not (it saves what it needs); a light one with direct handlers gets them called
    // inline by the light trampolines.
    const uint8_t hint = u && u->n == 1 && u->ops[0]->direct.call ? SITE_LIGHT_CALL
                         : !u || !u->light                        ? 0
                         : u->pt_regs                          ? SITE_LIGHT_ON | SITE_LIGHT_PT_REGS
                         : u->n == 1 && u->ops[0]->direct.gate ? SITE_LIGHT_ON | SITE_LIGHT_DIRECT
                                                               : SITE_LIGHT_ON;
    s->light.store(hint, std::memory_order_release);
    return old;
}

// ftrace_make_call() / ftrace_make_nop() of the site (the arch verbs: a compiled-in site's
// jmp or NOP, a jump site's detour).
text_poke_req enable_req(ftrace_site *s)
{
    if (s->kind == site_kind::jump) return jump_enable_req(s);
    text_poke_req r;
    arch::ftrace_make_call(s->ip, s->len, s->stub.rx, &r); // stubs are allocated in reach
    return r;
}

text_poke_req disable_req(ftrace_site *s)
{
    if (s->kind == site_kind::jump) return jump_disable_req(s);
    return arch::ftrace_make_nop(s->ip, s->len);
}

int ensure_stub(ftrace_site *s)
{
    if (s->stub) return 0;
    exec_chunk c = exec_alloc(s->ip, s->ip + s->len, arch::ftrace_stub_size);
    if (!c) return -ENOMEM;
    // A plain function's callers, and a patch site's in a unit built without the option (the
    // patchable_function_entry attribute), may keep values in any vector register the
    // function leaves alone (-fipa-ra): its trampolines keep all sixteen.
    const bool keep_all =
        s->kind == site_kind::jump ||
        (s->kind == site_kind::nop && s->obj && callers_may_rely_on_clobbers(*s->obj, s->func));
    if (keep_all) arch::return_keeps_all_xmm(); // before any return of its function is hooked
    arch::write_ftrace_stub(c.rw, s, keep_all ? arch::ftrace_caller_all() : arch::ftrace_caller());
    s->stub = c;
    if (s->kind == site_kind::jump) {
        jump_site_link_stub(s);
        s->body = s->jump->d.copy();
    } else {
        s->body = s->ip + s->len;
    }
    return 0;
}

// Enables REQS: sites whose new instruction replaces one instruction by the int3 protocol,
// jump sites (which replace several) with every other thread stopped, and sites no thread
// can have reached yet with plain writes.
int enable_sites(std::vector<text_poke_req> &reqs, const std::vector<ftrace_site *> &sites)
{
    std::vector<text_poke_req> plain, jumps, unreached;
    std::vector<rip_move> moves;
    for (size_t i = 0; i < reqs.size(); ++i) {
        if (sites[i]->unreached) {
            unreached.push_back(reqs[i]);
        } else if (sites[i]->kind == site_kind::jump) {
            jumps.push_back(reqs[i]);
            jump_rip_moves(sites[i], moves);
        } else {
            plain.push_back(reqs[i]);
        }
    }
    std::sort(moves.begin(), moves.end(),
              [](const rip_move &a, const rip_move &b) { return a.from < b.from; });
    if (int err = text_poke_early(unreached)) return err;
    auto undo_unreached = [&] {
        std::vector<text_poke_req> undo;
        for (ftrace_site *s : sites)
            if (s->unreached) undo.push_back(disable_req(s));
        text_poke_early(undo);
    };
    if (int err = text_poke_batch(plain)) {
        undo_unreached();
        return err;
    }
    if (int err = text_poke_stopped(jumps, moves)) {
        // Undo the plain part so the batch is all or nothing.
        std::vector<text_poke_req> undo;
        for (ftrace_site *s : sites)
            if (s->kind != site_kind::jump && !s->unreached) undo.push_back(disable_req(s));
        text_poke_batch(undo);
        undo_unreached();
        return err;
    }
    return 0;
}

// Whether a thread may still be using the users list of one of SITES replaced by a change:
// not for sites nobody can have reached.
bool may_be_in_use(std::span<ftrace_site *const> sites, const std::vector<site_users *> &old)
{
    for (size_t i = 0; i < sites.size(); ++i)
        if (old[i] && !sites[i]->unreached) return true;
    return false;
}

int attach_locked(std::span<const ftrace_ops_site> pairs);

std::vector<ftrace_ops_site> pairs_of(ftrace_ops *ops, std::span<ftrace_site *const> sites)
{
    std::vector<ftrace_ops_site> v;
    v.reserve(sites.size());
    for (ftrace_site *s : sites)
        v.push_back({ops, s});
    return v;
}

} // namespace

int ftrace_ops_attach(ftrace_ops *ops, std::span<ftrace_site *const> sites)
{
    std::lock_guard<fair_mutex> g(ftrace_st().lock);
    return attach_locked(pairs_of(ops, sites));
}

int ftrace_ops_attach_each(std::span<const ftrace_ops_site> pairs)
{
    std::lock_guard<fair_mutex> g(ftrace_st().lock);
    return attach_locked(pairs);
}

std::vector<ftrace_site *> ftrace_ops_attach_usable(ftrace_ops *ops,
                                                    std::span<ftrace_site *const> sites)
{
    std::lock_guard<fair_mutex> g(ftrace_st().lock);
    std::vector<ftrace_site *> ok;
    for (ftrace_site *s : sites)
        if (s->usable && !s->gone) ok.push_back(s);
    if (attach_locked(pairs_of(ops, ok)) == 0) return ok;
    std::vector<ftrace_site *> some;
    for (ftrace_site *s : ok) {
        const ftrace_ops_site one[1] = {{ops, s}};
        if (attach_locked(one) == 0) some.push_back(s);
    }
    return some;
}

namespace
{

// The distinct sites of PAIRS, in first-seen order, and for each pair the index of its site.
std::vector<ftrace_site *> distinct_sites(std::span<const ftrace_ops_site> pairs,
                                          std::vector<size_t> &index)
{
    std::vector<ftrace_site *> sites;
    std::unordered_map<ftrace_site *, size_t> seen;
    seen.reserve(pairs.size());
    index.clear();
    index.reserve(pairs.size());
    for (const ftrace_ops_site &p : pairs) {
        auto [it, added] = seen.emplace(p.site, sites.size());
        if (added) sites.push_back(p.site);
        index.push_back(it->second);
    }
    return sites;
}

// The users list of each site after adding (or removing) the ops of its pairs, in order.
// Lists built on the way for a site named twice are freed at once: nobody saw them.
std::vector<site_users *> users_after(std::span<const ftrace_ops_site> pairs,
                                      const std::vector<ftrace_site *> &sites,
                                      const std::vector<size_t> &index, bool add)
{
    std::vector<site_users *> next(sites.size());
    std::vector<bool> built(sites.size(), false);
    try {
        for (size_t i = 0; i < pairs.size(); ++i) {
            const size_t k = index[i];
            site_users *cur = built[k] ? next[k] : sites[k]->users.load(std::memory_order_relaxed);
            site_users *nu = add ? make_users(cur, pairs[i].ops, nullptr)
                                 : make_users(cur, nullptr, pairs[i].ops);
            if (built[k]) std::free(cur);
            next[k] = nu;
            built[k] = true;
        }
    } catch (const std::bad_alloc &) {
        for (size_t k = 0; k < sites.size(); ++k)
            if (built[k]) std::free(next[k]);
        throw;
    }
    return next;
}

// st.lock held. Every pair's site gets its ops; the sites that had none are enabled in one
// batch, and one wait covers every replaced list.
int attach_locked(std::span<const ftrace_ops_site> pairs)
{
    for (const ftrace_ops_site &p : pairs) {
        if (!p.site->usable || p.site->gone) return -EINVAL;
        // A jump site made before a kprobe went into its entry (an int3 may go into the
        // entry of a jump site nobody uses): enabling it would bury the probe.
        if (jump_site_busy(p.site)) return -EBUSY;
    }
    std::vector<size_t> index;
    const std::vector<ftrace_site *> sites = distinct_sites(pairs, index);
    for (ftrace_site *s : sites)
        if (int err = ensure_stub(s)) return err;
    std::vector<site_users *> fresh;
    try {
        fresh = users_after(pairs, sites, index, true);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
    std::vector<site_users *> old;
    old.reserve(sites.size());
    std::vector<text_poke_req> reqs;
    std::vector<ftrace_site *> to_enable;
    for (size_t i = 0; i < sites.size(); ++i) {
        ftrace_site *s = sites[i];
        old.push_back(set_users(s, fresh[i]));
        if (!s->patched) {
            reqs.push_back(enable_req(s));
            to_enable.push_back(s);
        }
    }
    if (int err = enable_sites(reqs, to_enable)) {
        for (size_t i = 0; i < sites.size(); ++i)
            set_users(sites[i], old[i]);
        if (may_be_in_use(sites, old)) synchronize_dispatch();
        for (auto *u : fresh)
            std::free(u);
        return err;
    }
    for (ftrace_site *s : sites)
        s->patched = true;
    // Sites of an object being loaded need no wait, and must not get one: inside the
    // loader (a dlopen notifier) a thread it waited for could be waiting for the loader.
    if (may_be_in_use(sites, old)) synchronize_dispatch();
    for (auto *u : old)
        std::free(u);
    return 0;
}

} // namespace

void ftrace_ops_detach(ftrace_ops *ops, std::span<ftrace_site *const> sites)
{
    ftrace_ops_detach_each(pairs_of(ops, sites));
}

namespace
{

// st.lock held. False, with nothing changed, when a list could not be built.
bool detach_locked(std::span<const ftrace_ops_site> pairs)
{
    std::vector<size_t> index;
    const std::vector<ftrace_site *> sites = distinct_sites(pairs, index);
    std::vector<site_users *> next;
    try {
        next = users_after(pairs, sites, index, false);
    } catch (const std::bad_alloc &) {
        return false;
    }
    std::vector<site_users *> old;
    old.reserve(sites.size());
    std::vector<text_poke_req> reqs;
    std::vector<ftrace_site *> turned_off;
    for (size_t i = 0; i < sites.size(); ++i) {
        ftrace_site *s = sites[i];
        old.push_back(set_users(s, next[i]));
        if (!next[i] && s->patched && !s->gone) {
            reqs.push_back(disable_req(s));
            turned_off.push_back(s);
        }
    }
    if (text_poke_batch(reqs) == 0)
        for (ftrace_site *s : turned_off)
            s->patched = false;
    synchronize_dispatch();
    for (auto *u : old)
        std::free(u);
    return true;
}

} // namespace

void ftrace_ops_detach_each(std::span<const ftrace_ops_site> pairs)
{
    std::lock_guard<fair_mutex> g(ftrace_st().lock);
    if (detach_locked(pairs) || pairs.size() == 1) return;
    // Cannot shrink the lists at once: pair by pair. A pair whose list cannot shrink leaves
    // its ops attached but retired (no callbacks run for it because its owner is gone); rare
    // enough to only cost a wasted slot.
    for (const ftrace_ops_site &p : pairs)
        detach_locked({&p, 1});
}

void ftrace_ops_retire(ftrace_ops *ops)
{
    ops->gen.fetch_add(1, std::memory_order_acq_rel);
    synchronize_dispatch();
}

void ftrace_ops_retire(std::span<ftrace_ops *const> ops)
{
    if (ops.empty()) return;
    for (ftrace_ops *o : ops)
        o->gen.fetch_add(1, std::memory_order_acq_rel);
    synchronize_dispatch();
}

uint32_t ftrace_site_ops_count(const ftrace_site *site)
{
    std::lock_guard<fair_mutex> g(ftrace_st().lock);
    const site_users *u = site->users.load(std::memory_order_acquire);
    return u ? u->n : 0;
}

bool ftrace_is_return_trampoline(uintptr_t a)
{
    return arch::is_return_hook(a);
}

} // namespace dprobe
