// The kprobe-served kinds' shared state (trace_kprobe.cpp, trace_uprobe.cpp): p/r events on
// symbols and addresses (trace_kprobe_ops) and on PATH:OFFSET (trace_uprobe_ops) both get a
// kprobe or kretprobe at one address, registered disabled on creation and armed on enable,
// and both may sit in an object the process has not mapped (pending) or has unloaded
// ([GONE]), re-registered when the object is loaded (the kernel's module notifier).
// Invariant: hook and the handler-read fields stay valid while the kprobe is registered.
#pragma once

#include "tracefs/trace_probe.h"

#include <dprobe/kprobes.h>

#include <atomic>
#include <string>

namespace dprobe
{

struct trace_kprobe;

// What the handlers find from the kprobe / kretprobe they are called with (standard
// layout, so the owner is found with offsetof).
struct trace_kprobe_hook {
    struct kretprobe rp; // rp.kp is the kprobe of a 'p' event
    trace_kprobe *owner;
};

// What differs between the kprobe-served kinds.
struct trace_kprobe_place_ops {
    // Readies TK's kprobe for registration: its arguments resolved and compiled, rp.kp's
    // symbol_name + offset or addr set and tk.obj the object it is in; or marks TK pending
    // (its object not mapped; returns 0). Returns 0, or -errno with ERR set when logged.
    int (*place)(trace_kprobe &tk, probe_error &err);
    // After TK is armed / before it is disarmed (nullptr: nothing to do): the uprobe's SDT
    // semaphore.
    void (*armed)(trace_kprobe &tk, bool on);
};

// The kernel's struct trace_kprobe (and trace_uprobe, which dprobe serves with a kprobe).
struct trace_kprobe : trace_probe {
    trace_kprobe_hook hook{};
    const trace_kprobe_place_ops *place = nullptr;
    bool registered = false;
    // On an object the process has not mapped (lib:sym, path:offset): no kprobe yet.
    bool pending = false;
    object_ptr obj;                     // the object a registered kprobe is in (to see it unloaded)
    std::string symbol;                 // rp.kp.symbol_name
    std::atomic<unsigned long> nhit{0}; // kprobe_profile / uprobe_profile (handlers)

    trace_kprobe() { hook.owner = this; }
};

// TP as a kprobe-served probe, nullptr for other kinds.
trace_kprobe *as_trace_kprobe(trace_probe *tp);
const trace_kprobe *as_trace_kprobe(const trace_probe *tp);

// TK's object is not mapped: pending, or its kprobe's object was unloaded.
bool trace_kprobe_gone(const trace_kprobe &tk);

// Registers TK's kprobe (armed when ARMED), or marks TK pending when its object is not
// mapped. Returns 0, or -errno with ERR set when the kernel would log the failure.
int register_trace_kprobe(trace_kprobe &tk, bool armed, probe_error &err);

// Table entries both kprobe-served kinds use (trace_kprobe.cpp); their arm and unregister
// are the same functions, so a batch mixes them.
int trace_kprobe_create(trace_events &te, trace_probe &tp, bool armed, probe_error &err);
std::string trace_kprobe_show(const trace_probe &tp);
int trace_kprobe_arm(trace_events &te, std::span<trace_probe *const> tps, bool on);
void trace_kprobe_unregister(std::span<trace_probe *const> tps);
bool trace_kprobe_waits_for_objects(const trace_probe &tp);
void trace_kprobe_rescan(trace_events &te, trace_probe &tp);

} // namespace dprobe
