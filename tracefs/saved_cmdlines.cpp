// Names of the threads and processes in the trace (see saved_cmdlines.h).
#include "tracefs/saved_cmdlines.h"
#include "tracefs/tree_node.h"

#include "core/ring_buffer.h"
#include "tracefs/trace_array.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>

namespace dprobe
{
namespace
{

struct saved {
    int32_t pid;
    std::string comm;
    int32_t tgid;
};

std::mutex saved_lock;
std::deque<saved> &saved_list = *new std::deque<saved>; // oldest first
unsigned saved_capacity = 128;

std::string live_comm(int32_t tid)
{
    char path[64], name[64];
    std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    ssize_t n = read(fd, name, sizeof name - 1);
    close(fd);
    if (n <= 0) return "";
    while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0'))
        n--;
    return std::string(name, size_t(n));
}

// pid -> {comm, tgid} of everything known.
std::map<int32_t, saved> all_known()
{
    std::map<int32_t, saved> m;
    const int32_t self = static_cast<int32_t>(getpid());
    std::vector<trace_buffer *> tbs;
    {
        std::lock_guard<std::mutex> g(trace_types_lock());
        for (auto &tr : trace_arrays()) {
            tbs.push_back(tr->buffer);
            if (tr->max_buffer) tbs.push_back(tr->max_buffer);
        }
    }
    for (trace_buffer *tb : tbs)
        for (const rb_stats &s : ring_buffer_thread_stats(tb)) {
            std::string c = s.exited ? "" : live_comm(s.tid);
            m[s.tid] = saved{s.tid, c.empty() ? std::string(s.comm) : c, self};
        }
    std::lock_guard<std::mutex> g(saved_lock);
    for (const saved &s : saved_list)
        m[s.pid] = s;
    return m;
}

} // namespace

void trace_save_cmdline(int32_t pid, std::string_view comm, int32_t tgid)
{
    std::lock_guard<std::mutex> g(saved_lock);
    for (auto it = saved_list.begin(); it != saved_list.end(); ++it)
        if (it->pid == pid) {
            saved_list.erase(it);
            break;
        }
    saved_list.push_back(saved{pid, std::string(comm), tgid});
    while (saved_list.size() > saved_capacity)
        saved_list.pop_front();
}

bool trace_find_cmdline(int32_t pid, std::string &comm)
{
    std::lock_guard<std::mutex> g(saved_lock);
    for (const saved &s : saved_list)
        if (s.pid == pid) {
            comm = s.comm;
            return true;
        }
    return false;
}

std::string saved_cmdlines_text()
{
    std::string out;
    for (auto &[pid, s] : all_known())
        out += std::to_string(pid) + " " + s.comm + "\n";
    return out;
}

std::string saved_tgids_text()
{
    std::string out;
    for (auto &[pid, s] : all_known())
        out += std::to_string(pid) + " " + std::to_string(s.tgid) + "\n";
    return out;
}

unsigned saved_cmdlines_size()
{
    std::lock_guard<std::mutex> g(saved_lock);
    return saved_capacity;
}

int set_saved_cmdlines_size(unsigned long long n)
{
    if (n == 0 || n > 32768) // PID_MAX_DEFAULT
        return -EINVAL;
    std::lock_guard<std::mutex> g(saved_lock);
    saved_capacity = unsigned(n);
    while (saved_list.size() > saved_capacity)
        saved_list.pop_front();
    return 0;
}

// saved_cmdlines, its size and saved_tgids (the kernel's tracer_init_tracefs).
void tree::saved_cmdlines_files()
{
    top_file("saved_cmdlines", [] { return ro(saved_cmdlines_text); });
    top_file("saved_tgids", [] { return ro(saved_tgids_text); });
    top_file("saved_cmdlines_size", [] {
        return rw([] { return std::to_string(saved_cmdlines_size()) + "\n"; },
                  [](std::string_view s) {
                      unsigned long long v;
                      if (parse_ulong(s, v)) return -EINVAL;
                      return set_saved_cmdlines_size(v);
                  });
    });
}

} // namespace dprobe
