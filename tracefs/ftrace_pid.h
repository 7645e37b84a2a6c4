// Thread-id filters: set_ftrace_pid, set_ftrace_notrace_pid, set_event_pid and
// set_event_notrace_pid (the kernel's trace_pid_list). The kernel's pids are tasks, which
// in a process are its threads: these files take thread ids (gettid(), the TID column of
// the trace).
//
// A write appends to the list (all or nothing: one bad number and nothing changes, -EINVAL);
// opening with O_TRUNC empties it. The hot path sees an immutable sorted list through one
// atomic pointer; lists replaced by a write are kept until the filter is destroyed, since a
// probe handler may still be reading one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

// The calling thread's id (from its dprobe context when it has one: no system call).
int32_t trace_current_tid() noexcept;

class pid_filter
{
  public:
    pid_filter() = default;
    pid_filter(const pid_filter &) = delete;
    pid_filter &operator=(const pid_filter &) = delete;

    bool active() const noexcept { return list_.load(std::memory_order_acquire) != nullptr; }
    bool contains(int32_t tid) const noexcept;
    bool contains_current() const noexcept { return active() && contains(trace_current_tid()); }

    // Adds the whitespace-separated thread ids of TEXT. 0 or -EINVAL.
    int write(std::string_view text);
    void clear();
    std::vector<int32_t> tids() const;
    // The file: one id a line, in order; EMPTY_TEXT when the list is empty.
    std::string show(const char *empty_text) const;

  private:
    struct list {
        std::vector<int32_t> tids; // sorted, unique
    };
    std::atomic<const list *> list_{nullptr};
    mutable std::mutex m_;
    std::vector<std::unique_ptr<list>> lists_; // every list ever published
};

} // namespace dprobe
