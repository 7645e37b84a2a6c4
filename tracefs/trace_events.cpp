// Dynamic-event registry and the probe handlers that write event records.
#include "tracefs/trace_events.h"

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "core/symbols.h"
#include "core/task_ctx.h"
#include "core/trace_clock.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/ftrace_pid.h"
#include "tracefs/stack_trace.h"
#include "tracefs/trace_array.h"

#include "arch/x86_64/uaccess.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace dprobe {

// What the probe handlers find from the fprobe / kprobe / kretprobe they are called with.
// Standard layout, so the owner is found with offsetof.
struct trace_probe_hooks {
    struct fprobe fp;
    struct kretprobe rp; // rp.kp is the kprobe of a 'p' event
    trace_probe *owner;
};

struct trace_event {
    std::string group, name;
    uint16_t id = 0;
    std::vector<trace_probe *> probes;
    bool registered = false;   // the probes are registered / armed
    uint64_t enabled_mask = 0; // arrays where the event is enabled (mutex_)
    uint64_t soft_mask = 0;    // arrays holding it in soft mode (mutex_)
    std::map<unsigned, int> soft_refs;
    // Arrays the handlers write to (enabled ones, and soft-mode ones switched on).
    std::atomic<uint64_t> record_mask{0};
    // Per array, read by the handlers. Old filters are kept (in `filters`) until the event
    // is freed, when no handler can run any more.
    std::atomic<const event_filter *> filter[TRACE_ARRAY_MAX] = {};
    std::vector<std::unique_ptr<event_filter>> filters;
    std::map<unsigned, std::string> filter_file; // absent: "none"
    std::vector<filter_field> fields;

    std::string filter_text(unsigned array) const
    {
        auto it = filter_file.find(array);
        return it == filter_file.end() ? "none\n" : it->second;
    }
};

// An argument the record writer stores without the fetch-arg interpreter: a register, an
// immediate or a saved entry argument, stored as is or dereferenced once (the shapes
// `$argN`, `%reg`, `$retval`, `\imm`, `+off(%reg)` of 1-8 bytes). Same results as the
// interpreter's (fetch_run), checked by the tests; ~2 ns instead of ~6 ns per argument.
struct fast_arg {
    enum : uint8_t { REGS, IMM, EDATA } src;
    bool mem;         // read SIZE bytes at value + mem_off (a fault leaves zeroes)
    uint8_t size;
    uint16_t dest;    // offset in the record
    uint32_t param;   // pt_regs byte offset (REGS), entry-data offset (EDATA)
    int64_t mem_off;
    uint64_t imm;
};

struct trace_probe {
    trace_probe_hooks hooks{};
    probe_definition def;
    trace_event *event = nullptr;
    uint16_t id = 0;
    bool has_dyn = false;
    uint32_t fixed_size = 0;
    bool kprobe_registered = false;
    bool fprobe_registered = false;
    std::atomic<unsigned long> nhit{0};
    std::string symbol; // kprobe symbol_name / fprobe filter
    bool fast = false;  // every argument is a fast_arg
    std::vector<fast_arg> fast_args;
};

namespace {

trace_probe *owner_of(struct fprobe *fp) noexcept
{
    return reinterpret_cast<trace_probe_hooks *>(reinterpret_cast<char *>(fp) -
                                                 offsetof(trace_probe_hooks, fp))
        ->owner;
}

trace_probe *owner_of(struct kretprobe *rp) noexcept
{
    return reinterpret_cast<trace_probe_hooks *>(reinterpret_cast<char *>(rp) -
                                                 offsetof(trace_probe_hooks, rp))
        ->owner;
}

trace_probe *owner_of(struct kprobe *kp) noexcept
{
    static_assert(offsetof(struct kretprobe, kp) == 0);
    return owner_of(reinterpret_cast<struct kretprobe *>(kp));
}

DPROBE_NOPROBE size_t symbolize(char *buf, size_t len, uintptr_t addr)
{
    return sprint_symbol(buf, len, addr, false);
}

DPROBE_NOPROBE inline int32_t current_tid() noexcept { return trace_current_tid(); }

// Compiles ARGS into fast_args when every one has a fast shape.
bool compile_fast_args(const probe_definition &def, std::vector<fast_arg> &out)
{
    static constexpr uint32_t arg_regs[] = {offsetof(pt_regs, di), offsetof(pt_regs, si),
                                            offsetof(pt_regs, dx), offsetof(pt_regs, cx),
                                            offsetof(pt_regs, r8), offsetof(pt_regs, r9)};
    size_t args_off = probe_layout(def).args_off;
    out.clear();
    for (const probe_arg &a : def.args) {
        if (a.count || a.dynamic)
            return false;
        const fetch_insn *c = a.prog.code.data();
        if (c->op == fetch_op::NOP_SYMBOL)
            c++;
        fast_arg f{};
        switch (c->op) {
        case fetch_op::REG:
            if (c->param > offsetof(pt_regs, ss) || c->param % sizeof(long))
                return false;
            f.src = fast_arg::REGS;
            f.param = c->param;
            break;
        case fetch_op::ARG:
            if (c->param >= std::size(arg_regs))
                return false;
            f.src = fast_arg::REGS;
            f.param = arg_regs[c->param];
            break;
        case fetch_op::RETVAL:
            f.src = fast_arg::REGS;
            f.param = offsetof(pt_regs, ax);
            break;
        case fetch_op::STACKP:
            f.src = fast_arg::REGS;
            f.param = offsetof(pt_regs, sp);
            break;
        case fetch_op::IMM:
            f.src = fast_arg::IMM;
            f.imm = c->immediate;
            break;
        case fetch_op::EDATA:
            f.src = fast_arg::EDATA;
            f.param = static_cast<uint32_t>(c->offset);
            break;
        default:
            return false;
        }
        const fetch_insn *st = c + 1;
        if (st->op == fetch_op::ST_RAW) {
            f.mem = false;
        } else if (st->op == fetch_op::ST_MEM || st->op == fetch_op::ST_UMEM) {
            f.mem = true;
            f.mem_off = st->offset;
        } else {
            return false;
        }
        if ((st + 1)->op != fetch_op::END || !st->size || st->size > 8 ||
            a.prog.field_size != st->size)
            return false;
        f.size = st->size;
        f.dest = static_cast<uint16_t>(args_off + a.offset);
        out.push_back(f);
    }
    return true;
}

DPROBE_NOPROBE void store_fast_args(const trace_probe &tp, const fetch_context &ctx,
                                    uint8_t *rec) noexcept
{
    const auto *regs = reinterpret_cast<const char *>(ctx.regs);
    for (const fast_arg &f : tp.fast_args) {
        unsigned long v = 0;
        switch (f.src) {
        case fast_arg::REGS:
            std::memcpy(&v, regs + f.param, sizeof(v));
            break;
        case fast_arg::IMM:
            v = f.imm;
            break;
        case fast_arg::EDATA:
            if (!ctx.edata) {
                std::memset(rec + f.dest, 0, f.size);
                continue;
            }
            std::memcpy(&v, static_cast<const char *>(ctx.edata) + f.param, sizeof(v));
            break;
        }
        uint8_t *dst = rec + f.dest;
        if (f.mem) {
            if (copy_from_user_nofault(dst, reinterpret_cast<const void *>(v + f.mem_off), f.size))
                std::memset(dst, 0, f.size);
        } else {
            switch (f.size) { // little-endian: the low bytes
            case 8: std::memcpy(dst, &v, 8); break;
            case 4: { uint32_t x = uint32_t(v); std::memcpy(dst, &x, 4); break; }
            case 2: { uint16_t x = uint16_t(v); std::memcpy(dst, &x, 2); break; }
            default: std::memcpy(dst, &v, f.size); break;
            }
        }
    }
}

// One record of TP in one array's buffer: build it in the ring buffer, filter, commit.
DPROBE_NOPROBE void trace_probe_write_one(const trace_probe &tp, const fetch_context &ctx,
                                          uintptr_t ip, uintptr_t ret_ip, trace_array &tr,
                                          const event_filter *f) noexcept
{
    const probe_definition &def = tp.def;
    size_t len = tp.fixed_size;
    if (tp.has_dyn)
        len += trace_args_dynamic_size(def.args, ctx);
    void *ev = ring_buffer_reserve(tr.buffer, len);
    if (!ev)
        return;
    auto *rec = static_cast<uint8_t *>(ev);
    size_t used;
    if (tp.fast) {
        probe_record_init(rec, def, tp.id, current_tid(), ip, ret_ip);
        store_fast_args(tp, ctx, rec);
        used = len;
    } else {
        used = probe_record_store(rec, len, def, ctx, tp.id, current_tid(), ip, ret_ip);
    }
    if (f) {
        event_filter::context fc;
        fc.cpu = ring_buffer_event_header(ev)->cpu;
        if (!f->match(rec, used, fc)) {
            ring_buffer_discard(tr.buffer, ev);
            return;
        }
    }
    ring_buffer_commit(tr.buffer, ev);
    if (unlikely(tr.opt(OPT_STACKTRACE)))
        trace_stack_record_regs(tr, ctx.regs);
}

// The common part of every handler: one record in each array the event records to.
DPROBE_NOPROBE void trace_probe_write(const trace_probe &tp, const fetch_context &ctx,
                                      uintptr_t ip, uintptr_t ret_ip) noexcept
{
    const trace_event &ev = *tp.event;
    uint64_t mask = ev.record_mask.load(std::memory_order_acquire);
    while (mask) {
        const unsigned id = static_cast<unsigned>(__builtin_ctzll(mask));
        mask &= mask - 1;
        trace_array *tr = trace_array_by_id(id);
        if (unlikely(!tr) || unlikely(tr->event_ignore_this_task()))
            continue;
        trace_probe_write_one(tp, ctx, ip, ret_ip, *tr,
                              ev.filter[id].load(std::memory_order_acquire));
    }
}

DPROBE_NOPROBE int fentry_handler(struct fprobe *fp, unsigned long ip, unsigned long,
                                  struct ftrace_regs *fregs, void *)
{
    const trace_probe &tp = *owner_of(fp);
    fetch_context ctx;
    ctx.regs = &fregs->regs;
    ctx.symbolize = symbolize;
    trace_probe_write(tp, ctx, ip, 0);
    return 0;
}

DPROBE_NOPROBE int fexit_entry_handler(struct fprobe *fp, unsigned long, unsigned long,
                                       struct ftrace_regs *fregs, void *data)
{
    store_entry_args(owner_of(fp)->def.entry_args, &fregs->regs, data);
    return 0;
}

DPROBE_NOPROBE void fexit_handler(struct fprobe *fp, unsigned long ip, unsigned long ret_ip,
                                  struct ftrace_regs *fregs, void *data)
{
    const trace_probe &tp = *owner_of(fp);
    fetch_context ctx;
    ctx.regs = &fregs->regs;
    ctx.edata = data;
    ctx.symbolize = symbolize;
    trace_probe_write(tp, ctx, ip, ret_ip);
}

DPROBE_NOPROBE int kprobe_pre_handler(struct kprobe *kp, struct pt_regs *regs)
{
    trace_probe &tp = *owner_of(kp);
    tp.nhit.fetch_add(1, std::memory_order_relaxed);
    fetch_context ctx;
    ctx.regs = regs;
    ctx.symbolize = symbolize;
    trace_probe_write(tp, ctx, reinterpret_cast<uintptr_t>(kp->addr), 0);
    return 0;
}

DPROBE_NOPROBE int kretprobe_entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    store_entry_args(owner_of(get_kretprobe(ri))->def.entry_args, regs, ri->data);
    return 0;
}

DPROBE_NOPROBE int kretprobe_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    struct kretprobe *rp = get_kretprobe(ri);
    trace_probe &tp = *owner_of(rp);
    tp.nhit.fetch_add(1, std::memory_order_relaxed);
    fetch_context ctx;
    ctx.regs = regs;
    ctx.edata = ri->data;
    ctx.symbolize = symbolize;
    trace_probe_write(tp, ctx, reinterpret_cast<uintptr_t>(rp->kp.addr),
                      reinterpret_cast<uintptr_t>(ri->ret_addr));
    return 0;
}

bool accepts(unsigned accept, probe_kind k)
{
    switch (k) {
    case probe_kind::kprobe: return accept & ACCEPT_KPROBE;
    case probe_kind::uprobe: return accept & ACCEPT_UPROBE;
    case probe_kind::fprobe: return accept & ACCEPT_FPROBE;
    }
    return false;
}

std::string_view strip(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

constexpr const char default_sys_filter_message[] =
    "### global filter ###\n"
    "# Use this to set filters for multiple events.\n"
    "# Only events with the given fields will be affected.\n"
    "# If no events are modified, an error message will be displayed here\n";

constexpr const char filter_err_loc[] = "event filter parse error";

// The kernel's kprobe_on_func_entry() as the parser's is_func_entry: unknown symbols count
// as entries here, so the registration reports them (BAD_PROBE_ADDR), not BAD_RETPROBE.
bool place_is_func_entry(const probe_place &pl)
{
    int r;
    switch (pl.kind) {
    case probe_place::form::symbol:
        r = kprobe_on_func_entry(nullptr, pl.qualified_symbol().c_str(), pl.offset);
        break;
    case probe_place::form::address:
        r = kprobe_on_func_entry(reinterpret_cast<kprobe_opcode_t *>(pl.address), nullptr, 0);
        break;
    default: {
        auto a = file_offset_to_addr(pl.object, pl.file_offset);
        if (!a)
            return false;
        r = kprobe_on_func_entry(reinterpret_cast<kprobe_opcode_t *>(*a), nullptr, 0);
    }
    }
    return r != -EINVAL;
}

} // namespace

// ---------------------------------------------------------------------------------------

std::optional<uintptr_t> file_offset_to_addr(const std::string &path, uint64_t file_offset)
{
    char *real = realpath(path.c_str(), nullptr);
    std::string want = real ? real : path;
    std::free(real);
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        unsigned long start, end, off;
        char perms[8];
        int name_at = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &off,
                        &name_at) < 4 ||
            !name_at)
            continue;
        std::string_view name = strip(std::string_view(line).substr(size_t(name_at)));
        if (name != want)
            continue;
        if (file_offset >= off && file_offset < off + (end - start))
            return start + (file_offset - off);
    }
    return std::nullopt;
}

trace_events &trace_events::instance()
{
    static trace_events *inst = new trace_events; // never destroyed
    return *inst;
}

trace_events::trace_events()
{
    trace_clock_init();
}

trace_event *trace_events::find(std::string_view group, std::string_view event) const
{
    for (trace_event *ev : events_)
        if (ev->group == group && ev->name == event)
            return ev;
    return nullptr;
}

uint16_t trace_events::alloc_id()
{
    for (;;) {
        uint16_t id = next_id_;
        next_id_ = next_id_ == UINT16_MAX ? TRACE_EVENT_FIRST_ID : uint16_t(next_id_ + 1);
        bool used = std::any_of(events_.begin(), events_.end(),
                                [id](const trace_event *e) { return e->id == id; });
        if (!used)
            return id;
    }
}

int trace_events::write_commands(std::string_view buf, unsigned accept)
{
    return trace_parse_run_command(
        buf, [&](std::span<const std::string> argv) { return run_command(argv, accept); });
}

int trace_events::run_command(std::span<const std::string> argv, unsigned accept)
{
    if (argv.empty())
        return 0;
    parse_options opts;
    opts.accept = accept;
    opts.is_func_entry = place_is_func_entry;
    dynevent_command cmd;
    const char *loc = nullptr;
    std::lock_guard<std::mutex> g(mutex_);
    probe_error e = parse_dynevent(argv, opts, cmd, &loc);
    if (e) {
        if (e.logged())
            errors_.append(loc ? loc : "trace_probe", argv, e);
        return -e.errnum;
    }
    if (cmd.kind == dynevent_command::type::remove)
        return remove(cmd.del, accept);
    return create(cmd.def, argv, loc ? loc : cmd.def.error_loc());
}

int trace_events::create(const probe_definition &def, std::span<const std::string> argv,
                         const char *loc)
{
    auto fail = [&](probe_error e) {
        errors_.append(loc, argv, e);
        return -e.errnum;
    };

    trace_event *ev = find(def.group, def.event);
    if (ev) {
        std::vector<const probe_definition *> existing;
        for (trace_probe *p : ev->probes)
            existing.push_back(&p->def);
        if (probe_error e = check_append(existing, def))
            return fail(e);
    }

    auto tp = std::make_unique<trace_probe>();
    tp->def = def;
    tp->hooks.owner = tp.get();
    probe_definition &d = tp->def;

    // @SYM and @+OFFSET arguments. A probe placed in an object (lib:sym) reads that
    // object's symbol when it has one: its own static variables, not a namesake elsewhere.
    fetch_resolver resolver;
    std::string home = d.place.kind == probe_place::form::symbol ? d.place.object : "";
    resolver.symbol = [home](std::string_view name) -> std::optional<uintptr_t> {
        auto &ks = kallsyms::instance();
        std::vector<sym_hit> hits;
        if (!home.empty() && name.find(':') == std::string_view::npos) {
            std::string in_home = home + ":" + std::string(name);
            hits = ks.lookup_data(in_home);
            if (hits.empty())
                hits = ks.lookup_func(in_home);
        }
        if (hits.empty())
            hits = ks.lookup_data(name);
        if (hits.empty())
            hits = ks.lookup_func(name);
        if (hits.empty())
            return std::nullopt;
        return hits.front().sym->addr;
    };
    if (d.kind == probe_kind::uprobe) {
        std::string path = d.place.object;
        resolver.file_offset = [path](uint64_t off) { return file_offset_to_addr(path, off); };
    }
    if (probe_error e = resolve_fetch_args(d.args, resolver, 2))
        return fail(e);
    if (!d.args.empty())
        fetch_install_fault_handler();

    if (d.kind == probe_kind::fprobe) {
        tp->symbol = d.place.qualified_symbol();
        if (fprobe_count_ips_from_filter(tp->symbol.c_str(), nullptr) <= 0)
            return fail(registration_error(probe_err::BAD_PROBE_ADDR, ENOENT));
    } else {
        struct kretprobe &rp = tp->hooks.rp;
        struct kprobe &kp = rp.kp;
        switch (d.place.kind) {
        case probe_place::form::symbol: {
            tp->symbol = d.place.qualified_symbol();
            auto hits = kallsyms::instance().lookup_func(tp->symbol);
            std::set<uintptr_t> addrs;
            for (const auto &h : hits)
                addrs.insert(h.sym->addr);
            if (addrs.empty())
                return fail(registration_error(probe_err::BAD_PROBE_ADDR, ENOENT));
            if (addrs.size() > 1)
                return fail(registration_error(probe_err::NON_UNIQ_SYMBOL, EADDRNOTAVAIL));
            kp.symbol_name = tp->symbol.c_str();
            kp.offset = d.place.offset;
            break;
        }
        case probe_place::form::address:
            kp.addr = reinterpret_cast<kprobe_opcode_t *>(d.place.address);
            break;
        case probe_place::form::file_offset: {
            auto a = file_offset_to_addr(d.place.object, d.place.file_offset);
            if (!a)
                return fail(registration_error(probe_err::FAIL_REG_PROBE, ENOENT));
            kp.addr = reinterpret_cast<kprobe_opcode_t *>(*a);
            break;
        }
        }
        // Registered disabled; enabling the event arms it. An enabled event's new probe
        // starts armed (the kernel's append to an enabled event).
        if (!(ev && ev->registered))
            kp.flags = KPROBE_FLAG_DISABLED;
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
        if (r < 0) {
            // __register_trace_kprobe(): EILSEQ -> BAD_INSN_BNDRY (EINVAL), ENOENT ->
            // BAD_PROBE_ADDR, anything else but ENOMEM/EEXIST -> FAIL_REG_PROBE.
            if (r == -EILSEQ)
                return fail(registration_error(probe_err::BAD_INSN_BNDRY, EINVAL));
            if (r == -ENOENT)
                return fail(registration_error(probe_err::BAD_PROBE_ADDR, ENOENT));
            if (r == -ENOMEM || r == -EEXIST)
                return r;
            return fail(registration_error(probe_err::FAIL_REG_PROBE, -r));
        }
        tp->kprobe_registered = true;
    }

    bool new_event = !ev;
    if (new_event) {
        auto e = std::make_unique<trace_event>();
        e->group = d.group;
        e->name = d.event;
        e->id = alloc_id();
        e->fields = probe_filter_fields(d);
        ev = e.release();
    }
    tp->event = ev;
    tp->id = ev->id;
    tp->has_dyn = d.has_dynamic_args();
    tp->fixed_size = static_cast<uint32_t>(probe_layout(d).fixed_size);
    tp->fast = !tp->has_dyn && compile_fast_args(d, tp->fast_args) &&
               !std::getenv("DPROBE_NO_FAST_ARGS"); // tests compare both writers

    // An fprobe appended to an enabled event is registered now.
    if (d.kind == probe_kind::fprobe && ev->registered) {
        struct fprobe &fp = tp->hooks.fp;
        if (d.is_return) {
            fp.exit_handler = fexit_handler;
            if (!d.entry_args.empty()) {
                fp.entry_handler = fexit_entry_handler;
                fp.entry_data_size = d.entry_args.size();
            }
        } else {
            fp.entry_handler = fentry_handler;
        }
        if (int r = register_fprobe(&fp, tp->symbol.c_str(), nullptr)) {
            if (new_event)
                delete ev;
            return fail(registration_error(
                r == -ENOENT ? probe_err::BAD_PROBE_ADDR : probe_err::FAIL_REG_PROBE, -r));
        }
        tp->fprobe_registered = true;
    }

    if (new_event) {
        events_.push_back(ev);
        std::lock_guard<std::mutex> g(fmt_mutex_);
        formats_[ev->id] = std::make_shared<const probe_definition>(d);
    }
    ev->probes.push_back(tp.get());
    probes_.push_back(tp.release());
    return 0;
}

void trace_events::free_event(trace_event *ev)
{
    events_.erase(std::remove(events_.begin(), events_.end(), ev), events_.end());
    delete ev; // its filters with it: every probe is unregistered, no handler runs
}

int trace_events::remove(const delete_request &req, unsigned accept)
{
    std::vector<trace_probe *> hit;
    for (trace_probe *p : probes_)
        if (accepts(accept, p->def.kind) && delete_matches(req, p->def))
            hit.push_back(p);
    if (hit.empty())
        return -ENOENT;
    for (trace_probe *p : hit)
        if (p->event->registered)
            return -EBUSY;
    for (trace_probe *p : hit) {
        if (p->kprobe_registered) {
            if (p->def.is_return)
                unregister_kretprobe(&p->hooks.rp);
            else
                unregister_kprobe(&p->hooks.rp.kp);
        }
        if (p->fprobe_registered)
            unregister_fprobe(&p->hooks.fp);
        trace_event *ev = p->event;
        ev->probes.erase(std::remove(ev->probes.begin(), ev->probes.end(), p), ev->probes.end());
        probes_.erase(std::remove(probes_.begin(), probes_.end(), p), probes_.end());
        delete p;
        if (ev->probes.empty())
            free_event(ev);
    }
    return 0;
}

int trace_events::release_all(unsigned accept)
{
    std::lock_guard<std::mutex> g(mutex_);
    for (trace_probe *p : probes_)
        if (accepts(accept, p->def.kind) && p->event->registered)
            return -EBUSY;
    delete_request all; // no group, empty event: every event
    bool any = std::any_of(probes_.begin(), probes_.end(),
                           [&](trace_probe *p) { return accepts(accept, p->def.kind); });
    if (!any)
        return 0;
    return remove(all, accept);
}

std::string trace_events::listing(unsigned accept) const
{
    std::lock_guard<std::mutex> g(mutex_);
    std::string s;
    for (const trace_probe *p : probes_)
        if (accepts(accept, p->def.kind))
            s += p->def.listing() + "\n";
    return s;
}

std::string trace_events::kprobe_profile() const
{
    std::lock_guard<std::mutex> g(mutex_);
    std::string s;
    char line[256];
    for (trace_probe *p : probes_) {
        if (p->def.kind != probe_kind::kprobe)
            continue;
        unsigned long missed = p->hooks.rp.kp.nmissed;
        if (p->def.is_return)
            missed += static_cast<unsigned long>(p->hooks.rp.nmissed);
        std::snprintf(line, sizeof line, "  %-44s %15lu %15lu\n", p->def.event.c_str(),
                      p->nhit.load(std::memory_order_relaxed), missed);
        s += line;
    }
    return s;
}

std::string trace_events::uprobe_profile() const
{
    std::lock_guard<std::mutex> g(mutex_);
    std::string s;
    char line[PATH_MAX + 128];
    for (trace_probe *p : probes_) {
        if (p->def.kind != probe_kind::uprobe)
            continue;
        std::snprintf(line, sizeof line, "  %s %-44s %15lu\n", p->def.place.object.c_str(),
                      p->def.event.c_str(), p->nhit.load(std::memory_order_relaxed));
        s += line;
    }
    return s;
}

std::vector<std::string> trace_events::groups() const
{
    std::lock_guard<std::mutex> g(mutex_);
    std::set<std::string> s;
    for (const trace_event *ev : events_)
        s.insert(ev->group);
    return {s.begin(), s.end()};
}

std::vector<std::string> trace_events::events(std::string_view group) const
{
    std::lock_guard<std::mutex> g(mutex_);
    std::set<std::string> s;
    for (const trace_event *ev : events_)
        if (ev->group == group)
            s.insert(ev->name);
    return {s.begin(), s.end()};
}

bool trace_events::has_group(std::string_view group) const
{
    std::lock_guard<std::mutex> g(mutex_);
    return std::any_of(events_.begin(), events_.end(),
                       [&](const trace_event *ev) { return ev->group == group; });
}

bool trace_events::has_event(std::string_view group, std::string_view event) const
{
    std::lock_guard<std::mutex> g(mutex_);
    return find(group, event) != nullptr;
}

int trace_events::event_id(std::string_view group, std::string_view event) const
{
    std::lock_guard<std::mutex> g(mutex_);
    const trace_event *ev = find(group, event);
    return ev ? ev->id : -ENOENT;
}

std::optional<std::string> trace_events::format(std::string_view group,
                                                std::string_view event) const
{
    std::lock_guard<std::mutex> g(mutex_);
    const trace_event *ev = find(group, event);
    if (!ev)
        return std::nullopt;
    return probe_format_file(ev->probes.front()->def, ev->id);
}

int trace_events::register_locked(trace_event &ev)
{
    if (ev.registered)
        return 0;
    size_t done = 0;
    int err = 0;
    for (; done < ev.probes.size(); done++) {
        trace_probe &tp = *ev.probes[done];
        if (tp.def.kind == probe_kind::fprobe) {
            struct fprobe &fp = tp.hooks.fp;
            fp = {};
            if (tp.def.is_return) {
                fp.exit_handler = fexit_handler;
                if (!tp.def.entry_args.empty()) {
                    fp.entry_handler = fexit_entry_handler;
                    fp.entry_data_size = tp.def.entry_args.size();
                }
            } else {
                fp.entry_handler = fentry_handler;
            }
            err = register_fprobe(&fp, tp.symbol.c_str(), nullptr);
            if (err)
                break;
            tp.fprobe_registered = true;
        } else {
            err = enable_kprobe(&tp.hooks.rp.kp);
            if (err)
                break;
        }
    }
    if (err) {
        for (size_t i = 0; i < done; i++) {
            trace_probe &tp = *ev.probes[i];
            if (tp.fprobe_registered) {
                unregister_fprobe(&tp.hooks.fp);
                tp.fprobe_registered = false;
            } else if (tp.kprobe_registered) {
                disable_kprobe(&tp.hooks.rp.kp);
            }
        }
        return err;
    }
    ev.registered = true;
    return 0;
}

void trace_events::unregister_locked(trace_event &ev)
{
    if (!ev.registered)
        return;
    for (trace_probe *tp : ev.probes) {
        if (tp->fprobe_registered) {
            unregister_fprobe(&tp->hooks.fp);
            tp->fprobe_registered = false;
        } else if (tp->kprobe_registered) {
            disable_kprobe(&tp->hooks.rp.kp);
        }
    }
    ev.registered = false;
}

bool trace_events::is_registered(const trace_event &ev) const { return ev.registered; }

int trace_events::enable_locked(trace_event &ev, bool on, unsigned array)
{
    if (array >= TRACE_ARRAY_MAX)
        return -EINVAL;
    (void)trace_array_top(); // the handlers find the arrays by id: the top one must exist
    const uint64_t bit = uint64_t{1} << array;
    if (on) {
        if (ev.enabled_mask & bit)
            return 0;
        if (int err = register_locked(ev))
            return err;
        ev.enabled_mask |= bit;
        ev.record_mask.fetch_or(bit, std::memory_order_release);
        return 0;
    }
    if (!(ev.enabled_mask & bit))
        return 0;
    ev.enabled_mask &= ~bit;
    if (!(ev.soft_mask & bit))
        ev.record_mask.fetch_and(~bit, std::memory_order_release);
    if (!ev.enabled_mask && !ev.soft_mask)
        unregister_locked(ev);
    return 0;
}

int trace_events::set_enabled(std::string_view group, std::string_view event, bool on,
                              unsigned array)
{
    std::lock_guard<std::mutex> g(mutex_);
    trace_event *ev = find(group, event);
    if (!ev)
        return -ENOENT;
    return enable_locked(*ev, on, array);
}

int trace_events::enabled(std::string_view group, std::string_view event, unsigned array) const
{
    std::lock_guard<std::mutex> g(mutex_);
    const trace_event *ev = find(group, event);
    if (!ev)
        return -ENOENT;
    return (ev->enabled_mask >> array) & 1 ? 1 : 0;
}

std::string trace_events::enable_text(std::string_view group, std::string_view event,
                                      unsigned array) const
{
    std::lock_guard<std::mutex> g(mutex_);
    const trace_event *ev = find(group, event);
    if (!ev)
        return "";
    const uint64_t bit = uint64_t{1} << array;
    std::string s = (ev->record_mask.load(std::memory_order_relaxed) & bit) ? "1" : "0";
    if (ev->soft_mask & bit)
        s += '*';
    return s + "\n";
}

int trace_events::set_group_enabled(std::string_view group, bool on, unsigned array)
{
    std::lock_guard<std::mutex> g(mutex_);
    int ret = 0;
    for (trace_event *ev : events_) {
        if (!group.empty() && ev->group != group)
            continue;
        if (int r = enable_locked(*ev, on, array); r && !ret)
            ret = r;
    }
    return ret;
}

char trace_events::group_enabled(std::string_view group, unsigned array) const
{
    std::lock_guard<std::mutex> g(mutex_);
    unsigned set = 0;
    for (const trace_event *ev : events_)
        if (group.empty() || ev->group == group)
            set |= 1u << ((ev->enabled_mask >> array) & 1);
    static constexpr char set_to_char[4] = {'?', '0', '1', 'X'};
    return set_to_char[set];
}

std::vector<std::string> trace_events::enabled_events(unsigned array) const
{
    std::lock_guard<std::mutex> g(mutex_);
    std::vector<std::string> v;
    for (const trace_event *ev : events_)
        if ((ev->enabled_mask >> array) & 1)
            v.push_back(ev->group + ":" + ev->name);
    return v;
}

std::vector<std::string> trace_events::all_events() const
{
    std::lock_guard<std::mutex> g(mutex_);
    std::vector<std::string> v;
    for (const trace_event *ev : events_)
        v.push_back(ev->group + ":" + ev->name);
    std::sort(v.begin(), v.end());
    return v;
}

int trace_events::set_event_matching(std::string_view spec, bool on, unsigned array)
{
    // The kernel's ftrace_set_clr_event(): "sys:event", "sys:*", "*:event" or a bare word,
    // which names an event or a whole system; "*" is anything.
    std::string_view sys, evname, any;
    if (size_t c = spec.find(':'); c != std::string_view::npos) {
        sys = spec.substr(0, c);
        evname = spec.substr(c + 1);
    } else {
        any = spec;
    }
    auto is_any = [](std::string_view x) { return x.empty() || x == "*"; };
    std::lock_guard<std::mutex> g(mutex_);
    int ret = -EINVAL;
    for (trace_event *ev : events_) {
        if (!any.empty()) {
            if (!is_any(any) && any != ev->name && any != ev->group)
                continue;
        } else {
            if (!is_any(sys) && sys != ev->group)
                continue;
            if (!is_any(evname) && evname != ev->name)
                continue;
        }
        int r = enable_locked(*ev, on, array);
        if (ret == -EINVAL || (r && !ret))
            ret = r;
    }
    return ret;
}

int trace_events::soft_mode(std::string_view group, std::string_view event, unsigned array,
                            bool ref)
{
    std::lock_guard<std::mutex> g(mutex_);
    trace_event *ev = find(group, event);
    if (!ev)
        return -ENOENT;
    const uint64_t bit = uint64_t{1} << array;
    int &n = ev->soft_refs[array];
    if (ref) {
        if (n++ == 0) {
            if (int err = register_locked(*ev)) {
                n--;
                return err;
            }
            ev->soft_mask |= bit;
            if (!(ev->enabled_mask & bit))
                ev->record_mask.fetch_and(~bit, std::memory_order_release);
        }
        return 0;
    }
    if (n == 0)
        return 0;
    if (--n == 0) {
        ev->soft_mask &= ~bit;
        if (!(ev->enabled_mask & bit))
            ev->record_mask.fetch_and(~bit, std::memory_order_release);
        if (!ev->enabled_mask && !ev->soft_mask)
            unregister_locked(*ev);
    }
    return 0;
}

trace_event *trace_events::find_event(std::string_view group, std::string_view event) const
{
    std::lock_guard<std::mutex> g(mutex_);
    return find(group, event);
}

DPROBE_NOPROBE void trace_events::soft_enable(trace_event *ev, unsigned array, bool on) noexcept
{
    const uint64_t bit = uint64_t{1} << array;
    if (on)
        ev->record_mask.fetch_or(bit, std::memory_order_release);
    else
        ev->record_mask.fetch_and(~bit, std::memory_order_release);
}

DPROBE_NOPROBE bool trace_events::soft_enabled(const trace_event *ev, unsigned array) noexcept
{
    return (ev->record_mask.load(std::memory_order_acquire) >> array) & 1;
}

void trace_events::remove_array(unsigned array)
{
    std::lock_guard<std::mutex> g(mutex_);
    const uint64_t bit = uint64_t{1} << array;
    for (trace_event *ev : events_) {
        ev->enabled_mask &= ~bit;
        ev->soft_mask &= ~bit;
        ev->soft_refs.erase(array);
        ev->record_mask.fetch_and(~bit, std::memory_order_release);
        ev->filter[array].store(nullptr, std::memory_order_release);
        ev->filter_file.erase(array);
        if (!ev->enabled_mask && !ev->soft_mask)
            unregister_locked(*ev);
    }
    const std::string prefix = std::to_string(array) + ":";
    std::erase_if(group_filter_text_, [&](const auto &kv) { return kv.first.starts_with(prefix); });
}

int trace_events::set_filter(std::string_view group, std::string_view event,
                             std::string_view text, unsigned array)
{
    std::lock_guard<std::mutex> g(mutex_);
    trace_event *ev = find(group, event);
    if (!ev || array >= TRACE_ARRAY_MAX)
        return -ENOENT;
    std::string_view s = strip(text);
    if (s == "0") {
        ev->filter[array].store(nullptr, std::memory_order_release);
        ev->filter_file.erase(array);
        return 0;
    }
    filter_parse_error pe;
    auto f = event_filter::compile(s, ev->fields, pe);
    if (!f) {
        // The kernel disables the event's filter and shows the error in the file.
        ev->filter[array].store(nullptr, std::memory_order_release);
        ev->filter_file[array] = filter_error_text(s, pe);
        bool positioned = pe.err != filter_err::NONE && pe.err != filter_err::ERRNO;
        errors_.append_message(filter_err_loc, filter_err_text(positioned ? pe.err
                                                                           : filter_err::ERRNO),
                               std::string(s), positioned ? size_t(pe.pos) : 0);
        return -EINVAL;
    }
    ev->filter_file[array] = std::string(s) + "\n";
    ev->filter[array].store(f.get(), std::memory_order_release);
    ev->filters.push_back(std::move(f));
    return 0;
}

std::optional<std::string> trace_events::filter_text(std::string_view group,
                                                     std::string_view event,
                                                     unsigned array) const
{
    std::lock_guard<std::mutex> g(mutex_);
    const trace_event *ev = find(group, event);
    if (!ev)
        return std::nullopt;
    return ev->filter_text(array);
}

int trace_events::set_group_filter(std::string_view group, std::string_view text,
                                   unsigned array)
{
    std::lock_guard<std::mutex> g(mutex_);
    if (array >= TRACE_ARRAY_MAX)
        return -ENOENT;
    std::string_view s = strip(text);
    std::string key = std::to_string(array) + ":" + std::string(group);
    std::vector<trace_event *> evs;
    for (trace_event *ev : events_)
        if (ev->group == group)
            evs.push_back(ev);
    if (evs.empty())
        return -ENOENT;
    if (s == "0") {
        for (trace_event *ev : evs) {
            ev->filter[array].store(nullptr, std::memory_order_release);
            ev->filter_file.erase(array);
        }
        group_filter_text_.erase(key);
        return 0;
    }
    bool any = false;
    filter_parse_error sub{filter_err::BAD_SUBSYS_FILTER, 0};
    for (trace_event *ev : evs) {
        filter_parse_error pe;
        auto f = event_filter::compile(s, ev->fields, pe);
        if (!f) {
            ev->filter[array].store(nullptr, std::memory_order_release);
            ev->filter_file[array] = filter_error_text(s, sub);
            continue;
        }
        any = true;
        ev->filter_file[array] = std::string(s) + "\n";
        ev->filter[array].store(f.get(), std::memory_order_release);
        ev->filters.push_back(std::move(f));
    }
    if (!any) {
        group_filter_text_[key] = filter_error_text(s, sub);
        errors_.append_message(filter_err_loc, filter_err_text(filter_err::BAD_SUBSYS_FILTER),
                               std::string(s), 0);
        return -EINVAL;
    }
    group_filter_text_.erase(key);
    return 0;
}

std::string trace_events::group_filter_text(std::string_view group, unsigned array) const
{
    std::lock_guard<std::mutex> g(mutex_);
    auto it = group_filter_text_.find(std::to_string(array) + ":" + std::string(group));
    return it != group_filter_text_.end() ? it->second : default_sys_filter_message;
}

std::string trace_events::format_record(const void *payload, size_t len) const
{
    trace_entry_header h{};
    if (len < sizeof(h))
        return "Unknown type 0";
    std::memcpy(&h, payload, sizeof(h));
    std::shared_ptr<const probe_definition> def;
    {
        std::lock_guard<std::mutex> g(fmt_mutex_);
        auto it = formats_.find(h.type);
        if (it != formats_.end())
            def = it->second;
    }
    if (!def)
        return "Unknown type " + std::to_string(h.type);
    return format_probe_record(*def, static_cast<const uint8_t *>(payload), len, symbolize);
}

size_t trace_events::payload_fn(char *buf, size_t len, const void *payload, size_t payload_len,
                                void *)
{
    std::string s = instance().format_record(payload, payload_len);
    if (len) {
        size_t n = std::min(s.size(), len - 1);
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return s.size();
}

size_t trace_events::nr_events() const
{
    std::lock_guard<std::mutex> g(mutex_);
    return events_.size();
}

} // namespace dprobe
