// f events (the kernel's trace_fprobe.c): `f[:[GRP/][EVENT]] SYM [FETCHARGS]` on a function
// entry, `f[MAXACTIVE][:...] SYM%return [FETCHARGS]` on its exit, SYM possibly a glob.
// As on Linux 6.15+, creation registers nothing: it checks that SYM names at least one
// function with a patch site (BAD_PROBE_ADDR otherwise); the fprobe is registered when the
// event is armed and unregistered when it is disarmed (or at creation when the event it
// joins is armed already). The handlers (fentry_trace_func / fexit_trace_func) are hot path:
// noexcept, allocation-free, lock-free, DPROBE_NOPROBE.
#include "tracefs/trace_probe.h"

#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/symbols.h"
#include "tracefs/fetch_arg.h"

#include <dprobe/fprobe.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <string>

namespace dprobe
{

namespace
{

struct trace_fprobe;

// What the handlers find from the fprobe they are called with (standard layout, so the
// owner is found with offsetof).
struct trace_fprobe_hook {
    struct fprobe fp;
    trace_fprobe *owner;
};

// The kernel's struct trace_fprobe.
struct trace_fprobe : trace_probe {
    trace_fprobe_hook hook{};
    bool registered = false;
    std::string symbol; // the filter (a name or a glob)

    trace_fprobe() { hook.owner = this; }
};

// ---- the handlers (hot path) ----

trace_fprobe &owner_of(struct fprobe *fp) noexcept
{
    return *reinterpret_cast<trace_fprobe_hook *>(reinterpret_cast<char *>(fp) -
                                                  offsetof(trace_fprobe_hook, fp))
                ->owner;
}

DPROBE_NOPROBE int fentry_handler(struct fprobe *fp, unsigned long ip, unsigned long,
                                  struct ftrace_regs *fregs, void *)
{
    const trace_fprobe &tf = owner_of(fp);
    fetch_context ctx;
    ctx.regs = &fregs->regs;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tf, ctx, ip, 0);
    return 0;
}

DPROBE_NOPROBE int fexit_entry_handler(struct fprobe *fp, unsigned long, unsigned long,
                                       struct ftrace_regs *fregs, void *data)
{
    store_entry_args(owner_of(fp).def.entry_args, &fregs->regs, data);
    return 0;
}

DPROBE_NOPROBE void fexit_handler(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                                  struct ftrace_regs *fregs, void *data)
{
    const trace_fprobe &tf = owner_of(fp);
    fetch_context ctx;
    ctx.regs = &fregs->regs;
    ctx.edata = data;
    ctx.symbolize = trace_symbolize;
    trace_probe_write(tf, ctx, ip, ret_ip);
}

// ---- the table ----

bool is_glob(std::string_view s)
{
    return s.find_first_of("*?[") != std::string_view::npos;
}

// Why an f event's place gives no function to hook, and what reaches it instead.
std::string no_function_why(const probe_definition &def)
{
    const probe_place &pl = def.place;
    const std::string spec = pl.qualified_symbol();
    const char *other = def.is_return ? "an r: probe" : "a p: probe";
    if (!pl.object.empty()) {
        auto objs = kallsyms::instance().objects();
        if (std::none_of(objs->begin(), objs->end(),
                         [&](const object_ptr &o) { return o->matches(pl.object); }))
            return pl.object +
                   " is not loaded in the process (yet), and an f event needs its "
                   "functions now: " +
                   other + " on " + spec +
                   " waits for the library and is armed when it is loaded (for its calls in "
                   "the function graph: --follow-loads -F '" +
                   spec + "')";
    }
    auto hits = kallsyms::instance().lookup_func(spec);
    if (hits.empty() || is_glob(pl.symbol))
        return "no function of the process's loaded objects is named " + spec;
    const char *why = ftrace_site_refusal(hits.front().sym->addr);
    return spec + " can have no patch or jump site (" +
           (why ? why : "not a function dprobe hooks") + "): " + other +
           " (an int3 breakpoint, slower) reaches it";
}

// Registers TF's fprobe, its handlers after the probe's type. Returns 0 or -errno.
int register_trace_fprobe(trace_fprobe &tf)
{
    struct fprobe &fp = tf.hook.fp;
    fp = {};
    if (tf.def.is_return) {
        fp.exit_handler = fexit_handler;
        if (!tf.def.entry_args.empty()) {
            fp.entry_handler = fexit_entry_handler;
            fp.entry_data_size = tf.def.entry_args.size();
        }
    } else {
        fp.entry_handler = fentry_handler;
    }
    int r = register_fprobe(&fp, tf.symbol.c_str(), nullptr);
    tf.registered = r == 0;
    return r;
}

void unregister_trace_fprobe(trace_fprobe &tf)
{
    if (tf.registered) {
        unregister_fprobe(&tf.hook.fp);
        tf.registered = false;
    }
}

trace_probe *trace_fprobe_alloc()
{
    return new trace_fprobe;
}

void trace_fprobe_free(trace_probe *tp, std::unique_ptr<trace_event>)
{
    delete static_cast<trace_fprobe *>(tp);
}

int trace_fprobe_create(trace_events &, trace_probe &tp, bool armed, probe_error &err)
{
    auto &tf = static_cast<trace_fprobe &>(tp);
    if (probe_error e = trace_probe_resolve_args(tf)) {
        err = e;
        return -e.errnum;
    }
    tf.symbol = tf.def.place.qualified_symbol();
    if (!is_glob(tf.def.place.symbol)) {
        // One function, as the dynamic linker binds its name (the program's step, not libc's
        // compatibility step@GLIBC_2.2.5); several are refused, named, as a p: probe's are.
        probe_error uniq;
        auto hits = trace_probe_func_places(tf.symbol, &uniq);
        if (uniq) {
            err = uniq;
            return -uniq.errnum;
        }
        if (!hits.empty()) tf.symbol = qualified_func_spec(hits.front());
    }
    if (fprobe_count_ips_from_filter(tf.symbol.c_str(), nullptr) <= 0) {
        err = registration_error(probe_err::BAD_PROBE_ADDR, ENOENT)
                  .with_detail(no_function_why(tf.def));
        return -ENOENT;
    }
    trace_probe_compile(tf);
    // An fprobe appended to an armed event is registered now.
    if (armed) {
        if (int r = register_trace_fprobe(tf)) {
            err = registration_error(
                r == -ENOENT ? probe_err::BAD_PROBE_ADDR : probe_err::FAIL_REG_PROBE, -r);
            return r;
        }
    }
    return 0;
}

std::string trace_fprobe_show(const trace_probe &tp)
{
    return tp.def.listing();
}

// One by one (each fprobe is itself one batch over its functions); all or nothing.
int trace_fprobe_arm(trace_events &, std::span<trace_probe *const> tps, bool on)
{
    if (!on) {
        for (trace_probe *tp : tps)
            unregister_trace_fprobe(static_cast<trace_fprobe &>(*tp));
        return 0;
    }
    for (trace_probe *tp : tps) {
        if (int err = register_trace_fprobe(static_cast<trace_fprobe &>(*tp))) {
            for (trace_probe *done : tps)
                unregister_trace_fprobe(static_cast<trace_fprobe &>(*done));
            return err;
        }
    }
    return 0;
}

void trace_fprobe_unregister(std::span<trace_probe *const> tps)
{
    for (trace_probe *tp : tps)
        unregister_trace_fprobe(static_cast<trace_fprobe &>(*tp));
}

} // namespace

const dyn_event_operations trace_fprobe_ops = {
    .kind = probe_kind::fprobe,
    .accept = ACCEPT_FPROBE,
    .alloc = trace_fprobe_alloc,
    .free = trace_fprobe_free,
    .create = trace_fprobe_create,
    .show = trace_fprobe_show,
    .is_busy = trace_probe_is_busy,
    .match = trace_probe_match,
    .arm = trace_fprobe_arm,
    .unregister = trace_fprobe_unregister,
    .waits_for_objects = nullptr,
    .rescan = nullptr,
    .list_line = nullptr,
    .reads = nullptr,
};

} // namespace dprobe
