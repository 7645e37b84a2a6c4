// Trace buffers exchanging their threads' buffers (see ring_buffer_internal.h): the
// snapshot file's swap (the kernel's ring_buffer_swap_cpu, for every thread at once). The
// swap changes owners on the process's list; writers look their buffer up again (a new
// epoch for the global buffer, a new generation for the others).
#include "core/ring_buffer_internal.h"

#include <cerrno>
#include <mutex>
#include <utility>

namespace dprobe
{
using namespace rb;

namespace
{

// Both reader locks held.
int swap_locked(trace_buffer *a, trace_buffer *b) noexcept
{
    const bool global = a == global_tb() || b == global_tb();
    if (global && exported.arena) return -EBUSY;
    process.swapped.store(true, std::memory_order_relaxed);
    // Odd while owners change: a thread attaching meanwhile does not cache what it finds.
    a->gen.fetch_add(1, std::memory_order_acq_rel);
    b->gen.fetch_add(1, std::memory_order_acq_rel);
    for (rb_node *n = process.list.load(std::memory_order_acquire); n; n = n->next) {
        trace_buffer *o = n->owner.load(std::memory_order_relaxed);
        if (o == a)
            n->owner.store(b, std::memory_order_relaxed);
        else if (o == b)
            n->owner.store(a, std::memory_order_relaxed);
    }
    std::swap(a->retired, b->retired);
    const uint64_t a_orphans = a->orphan_dropped.load(std::memory_order_relaxed) - a->orphan_base;
    const uint64_t b_orphans = b->orphan_dropped.load(std::memory_order_relaxed) - b->orphan_base;
    a->orphan_base = a->orphan_dropped.load(std::memory_order_relaxed) - b_orphans;
    b->orphan_base = b->orphan_dropped.load(std::memory_order_relaxed) - a_orphans;
    a->gen.fetch_add(1, std::memory_order_acq_rel);
    b->gen.fetch_add(1, std::memory_order_acq_rel);
    // The global buffer's writers look theirs up again at their next event.
    if (global) next_epoch();
    return 0;
}

} // namespace

int ring_buffer_swap(trace_buffer *a, trace_buffer *b)
{
    if (!a || !b || a == b) return 0;
    trace_buffer *first = a->id < b->id ? a : b;
    trace_buffer *second = first == a ? b : a;
    std::lock_guard<std::mutex> l1(first->reader_mutex);
    std::lock_guard<std::mutex> l2(second->reader_mutex);
    return swap_locked(a, b);
}

bool ring_buffer_try_swap(trace_buffer *a, trace_buffer *b) noexcept
{
    if (!a || !b || a == b) return false;
    std::unique_lock<std::mutex> l1(a->reader_mutex, std::try_to_lock);
    if (!l1.owns_lock()) return false;
    std::unique_lock<std::mutex> l2(b->reader_mutex, std::try_to_lock);
    if (!l2.owns_lock()) return false;
    return swap_locked(a, b) == 0;
}

} // namespace dprobe
