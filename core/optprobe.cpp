// Optimized probes' detours (see optprobe.h): memory near the probed code, the state of
// each detour (armed, light or full caller), the batch arming; the kernel's
// kernel/kprobes.c optimizer side, with arch/x86_64 building every byte.
#include "core/optprobe.h"

#include "arch/x86_64/detour.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/kprobes_arch.h"
#include "core/compiler.h"

#include <vector>

namespace dprobe
{

std::unique_ptr<optprobe> optprobe_prepare(uintptr_t func, size_t size, const uint8_t *code,
                                           uintptr_t addr, optprobe_handler fn, void *arg,
                                           std::string *why)
{
    auto fa = arch::analyze_function(code, func, size);
    auto region = arch::detour_region_at(fa, code, addr, why);
    if (!region) return nullptr;
    auto op = std::make_unique<optprobe>();
    op->addr = addr;
    op->len = region->len;
    op->fn = fn;
    op->arg = arg;
    op->df_safe = !arch::function_may_set_df(fa);
    const size_t head = arch::OPTPROBE_HEAD_SIZE;
    op->mem = exec_alloc(addr, addr + region->len, arch::detour_size(*region, head));
    if (!op->mem) {
        *why = "no executable memory within 2 GiB";
        return nullptr;
    }
    arch::optprobe_write_head(op->mem.rw, op.get(),
                              arch::optprobe_caller(arch::optprobe_mode::full));
    if (!arch::detour_build(*region, op->mem.rw, op->mem.rx, head, &op->d, why)) {
        exec_free(op->mem);
        return nullptr;
    }
    return op;
}

int optprobe_arm(optprobe &op)
{
    optprobe *one[1] = {&op};
    return optprobe_arm_many(one, {});
}

int optprobe_arm_many(std::span<optprobe *const> ops, std::span<const rip_move> extra,
                      std::span<const text_poke_req> also)
{
    std::vector<text_poke_req> reqs(also.begin(), also.end());
    std::vector<rip_move> moves(extra.begin(), extra.end());
    reqs.reserve(reqs.size() + ops.size());
    for (const optprobe *op : ops) {
        reqs.push_back(arch::detour_arm_req(op->d));
        op->d.moves(moves);
    }
    // A thread sitting right after the first byte (it trapped on a kprobe int3 that is
    // being replaced) is handled by the kprobe layer's SIGTRAP handling, which is delivered
    // when the thread resumes.
    int err = text_poke_stopped(reqs, moves);
    if (err == 0)
        for (optprobe *op : ops)
            op->armed = true;
    return err;
}

int optprobe_disarm(optprobe &op, bool keep_int3)
{
    optprobe *one[1] = {&op};
    return optprobe_disarm_many(one, keep_int3);
}

int optprobe_disarm_many(std::span<optprobe *const> ops, bool keep_int3)
{
    std::vector<text_poke_req> reqs;
    reqs.reserve(ops.size());
    for (const optprobe *op : ops)
        reqs.push_back(arch::detour_disarm_req(op->d, keep_int3));
    int err = text_poke_batch(reqs);
    if (err == 0)
        for (optprobe *op : ops)
            op->armed = false;
    return err;
}

arch::optprobe_mode optprobe_set_mode(optprobe &op, arch::optprobe_mode mode,
                                      optprobe_light_handler checked_fn)
{
    if ((mode == arch::optprobe_mode::light && !op.df_safe) ||
        (mode != arch::optprobe_mode::full && !checked_fn))
        mode = arch::optprobe_mode::full;
    // Each checked handler is read by its own caller only: set it before switching to that
    // caller (a thread already in another caller keeps using that caller's handler).
    if (mode == arch::optprobe_mode::light)
        __atomic_store_n(&op.light_fn, checked_fn, __ATOMIC_RELEASE);
    else if (mode == arch::optprobe_mode::vector)
        __atomic_store_n(&op.vec_fn, checked_fn, __ATOMIC_RELEASE);
    arch::optprobe_set_caller(op.mem.rw, arch::optprobe_caller(mode));
    op.light = mode == arch::optprobe_mode::light;
    op.mode = mode;
    return mode;
}

void optprobe_free(std::unique_ptr<optprobe> op)
{
    if (op && !op->armed) exec_free(op->mem);
}

} // namespace dprobe

extern "C" DPROBE_NOPROBE void dprobe_optprobe_dispatch(dprobe::optprobe *op,
                                                        struct pt_regs *regs) noexcept
{
    // Handlers see the same ip as on the int3 path (just past the int3); changes to it are
    // ignored, as with the kernel's optimized probes.
    instruction_pointer_set(regs, dprobe::arch::int3_trap_ip(op->addr));
    op->fn(op->arg, regs);
}

extern "C" DPROBE_NOPROBE int dprobe_optprobe_dispatch_light(dprobe::optprobe *op,
                                                             struct pt_regs *regs) noexcept
{
    instruction_pointer_set(regs, dprobe::arch::int3_trap_ip(op->addr));
    return __atomic_load_n(&op->light_fn, __ATOMIC_ACQUIRE)(op->arg, regs);
}

extern "C" DPROBE_NOPROBE int dprobe_optprobe_dispatch_vec(dprobe::optprobe *op,
                                                           struct pt_regs *regs) noexcept
{
    instruction_pointer_set(regs, dprobe::arch::int3_trap_ip(op->addr));
    return __atomic_load_n(&op->vec_fn, __ATOMIC_ACQUIRE)(op->arg, regs);
}
