// jprobes (kernel/kprobes.c's register_jprobes() and setjmp_pre_handler(), Linux 4.14): a
// kprobe on a function entry whose handler has the function's prototype.
//
// A jprobe is a kprobe of kind_jprobe in its address' record, so it shares everything a
// kprobe has: the site it rides on (a patch site, a jump site made for it as for a kretprobe,
// or an int3 at the entry when optimization is off), aggregation with other probes at the
// address, batches, enable/disable, the recursion guard (a hit while any kprobe handler runs
// on the thread counts in kp.nmissed), [GONE], and quiescence (unregister waits for the
// dispatchers and the SIGTRAP hook, so for any handler still running). It is never
// jump-optimized: the int3 detour does not keep the vector registers the handler needs.
// The hit itself is arch's (jprobes_arch.h): the handler is entered with the function's
// argument registers on a copy of its stack arguments, and comes back through
// jprobe_return() or by returning.
#include "arch/x86_64/jprobes_arch.h"
#include "arch/x86_64/uaccess.h"
#include "core/compiler.h"
#include "kprobe/kprobe_internal.h"

#include <cerrno>
#include <mutex>
#include <vector>

namespace dprobe::kp
{

namespace
{

static_assert(arch::JPROBE_STACK_MAX == JPROBE_MAX_STACK_SIZE);

} // namespace

DPROBE_NOPROBE void jprobe_run(struct kprobe *p, const struct pt_regs *regs, const void *vec,
                               unsigned long vec_size, bool wide) noexcept
{
    struct jprobe *jp = container_of_jprobe(p);
    arch::jprobe_call c;
    c.entry = __atomic_load_n(&jp->entry, __ATOMIC_RELAXED);
    c.regs = regs;
    c.vec = vec;
    c.vec_size = vec_size;
    c.wide = wide;
    // Read without trusting the stack to extend that far (a function entered at the top of a
    // makecontext() stack has little above it): what cannot be read is zero.
    alignas(16) unsigned char args[JPROBE_MAX_STACK_SIZE];
    c.stack = args;
    c.stack_len = p->ainsn.stack_len;
    if (c.stack_len &&
        copy_from_user_nofault(args, arch::jprobe_stack_args(regs), c.stack_len) != 0) {
        for (unsigned long i = 0; i < c.stack_len; ++i)
            args[i] = 0;
        for (unsigned long i = 0; i < c.stack_len; i += 8)
            if (copy_from_user_nofault(
                    args + i, static_cast<const char *>(arch::jprobe_stack_args(regs)) + i, 8))
                break;
    }
    c.frame_slot = &dprobe_jprobe_frame;
    if (dprobe_jprobe_call(&c)) __atomic_add_fetch(&jp->nreturned, 1, __ATOMIC_RELAXED);
}

} // namespace dprobe::kp

using namespace dprobe::kp;

extern "C" {

int register_jprobe(struct jprobe *jp)
{
    if (!jp) return -EINVAL;
    return register_jprobes(&jp, 1);
}

void unregister_jprobe(struct jprobe *jp)
{
    if (jp) unregister_jprobes(&jp, 1);
}

// As register_kretprobes(): checked in order, then armed in one batch; on the first failure
// none stays registered.
int register_jprobes(struct jprobe **jps, int num)
{
    if (!jps || num <= 0) return -EINVAL;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    std::vector<struct kprobe *> kps;
    kps.reserve(static_cast<size_t>(num));
    for (int i = 0; i < num; ++i) {
        struct jprobe *jp = jps[i];
        if (!jp || !jp->entry) return -EINVAL;
        if (kprobe_registered_locked(&jp->kp)) return -EEXIST;
        for (struct kprobe *k : kps)
            if (k == &jp->kp) return -EEXIST;
        // The kernel's check: a jprobe's handler mirrors the function's entry.
        if (int err = kprobe_on_func_entry(jp->kp.addr, jp->kp.symbol_name, jp->kp.offset))
            return err;
        jp->nreturned = 0;
        kps.push_back(&jp->kp);
    }
    return register_kprobes_locked(kps.data(), num, kind_jprobe);
}

void unregister_jprobes(struct jprobe **jps, int num)
{
    if (!jps || num <= 0) return;
    std::lock_guard<std::mutex> g(kprobe_mutex());
    std::vector<struct kprobe *> kps;
    for (int i = 0; i < num; ++i)
        if (jps[i] && kprobe_registered_locked(&jps[i]->kp)) kps.push_back(&jps[i]->kp);
    unregister_kprobes_locked(kps.data(), static_cast<int>(kps.size()));
}

// jprobe_return() is arch's (arch/x86_64/jprobe_tramp.S), as it was in the kernel.

} // extern "C"
