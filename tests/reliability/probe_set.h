// A set of functions probed either with one fprobe (entry + exit handlers) or with one
// kretprobe per function, counting per function: entries, reported exits, the sum of the
// reported return values, and the hits the probe did not report (nmissed). The reliability
// tests run each scenario under both kinds; on the flavour the targets were built in depends
// what serves the function entry (a compiled-in patch site, or a jump site / int3 probe).
#pragma once

#include "core/task_ctx.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace rel
{

enum class probe_kind { fprobe, kretprobe };

inline const char *kind_name(probe_kind k)
{
    return k == probe_kind::fprobe ? "fprobe" : "kretprobe";
}

struct probed_func {
    const char *name;
    const void *addr;
};

struct func_counts {
    std::atomic<long> entries{0}, exits{0};
    std::atomic<unsigned long> ret_sum{0};
    std::atomic<unsigned long> last_ret{0};
    std::atomic<long> bad_ret_ip{0}; // exits whose ret_ip was the return trampoline
    std::atomic<long> bad_value{0};  // exits whose value the model did not predict
};

// The return value a function gives for its first argument (to check each reported exit).
using value_model = long (*)(long arg0);

class probe_set
{
  public:
    probe_set(probe_kind kind, std::vector<probed_func> funcs);
    ~probe_set();
    probe_set(const probe_set &) = delete;
    probe_set &operator=(const probe_set &) = delete;

    // 0 or the registration error.
    int attach();
    void detach();

    long entries(const char *name) const { return counts_[index(name)].entries.load(); }
    long exits(const char *name) const { return counts_[index(name)].exits.load(); }
    unsigned long ret_sum(const char *name) const { return counts_[index(name)].ret_sum.load(); }
    unsigned long last_ret(const char *name) const { return counts_[index(name)].last_ret.load(); }
    long total_entries() const;
    long total_exits() const;
    long bad_ret_ips() const;
    // Checks every exit of NAME against MODEL (set before attach()).
    void expect_values(const char *name, value_model model) { models_[index(name)] = model; }
    long bad_values() const;
    // Hits whose exit the probe did not report (recursion, full shadow stack, unwound frame).
    unsigned long missed() const;
    void reset_counts();
    probe_kind kind() const { return kind_; }

    // Runs FN for every handler call of any probe_set (entry and exit), in handler context.
    static void set_handler_hook(void (*fn)(bool exit)) { hook_.store(fn); }

  private:
    size_t index(const char *name) const;
    size_t index_of_ip(unsigned long ip) const;
    static int fp_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *,
                        void *);
    static void fp_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *,
                        void *);
    static int krp_entry(struct kretprobe_instance *, struct pt_regs *);
    static int krp_exit(struct kretprobe_instance *, struct pt_regs *);

    probe_kind kind_;
    std::vector<probed_func> funcs_;
    std::vector<func_counts> counts_;
    std::vector<value_model> models_;
    struct fprobe fp_ = {};
    std::vector<struct kretprobe> rps_;
    bool attached_ = false;
    static std::atomic<void (*)(bool)> hook_;
};

// Words in use on the calling thread's shadow stack (0: no hooked frame).
inline uint32_t shadow_depth()
{
    dprobe::task_ctx *t = dprobe::peek_task_ctx();
    return t ? t->shadow_top : 0;
}

} // namespace rel
