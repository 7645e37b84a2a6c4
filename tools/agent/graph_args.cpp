// Arguments and return values in the function graph (see graph_args.h).
#include "tools/agent/graph_args.h"

#include "core/glob.h"
#include "core/symbols.h"
#include "tools/agent/graph_args_record.h"
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

namespace
{

// The pt_regs fields that hold the call's values at a light entry and at a light return
// (the argument and return registers, the stack and frame pointers; the other callee-saved
// registers are stored on the full path only: ptrace.h, struct ftrace_regs).
bool light_reg(uint32_t off)
{
    for (uint32_t r : {offsetof(pt_regs, di), offsetof(pt_regs, si), offsetof(pt_regs, dx),
                       offsetof(pt_regs, cx), offsetof(pt_regs, r8), offsetof(pt_regs, r9),
                       offsetof(pt_regs, ax), offsetof(pt_regs, sp), offsetof(pt_regs, bp)})
        if (off == r) return true;
    return false;
}

// SPEC's fetch programs as light stores (graph_args_record.h), from their compiled form:
// false when one of them needs more.
bool compile_light(graph_arg_spec &spec)
{
    if (!spec.fast) return false;
    spec.stores.clear();
    for (const fetch_fast_store &f : spec.fast_args) {
        graph_value_store s{};
        if (f.size != 1 && f.size != 2 && f.size != 4 && f.size != 8) return false;
        s.size = f.size;
        s.dest = static_cast<uint16_t>(f.dest - spec.args_off);
        if (f.src == fetch_fast_store::IMM) {
            if (f.mem) return false;
            s.kind = graph_value_store::IMM;
            s.imm = f.imm;
        } else if (f.src == fetch_fast_store::REGS && light_reg(f.param)) {
            s.kind = f.mem ? graph_value_store::MEM : graph_value_store::REG;
            s.reg = static_cast<uint16_t>(f.param);
            s.imm = static_cast<uint64_t>(f.mem_off);
        } else {
            return false;
        }
        spec.stores.push_back(s);
    }
    return true;
}

// The full fprobe's record of SPEC's values: through the compiled stores, or the fetch
// interpreter (strings, arrays, ...). The values are stored where the probe record keeps
// them, from a record start ARGS_OFF bytes before them (outside the reservation: nothing is
// stored below ARGS_OFF), so that __data_loc offsets count as in the probe record.
DPROBE_NOPROBE void write_full(const graph_arg_spec &spec, int32_t depth, unsigned long func,
                               const pt_regs *regs) noexcept
{
    fetch_context ctx;
    ctx.regs = regs;
    size_t len = spec.fixed_len;
    if (spec.has_dyn) len = (len + trace_args_dynamic_size(spec.def.args, ctx) + 3) & ~size_t{3};
    if (len > k_rb_max_payload) { // strings longer than a page holds: the call without them
        write_graph_event(spec.exit_flag ? tracefile::FUNCGRAPH_EXIT_ID
                                         : tracefile::FUNCGRAPH_ENTRY_ID,
                          depth, 0, func);
        return;
    }
    uint8_t *values;
    void *ev = graph_values_begin(spec, len, depth, func, &values);
    if (!ev) return;
    uint8_t *rec = values - spec.args_off;
    if (spec.fast)
        fetch_fast_run(spec.fast_args, ctx, rec);
    else
        store_trace_args(spec.def.args, spec.def.args_size, ctx, rec, spec.args_off,
                         spec.args_off + len - FTRACE_GRAPH_VALUES_OFF);
    ring_buffer_commit(ev);
}

struct fprobe light_probe = {}, full_probe = {};
bool light_registered = false, full_registered = false;

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
    explicit spec_builder(graph_args_state &s) : s_(s) {}

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
        spec->exit_flag = ret ? FTRACE_GRAPH_VALUES_FL_EXIT : 0;
        const probe_event_layout lay = probe_layout(spec->def);
        spec->args_off = static_cast<uint32_t>(lay.args_off);
        if (lay.args_off !=
            (ret ? FTRACE_GRAPH_VALUES_EXIT_ARGS_OFF : FTRACE_GRAPH_VALUES_ENTRY_ARGS_OFF)) {
            *why = "a record layout the graph's records cannot hold";
            return nullptr;
        }
        // The graph record's head, then the values as the probe record has them.
        spec->fixed_len = static_cast<uint32_t>(
            (FTRACE_GRAPH_VALUES_OFF + lay.fixed_size - lay.args_off + 3) & ~size_t{3});
        if (spec->fixed_len > k_rb_max_payload) {
            *why = "too many arguments for one record";
            return nullptr;
        }
        spec->has_dyn = spec->def.has_dynamic_args();
        spec->fast =
            !spec->has_dyn && fetch_fast_compile(spec->def.args, spec->args_off, spec->fast_args);
        spec->light = compile_light(*spec);
        spec->payload = tracefile::event_payload(
            spec->id, std::string(tracefile::GRAPH_ARGS_GROUP) + "/" + spec->def.event,
            spec->def.listing(), probe_format_file(spec->def, spec->id),
            tracefile::EVENT_FL_GRAPH_VALUES);
        const graph_arg_spec *p = spec.get();
        by_format_.emplace(key, p);
        s_.specs.push_back(std::move(spec));
        return p;
    }

  private:
    graph_args_state &s_;
    std::map<std::string, const graph_arg_spec *> by_format_;
    uint16_t next_id_ = tracefile::GRAPH_ARGS_FIRST_ID;
};

void insert(graph_args_state &s, const func_slot &f)
{
    for (size_t i = graph_args_slot_of(f.ip, s.mask);; i = (i + 1) & s.mask)
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
    auto st = std::make_unique<graph_args_state>();
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
    graph_args_table = st.release();
    // The light fprobe takes the functions whose values are all light stores, the full one
    // the others (graph_args_record.h).
    std::vector<unsigned long> light_ips, full_ips;
    for (const func_slot &f : hooked) {
        const bool light = (!f.entry || f.entry->light) && (!f.exit || f.exit->light);
        (light ? light_ips : full_ips).push_back(f.ip);
    }
    const auto reg = [&](struct fprobe &fp, auto entry, auto exit, std::vector<unsigned long> &v,
                         bool &registered) {
        if (v.empty()) return 0;
        fp = {};
        fp.entry_handler = entry;
        fp.exit_handler = exit;
        fp.unwound_handler = graph_args_unwound;
        fp.entry_data_size = sizeof(graph_args_data);
        const int r = register_fprobe_ips(&fp, v.data(), static_cast<int>(v.size()));
        if (r < 0) {
            *err = "register_fprobe_ips (arguments): " + std::string(std::strerror(-r));
            fp = {};
            return r;
        }
        registered = true;
        return 0;
    };
    int r = reg(light_probe, graph_args_light_entry, graph_args_light_exit, light_ips,
                light_registered);
    if (!r)
        r = reg(full_probe, graph_args_entry<write_full>, graph_args_exit<write_full>, full_ips,
                full_registered);
    if (r < 0) {
        const bool any = light_registered;
        graph_args_stop();
        if (!any) { // nothing of it can run: the layouts go
            delete graph_args_table;
            graph_args_table = nullptr;
        }
        return r;
    }
    ips = std::move(plain);
    return static_cast<int>(hooked.size());
}

void graph_args_stop()
{
    for (auto [fp, registered] :
         {std::pair{&light_probe, &light_registered}, std::pair{&full_probe, &full_registered}}) {
        if (!*registered) continue;
        unregister_fprobe(fp);
        *registered = false;
        *fp = {};
    }
    // The layouts stay: a call hooked before may still return through the shadow stack
    // with a pointer to its return value's layout (as funcgraph.cpp keeps its kretprobes).
}

std::vector<std::pair<uint32_t, std::string>> graph_args_events()
{
    std::vector<std::pair<uint32_t, std::string>> out;
    if (graph_args_table)
        for (const auto &s : graph_args_table->specs)
            out.emplace_back(s->id, s->payload);
    return out;
}

} // namespace dprobe::agent
