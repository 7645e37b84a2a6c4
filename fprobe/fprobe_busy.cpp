// FPROBE_FL_KPROBE_SHARED: an fprobe whose handlers share data with kprobe handlers marks
// the thread busy while they run, so a kprobe hit under them is missed (the kernel's fprobe
// calls kprobe_busy_begin()/kprobe_busy_end() around such handlers). A count, not a fake
// struct kprobe: fprobe sits beside kprobe, not above it.
#include "core/compiler.h"
#include "fprobe/fprobe_internal.h"

namespace dprobe
{

DPROBE_NOPROBE void fprobe_kprobe_busy_begin() noexcept
{
    if (task_ctx *t = current_task_ctx()) t->kprobe_busy++;
}

DPROBE_NOPROBE void fprobe_kprobe_busy_end() noexcept
{
    if (task_ctx *t = peek_task_ctx()) t->kprobe_busy--;
}

} // namespace dprobe
