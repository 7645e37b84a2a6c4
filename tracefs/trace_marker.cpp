// trace_marker, trace_marker_raw and the program's own markers (see trace_marker.h).
#include "tracefs/trace_marker.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/event_trigger.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/saved_cmdlines.h"
#include "tracefs/trace_array.h"
#include "tracefs/trace_probe.h"

#include <dprobe/ptrace.h>
#include <dprobe/tracefs.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

static_assert(sizeof(print_entry) == 16, "TRACE_MARKER_MAX_SIZE counts a 16-byte header");

// The writer's name, kept in saved_cmdlines for the trace's lines (this process's own name
// is there already). Empty when PID is not known.
std::string remember_writer(int32_t pid)
{
    if (pid <= 0) return {};
    char path[64], buf[512];
    std::string comm = "<...>";
    int32_t tgid = pid;
    std::snprintf(path, sizeof path, "/proc/%d/status", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            if (const char *p = std::strstr(buf, "Name:\t")) {
                p += 6;
                const char *e = std::strchr(p, '\n');
                comm.assign(p, e ? size_t(e - p) : std::strlen(p));
            }
            if (const char *p = std::strstr(buf, "\nTgid:\t")) tgid = std::atoi(p + 7);
        }
    }
    if (pid != getpid()) trace_save_cmdline(pid, comm, tgid);
    return comm;
}

// Who writes a print record, for ftrace/print's triggers.
struct marker_writer {
    int32_t pid = 0;               // the record's pid
    bool triggers = false;         // a trace_marker write (file or C call), not dprobe's own
    bool served = false;           // served for another thread or process: no registers
    const pt_regs *regs = nullptr; // the writer's, for stacktrace (the calling thread's)
};

// The triggers of ftrace/print in TR, nullptr when it has none. Hot path.
DPROBE_NOPROBE const event_trigger_list *print_triggers(const trace_array &tr) noexcept
{
    const trace_event &pe = ftrace_print_event();
    if (likely(!((pe.trigger_mask.load(std::memory_order_acquire) >> tr.id) & 1))) return nullptr;
    return pe.triggers[tr.id].load(std::memory_order_acquire);
}

// The kernel's tracing_mark_write: the record reserved and filled, the triggers run on it
// before its newline is added, then the commit and the post triggers (traceoff, stacktrace).
DPROBE_NOPROBE bool write_print(trace_array &tr, std::string_view text, uintptr_t ip,
                                const marker_writer &w) noexcept
{
    if (text.size() > TRACE_MARKER_MAX_SIZE) text = text.substr(0, TRACE_MARKER_MAX_SIZE);
    const bool nl = text.empty() || text.back() != '\n';
    const size_t len = sizeof(print_entry) + text.size() + (nl ? 1 : 0) + 1;
    rb_stamp stamp;
    void *ev = ring_buffer_reserve(tr.buffer, len, &stamp);
    if (!ev) return false;
    auto *e = static_cast<print_entry *>(ev);
    e->ent = trace_entry_header{TRACE_PRINT, 0, 0, w.pid};
    e->ip = ip;
    std::memcpy(e->buf, text.data(), text.size());
    size_t at = text.size();
    e->buf[at] = '\0';
    const event_trigger_list *tl = w.triggers ? print_triggers(tr) : nullptr;
    event_trigger_hit hit;
    uint64_t post = 0;
    static const uint64_t marker_frame[1] = {trace_marker_ip()};
    if (unlikely(tl != nullptr)) {
        hit.tr = &tr;
        hit.event = &ftrace_print_event();
        hit.regs = w.regs;
        hit.cpu = stamp.cpu;
        hit.pid = w.pid;
        if (w.served) {
            hit.stack = marker_frame;
            hit.stack_len = 1;
        }
        if (!tl->cond) {
            event_triggers_call(*tl, hit);
        } else {
            hit.rec = static_cast<const uint8_t *>(ev);
            hit.len = sizeof(print_entry) + text.size() + 1;
            post = event_triggers_call_rec(*tl, hit);
        }
    }
    if (nl) e->buf[at++] = '\n';
    e->buf[at] = '\0';
    ring_buffer_commit(tr.buffer, ev);
    if (unlikely(post != 0)) event_triggers_post_call(*tl, post, hit);
    return true;
}

// The registers at the entry of the C call FN whose frame is FP (its caller's frame is the
// first a stack walk finds): a stacktrace trigger on ftrace/print records the program's
// stack at its dprobe_trace_marker() call.
DPROBE_NOPROBE pt_regs entry_regs(void (*fn)(), void *fp) noexcept
{
    pt_regs r{};
    r.ip = reinterpret_cast<uintptr_t>(fn);
    r.sp = reinterpret_cast<uintptr_t>(fp) + 8;     // the return address
    r.bp = *static_cast<const unsigned long *>(fp); // the caller's frame pointer
    return r;
}

// A write served for another process (or thread) by the tree's server thread: the record
// is the writer's, written through the server thread's buffer even though dprobe's own
// threads are muted (their own work is never traced).
struct on_behalf {
    on_behalf() { ring_buffer_thread_speak(true); }
    ~on_behalf() { ring_buffer_thread_speak(false); }
    on_behalf(const on_behalf &) = delete;
    on_behalf &operator=(const on_behalf &) = delete;
};

} // namespace

trace_event &ftrace_print_event()
{
    static trace_event *const ev = [] {
        auto *e = new trace_event;
        e->group = "ftrace";
        e->name = "print";
        e->id = TRACE_PRINT;
        using t = filter_field::type;
        e->fields = {
            {"ip", t::number, offsetof(print_entry, ip), 8, false},
            // The kernel's `char buf[]`: a string of size 0, read to its NUL.
            {"buf", t::static_string, offsetof(print_entry, buf), 0, true},
            {"CPU", t::cpu, 0, 4, true},
            {"cpu", t::cpu, 0, 4, true},
            {"COMM", t::comm, 0, 16, false},
            {"comm", t::comm, 0, 16, false},
            {"common_type", t::number, 0, 2, false},
            {"common_flags", t::number, 2, 1, false},
            {"common_preempt_count", t::number, 3, 1, false},
            {"common_pid", t::number, 4, 4, true},
        };
        return e;
    }();
    return *ev;
}

// With a frame pointer (tracefs/CMakeLists.txt insists on it for this file): a write by the
// calling thread gives its own registers (entry_regs).
long trace_marker_write(trace_array &tr, std::string_view text, int32_t pid)
{
    if (!tr.opt(OPT_MARKERS)) return -EINVAL;
    const std::string comm = remember_writer(pid);
    size_t taken = std::min(text.size(), TRACE_MARKER_MAX_SIZE);
    on_behalf speak;
    marker_writer w;
    w.triggers = true;
    w.served = pid > 0;
    w.pid = w.served ? pid : trace_current_tid();
    const pt_regs regs =
        entry_regs(reinterpret_cast<void (*)()>(&trace_marker_write), __builtin_frame_address(0));
    if (!w.served) w.regs = &regs;
    char name[16] = {};
    if (!comm.empty()) {
        // The triggers' comm and .execname are the writer's, as the kernel's current.
        std::memcpy(name, comm.data(), std::min(comm.size(), sizeof name - 1));
        fetch_comm_speak_for(name);
    }
    const bool ok = write_print(tr, text, trace_marker_ip(), w);
    if (!comm.empty()) fetch_comm_speak_for(nullptr);
    if (!ok) return -EBADF;
    return long(taken);
}

long trace_marker_raw_write(trace_array &tr, std::string_view data, int32_t pid)
{
    if (!tr.opt(OPT_MARKERS)) return -EINVAL;
    if (data.size() < sizeof(uint32_t) || data.size() > TRACE_MARKER_MAX_SIZE) return -EINVAL;
    remember_writer(pid);
    const size_t n = data.size() - sizeof(uint32_t);
    // The payload's length goes in the last word: the ring buffer rounds records up to 8.
    const size_t len = sizeof(raw_data_entry) + n + sizeof(uint32_t);
    on_behalf speak;
    void *ev = ring_buffer_reserve(tr.buffer, (len + 7) & ~size_t{7});
    if (!ev) return -EBADF;
    auto *e = static_cast<raw_data_entry *>(ev);
    e->ent = trace_entry_header{TRACE_RAW_DATA, 0, 0, pid > 0 ? pid : trace_current_tid()};
    std::memcpy(&e->id, data.data(), sizeof(uint32_t));
    const size_t total = (len + 7) & ~size_t{7};
    std::memset(e->buf, 0, total - sizeof(raw_data_entry));
    std::memcpy(e->buf, data.data() + sizeof(uint32_t), n);
    const uint32_t n32 = uint32_t(n);
    std::memcpy(reinterpret_cast<char *>(ev) + total - sizeof(uint32_t), &n32, sizeof n32);
    ring_buffer_commit(tr.buffer, ev);
    return long(data.size());
}

DPROBE_NOPROBE bool trace_marker_write_kernel(trace_array &tr, std::string_view text,
                                              uintptr_t caller) noexcept
{
    marker_writer w;
    w.pid = trace_current_tid();
    return write_print(
        tr, text, caller ? caller : reinterpret_cast<uintptr_t>(__builtin_return_address(0)), w);
}

DPROBE_NOPROBE bool trace_marker_write_user(trace_array &tr, std::string_view text,
                                            uintptr_t caller, const pt_regs *regs) noexcept
{
    marker_writer w;
    w.pid = trace_current_tid();
    w.triggers = true;
    w.regs = regs;
    return write_print(tr, text, caller, w);
}

} // namespace dprobe

// ---- the program's C calls ----

// Their frames have a frame pointer (the project builds with -fno-omit-frame-pointer; entry_regs
// reads the caller's registers through it).
extern "C" DPROBE_API int dprobe_trace_marker(const char *text)
{
    if (!text) return -EINVAL;
    dprobe::trace_array &tr = dprobe::trace_array_top();
    if (!tr.opt(dprobe::OPT_MARKERS)) return -EINVAL;
    const pt_regs regs = dprobe::entry_regs(reinterpret_cast<void (*)()>(&dprobe_trace_marker),
                                            __builtin_frame_address(0));
    return dprobe::trace_marker_write_user(
               tr, text, reinterpret_cast<uintptr_t>(__builtin_return_address(0)), &regs)
               ? 0
               : -EBADF;
}

extern "C" DPROBE_API int dprobe_trace_printk(const char *fmt, ...)
{
    if (!fmt) return -EINVAL;
    char buf[dprobe::TRACE_MARKER_MAX_SIZE + 1];
    va_list ap;
    va_start(ap, fmt);
    int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return -EINVAL;
    dprobe::trace_array &tr = dprobe::trace_array_top();
    if (!tr.opt(dprobe::OPT_MARKERS)) return -EINVAL;
    size_t len = std::min<size_t>(size_t(n), dprobe::TRACE_MARKER_MAX_SIZE);
    const pt_regs regs = dprobe::entry_regs(reinterpret_cast<void (*)()>(&dprobe_trace_printk),
                                            __builtin_frame_address(0));
    return dprobe::trace_marker_write_user(tr, std::string_view(buf, len),
                                           reinterpret_cast<uintptr_t>(__builtin_return_address(0)),
                                           &regs)
               ? n
               : -EBADF;
}
