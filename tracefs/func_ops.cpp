// An ftrace_ops following a changing set of functions (see func_ops.h).
#include "tracefs/func_ops.h"

#include "core/dl_notify.h"

#include <algorithm>
#include <cerrno>
#include <iterator>

namespace dprobe
{
namespace
{

// Running func_ops, for the dlopen notifier. Never destroyed: a dlopen on another thread
// while exit() runs destructors still gets here.
fair_mutex running_lock;
std::vector<func_ops *> &running_ops = *new std::vector<func_ops *>;
bool notifier_added = false;

} // namespace

void func_ops_notify(std::span<const object_ptr> added);

namespace
{
// An ftrace user, like an fprobe following loads (core/dl_notify.h).
const dl_notifier loads_notifier = {func_ops_notify, &running_lock, true};
} // namespace

void func_ops_notify(std::span<const object_ptr> added)
{
    if (added.empty())
        return; // a dlclose: sites of unloaded objects are gone, detached at the next update
    std::lock_guard<fair_mutex> g(running_lock);
    for (func_ops *f : running_ops)
        f->objects_loaded(added);
}

std::vector<ftrace_site *> func_ops_usable(std::vector<ftrace_site *> v)
{
    std::erase_if(v, [](ftrace_site *s) { return !s || !s->usable || s->gone; });
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

int func_ops::start()
{
    {
        std::lock_guard<std::mutex> g(m_);
        if (running_) return -EBUSY;
        // Nothing to attach yet is not an error: a filter write or a dlopen may add some.
        std::vector<ftrace_site *> want = func_ops_usable(want_all());
        attached_ = want.empty() ? want : ftrace_ops_attach_usable(&ops, want);
        std::sort(attached_.begin(), attached_.end());
        running_ = true;
    }
    std::lock_guard<fair_mutex> g(running_lock);
    // Objects loaded from now on get the same treatment (dl_notifier_add may fail when a
    // debugger's breakpoint sits on the loader hook: tracing the loaded objects still works).
    if (!notifier_added && dl_notifier_add(&loads_notifier) == 0) notifier_added = true;
    running_ops.push_back(this);
    return 0;
}

int func_ops::update()
{
    std::lock_guard<std::mutex> g(m_);
    if (!running_) return 0;
    std::vector<ftrace_site *> want = func_ops_usable(want_all());
    std::vector<ftrace_site *> add, del;
    std::set_difference(want.begin(), want.end(), attached_.begin(), attached_.end(),
                        std::back_inserter(add));
    std::set_difference(attached_.begin(), attached_.end(), want.begin(), want.end(),
                        std::back_inserter(del));
    std::vector<ftrace_site *> got;
    if (!add.empty()) got = ftrace_ops_attach_usable(&ops, add);
    if (!del.empty()) ftrace_ops_detach(&ops, del);
    std::vector<ftrace_site *> kept;
    std::set_difference(attached_.begin(), attached_.end(), del.begin(), del.end(),
                        std::back_inserter(kept));
    kept.insert(kept.end(), got.begin(), got.end());
    std::sort(kept.begin(), kept.end());
    attached_ = std::move(kept);
    return got.size() == add.size() ? 0 : -EINVAL;
}

void func_ops::objects_loaded(std::span<const object_ptr> added)
{
    std::lock_guard<std::mutex> g(m_);
    if (!running_ || !want_loaded) return;
    std::vector<ftrace_site *> want = func_ops_usable(want_loaded(added));
    std::vector<ftrace_site *> add;
    std::set_difference(want.begin(), want.end(), attached_.begin(), attached_.end(),
                        std::back_inserter(add));
    if (add.empty()) return;
    std::vector<ftrace_site *> got = ftrace_ops_attach_usable(&ops, add);
    attached_.insert(attached_.end(), got.begin(), got.end());
    std::sort(attached_.begin(), attached_.end());
}

void func_ops::stop()
{
    {
        std::lock_guard<fair_mutex> g(running_lock);
        std::erase(running_ops, this);
    }
    std::lock_guard<std::mutex> g(m_);
    if (!running_) return;
    ftrace_ops_detach(&ops, attached_);
    ftrace_ops_retire(&ops);
    attached_.clear();
    running_ = false;
}

bool func_ops::running() const
{
    std::lock_guard<std::mutex> g(m_);
    return running_;
}

size_t func_ops::nr_functions() const
{
    std::lock_guard<std::mutex> g(m_);
    return attached_.size();
}

} // namespace dprobe
