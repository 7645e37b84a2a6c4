// An ftrace_ops kept attached to a set of functions that changes while it runs: what the
// kernel does when a tracer's filter hash is written (ftrace_hash_move_and_update_ops) and
// when a module is loaded (ftrace_module_enable). Used by the function and function-graph
// tracers, the function profiler, the stack tracer and the function commands.
//
// The set comes from the owner: want_all() (every function it wants now) and want_loaded()
// (those among objects a dlopen just mapped, called inside the loader before the objects
// run: it must only read site records and filter sets, see core/dl_notify.h). An update
// attaches the new functions before it detaches the old ones, so a function in both sets is
// never left untraced, and none is traced twice.
#pragma once

#include "core/ftrace.h"

#include <functional>
#include <mutex>
#include <span>
#include <vector>

namespace dprobe
{

class func_ops
{
  public:
    func_ops() = default;
    func_ops(const func_ops &) = delete;
    func_ops &operator=(const func_ops &) = delete;

    // The callbacks of ops (entry, exit, data_words, priv) are the owner's to fill in before
    // start(). The object must outlive every activation it recorded: owners keep theirs for
    // the process's lifetime.
    ftrace_ops ops;
    std::function<std::vector<ftrace_site *>()> want_all;
    std::function<std::vector<ftrace_site *>(std::span<const object_ptr>)> want_loaded;

    // Attaches to want_all() (which may be empty). 0 or -errno.
    int start();
    // Brings the attached set to want_all() (new ones attached first). 0 or -errno.
    int update();
    // Detaches from everything; returns when no callback of the ops can still run, and no
    // exit callback will run for activations that entered before.
    void stop();
    bool running() const;
    size_t nr_functions() const;

  private:
    void objects_loaded(std::span<const object_ptr> added);
    friend void func_ops_notify(std::span<const object_ptr> added);

    mutable std::mutex m_;
    bool running_ = false;
    std::vector<ftrace_site *> attached_; // sorted by pointer
};

// Sites usable now (usable, not gone), sorted by pointer, duplicates removed.
std::vector<ftrace_site *> func_ops_usable(std::vector<ftrace_site *> v);

} // namespace dprobe
