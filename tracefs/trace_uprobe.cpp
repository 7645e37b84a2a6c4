// p/r events on a file offset (the kernel's trace_uprobe.c): `p[:[GRP/][EVENT]]
// PATH:OFFSET[(REF)] [FETCHARGS]` and `r...` on the same. The kernel plants a uprobe in every
// mapping of the file; dprobe traces one process, so it serves the event with a kprobe at
// the address where the process maps that offset (trace_kprobe.cpp: registration, batches,
// handlers, pending and [GONE] probes). A file the process has not mapped leaves the probe
// pending until it is; a mapped file without that offset is FAIL_REG_PROBE.
// (REF) is the SDT semaphore: a 16-bit counter at that file offset, incremented while the
// probe is armed (the kernel's uprobe reference counter) so that the program evaluates the
// probe's arguments; never touched after its object is unloaded.
#include "tracefs/trace_kprobe.h"
#include "tracefs/tree_node.h"

#include "core/proc_maps.h" // file_offset_to_addr(), file_mapped()
#include "core/symbols.h"
#include "tracefs/trace_events.h"

#include <cerrno>
#include <sys/stat.h>
#include <cinttypes>
#include <climits>
#include <cstdio>

namespace dprobe
{

namespace
{

struct trace_uprobe : trace_kprobe {
    uintptr_t sem = 0; // the semaphore this armed probe incremented
};

int uprobe_place(trace_kprobe &tk, probe_error &err)
{
    const probe_place &pl = tk.def.place;
    std::optional<uintptr_t> faddr = file_offset_to_addr(pl.object, pl.file_offset);
    if (!faddr && !file_mapped(pl.object)) {
        tk.pending = true;
        return 0;
    }
    if (probe_error e = trace_probe_resolve_args(tk)) {
        err = e;
        return -e.errnum;
    }
    trace_probe_compile(tk);
    if (!faddr) {
        // Mapped, but not that offset.
        err = registration_error(probe_err::FAIL_REG_PROBE, ENOENT);
        return -ENOENT;
    }
    tk.hook.rp.kp.addr = reinterpret_cast<kprobe_opcode_t *>(*faddr);
    tk.obj = kallsyms::instance().object_of(*faddr);
    return 0;
}

// The uprobe's reference counter: taken when TK is armed, given back when it is disarmed.
void uprobe_armed(trace_kprobe &tk, bool on)
{
    auto &tu = static_cast<trace_uprobe &>(tk);
    const probe_place &pl = tu.def.place;
    if (!on) {
        if (!tu.sem) return;
        if (!trace_kprobe_gone(tu)) // unloaded memory is left alone
            __atomic_fetch_sub(reinterpret_cast<uint16_t *>(tu.sem), 1, __ATOMIC_SEQ_CST);
        tu.sem = 0;
        return;
    }
    if (tu.sem || !pl.ref_ctr_offset || !tu.registered) return;
    auto a = file_offset_to_addr(pl.object, pl.ref_ctr_offset);
    if (!a) return;
    // The program reads it unsynchronised (a plain load before the probe site): any
    // atomic update will do; other tracers may count too.
    __atomic_fetch_add(reinterpret_cast<uint16_t *>(*a), 1, __ATOMIC_SEQ_CST);
    tu.sem = *a;
}

const trace_kprobe_place_ops uprobe_place_ops = {uprobe_place, uprobe_armed};

trace_probe *trace_uprobe_alloc()
{
    auto *tu = new trace_uprobe;
    tu->place = &uprobe_place_ops;
    return tu;
}

void trace_uprobe_free(trace_probe *tp, std::unique_ptr<trace_event>)
{
    delete static_cast<trace_uprobe *>(tp);
}

// kprobes/list's line of a pending PATH:OFFSET probe.
std::string uprobe_list_line(const trace_probe &tp)
{
    const auto &tk = static_cast<const trace_kprobe &>(tp);
    if (!tk.pending) return "";
    const probe_place &pl = tk.def.place;
    char line[PATH_MAX + 128];
    std::snprintf(line, sizeof line, "%016x  %s  0x%" PRIx64 "  %s [GONE]\n", 0u,
                  tk.def.is_return ? "r" : "k", pl.file_offset, pl.object.c_str());
    return line;
}

} // namespace

namespace
{

// The kernel's validate_ref_ctr_offset(): an instruction of a file has one semaphore (a
// uprobe has one reference counter); another event there naming another one, or none, is
// refused with EINVAL and only a kernel warning, no error_log entry. PROBES are the others.
bool ref_ctr_mismatch(const trace_probe &tp, const std::vector<trace_probe *> &probes)
{
    const probe_place &pl = tp.def.place;
    struct stat st;
    if (::stat(pl.object.c_str(), &st) != 0) return false;
    for (const trace_probe *p : probes) {
        const probe_place &o = p->def.place;
        struct stat ost;
        if (p != &tp && p->def.kind != probe_kind::fprobe &&
            o.kind == probe_place::form::file_offset && o.file_offset == pl.file_offset &&
            o.ref_ctr_offset != pl.ref_ctr_offset && ::stat(o.object.c_str(), &ost) == 0 &&
            ost.st_dev == st.st_dev && ost.st_ino == st.st_ino)
            return true;
    }
    return false;
}

int trace_uprobe_create(trace_events &te, trace_probe &tp, bool armed, probe_error &err)
{
    if (ref_ctr_mismatch(tp, te.probes_locked())) return -EINVAL;
    return trace_kprobe_create(te, tp, armed, err);
}

} // namespace

// The arm and unregister functions are the kprobe kind's: a batch mixes the two kinds.
const dyn_event_operations trace_uprobe_ops = {
    .kind = probe_kind::uprobe,
    .accept = ACCEPT_UPROBE,
    .alloc = trace_uprobe_alloc,
    .free = trace_uprobe_free,
    .create = trace_uprobe_create,
    .show = trace_kprobe_show,
    .is_busy = trace_probe_is_busy,
    .match = trace_probe_match,
    .arm = trace_kprobe_arm,
    .unregister = trace_kprobe_unregister,
    .waits_for_objects = trace_kprobe_waits_for_objects,
    .rescan = trace_kprobe_rescan,
    .list_line = uprobe_list_line,
    .reads = nullptr,
};

// uprobe_profile: "  %s %-44s %15lu\n" per PATH:OFFSET event (path, event name, hits).
std::string trace_events::uprobe_profile() const
{
    events_lock g(*this);
    std::string s;
    char line[PATH_MAX + 128];
    for (const trace_probe *p : probes_) {
        if (p->ops != &trace_uprobe_ops) continue;
        const auto &tk = static_cast<const trace_kprobe &>(*p);
        std::snprintf(line, sizeof line, "  %s %-44s %15lu\n", tk.def.place.object.c_str(),
                      tk.def.event.c_str(), tk.nhit.load(std::memory_order_relaxed));
        s += line;
    }
    return s;
}

// uprobe_events and uprobe_profile (the kernel's init_uprobe_trace).
void tree::trace_uprobe_files()
{
    top_file("uprobe_events", [] { return dynevent_file(ACCEPT_UPROBE); });
    top_file("uprobe_profile",
             [] { return ro([] { return trace_events::instance().uprobe_profile(); }); });
}

} // namespace dprobe
