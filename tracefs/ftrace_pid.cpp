// Thread-id filters (see ftrace_pid.h).
#include "tracefs/ftrace_pid.h"

#include "core/compiler.h"
#include "core/task_ctx.h"
#include "tracefs/fetch_arg.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

namespace dprobe
{

DPROBE_NOPROBE int32_t trace_current_tid() noexcept
{
    task_ctx *t = peek_task_ctx();
    return t ? t->tid : static_cast<int32_t>(syscall(SYS_gettid));
}

DPROBE_NOPROBE bool pid_filter::contains(int32_t tid) const noexcept
{
    const list *l = list_.load(std::memory_order_acquire);
    if (!l) return false;
    return std::binary_search(l->tids.begin(), l->tids.end(), tid);
}

int pid_filter::write(std::string_view text)
{
    std::vector<int32_t> add;
    size_t i = 0;
    while (i < text.size()) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
            i++;
        size_t s = i;
        while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])))
            i++;
        if (i == s) break;
        unsigned long long v;
        // The kernel's pid_max is at most 4194304 (PID_MAX_LIMIT); 0 is no thread.
        if (kstrtoull(text.substr(s, i - s), 10, v) || v == 0 || v > 4194304) return -EINVAL;
        add.push_back(static_cast<int32_t>(v));
    }
    std::lock_guard<std::mutex> g(m_);
    auto l = std::make_unique<list>();
    if (const list *cur = list_.load(std::memory_order_relaxed)) l->tids = cur->tids;
    if (add.empty() && !l->tids.empty()) return 0;
    l->tids.insert(l->tids.end(), add.begin(), add.end());
    std::sort(l->tids.begin(), l->tids.end());
    l->tids.erase(std::unique(l->tids.begin(), l->tids.end()), l->tids.end());
    if (l->tids.empty()) return 0;
    list_.store(l.get(), std::memory_order_release);
    lists_.push_back(std::move(l));
    return 0;
}

void pid_filter::clear()
{
    std::lock_guard<std::mutex> g(m_);
    list_.store(nullptr, std::memory_order_release);
}

std::vector<int32_t> pid_filter::tids() const
{
    std::lock_guard<std::mutex> g(m_);
    const list *l = list_.load(std::memory_order_relaxed);
    return l ? l->tids : std::vector<int32_t>{};
}

std::string pid_filter::show(const char *empty_text) const
{
    std::vector<int32_t> v = tids();
    if (v.empty()) return empty_text;
    std::string s;
    for (int32_t t : v)
        s += std::to_string(t) + "\n";
    return s;
}

} // namespace dprobe
