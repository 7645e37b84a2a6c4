// Arguments and return values in the function graph (see graph_args.h).
#include "tools/agent/graph_args.h"

#include "core/glob.h"
#include "core/symbols.h"
#include "tools/agent/funcgraph_record.h"
#include "tracefs/btf_lookup.h"
#include "tracefs/event_format.h"
#include "tracefs/fetch_arg.h"
#include "tracefs/fetch_fast.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_events.h"

#include <dprobe/fprobe.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <cstdio>
#include <map>
#include <memory>
#include <unistd.h>

namespace dprobe::agent
{

// One record layout: the compiled fetch args of the functions that share it.
struct graph_arg_spec {
    probe_definition def;
    uint16_t id = 0;
    uint32_t fixed_size = 0;
    bool has_dyn = false;
    bool fast = false;
    std::vector<fetch_fast_store> fast_args;
    std::string payload; // its EVENT chunk
};

namespace
{

// A hooked function's layouts, found by the handler's ip.
struct func_slot {
    unsigned long ip = 0; // 0: empty
    const graph_arg_spec *entry = nullptr, *exit = nullptr;
};

// Everything the handlers read; built before the fprobe is registered, freed after it is
// unregistered (and kept, never freed, when a call may still be on its way back).
struct args_state {
    std::vector<std::unique_ptr<graph_arg_spec>> specs;
    std::vector<func_slot> table; // open addressing, a power of two
    size_t mask = 0;
};
args_state *g_state = nullptr;
struct fprobe g_args_probe = {};
bool g_registered = false;

struct args_data {
    graph_data g;
    const graph_arg_spec *exit;
};
static_assert(sizeof(args_data) <= MAX_FPROBE_DATA_SIZE);

DPROBE_NOPROBE inline size_t slot_of(unsigned long ip, size_t mask) noexcept
{
    return ((ip >> 4) * 0x9E3779B97F4A7C15ull >> 32) & mask;
}

DPROBE_NOPROBE const func_slot *find_slot(unsigned long ip) noexcept
{
    const args_state *s = g_state;
    for (size_t i = slot_of(ip, s->mask);; i = (i + 1) & s->mask) {
        const func_slot &f = s->table[i];
        if (f.ip == ip) return &f;
        if (!f.ip) return nullptr;
    }
}

// The record of SPEC's values, right after the graph's own record: at the function's entry
// (its arguments, read from REGS as the call left them) or at its return (its value).
DPROBE_NOPROBE void write_values(const graph_arg_spec &spec, const pt_regs *regs,
                                 unsigned long func) noexcept
{
    fetch_context ctx;
    ctx.regs = regs;
    size_t len = spec.fixed_size;
    if (spec.has_dyn) len += trace_args_dynamic_size(spec.def.args, ctx);
    void *p = ring_buffer_reserve(len);
    if (!p) return;
    auto *rec = static_cast<uint8_t *>(p);
    if (spec.fast) {
        probe_record_init(rec, spec.def, spec.id, 0, func, 0);
        fetch_fast_run(spec.fast_args, ctx, rec);
    } else {
        probe_record_store(rec, len, spec.def, ctx, spec.id, 0, func, 0);
    }
    ring_buffer_commit(p);
}

DPROBE_NOPROBE int args_entry(struct fprobe *, unsigned long ip, unsigned long,
                              struct ftrace_regs *fregs, void *data) noexcept
{
    if (t_depth >= g_max_depth) return 1; // no exit wanted either
    auto *ad = static_cast<args_data *>(data);
    const int32_t depth = t_depth++;
    ad->g.depth = depth;
    ad->g.func = ip;
    const func_slot *f = find_slot(ip);
    ad->exit = f ? f->exit : nullptr;
    write_graph_event(tracefile::FUNCGRAPH_ENTRY_ID, depth, 0, ip);
    if (f && f->entry) write_values(*f->entry, &fregs->regs, ip);
    return 0;
}

DPROBE_NOPROBE void args_exit(struct fprobe *, unsigned long ip, unsigned long,
                              struct ftrace_regs *fregs, void *data) noexcept
{
    const auto *ad = static_cast<const args_data *>(data);
    write_graph_exit(&ad->g, 0);
    if (ad->exit) write_values(*ad->exit, &fregs->regs, ad->g.func);
}

DPROBE_NOPROBE void args_unwound(struct fprobe *, void *data) noexcept
{
    // No return value: the call did not return.
    write_graph_exit(&static_cast<const args_data *>(data)->g, tracefile::FUNCGRAPH_FL_UNWOUND);
}

// The rule of RULES (GLOB ARGS lines) that names NAME first: its ARGS, or nullptr.
const std::string *rule_for(const std::vector<std::pair<std::string, std::string>> &rules,
                            const std::string &name)
{
    for (const auto &[glob, args] : rules)
        if (glob_match(glob, name)) return &args;
    return nullptr;
}

std::vector<std::pair<std::string, std::string>> split_rules(const std::vector<std::string> &v)
{
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string &l : v) {
        const size_t sp = l.find(' ');
        out.emplace_back(l.substr(0, sp), sp == std::string::npos ? "" : l.substr(sp + 1));
    }
    return out;
}

class spec_builder
{
  public:
    explicit spec_builder(args_state &s) : s_(s) {}

    // The layout of ARGS on the function at ADDR (its entry, or its return: RET); nullptr
    // with *WHY when the parser refuses them there.
    const graph_arg_spec *build(uintptr_t addr, bool ret, const std::string &args, std::string *why)
    {
        char place[32];
        std::snprintf(place, sizeof place, "0x%" PRIxPTR, addr);
        const std::string line = std::string(ret ? "r:" : "p:") + tracefile::GRAPH_ARGS_GROUP +
                                 "/v " + place + " " + args;
        parse_options po;
        po.check_files = false;
        po.func_info = func_proto_of_place;
        po.is_func_entry = [](const probe_place &) { return true; };
        auto spec = std::make_unique<graph_arg_spec>();
        const auto argv = argv_split(line);
        probe_error e = parse_probe_definition(argv, po, spec->def);
        if (!e) {
            fetch_resolver resolver;
            resolver.symbol = [](std::string_view name) -> std::optional<uintptr_t> {
                auto &ks = kallsyms::instance();
                auto hits = ks.lookup_data(name);
                if (hits.empty()) hits = ks.lookup_func(name);
                if (hits.empty()) return std::nullopt;
                return hits.front().sym->addr;
            };
            e = resolve_fetch_args(spec->def.args, resolver, 2);
        }
        if (e) {
            *why = e.detail.empty() ? probe_err_text(e.err) : e.detail;
            return nullptr;
        }
        if (spec->def.args.empty()) {
            *why = "no argument";
            return nullptr;
        }
        if (!spec->def.entry_args.empty()) {
            *why = "an entry argument at the return (-A records the entry's)";
            return nullptr;
        }
        // One layout per distinct record format (its text without an id).
        const std::string key = std::string(ret ? "r" : "p") + probe_format_file(spec->def, 0);
        if (auto it = by_format_.find(key); it != by_format_.end()) return it->second;
        if (next_id_ > tracefile::GRAPH_ARGS_LAST_ID) {
            *why = "too many different argument lists";
            return nullptr;
        }
        spec->id = next_id_++;
        spec->def.event = std::string(ret ? "retval" : "args") + std::to_string(spec->id);
        spec->def.group = tracefile::GRAPH_ARGS_GROUP;
        spec->fixed_size = static_cast<uint32_t>(probe_layout(spec->def).fixed_size);
        spec->has_dyn = spec->def.has_dynamic_args();
        spec->fast =
            !spec->has_dyn &&
            fetch_fast_compile(spec->def.args, probe_layout(spec->def).args_off, spec->fast_args);
        spec->payload = tracefile::event_payload(
            spec->id, std::string(tracefile::GRAPH_ARGS_GROUP) + "/" + spec->def.event,
            spec->def.listing(), probe_format_file(spec->def, spec->id));
        // Read in the live trace files too (not only by `dprobe report`).
        trace_events::instance().register_record_format(spec->id, spec->def);
        const graph_arg_spec *p = spec.get();
        by_format_.emplace(key, p);
        s_.specs.push_back(std::move(spec));
        return p;
    }

  private:
    args_state &s_;
    std::map<std::string, const graph_arg_spec *> by_format_;
    uint16_t next_id_ = tracefile::GRAPH_ARGS_FIRST_ID;
};

void insert(args_state &s, const func_slot &f)
{
    for (size_t i = slot_of(f.ip, s.mask);; i = (i + 1) & s.mask)
        if (!s.table[i].ip || s.table[i].ip == f.ip) {
            s.table[i] = f;
            return;
        }
}

} // namespace

int graph_args_start(const graph_args_config &c, std::vector<unsigned long> &ips, std::string *warn,
                     std::string *err)
{
    if (c.empty() || ips.empty()) return 0;
    auto st = std::make_unique<args_state>();
    spec_builder build(*st);
    const auto arg_rules = split_rules(c.args), ret_rules = split_rules(c.retvals);
    std::vector<func_slot> hooked;
    std::vector<unsigned long> plain;
    std::vector<std::string> refused;
    auto &ks = kallsyms::instance();
    for (unsigned long ip : ips) {
        auto h = ks.lookup_addr(ip);
        if (!h) {
            plain.push_back(ip);
            continue;
        }
        const std::string &name = h->sym->name;
        func_slot f;
        f.ip = ip;
        for (int ret = 0; ret < 2; ret++) {
            const std::string *args = rule_for(ret ? ret_rules : arg_rules, name);
            const bool explicit_rule = args != nullptr;
            const std::string automatic = ret ? "retval=$retval" : "$arg*";
            if (!args && c.auto_args) args = &automatic;
            if (!args) continue;
            std::string why;
            const graph_arg_spec *spec = build.build(h->sym->addr, ret, *args, &why);
            if (!spec && explicit_rule)
                refused.push_back(name + (ret ? " (return value)" : "") + ": " + why);
            (ret ? f.exit : f.entry) = spec;
        }
        if (f.entry || f.exit)
            hooked.push_back(f);
        else
            plain.push_back(ip);
    }
    for (size_t i = 0; i < refused.size() && i < 8; i++)
        *warn += (warn->empty() ? "" : "; ") + refused[i];
    if (refused.size() > 8)
        *warn += "; and " + std::to_string(refused.size() - 8) + " more without their arguments";
    if (hooked.empty()) return 0;
    size_t cap = 16;
    while (cap < hooked.size() * 2)
        cap <<= 1;
    st->table.resize(cap);
    st->mask = cap - 1;
    std::vector<unsigned long> hooked_ips;
    for (const func_slot &f : hooked) {
        insert(*st, f);
        hooked_ips.push_back(f.ip);
        // The handler may be given the function's address rather than its site's.
        if (auto h = ks.lookup_addr(f.ip); h && h->sym->addr != f.ip) {
            func_slot alias = f;
            alias.ip = h->sym->addr;
            insert(*st, alias);
        }
    }
    g_state = st.release();
    g_args_probe = {};
    g_args_probe.entry_handler = args_entry;
    g_args_probe.exit_handler = args_exit;
    g_args_probe.unwound_handler = args_unwound;
    g_args_probe.entry_data_size = sizeof(args_data);
    const int r =
        register_fprobe_ips(&g_args_probe, hooked_ips.data(), static_cast<int>(hooked_ips.size()));
    if (r < 0) {
        *err = "register_fprobe_ips (arguments): " + std::string(std::strerror(-r));
        g_args_probe = {};
        delete g_state;
        g_state = nullptr;
        return r;
    }
    g_registered = true;
    ips = std::move(plain);
    return static_cast<int>(hooked.size());
}

void graph_args_stop()
{
    if (!g_registered) return;
    unregister_fprobe(&g_args_probe);
    g_registered = false;
    g_args_probe = {};
    // The layouts stay: a call hooked before may still return through the shadow stack
    // with a pointer to its return value's layout (as funcgraph.cpp keeps its kretprobes).
}

std::vector<std::pair<uint32_t, std::string>> graph_args_events()
{
    std::vector<std::pair<uint32_t, std::string>> out;
    if (g_state)
        for (const auto &s : g_state->specs)
            out.emplace_back(s->id, s->payload);
    return out;
}

} // namespace dprobe::agent
