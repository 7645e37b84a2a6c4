// The registry's loader notifier: probes on objects the process has not mapped yet, or has
// unloaded (the kernel's module notifier, trace_kprobe_module_callback()). While some probe
// waits for objects (its table's waits_for_objects: p/r events pending or in a loaded
// library), a dlopen makes the registry rescan: each such probe's table (rescan) registers
// it when its object is (again) mapped, in the dlopen, before the object's constructors run.
// Locking: the notifier runs inside dlopen with the loader's locks held. It takes
// trace_events' mutex only with try_lock (its holder may itself be waiting for the loader,
// in a dlsym): when that fails, the holder rescans before releasing it (events_lock), so a
// library loaded during a write to dynamic_events is armed when the write ends.
#include "tracefs/trace_events.h"

#include "core/dl_notify.h"
#include "core/symbols.h"
#include "tracefs/trace_probe.h"

#include <algorithm>

namespace dprobe
{

void trace_events::rescan_locked()
{
    usdt_scan_locked(); // tracepoints of the new objects first: t events may wait for them
    for (trace_probe *p : probes_)
        if (p->ops->rescan) p->ops->rescan(*this, *p);
}

void trace_events::unlock_and_rescan()
{
    for (;;) {
        if (rescan_.exchange(false)) {
            kallsyms::instance().refresh();
            rescan_locked();
        }
        mutex_.unlock();
        // A notifier that failed to take the lock just before it was released.
        if (!rescan_.load() || !mutex_.try_lock()) break;
    }
    // Tracepoints of a newly loaded object: described (by a recording) before they can be
    // enabled.
    if (usdt_added_.exchange(false)) run_commands_hook();
}

void trace_events::objects_changed(std::span<const object_ptr> added)
{
    if (added.empty())
        return; // a dlclose: its probes' kprobes are gone, and stay until it comes back
    trace_events &te = instance();
    te.rescan_.store(true);
    // The holder of the lock may be waiting for the loader (dlsym): never block on it.
    if (te.mutex_.try_lock()) {
        te.rescan_.store(false);
        te.rescan_locked(); // kallsyms already holds the new objects
        te.unlock_and_rescan();
    }
}

const dl_notifier &trace_events::events_notifier()
{
    static const dl_notifier n = {objects_changed, &instance().mutex_};
    return n;
}

void trace_events::update_dl_notifier()
{
    const bool need =
        usdt_on_ || std::any_of(probes_.begin(), probes_.end(), [](const trace_probe *p) {
            return p->ops->waits_for_objects && p->ops->waits_for_objects(*p);
        });
    if (need == notifier_on_) return;
    if (need) {
        // Without the hook (a debugger's breakpoint on the loader's), pending probes are
        // registered at the next command instead.
        notifier_on_ = dl_notifier_add(&events_notifier()) == 0;
    } else {
        dl_notifier_remove(&events_notifier());
        notifier_on_ = false;
    }
}

} // namespace dprobe
