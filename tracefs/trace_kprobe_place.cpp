// Where the kprobe of a p/r event goes, and probes on objects not mapped yet (the kernel's
// __register_trace_kprobe() and its module notifier, trace_kprobe_module_callback()):
//  - SYM[+OFF], lib:SYM[+OFF] and ADDR places get a kprobe at that address, path:OFFSET
//    places (uprobe style) one at the address the file offset is mapped at;
//  - a place in an object the process has not mapped (a lib:SYM whose lib is not loaded, a
//    path:OFFSET whose file is not mapped) is accepted and pending, as the kernel accepts a
//    probe on a module not loaded yet and a uprobe on any file: listed, enabled like any
//    event, and registered when the object is loaded (in its dlopen, before its
//    constructors run); a probe whose object is unloaded keeps its kprobe marked [GONE], as
//    the kernel keeps one in an unloaded module, and gets a new one when the object is
//    loaded again;
//  - both show " # [GONE]" after their line in the *_events files and a [GONE] line in
//    kprobes/list;
//  - a path:OFFSET(REF) place's semaphore is counted while it is armed (sem_get/sem_put),
//    and one file offset has one REF for every event on it (ref_ctr_mismatch).
// Locking: the loader notifier runs inside dlopen with the loader's locks held. It takes
// trace_events' mutex only with try_lock (its holder may itself be waiting for the loader,
// in a dlsym): when that fails, the holder rescans before releasing it (events_lock), so a
// library loaded during a write to dynamic_events is armed when the write ends.
#include "core/dl_notify.h"
#include "core/symbols.h"
#include "tracefs/trace_events.h"
#include "tracefs/trace_events_internal.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include <sys/stat.h>

namespace dprobe
{

namespace
{

// Whether a loaded object is named LIB (the lib of lib:sym).
bool object_loaded(std::string_view lib)
{
    auto objs = kallsyms::instance().objects();
    for (const object_ptr &o : *objs)
        if (o->matches(lib)) return true;
    return false;
}

// The kernel's validate_ref_ctr_offset(): an instruction of a file has one semaphore (a
// uprobe has one reference counter); another event there naming another one, or none, is
// refused with EINVAL and only a kernel warning, no error_log entry. PROBES are the others.
bool ref_ctr_mismatch(const trace_probe &tp, const std::vector<trace_probe *> &probes)
{
    const probe_place &pl = tp.def.place;
    struct stat st;
    if (::stat(pl.object.c_str(), &st) != 0)
        return false;
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

bool object_still_loaded(const object_ptr &obj)
{
    auto objs = kallsyms::instance().objects();
    for (const object_ptr &o : *objs)
        if (o->id == obj->id) return true;
    return false;
}

} // namespace

bool trace_events::code_gone(const trace_probe &tp) const
{
    if (tp.def.kind == probe_kind::fprobe) return false;
    return tp.pending || (tp.kprobe_registered && tp.obj && !object_still_loaded(tp.obj));
}

int trace_events::register_trace_kprobe(trace_probe &tp, bool armed, probe_error &err)
{
    probe_definition &d = tp.def;
    auto &ks = kallsyms::instance();
    tp.pending = false;
    tp.obj.reset();

    // Not mapped: pending, the arguments resolved when it is (they may name its symbols).
    if (d.place.kind == probe_place::form::symbol && !d.place.object.empty() &&
        ks.lookup_func(d.place.qualified_symbol()).empty() && !object_loaded(d.place.object)) {
        tp.pending = true;
        return 0;
    }
    std::optional<uintptr_t> faddr;
    if (d.place.kind == probe_place::form::file_offset) {
        if (ref_ctr_mismatch(tp, probes_))
            return -EINVAL;
        faddr = file_offset_to_addr(d.place.object, d.place.file_offset);
        if (!faddr && !file_mapped(d.place.object)) {
            tp.pending = true;
            return 0;
        }
    }
    if (probe_error e = resolve_probe_args(tp)) {
        err = e;
        return -e.errnum;
    }
    compile_record(tp);

    // A fresh kprobe each time, as a kprobe is registered only once (the kernel clears it).
    tp.hooks.rp = {};
    struct kretprobe &rp = tp.hooks.rp;
    struct kprobe &kp = rp.kp;
    switch (d.place.kind) {
    case probe_place::form::symbol: {
        tp.symbol = d.place.qualified_symbol();
        auto hits = ks.lookup_func(tp.symbol);
        std::set<uintptr_t> addrs;
        for (const auto &h : hits)
            addrs.insert(h.sym->addr);
        if (addrs.empty()) {
            err = registration_error(probe_err::BAD_PROBE_ADDR, ENOENT);
            return -ENOENT;
        }
        if (addrs.size() > 1) {
            err = registration_error(probe_err::NON_UNIQ_SYMBOL, EADDRNOTAVAIL);
            return -EADDRNOTAVAIL;
        }
        kp.symbol_name = tp.symbol.c_str();
        kp.offset = d.place.offset;
        tp.obj = hits.front().obj;
        break;
    }
    case probe_place::form::address:
        kp.addr = reinterpret_cast<kprobe_opcode_t *>(d.place.address);
        tp.obj = ks.object_of(d.place.address);
        break;
    case probe_place::form::file_offset:
        if (!faddr) {
            // Mapped, but not that offset.
            err = registration_error(probe_err::FAIL_REG_PROBE, ENOENT);
            return -ENOENT;
        }
        kp.addr = reinterpret_cast<kprobe_opcode_t *>(*faddr);
        tp.obj = ks.object_of(*faddr);
        break;
    }
    kprobe_opcode_t *const kp_addr = kp.addr; // register_kprobe() writes the resolved one
    // Registered disabled; enabling the event arms it. An enabled event's new probe starts
    // armed (the kernel's append to an enabled event, and its module notifier).
    if (!armed) kp.flags = KPROBE_FLAG_DISABLED;
    int r;
    if (d.is_return) {
        rp.handler = kretprobe_handler;
        if (!d.entry_args.empty()) {
            rp.entry_handler = kretprobe_entry_handler;
            rp.data_size = d.entry_args.size();
        }
        rp.maxactive = static_cast<int>(d.maxactive);
        r = register_kretprobe(&rp);
    } else {
        kp.pre_handler = kprobe_pre_handler;
        r = register_kprobe(&kp);
    }
    if (r == -EINVAL) {
        // dprobe's register_kprobe() says -EINVAL where the kernel's arch check says -EILSEQ,
        // an address inside an instruction (sym+off past sym's end included): tell which.
        const bool sym = d.place.kind == probe_place::form::symbol;
        if (kprobe_insn_boundary(sym ? nullptr : kp_addr, sym ? tp.symbol.c_str() : nullptr,
                                 sym ? d.place.offset : 0) == -EILSEQ)
            r = -EILSEQ;
    }
    if (r < 0) {
        tp.obj.reset();
        // __trace_kprobe_create(): EILSEQ -> BAD_INSN_BNDRY, ENOENT -> BAD_PROBE_ADDR,
        // anything else but ENOMEM/EEXIST -> FAIL_REG_PROBE; the errno stays.
        if (r == -EILSEQ)
            err = registration_error(probe_err::BAD_INSN_BNDRY, EILSEQ);
        else if (r == -ENOENT)
            err = registration_error(probe_err::BAD_PROBE_ADDR, ENOENT);
        else if (r != -ENOMEM && r != -EEXIST)
            err = registration_error(probe_err::FAIL_REG_PROBE, -r);
        return err.logged() ? -err.errnum : r;
    }
    tp.kprobe_registered = true;
    if (armed)
        sem_get(tp);
    return 0;
}

void trace_events::sem_get(trace_probe &tp)
{
    const probe_place &pl = tp.def.place;
    if (tp.sem || pl.kind != probe_place::form::file_offset || !pl.ref_ctr_offset ||
        !tp.kprobe_registered)
        return;
    auto a = file_offset_to_addr(pl.object, pl.ref_ctr_offset);
    if (!a)
        return;
    // The program reads it unsynchronised (a plain load before the probe site): any
    // atomic update will do; other tracers may count too.
    __atomic_fetch_add(reinterpret_cast<uint16_t *>(*a), 1, __ATOMIC_SEQ_CST);
    tp.sem = *a;
}

void trace_events::sem_put(trace_probe &tp)
{
    if (!tp.sem)
        return;
    if (!code_gone(tp))
        __atomic_fetch_sub(reinterpret_cast<uint16_t *>(tp.sem), 1, __ATOMIC_SEQ_CST);
    tp.sem = 0;
}

void trace_events::rescan_locked()
{
    for (trace_probe *p : probes_) {
        if (p->def.kind == probe_kind::fprobe || !code_gone(*p)) continue;
        if (p->kprobe_registered) {
            // Its object was unloaded: the old kprobe goes, a new one comes if it is back.
            sem_put(*p);
            if (p->def.is_return)
                unregister_kretprobe(&p->hooks.rp);
            else
                unregister_kprobe(&p->hooks.rp.kp);
            p->kprobe_registered = false;
            p->obj.reset();
        }
        probe_error e;
        if (register_trace_kprobe(*p, p->event->armed(), e) && e.logged()) {
            // Nobody wrote this command now: its listing is what the log shows.
            p->pending = true;
            errors_.append(p->def.error_loc(), argv_split(p->def.listing()), e);
        }
    }
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
        if (!rescan_.load() || !mutex_.try_lock()) return;
    }
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
    const bool need = std::any_of(probes_.begin(), probes_.end(),
                                  [](const trace_probe *p) { return p->needs_dl_notifier(); });
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

std::string trace_events::pending_kprobes_list() const
{
    events_lock g(*this);
    std::string out;
    char line[PATH_MAX + 128];
    for (const trace_probe *p : probes_) {
        if (p->def.kind == probe_kind::fprobe || !p->pending) continue;
        const probe_place &pl = p->def.place;
        const char *type = p->def.is_return ? "r" : "k";
        if (pl.kind == probe_place::form::file_offset)
            std::snprintf(line, sizeof line, "%016x  %s  0x%" PRIx64 "  %s [GONE]\n", 0u, type,
                          pl.file_offset, pl.object.c_str());
        else
            std::snprintf(line, sizeof line, "%016x  %s  %s+0x%x  %s [GONE]\n", 0u, type,
                          pl.symbol.c_str(), pl.offset, pl.object.c_str());
        out += line;
    }
    return out;
}

} // namespace dprobe
