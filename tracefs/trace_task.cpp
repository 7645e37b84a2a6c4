// Per-thread tracer state (see trace_task.h).
#include "tracefs/trace_task.h"

#include "core/compiler.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace dprobe
{
namespace
{

std::atomic<trace_task *> task_list{nullptr};
trace_task *const k_dead = reinterpret_cast<trace_task *>(uintptr_t{1});
__attribute__((tls_model("initial-exec"))) thread_local trace_task *tls_task = nullptr;
// Set while this thread maps its block: a signal handler's probe then gets none.
__attribute__((tls_model("initial-exec"))) thread_local bool tls_acquiring = false;
pthread_key_t exit_key;
bool exit_key_ok = false;

void task_exit(void *p) noexcept
{
    auto *t = static_cast<trace_task *>(p);
    tls_task = k_dead;
    // The profiler's table stays with the profiler (it outlives the thread); the block is
    // free for a new thread.
    t->in_use.store(0, std::memory_order_release);
}

void fork_child() noexcept
{
    trace_task *self = tls_task > k_dead ? tls_task : nullptr;
    for (trace_task *t = task_list.load(std::memory_order_acquire); t; t = t->next)
        if (t != self) t->in_use.store(0, std::memory_order_release);
    if (self) self->tid = static_cast<int32_t>(syscall(SYS_gettid));
}

__attribute__((constructor)) void trace_task_setup()
{
    exit_key_ok = pthread_key_create(&exit_key, task_exit) == 0;
    pthread_atfork(nullptr, nullptr, fork_child);
}

trace_task *take_block() noexcept;

__attribute__((noinline)) trace_task *alloc_task() noexcept
{
    if (tls_task == k_dead || tls_acquiring) return nullptr;
    tls_acquiring = true;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    trace_task *t = take_block();
    std::atomic_signal_fence(std::memory_order_seq_cst);
    tls_acquiring = false;
    return t;
}

trace_task *take_block() noexcept
{
    trace_task *t = nullptr;
    for (trace_task *it = task_list.load(std::memory_order_acquire); it; it = it->next) {
        int expect = 0;
        if (it->in_use.load(std::memory_order_relaxed) == 0 &&
            it->in_use.compare_exchange_strong(expect, 1, std::memory_order_acquire)) {
            t = it;
            break;
        }
    }
    if (t) {
        std::memset(t->graph, 0, sizeof t->graph);
        t->stack_top = 0;
        t->profile.store(nullptr, std::memory_order_relaxed);
    } else {
        size_t len = (sizeof(trace_task) + 4095) & ~size_t{4095};
        void *m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) return nullptr;
        t = static_cast<trace_task *>(m); // zero-filled
        t->in_use.store(1, std::memory_order_relaxed);
        trace_task *head = task_list.load(std::memory_order_relaxed);
        do {
            t->next = head;
        } while (!task_list.compare_exchange_weak(head, t, std::memory_order_release,
                                                  std::memory_order_relaxed));
    }
    t->tid = static_cast<int32_t>(syscall(SYS_gettid));
    tls_task = t;
    if (exit_key_ok) pthread_setspecific(exit_key, t);
    return t;
}

} // namespace

DPROBE_NOPROBE trace_task *current_trace_task() noexcept
{
    trace_task *t = tls_task;
    if (likely(t > k_dead)) return t;
    return alloc_task();
}

void trace_task_release_all() noexcept
{
    if (exit_key_ok) pthread_key_delete(exit_key);
    exit_key_ok = false;
    tls_task = nullptr; // the other threads' pointers go with this object's TLS
    const size_t len = (sizeof(trace_task) + 4095) & ~size_t{4095};
    for (trace_task *t = task_list.exchange(nullptr, std::memory_order_acq_rel); t;) {
        trace_task *next = t->next;
        munmap(t, len);
        t = next;
    }
}

} // namespace dprobe
