#include "core/compiler.h"
#include "fprobe/fprobe_internal.h"

namespace dprobe {
namespace {
// Any non-null pointer works: only "is a kprobe running" is asked of it.
char busy_marker;
} // namespace

DPROBE_NOPROBE void fprobe_kprobe_busy_begin() noexcept
{
    if (task_ctx *t = current_task_ctx())
        t->current_kprobe = reinterpret_cast<struct kprobe *>(&busy_marker);
}

DPROBE_NOPROBE void fprobe_kprobe_busy_end() noexcept
{
    if (task_ctx *t = peek_task_ctx())
        t->current_kprobe = nullptr;
}

} // namespace dprobe
