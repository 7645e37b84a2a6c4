// The stack tracer (see stack_tracer.h; the kernel's check_stack()).
//
// Hot path: one subtraction and a comparison with the maximum. Only a deeper stack takes
// the (try-)lock, walks the stack and stores the chain; a thread finding the lock taken
// skips its check, as the kernel's per-CPU recursion guard does.
#include "tracefs/stack_tracer.h"
#include "tracefs/tree_node.h"

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

std::atomic<uint64_t> stack_max{0};
std::atomic<bool> recording{false}; // the recorder's lock
bool tracer_on = false;
func_ops *const stack_ops = new func_ops;
ftrace_hash *const filter_hash = new ftrace_hash;

// The deepest stack's chain (written under recording, read under it too).
unsigned saved_nr = 0;
uint64_t saved_ips[k_entries + 1];
uint64_t saved_index[k_entries + 1];

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
    saved_ips[0] = ip;
    saved_index[0] =
        top - (kernel_stack_pointer(const_cast<pt_regs *>(regs)) - sizeof(unsigned long));
    unsigned k = 1;
    for (size_t i = 0; i < n && k <= k_entries; i++) {
        if (slots[i] >= top) break;
        saved_ips[k] = ips[i];
        saved_index[k] = top - slots[i];
        k++;
    }
    saved_nr = k;
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
    if (likely(depth <= stack_max.load(std::memory_order_relaxed))) return 1;
    bool expect = false;
    if (!recording.compare_exchange_strong(expect, true, std::memory_order_acquire)) return 1;
    if (depth > stack_max.load(std::memory_order_relaxed)) {
        record(&fregs->regs, ip, top);
        stack_max.store(depth, std::memory_order_relaxed);
    }
    recording.store(false, std::memory_order_release);
    return 1;
}

std::vector<ftrace_site *> stack_functions()
{
    if (!filter_hash->empty()) return filter_hash->sites();
    std::vector<ftrace_site *> v;
    for (ftrace_site *s : ftrace_all_sites())
        if (!s->gone && s->sym && s->kind != site_kind::jump) v.push_back(s);
    return v;
}

} // namespace

bool stack_tracer_enabled()
{
    std::lock_guard<std::mutex> g(trace_types_lock());
    return tracer_on;
}

int stack_tracer_set(bool on)
{
    if (on == tracer_on) return 0;
    if (!on) {
        stack_ops->stop();
        tracer_on = false;
        return 0;
    }
    trace_stack_init();
    stack_ops->ops.entry = stack_tracer_entry;
    stack_ops->ops.exit = nullptr;
    stack_ops->ops.data_words = 0;
    stack_ops->want_all = stack_functions;
    stack_ops->want_loaded = [](std::span<const object_ptr> added) {
        std::vector<ftrace_site *> v;
        filter_hash->objects_loaded(added);
        bool all = filter_hash->empty();
        for (const object_ptr &o : added)
            for (const ksym &f : o->funcs)
                if (ftrace_site *s = ftrace_location(f.addr);
                    s && !s->gone &&
                    (all ? s->kind != site_kind::jump : filter_hash->contains_ip(s->ip)))
                    v.push_back(s);
        return v;
    };
    if (int err = stack_ops->start()) return err;
    tracer_on = true;
    return 0;
}

void stack_tracer_update()
{
    if (tracer_on) stack_ops->update();
}

ftrace_hash &stack_trace_filter_hash()
{
    return *filter_hash;
}

uint64_t stack_max_size()
{
    return stack_max.load(std::memory_order_relaxed);
}

void stack_set_max_size(uint64_t v)
{
    // Under the recorder's lock, so the chain and the maximum stay a pair.
    bool expect = false;
    while (!recording.compare_exchange_weak(expect, true, std::memory_order_acquire))
        expect = false;
    stack_max.store(v, std::memory_order_relaxed);
    if (v == 0) saved_nr = 0;
    recording.store(false, std::memory_order_release);
}

std::string stack_trace_text()
{
    uint64_t ips[k_entries + 1], index[k_entries + 1];
    unsigned nr;
    bool expect = false;
    while (!recording.compare_exchange_weak(expect, true, std::memory_order_acquire))
        expect = false;
    nr = saved_nr;
    std::memcpy(ips, saved_ips, sizeof ips);
    std::memcpy(index, saved_index, sizeof index);
    recording.store(false, std::memory_order_release);

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

// The stack tracer's files (the kernel's stack_trace_init).
void tree::stack_tracer_files()
{
    top_file("stack_trace", [] { return ro(stack_trace_text); });
    top_file("stack_max_size", [] {
        return rw([] { return std::to_string(stack_max_size()) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v)) return -EINVAL;
                      stack_set_max_size(v);
                      return 0;
                  });
    });
    top_file("stack_tracer_enabled", [] {
        return rw([] { return std::string(stack_tracer_enabled() ? "1\n" : "0\n"); },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v) || v > 1) return -EINVAL;
                      std::lock_guard<std::mutex> g(trace_types_lock());
                      return stack_tracer_set(v == 1);
                  });
    });
    top_file("stack_trace_filter", [] {
        return hash_node(&stack_trace_filter_hash(), "#### all functions enabled ####\n",
                         [] { stack_tracer_update(); });
    });
}

} // namespace dprobe
