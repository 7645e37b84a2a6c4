// fprobe on top of core sites and the shadow stack (kernel/trace/fprobe.c's role).
//
// Each registered fprobe owns one ftrace_ops attached to all its sites. The ops records
// live in a pool and are never freed: a shadow frame of a still-running function may point
// at one long after its fprobe was unregistered; the ops generation tells that frame the
// exit must not run.
#include "arch/x86_64/ext_state.h"
#include "core/compiler.h"
#include "core/dl_notify.h"
#include "core/ftrace.h"
#include "core/task_ctx.h"
#include "fprobe/fprobe_internal.h"

#include <dprobe/fprobe.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <vector>

using namespace dprobe;
using dprobe::fprobe_kprobe_busy_begin;
using dprobe::fprobe_kprobe_busy_end;

struct fprobe_hlist {
    ftrace_ops ops; // first: the hot path gets from the ops to its hlist without a load
    struct fprobe *fp = nullptr;
    std::vector<ftrace_site *> sites; // sorted; gone ones stay until unregister detaches them
    fprobe_hlist *next_free = nullptr;
    // FPROBE_FL_FOLLOW_LOADS: the filter, matched again in each object loaded later.
    bool follow = false;
    std::string filter, notfilter;
};

namespace
{

inline fprobe_hlist *hlist_of(ftrace_ops *ops)
{
    return reinterpret_cast<fprobe_hlist *>(ops);
}

fair_mutex fprobe_mutex;
fprobe_hlist *free_hlists;
// Registered with FPROBE_FL_FOLLOW_LOADS. Never destroyed: a dlopen on another thread while
// exit() runs destructors still gets here.
std::vector<fprobe_hlist *> &followers = *new std::vector<fprobe_hlist *>;

// Attaches HL's ops to what it can of SITES and adds those to hl->sites. fprobe_mutex held.
void attach_more(fprobe_hlist *hl, const std::vector<ftrace_site *> &sites)
{
    if (sites.empty()) return;
    auto ok = ftrace_ops_attach_usable(&hl->ops, sites);
    hl->sites.insert(hl->sites.end(), ok.begin(), ok.end());
    std::sort(hl->sites.begin(), hl->sites.end());
}

// After a dlopen (inside the loader, before the new objects run): each follower's filter
// gets the matching functions of the objects recorded since the last time. A function that
// cannot be probed (an unusable site) is left out, as when the filter matched it first.
void fprobe_objects_changed(std::span<const object_ptr> added)
{
    if (added.empty()) return; // a dlclose: its sites are marked gone, and detached at unregister
    std::lock_guard<fair_mutex> g(fprobe_mutex);
    for (fprobe_hlist *hl : followers) {
        std::vector<ftrace_site *> fresh;
        for (ftrace_site *s : ftrace_match_sites_in(added, hl->filter, hl->notfilter))
            if (!std::binary_search(hl->sites.begin(), hl->sites.end(), s)) fresh.push_back(s);
        attach_more(hl, fresh);
    }
}

// An ftrace user: its sites are made before a pending kprobe on the same entry is armed,
// which then rides on them ([FTRACE]) rather than leave the function out of the follower.
const dl_notifier fprobe_dl_notifier = {fprobe_objects_changed, &fprobe_mutex, true};

DPROBE_NOPROBE bool kprobe_conflict(struct fprobe *fp)
{
    // FPROBE_FL_KPROBE_SHARED: such a handler behaves like a kprobe handler and does not
    // run while one is running on this thread.
    if (!(fp->flags & FPROBE_FL_KPROBE_SHARED)) return false;
    task_ctx *t = peek_task_ctx();
    return t && kprobe_busy_on(t);
}

DPROBE_NOPROBE int fprobe_ops_entry(ftrace_ops *ops, unsigned long ip, unsigned long parent_ip,
                                    struct ftrace_regs *fregs, void *data)
{
    auto *hl = hlist_of(ops);
    struct fprobe *fp = hl->fp;
    if (__atomic_load_n(&fp->flags, __ATOMIC_ACQUIRE) & FPROBE_FL_DISABLED) return 1;
    if (unlikely(kprobe_conflict(fp))) {
        __atomic_add_fetch(&fp->nmissed, 1, __ATOMIC_RELAXED);
        return 1;
    }
    if (!fp->entry_handler) return 0;
    if (fp->flags & FPROBE_FL_KPROBE_SHARED) {
        fprobe_kprobe_busy_begin();
        int r = fp->entry_handler(fp, ip, parent_ip, fregs, data);
        fprobe_kprobe_busy_end();
        return r;
    }
    return fp->entry_handler(fp, ip, parent_ip, fregs, data);
}

DPROBE_NOPROBE void fprobe_ops_exit(ftrace_ops *ops, unsigned long ip, unsigned long ret_ip,
                                    struct ftrace_regs *fregs, void *data)
{
    auto *hl = hlist_of(ops);
    struct fprobe *fp = hl->fp;
    if (__atomic_load_n(&fp->flags, __ATOMIC_ACQUIRE) & FPROBE_FL_DISABLED) return;
    if (unlikely(kprobe_conflict(fp))) {
        __atomic_add_fetch(&fp->nmissed, 1, __ATOMIC_RELAXED);
        return;
    }
    if (fp->flags & FPROBE_FL_KPROBE_SHARED) {
        fprobe_kprobe_busy_begin();
        fp->exit_handler(fp, ip, ret_ip, fregs, data);
        fprobe_kprobe_busy_end();
        return;
    }
    fp->exit_handler(fp, ip, ret_ip, fregs, data);
}

DPROBE_NOPROBE void fprobe_ops_missed(ftrace_ops *ops)
{
    auto *hl = hlist_of(ops);
    __atomic_add_fetch(&hl->fp->nmissed, 1, __ATOMIC_RELAXED);
}

// The function left without returning (longjmp, an exception, thread exit): its exit
// handler will not run. The fprobe's unwound_handler is told, if it has one (with the
// same checks as an exit); else it counts like any other exit not handled.
DPROBE_NOPROBE void fprobe_ops_unwound(ftrace_ops *ops, void *data)
{
    auto *hl = hlist_of(ops);
    struct fprobe *fp = hl->fp;
    if (!fp) return;
    if (!fp->unwound_handler) {
        __atomic_add_fetch(&fp->nmissed, 1, __ATOMIC_RELAXED);
        return;
    }
    if (__atomic_load_n(&fp->flags, __ATOMIC_ACQUIRE) & FPROBE_FL_DISABLED) return;
    if (unlikely(kprobe_conflict(fp))) {
        __atomic_add_fetch(&fp->nmissed, 1, __ATOMIC_RELAXED);
        return;
    }
    if (fp->flags & FPROBE_FL_KPROBE_SHARED) {
        fprobe_kprobe_busy_begin();
        fp->unwound_handler(fp, data);
        fprobe_kprobe_busy_end();
        return;
    }
    fp->unwound_handler(fp, data);
}

// fprobe's callbacks, as the kernel's fprobe chooses its ftrace_ops' (fprobe_handler, or
// fprobe_kprobe_handler for an fprobe shared with kprobes): ftrace's direct facility
// (core/ftrace.h, ftrace_direct) calls the fprobe's own handlers, with the fprobe (the ops'
// priv) first, while FPROBE_FL_DISABLED is clear in its flags (the gate); an fprobe whose
// handlers must run marked as kprobe handlers keeps fprobe_ops_entry()/exit(). Its handlers
// are read here, when it is registered, as its light and x87 scans are. The casts: an
// fprobe's handlers differ from ftrace_direct's only in the type of their first pointer
// argument, passed the same way.
ftrace_direct direct_of(struct fprobe *fp)
{
    ftrace_direct d;
    if (fp->flags & FPROBE_FL_KPROBE_SHARED) return d;
    d.entry = reinterpret_cast<ftrace_direct_entry_fn>(fp->entry_handler);
    d.exit = reinterpret_cast<ftrace_direct_exit_fn>(fp->exit_handler);
    d.gate = &fp->flags;
    d.gate_mask = FPROBE_FL_DISABLED;
    return d;
}

fprobe_hlist *alloc_hlist()
{
    if (fprobe_hlist *hl = free_hlists) {
        free_hlists = hl->next_free;
        hl->next_free = nullptr;
        return hl;
    }
    return new (std::nothrow) fprobe_hlist;
}

// fprobe_mutex held.
int register_sites_locked(struct fprobe *fp, std::vector<ftrace_site *> sites,
                          const char *filter = nullptr, const char *notfilter = nullptr)
{
    if (fp->hlist_array) return -EEXIST;
    size_t size = (fp->entry_data_size + sizeof(long) - 1) & ~(sizeof(long) - 1);
    if (size > MAX_FPROBE_DATA_SIZE) return -E2BIG;
    std::sort(sites.begin(), sites.end());
    sites.erase(std::unique(sites.begin(), sites.end()), sites.end());
    fprobe_hlist *hl = alloc_hlist();
    if (!hl) return -ENOMEM;
    fp->entry_data_size = size;
    fp->nmissed = 0;
    hl->fp = fp;
    hl->sites = std::move(sites);
    hl->ops.priv = fp;
    hl->ops.entry = fprobe_ops_entry;
    hl->ops.exit = fp->exit_handler ? fprobe_ops_exit : nullptr;
    hl->ops.direct = direct_of(fp);
    hl->ops.missed = fprobe_ops_missed;
    hl->ops.unwound = fp->exit_handler ? fprobe_ops_unwound : nullptr;
    hl->ops.data_words = fp->exit_handler ? static_cast<uint32_t>(size / sizeof(long)) : 0;
    // An exit handler that provably leaves the x87 stack alone spares every return the
    // setting aside of a long double result.
    hl->ops.x87_safe =
        !fp->exit_handler || arch::ext_state_clean(reinterpret_cast<uintptr_t>(fp->exit_handler),
                                                   false, arch::ext_scope::x87);
    // Handlers that provably leave the whole extended state alone let the sites skip saving
    // the vector registers (the light path, arch/x86_64/ftrace_tramp.S).
    const auto clean = [](auto h) {
        return !h || arch::ext_state_clean(reinterpret_cast<uintptr_t>(h));
    };
    hl->ops.light = !(fp->flags & FPROBE_FL_KPROBE_SHARED) && hl->ops.x87_safe &&
                    clean(fp->entry_handler) && clean(fp->exit_handler);
    if (filter) {
        // A follower takes what can be probed, here as in the objects loaded later (a site
        // may also have gone with a dlclose since the match).
        hl->sites = ftrace_ops_attach_usable(&hl->ops, hl->sites);
    } else if (int err = ftrace_ops_attach(&hl->ops, hl->sites)) {
        hl->sites.clear();
        hl->next_free = free_hlists;
        free_hlists = hl;
        return err;
    }
    fp->hlist_array = hl;
    if (filter) {
        try {
            hl->filter = filter;
            hl->notfilter = notfilter ? notfilter : "";
            followers.push_back(hl);
            hl->follow = true;
        } catch (const std::bad_alloc &) {
            fp->hlist_array = nullptr;
            ftrace_ops_detach(&hl->ops, hl->sites);
            ftrace_ops_retire(&hl->ops);
            hl->sites.clear();
            hl->fp = nullptr;
            hl->next_free = free_hlists;
            free_hlists = hl;
            return -ENOMEM;
        }
    }
    return 0;
}

int register_sites(struct fprobe *fp, std::vector<ftrace_site *> sites)
{
    if (!fp) return -EINVAL;
    std::lock_guard<fair_mutex> g(fprobe_mutex);
    return register_sites_locked(fp, std::move(sites));
}

// FPROBE_FL_FOLLOW_LOADS. The filter is matched under fprobe_mutex, which the notifier
// takes: an object loaded meanwhile is either matched here or delivered to the notifier
// once this fprobe is among the followers.
int register_follower(struct fprobe *fp, const char *filter, const char *notfilter)
{
    std::lock_guard<fair_mutex> g(fprobe_mutex);
    if (int err = dl_notifier_add(&fprobe_dl_notifier)) return err;
    auto sites = ftrace_match_sites(filter, notfilter ? notfilter : "");
    int err = register_sites_locked(fp, std::move(sites), filter, notfilter);
    if (err && followers.empty()) dl_notifier_remove(&fprobe_dl_notifier);
    return err;
}

} // namespace

extern "C" int register_fprobe_ips(struct fprobe *fp, unsigned long *addrs, int num)
{
    if (!fp || !addrs || num <= 0 || (fp->flags & FPROBE_FL_FOLLOW_LOADS)) return -EINVAL;
    if (fp->hlist_array) return -EEXIST;
    ftrace_update_objects();
    std::vector<ftrace_site *> sites;
    sites.reserve(static_cast<size_t>(num));
    for (int i = 0; i < num; ++i) {
        ftrace_site *s = ftrace_location_or_jump(addrs[i]);
        if (!s) return -ENOENT;
        sites.push_back(s);
    }
    return register_sites(fp, std::move(sites));
}

extern "C" int register_fprobe(struct fprobe *fp, const char *filter, const char *notfilter)
{
    if (!fp || !filter) return -EINVAL;
    if (fp->hlist_array) return -EEXIST;
    if (fp->flags & FPROBE_FL_FOLLOW_LOADS) return register_follower(fp, filter, notfilter);
    auto sites = ftrace_match_sites(filter, notfilter ? notfilter : "");
    if (sites.empty()) return -ENOENT;
    return register_sites(fp, std::move(sites));
}

extern "C" int register_fprobe_syms(struct fprobe *fp, const char **syms, int num)
{
    if (!fp || !syms || num <= 0 || (fp->flags & FPROBE_FL_FOLLOW_LOADS)) return -EINVAL;
    if (fp->hlist_array) return -EEXIST;
    // The kernel sorts the caller's array in place (ftrace_lookup_symbols needs it sorted).
    std::sort(syms, syms + num, [](const char *a, const char *b) { return std::strcmp(a, b) < 0; });
    ftrace_update_objects();
    std::vector<ftrace_site *> sites;
    for (int i = 0; i < num; ++i) {
        if (!syms[i]) return -EINVAL;
        auto hits = kallsyms::instance().lookup_func(syms[i]);
        ftrace_site *found = nullptr;
        for (auto &h : hits)
            if ((found = ftrace_location_or_jump(h.sym->addr))) break;
        if (!found) return -ENOENT;
        sites.push_back(found);
    }
    return register_sites(fp, std::move(sites));
}

extern "C" int unregister_fprobe(struct fprobe *fp)
{
    if (!fp) return -EINVAL;
    std::lock_guard<fair_mutex> g(fprobe_mutex);
    auto *hl = fp->hlist_array;
    if (!hl) return -EINVAL;
    ftrace_ops_detach(&hl->ops, hl->sites);
    ftrace_ops_retire(&hl->ops);
    fp->hlist_array = nullptr;
    hl->sites.clear();
    if (hl->follow) {
        std::erase(followers, hl);
        if (followers.empty()) dl_notifier_remove(&fprobe_dl_notifier);
        hl->follow = false;
        hl->filter.clear();
        hl->notfilter.clear();
    }
    hl->fp = nullptr;
    hl->next_free = free_hlists;
    free_hlists = hl;
    return 0;
}

extern "C" int fprobe_count_ips_from_filter(const char *filter, const char *notfilter)
{
    if (!filter) return -EINVAL;
    return static_cast<int>(ftrace_match_sites(filter, notfilter ? notfilter : "").size());
}
