#include "probe_set.h"

#include "core/ftrace.h"

#include <cerrno>
#include <cstring>
#include <mutex>

namespace rel
{

std::atomic<void (*)(bool)> probe_set::hook_{nullptr};

namespace
{

// The live sets, for handlers to find theirs (they get only the fprobe or kretprobe).
constexpr int max_sets = 4;
std::atomic<probe_set *> sets[max_sets];

} // namespace

probe_set::probe_set(probe_kind kind, std::vector<probed_func> funcs)
    : kind_(kind), funcs_(std::move(funcs)), counts_(funcs_.size()), models_(funcs_.size())
{
    for (auto &s : sets) {
        probe_set *expected = nullptr;
        if (s.compare_exchange_strong(expected, this)) break;
    }
}

probe_set::~probe_set()
{
    detach();
    for (auto &s : sets) {
        probe_set *expected = this;
        s.compare_exchange_strong(expected, nullptr);
    }
}

size_t probe_set::index(const char *name) const
{
    for (size_t i = 0; i < funcs_.size(); ++i)
        if (std::strcmp(funcs_[i].name, name) == 0) return i;
    std::abort();
}

// IP is the probed entry: the function's address, or after its endbr64.
size_t probe_set::index_of_ip(unsigned long ip) const
{
    for (size_t i = 0; i < funcs_.size(); ++i) {
        auto a = reinterpret_cast<unsigned long>(funcs_[i].addr);
        if (ip >= a && ip <= a + 4) return i;
    }
    return funcs_.size();
}

int probe_set::fp_entry(struct fprobe *fp, unsigned long ip, unsigned long,
                        struct ftrace_regs *fregs, void *data)
{
    *static_cast<unsigned long *>(data) = ftrace_regs_get_argument(fregs, 0);
    for (auto &s : sets) {
        probe_set *p = s.load();
        if (!p || &p->fp_ != fp) continue;
        size_t i = p->index_of_ip(ip);
        if (i < p->counts_.size()) p->counts_[i].entries.fetch_add(1);
    }
    if (auto h = hook_.load()) h(false);
    return 0;
}

void probe_set::fp_exit(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                        struct ftrace_regs *fregs, void *data)
{
    const long arg0 = static_cast<long>(*static_cast<unsigned long *>(data));
    for (auto &s : sets) {
        probe_set *p = s.load();
        if (!p || &p->fp_ != fp) continue;
        size_t i = p->index_of_ip(ip);
        if (i >= p->counts_.size()) continue;
        func_counts &c = p->counts_[i];
        unsigned long r = ftrace_regs_get_return_value(fregs);
        c.exits.fetch_add(1);
        c.ret_sum.fetch_add(r);
        c.last_ret.store(r);
        if (dprobe::ftrace_is_return_trampoline(ret_ip)) c.bad_ret_ip.fetch_add(1);
        if (p->models_[i] && p->models_[i](arg0) != static_cast<long>(r)) c.bad_value.fetch_add(1);
    }
    if (auto h = hook_.load()) h(true);
}

int probe_set::krp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    *reinterpret_cast<unsigned long *>(ri->data) = regs_get_kernel_argument(regs, 0);
    for (auto &s : sets) {
        probe_set *p = s.load();
        if (!p || p->rps_.empty() || ri->rp < &p->rps_.front() || ri->rp > &p->rps_.back())
            continue;
        p->counts_[static_cast<size_t>(ri->rp - &p->rps_.front())].entries.fetch_add(1);
    }
    if (auto h = hook_.load()) h(false);
    return 0;
}

int probe_set::krp_exit(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    for (auto &s : sets) {
        probe_set *p = s.load();
        if (!p || p->rps_.empty() || ri->rp < &p->rps_.front() || ri->rp > &p->rps_.back())
            continue;
        const size_t i = static_cast<size_t>(ri->rp - &p->rps_.front());
        func_counts &c = p->counts_[i];
        unsigned long r = regs_return_value(regs);
        const long arg0 = *reinterpret_cast<long *>(ri->data);
        if (p->models_[i] && p->models_[i](arg0) != static_cast<long>(r)) c.bad_value.fetch_add(1);
        c.exits.fetch_add(1);
        c.ret_sum.fetch_add(r);
        c.last_ret.store(r);
        if (dprobe::ftrace_is_return_trampoline(regs->ip) || get_kretprobe_retaddr(ri) != regs->ip)
            c.bad_ret_ip.fetch_add(1);
    }
    if (auto h = hook_.load()) h(true);
    return 0;
}

int probe_set::attach()
{
    if (attached_) return -EEXIST;
    if (kind_ == probe_kind::fprobe) {
        fp_ = {};
        fp_.entry_handler = fp_entry;
        fp_.exit_handler = fp_exit;
        fp_.entry_data_size = sizeof(unsigned long);
        std::vector<const char *> names;
        for (auto &f : funcs_)
            names.push_back(f.name);
        int err = register_fprobe_syms(&fp_, names.data(), static_cast<int>(names.size()));
        if (err) return err;
    } else {
        rps_.assign(funcs_.size(), {});
        std::vector<struct kretprobe *> ptrs;
        for (size_t i = 0; i < funcs_.size(); ++i) {
            rps_[i].kp.symbol_name = funcs_[i].name;
            rps_[i].entry_handler = krp_entry;
            rps_[i].handler = krp_exit;
            rps_[i].maxactive = 64;
            rps_[i].data_size = sizeof(unsigned long);
            ptrs.push_back(&rps_[i]);
        }
        int err = register_kretprobes(ptrs.data(), static_cast<int>(ptrs.size()));
        if (err) {
            rps_.clear();
            return err;
        }
    }
    attached_ = true;
    return 0;
}

void probe_set::detach()
{
    if (!attached_) return;
    if (kind_ == probe_kind::fprobe) {
        unregister_fprobe(&fp_);
    } else {
        std::vector<struct kretprobe *> ptrs;
        for (auto &rp : rps_)
            ptrs.push_back(&rp);
        unregister_kretprobes(ptrs.data(), static_cast<int>(ptrs.size()));
    }
    attached_ = false;
}

long probe_set::total_entries() const
{
    long n = 0;
    for (auto &c : counts_)
        n += c.entries.load();
    return n;
}

long probe_set::total_exits() const
{
    long n = 0;
    for (auto &c : counts_)
        n += c.exits.load();
    return n;
}

long probe_set::bad_ret_ips() const
{
    long n = 0;
    for (auto &c : counts_)
        n += c.bad_ret_ip.load();
    return n;
}

long probe_set::bad_values() const
{
    long n = 0;
    for (auto &c : counts_)
        n += c.bad_value.load();
    return n;
}

unsigned long probe_set::missed() const
{
    if (kind_ == probe_kind::fprobe) return __atomic_load_n(&fp_.nmissed, __ATOMIC_RELAXED);
    unsigned long n = 0;
    for (auto &rp : rps_)
        n += static_cast<unsigned long>(__atomic_load_n(&rp.nmissed, __ATOMIC_RELAXED)) +
             __atomic_load_n(&rp.kp.nmissed, __ATOMIC_RELAXED);
    return n;
}

void probe_set::reset_counts()
{
    for (auto &c : counts_) {
        c.entries = 0;
        c.exits = 0;
        c.ret_sum = 0;
        c.last_ret = 0;
        c.bad_ret_ip = 0;
        c.bad_value = 0;
    }
    if (kind_ == probe_kind::fprobe)
        __atomic_store_n(&fp_.nmissed, 0, __ATOMIC_RELAXED);
    else
        for (auto &rp : rps_) {
            __atomic_store_n(&rp.nmissed, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&rp.kp.nmissed, 0, __ATOMIC_RELAXED);
        }
}

} // namespace rel
