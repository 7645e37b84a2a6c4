// What fprobe needs from the kprobe state kept in the per-thread context.
#pragma once

#include "core/task_ctx.h"

namespace dprobe
{

// A dummy "current kprobe" so kprobes hit inside a shared fprobe handler count as missed,
// like kprobe_busy_begin()/end() (implemented over the per-thread context so fprobe does not
// depend on the kprobe layer).
void fprobe_kprobe_busy_begin() noexcept;
void fprobe_kprobe_busy_end() noexcept;

} // namespace dprobe
