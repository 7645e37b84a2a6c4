// Stack traces for records (see stack_trace.h).
#include "tracefs/stack_trace.h"

#include "arch/x86_64/ftrace_arch.h"
#include "arch/x86_64/unwind_cfi.h"
#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/ring_buffer.h"
#include "core/shadow_stack.h"
#include "core/task_ctx.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/trace_array.h"

#include <dprobe/ptrace.h>

#include <cstring>

namespace dprobe
{
namespace
{

constexpr size_t k_record_depth = 32; // return addresses in a kernel_stack record

// A hooked return's slot holds one of the return hooks (arch::is_return_hook): the shadow
// frame of that slot has the real return address.
DPROBE_NOPROBE uintptr_t real_return(uintptr_t ra, uintptr_t slot)
{
    if (!arch::is_return_hook(ra)) return ra;
    task_ctx *t = peek_task_ctx();
    if (!t) return ra;
    uint32_t top = t->shadow_top;
    while (top) {
        uint32_t n;
        unsigned long *f = shadow_frame_below(t, top, &n);
        if (!n || n > top) break;
        if (f[sf_retp] == slot) return shadow_real_return(t, top - n);
        top -= n;
    }
    return ra;
}

DPROBE_NOPROBE void write_stack(trace_array &tr, const arch::unwind_frame *frames,
                                size_t n) noexcept
{
    void *ev = ring_buffer_reserve(tr.buffer, sizeof(stack_entry) + n * sizeof(uint64_t));
    if (!ev) return;
    auto *e = static_cast<stack_entry *>(ev);
    e->ent = trace_entry_header{TRACE_STACK, 0, 0, trace_current_tid()};
    e->size = static_cast<int32_t>(n);
    e->pad = 0;
    for (size_t i = 0; i < n; i++)
        e->caller[i] = frames[i].ip;
    ring_buffer_commit(tr.buffer, ev);
}

} // namespace

DPROBE_NOPROBE void trace_stack_record_ips(trace_array &tr, int32_t pid, const uint64_t *ips,
                                           size_t n) noexcept
{
    if (n > k_record_depth) n = k_record_depth;
    void *ev = ring_buffer_reserve(tr.buffer, sizeof(stack_entry) + n * sizeof(uint64_t));
    if (!ev) return;
    auto *e = static_cast<stack_entry *>(ev);
    e->ent = trace_entry_header{TRACE_STACK, 0, 0, pid ? pid : trace_current_tid()};
    e->size = static_cast<int32_t>(n);
    e->pad = 0;
    std::memcpy(e->caller, ips, n * sizeof(uint64_t));
    ring_buffer_commit(tr.buffer, ev);
}

void trace_stack_init()
{
    fetch_install_fault_handler();
}

DPROBE_NOPROBE size_t trace_stack_save(const struct pt_regs *regs, uint64_t *ips, uintptr_t *slots,
                                       size_t max) noexcept
{
    arch::unwind_frame frames[FTRACE_STACK_ENTRIES_MAX];
    if (max > FTRACE_STACK_ENTRIES_MAX) max = FTRACE_STACK_ENTRIES_MAX;
    size_t n = arch::unwind_from_entry(regs, frames, max, real_return);
    for (size_t i = 0; i < n; i++) {
        ips[i] = frames[i].ip;
        if (slots) slots[i] = frames[i].slot;
    }
    return n;
}

DPROBE_NOPROBE size_t trace_stack_save_regs(const struct pt_regs *regs, uint64_t *ips,
                                            size_t max) noexcept
{
    arch::unwind_frame frames[FTRACE_STACK_ENTRIES_MAX];
    if (max > FTRACE_STACK_ENTRIES_MAX) max = FTRACE_STACK_ENTRIES_MAX;
    size_t n = arch::unwind_from_regs(regs, frames, max, real_return);
    for (size_t i = 0; i < n; i++)
        ips[i] = frames[i].ip;
    return n;
}

DPROBE_NOPROBE void trace_stack_record(trace_array &tr, const struct ftrace_regs *fregs) noexcept
{
    arch::unwind_frame frames[k_record_depth];
    write_stack(tr, frames,
                arch::unwind_from_entry(&fregs->regs, frames, k_record_depth, real_return));
}

DPROBE_NOPROBE void trace_stack_record_regs(trace_array &tr, const struct pt_regs *regs) noexcept
{
    arch::unwind_frame frames[k_record_depth];
    write_stack(tr, frames, arch::unwind_from_regs(regs, frames, k_record_depth, real_return));
}

} // namespace dprobe
