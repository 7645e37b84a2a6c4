#include "tracefs/trace_output.h"

#include "core/trace_clock.h"
#include "tracefs/saved_cmdlines.h"

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{

std::string trace_print_header()
{
    rb_stats st = ring_buffer_stats();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return trace_print_header(st.entries, st.entries + st.overrun, cpus > 0 ? int(cpus) : 1);
}

const char *comm_cache::lookup(int32_t tid, const char *recorded)
{
    auto it = names_.find(tid);
    if (it != names_.end() && it->second.live) return it->second.name.c_str();
    char path[64], name[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, name, sizeof name - 1);
        close(fd);
        if (n > 0) {
            while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0'))
                n--;
            entry &e = names_[tid];
            e.name.assign(name, static_cast<size_t>(n));
            e.live = true;
            return e.name.c_str();
        }
    }
    if (it != names_.end()) return it->second.name.c_str(); // seen earlier, gone now
    entry &e = names_[tid];
    std::string saved;
    if (recorded && *recorded)
        e.name = recorded;
    else if (trace_find_cmdline(tid, saved)) // another process that wrote to the tree
        e.name = saved;
    else
        e.name = "<...>";
    e.live = false;
    return e.name.c_str();
}

void trace_print_record(std::string &out, const rb_record &rec, comm_cache &comms,
                        trace_payload_fn fn, void *ctx, bool ts_in_ns)
{
    char buf[512];
    if (rec.lost_before) {
        int n = snprintf(buf, sizeof buf, "TID:%d [LOST %" PRIu64 " EVENTS]\n", rec.tid,
                         rec.lost_before);
        out.append(buf, static_cast<size_t>(n));
    }
    size_t n = trace_print_context(buf, sizeof buf, comms.lookup(rec.tid, rec.comm), rec.tid,
                                   rec.cpu, rec.ts, ts_in_ns);
    out.append(buf, std::min(n, sizeof buf - 1));
    size_t at = out.size();
    size_t room = 256;
    for (;;) {
        out.resize(at + room);
        size_t need = fn(out.data() + at, room, rec.payload, rec.len, ctx);
        if (need < room) {
            out.resize(at + need);
            break;
        }
        room = need + 1;
    }
    if (out.empty() || out.back() != '\n') out += '\n';
}

std::string trace_read(trace_payload_fn fn, void *ctx)
{
    std::string out = trace_print_header();
    bool in_ns = trace_clock_in_ns(trace_clock_current());
    comm_cache comms;
    ring_buffer_reader rd(ring_buffer_reader::PEEK);
    rb_record rec;
    while (rd.next(rec))
        trace_print_record(out, rec, comms, fn, ctx, in_ns);
    return out;
}

size_t trace_pipe_read(std::string &out, size_t max_records, comm_cache &comms, trace_payload_fn fn,
                       void *ctx)
{
    bool in_ns = trace_clock_in_ns(trace_clock_current());
    ring_buffer_reader rd(ring_buffer_reader::CONSUME);
    rb_record rec;
    size_t n = 0;
    while (n < max_records && rd.next(rec)) {
        trace_print_record(out, rec, comms, fn, ctx, in_ns);
        n++;
    }
    return n;
}

} // namespace dprobe
