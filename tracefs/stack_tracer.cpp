// The stack tracer (see stack_tracer.h; the kernel's check_stack()).
//
// Hot path: one subtraction and a comparison with the maximum. Only a deeper stack takes
// the (try-)lock, walks the stack and stores the chain; a thread finding the lock taken
// skips its check, as the kernel's per-CPU recursion guard does.
#include "tracefs/stack_tracer.h"

#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/symbols.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/func_ops.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_task.h"
#include "tracefs/tracer.h"

#include <dprobe/ptrace.h>

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

extern "C" void *__libc_stack_end;

namespace dprobe
{
namespace
{

constexpr size_t k_entries = FTRACE_STACK_ENTRIES_MAX;

std::atomic<uint64_t> g_max{0};
std::atomic<bool> g_busy{false}; // the recorder's lock
bool g_enabled = false;
func_ops *const g_ops = new func_ops;
ftrace_hash *const g_filter = new ftrace_hash;

// The deepest stack's chain (written under g_busy, read under it too).
unsigned g_nr = 0;
uint64_t g_ips[k_entries + 1];
uint64_t g_index[k_entries + 1];

// The top of the calling thread's stack: the mapping around SP, read once per thread from
// /proc/self/maps with raw system calls (this runs in probe handlers).
DPROBE_NOPROBE uintptr_t find_stack_top(uintptr_t sp) noexcept
{
    if (static_cast<pid_t>(syscall(SYS_gettid)) == getpid() && __libc_stack_end)
        return reinterpret_cast<uintptr_t>(__libc_stack_end);
    int fd = static_cast<int>(syscall(SYS_open, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
    if (fd < 0) return 0;
    char buf[4096];
    size_t have = 0;
    uintptr_t top = 0;
    for (;;) {
        ssize_t n = syscall(SYS_read, fd, buf + have, sizeof buf - have);
        if (n <= 0) break;
        have += size_t(n);
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (buf[i] != '\n') continue;
            // "lo-hi perms ..."
            uintptr_t lo = 0, hi = 0;
            size_t j = start;
            auto hex = [&](uintptr_t &v) {
                for (; j < i; j++) {
                    char c = buf[j];
                    int d = c >= '0' && c <= '9'   ? c - '0'
                            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                   : -1;
                    if (d < 0) break;
                    v = v * 16 + uintptr_t(d);
                }
            };
            hex(lo);
            if (j < i && buf[j] == '-') {
                j++;
                hex(hi);
            }
            if (sp >= lo && sp < hi) top = hi;
            start = i + 1;
        }
        if (top) break;
        std::memmove(buf, buf + start, have - start);
        have -= start;
        if (have == sizeof buf)
            have = 0; // a line longer than the buffer: not a mapping line we need
    }
    syscall(SYS_close, fd);
    return top;
}

DPROBE_NOPROBE void record(const struct pt_regs *regs, uint64_t ip, uintptr_t top) noexcept
{
    uint64_t ips[k_entries];
    uintptr_t slots[k_entries];
    size_t n = trace_stack_save(regs, ips, slots, k_entries);
    // Entry 0 is the traced function itself: its return address into it would sit right
    // below the slot of its own return address.
    g_ips[0] = ip;
    g_index[0] = top - (kernel_stack_pointer(const_cast<pt_regs *>(regs)) - sizeof(unsigned long));
    unsigned k = 1;
    for (size_t i = 0; i < n && k <= k_entries; i++) {
        if (slots[i] >= top) break;
        g_ips[k] = ips[i];
        g_index[k] = top - slots[i];
        k++;
    }
    g_nr = k;
}

DPROBE_NOPROBE int stack_tracer_entry(ftrace_ops *, unsigned long ip, unsigned long,
                                      struct ftrace_regs *fregs, void *)
{
    trace_task *t = current_trace_task();
    if (unlikely(!t)) return 1;
    const uintptr_t sp = ftrace_regs_get_stack_pointer(fregs);
    if (unlikely(!t->stack_top)) {
        t->stack_top = find_stack_top(sp);
        if (!t->stack_top) t->stack_top = 1; // unknown: never measure
    }
    const uintptr_t top = t->stack_top;
    if (top <= sp) return 1;
    const uint64_t depth = top - (sp - sizeof(unsigned long));
    if (likely(depth <= g_max.load(std::memory_order_relaxed))) return 1;
    bool expect = false;
    if (!g_busy.compare_exchange_strong(expect, true, std::memory_order_acquire)) return 1;
    if (depth > g_max.load(std::memory_order_relaxed)) {
        record(&fregs->regs, ip, top);
        g_max.store(depth, std::memory_order_relaxed);
    }
    g_busy.store(false, std::memory_order_release);
    return 1;
}

std::vector<ftrace_site *> stack_functions()
{
    if (!g_filter->empty()) return g_filter->sites();
    std::vector<ftrace_site *> v;
    for (ftrace_site *s : ftrace_all_sites())
        if (!s->gone && s->sym && s->kind != site_kind::jump) v.push_back(s);
    return v;
}

} // namespace

bool stack_tracer_enabled()
{
    std::lock_guard<std::mutex> g(trace_types_lock());
    return g_enabled;
}

int stack_tracer_set(bool on)
{
    if (on == g_enabled) return 0;
    if (!on) {
        g_ops->stop();
        g_enabled = false;
        return 0;
    }
    trace_stack_init();
    g_ops->ops.entry = stack_tracer_entry;
    g_ops->ops.exit = nullptr;
    g_ops->ops.data_words = 0;
    g_ops->want_all = stack_functions;
    g_ops->want_loaded = [](std::span<const object_ptr> added) {
        std::vector<ftrace_site *> v;
        g_filter->objects_loaded(added);
        bool all = g_filter->empty();
        for (const object_ptr &o : added)
            for (const ksym &f : o->funcs)
                if (ftrace_site *s = ftrace_location(f.addr);
                    s && !s->gone &&
                    (all ? s->kind != site_kind::jump : g_filter->contains_ip(s->ip)))
                    v.push_back(s);
        return v;
    };
    if (int err = g_ops->start()) return err;
    g_enabled = true;
    return 0;
}

void stack_tracer_update()
{
    if (g_enabled) g_ops->update();
}

ftrace_hash &stack_trace_filter_hash()
{
    return *g_filter;
}

uint64_t stack_max_size()
{
    return g_max.load(std::memory_order_relaxed);
}

void stack_set_max_size(uint64_t v)
{
    // Under the recorder's lock, so the chain and the maximum stay a pair.
    bool expect = false;
    while (!g_busy.compare_exchange_weak(expect, true, std::memory_order_acquire))
        expect = false;
    g_max.store(v, std::memory_order_relaxed);
    if (v == 0) g_nr = 0;
    g_busy.store(false, std::memory_order_release);
}

std::string stack_trace_text()
{
    uint64_t ips[k_entries + 1], index[k_entries + 1];
    unsigned nr;
    bool expect = false;
    while (!g_busy.compare_exchange_weak(expect, true, std::memory_order_acquire))
        expect = false;
    nr = g_nr;
    std::memcpy(ips, g_ips, sizeof ips);
    std::memcpy(index, g_index, sizeof index);
    g_busy.store(false, std::memory_order_release);

    char line[160];
    std::snprintf(line, sizeof line,
                  "        Depth    Size   Location    (%u entries)\n"
                  "        -----    ----   --------\n",
                  nr);
    std::string s = line;
    if (!stack_tracer_enabled() && !stack_max_size())
        s += "#\n"
             "#  Stack tracer disabled\n"
             "#\n"
             "# To enable the stack tracer, either add 'stacktrace' to the\n"
             "# kernel command line\n"
             "# or 'echo 1 > /proc/sys/kernel/stack_tracer_enabled'\n"
             "#\n"
             "# (dprobe: echo 1 > stack_tracer_enabled)\n";
    for (unsigned i = 0; i < nr; i++) {
        uint64_t size = i + 1 == nr ? index[i] : index[i] - index[i + 1];
        std::snprintf(line, sizeof line, "%3u) %8" PRIu64 "   %5" PRIu64 "   ", i, index[i], size);
        s += line;
        char sym[512];
        sprint_symbol(sym, sizeof sym, ips[i], false);
        s += sym;
        s += '\n';
    }
    return s;
}

} // namespace dprobe
