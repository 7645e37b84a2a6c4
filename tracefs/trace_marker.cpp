// trace_marker, trace_marker_raw and the program's own markers (see trace_marker.h).
#include "tracefs/trace_marker.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/saved_cmdlines.h"
#include "tracefs/trace_array.h"

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

void remember_writer(int32_t pid)
{
    if (pid <= 0 || pid == getpid()) return;
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
    trace_save_cmdline(pid, comm, tgid);
}

DPROBE_NOPROBE bool write_print(trace_array &tr, std::string_view text, int32_t pid,
                                uintptr_t ip) noexcept
{
    if (text.size() > TRACE_MARKER_MAX_SIZE) text = text.substr(0, TRACE_MARKER_MAX_SIZE);
    const bool nl = text.empty() || text.back() != '\n';
    const size_t len = sizeof(print_entry) + text.size() + (nl ? 1 : 0) + 1;
    void *ev = ring_buffer_reserve(tr.buffer, len);
    if (!ev) return false;
    auto *e = static_cast<print_entry *>(ev);
    e->ent = trace_entry_header{TRACE_PRINT, 0, 0, pid};
    e->ip = ip;
    std::memcpy(e->buf, text.data(), text.size());
    size_t at = text.size();
    if (nl) e->buf[at++] = '\n';
    e->buf[at] = '\0';
    ring_buffer_commit(tr.buffer, ev);
    return true;
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

long trace_marker_write(trace_array &tr, std::string_view text, int32_t pid)
{
    if (!tr.opt(OPT_MARKERS)) return -EINVAL;
    remember_writer(pid);
    size_t taken = std::min(text.size(), TRACE_MARKER_MAX_SIZE);
    on_behalf speak;
    if (!write_print(tr, text, pid > 0 ? pid : trace_current_tid(), trace_marker_ip()))
        return -EBADF;
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
    return write_print(tr, text, trace_current_tid(),
                       caller ? caller : reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

} // namespace dprobe

// ---- the program's C calls ----

extern "C" DPROBE_API int dprobe_trace_marker(const char *text)
{
    if (!text) return -EINVAL;
    dprobe::trace_array &tr = dprobe::trace_array_top();
    if (!tr.opt(dprobe::OPT_MARKERS)) return -EINVAL;
    return dprobe::trace_marker_write_kernel(
               tr, text, reinterpret_cast<uintptr_t>(__builtin_return_address(0)))
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
    return dprobe::trace_marker_write_kernel(
               tr, std::string_view(buf, len),
               reinterpret_cast<uintptr_t>(__builtin_return_address(0)))
               ? n
               : -EBADF;
}
