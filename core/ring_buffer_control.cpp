// The ring buffer's control and export (see ring_buffer_internal.h): tracing_on,
// overwrite, size and cpumask of each trace buffer, the export of the global one to a
// consumer (the arena), and the release of every buffer when dprobe leaves the process.
#include "core/ring_buffer_internal.h"

#include "core/own_fds.h"
#include "core/proc_maps.h"
#include "core/trace_clock.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace dprobe
{
using namespace rb;

// ---- trace buffers ------------------------------------------------------------------------

trace_buffer *ring_buffer_global() noexcept
{
    return global_tb();
}

unsigned ring_buffer_id(const trace_buffer *tb) noexcept
{
    return tb->id;
}

// ---- control ------------------------------------------------------------------------------

void ring_buffer_set_tracing_on(trace_buffer *tb, bool on) noexcept
{
    if (on) trace_clock_init();
    if (tb != global_tb())
        tb->tracing_on.store(on, std::memory_order_relaxed);
    else if (on)
        process.word.fetch_or(1, std::memory_order_relaxed);
    else
        process.word.fetch_and(~1u, std::memory_order_relaxed);
}
bool ring_buffer_tracing_on(const trace_buffer *tb) noexcept
{
    if (tb == global_tb()) return process.word.load(std::memory_order_relaxed) & 1;
    return tb->tracing_on.load(std::memory_order_relaxed);
}
void ring_buffer_set_overwrite(trace_buffer *tb, bool on) noexcept
{
    tb->overwrite.store(on, std::memory_order_relaxed);
}
bool ring_buffer_overwrite(const trace_buffer *tb) noexcept
{
    return tb->overwrite.load(std::memory_order_relaxed);
}

int ring_buffer_set_size_kb(trace_buffer *tb, size_t kb) noexcept
{
    if (kb == 0 || kb > (size_t{1} << 30)) return -EINVAL;
    size_t pages = (kb * 1024 + k_page_size - 1) / k_page_size;
    pages = std::max(pages, k_rb_min_pages);
    tb->npages.store(static_cast<uint32_t>(pages), std::memory_order_relaxed);
    return 0;
}

size_t ring_buffer_size_kb(const trace_buffer *tb) noexcept
{
    return tb->npages.load(std::memory_order_relaxed) * k_page_size / 1024;
}

void ring_buffer_set_cpumask(trace_buffer *tb, const std::vector<uint64_t> &mask) noexcept
{
    bool any_off = false;
    for (unsigned i = 0; i < k_rb_max_cpus / 64; i++) {
        const uint64_t off = ~(i < mask.size() ? mask[i] : 0);
        tb->cpu_off[i].store(off, std::memory_order_relaxed);
        any_off |= off != 0;
    }
    tb->cpu_masked.store(any_off, std::memory_order_release);
}

std::vector<uint64_t> ring_buffer_cpumask(const trace_buffer *tb)
{
    std::vector<uint64_t> mask(k_rb_max_cpus / 64);
    for (unsigned i = 0; i < k_rb_max_cpus / 64; i++)
        mask[i] = ~tb->cpu_off[i].load(std::memory_order_relaxed);
    return mask;
}

void ring_buffer_set_tracing_on(bool on) noexcept
{
    ring_buffer_set_tracing_on(global_tb(), on);
}
bool ring_buffer_tracing_on() noexcept
{
    return ring_buffer_tracing_on(global_tb());
}
void ring_buffer_set_overwrite(bool on) noexcept
{
    ring_buffer_set_overwrite(global_tb(), on);
}
bool ring_buffer_overwrite() noexcept
{
    return ring_buffer_overwrite(global_tb());
}
int ring_buffer_set_size_kb(size_t kb) noexcept
{
    return ring_buffer_set_size_kb(global_tb(), kb);
}
size_t ring_buffer_size_kb() noexcept
{
    return ring_buffer_size_kb(global_tb());
}

// ---- export -------------------------------------------------------------------------------

int ring_buffer_export(int wake_fd, bool consumer_blocking)
{
    std::lock_guard<std::mutex> lk(global_tb()->reader_mutex);
    if (exported.arena) return -EBUSY;
    exported.consumer_blocking = consumer_blocking;
    exported.gave_up.store(0, std::memory_order_relaxed);
    int r = make_arena();
    if (r < 0) return r;
    exported.wake_fd = wake_fd;
    exported.epoch = next_epoch();
    return exported.fd;
}

int ring_buffer_export_fd() noexcept
{
    return exported.arena ? exported.fd : -1;
}

void ring_buffer_export_state(arena_state state, int status) noexcept
{
    if (arena_header *a = exported.arena) {
        a->status.store(status, std::memory_order_relaxed);
        a->state.store(state, std::memory_order_release);
    }
}

void ring_buffer_unexport()
{
    std::lock_guard<std::mutex> lk(global_tb()->reader_mutex);
    if (!exported.arena) return;
    next_epoch();
    if (exported.fd >= 0) {
        own_fd_remove(exported.fd);
        ::close(exported.fd);
    }
    exported.fd = -1;
    exported.arena = nullptr; // left mapped: a writer may be in one of its buffers
    exported.wake_fd = -1;
}

namespace
{

// The arena's memfd pages still mapped once every list was unmapped: a forked child's copy of
// a buffer another thread of its parent was mapping at the moment of the fork (mapped before
// it, put on the list after it, in the parent only), which no list of the child holds. Found
// by the memfd's name: every such mapping is the ring buffer's, and none may outlive the
// release.
void unmap_stray_arena_buffers() noexcept
{
    try {
        for (const proc_map &m : read_proc_maps())
            if (m.path.rfind(k_arena_memfd_path, 0) == 0)
                arch::raw_syscall(SYS_munmap, static_cast<long>(m.start),
                                  static_cast<long>(m.end - m.start));
    } catch (...) {
        // No memory for the list: the stray mapping stays (the detach reports it).
    }
}

} // namespace

void ring_buffer_release_all() noexcept
{
    process.released.store(true, std::memory_order_release);
    ring_buffer_unexport();
    if (process.exit_key_ok) pthread_key_delete(process.exit_key);
    process.exit_key_ok = false;
    // This thread's pointers; the others' go with this object's TLS.
    cur.rb = nullptr;
    cur.node = nullptr;
    cur.table = nullptr;
    const long node_len = (sizeof(rb_node) + 4095) & ~size_t{4095};
    for (rb_node *list :
         {process.list.exchange(nullptr, std::memory_order_acq_rel), process.parent_list}) {
        for (rb_node *n = list; n;) {
            rb_node *next = n->next;
            arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(n->ctl),
                              static_cast<long>(n->map_len));
            arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(n), node_len);
            n = next;
        }
    }
    process.parent_list = nullptr;
    const long table_len = (sizeof(rb_thread_table) + 4095) & ~size_t{4095};
    for (rb_thread_table *t = process.tables.exchange(nullptr, std::memory_order_acq_rel); t;) {
        rb_thread_table *next = t->next;
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(t), table_len);
        t = next;
    }
    for (unsigned i = 0; i < exported.narenas; i++)
        arch::raw_syscall(SYS_munmap, reinterpret_cast<long>(exported.arenas[i]),
                          static_cast<long>(arena_header_size()));
    exported.narenas = 0;
    unmap_stray_arena_buffers();
}

} // namespace dprobe
