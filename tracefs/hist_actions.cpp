// hist actions (the kernel's trace_events_hist.c: parse_actions, onmatch_parse,
// track_data_parse, action_parse, parse_action_params, create_actions, trace_action_create,
// track_data_create, action_create, the action functions and their printing):
//
//   onmatch(SYS.EVENT).trace(SYNTH,P,...)   onmatch(SYS.EVENT).SYNTH(P,...)
//   onmax($VAR).save(FIELD,...)  onmax($VAR).snapshot()  onmax($VAR).trace(SYNTH,P,...)
//   onchange($VAR).save(...)     onchange($VAR).snapshot()  onchange($VAR).trace(...)
//
// A param is $VAR (of this trigger, of the onmatch() event's hist, or SYS.EVENT.$VAR) or a
// field: of this trigger's event, for which a hidden variable is made (create_field_var), or
// else of the onmatch() event (or SYS.EVENT.FIELD): a hist trigger is added on that event,
// with the keys of one of its hist triggers whose keys match this one's and that one's
// filter, holding "synthetic_FIELD=FIELD" (create_field_var_hist); it goes when this trigger
// does (unregister_field_var_hists).
//
// run_actions is hot path: it reads the hit's resolved references and writes a synthetic
// event, an element's tracking variable, or the snapshot's triggering value (under a
// try-flag: a concurrent update is skipped rather than waited for).
#include "tracefs/trace_events_hist.h"

#include "core/compiler.h"
#include "tracefs/trace_events_synth.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

constexpr size_t comm_len = 16;

bool has_prefix(std::string_view s, std::string_view p)
{
    return s.substr(0, p.size()) == p;
}

std::string_view strip(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
        s.remove_suffix(1);
    return s;
}

} // namespace

hist_trigger_data::~hist_trigger_data()
{
    remove_hist_vars();
    for (hist_action &a : actions_)
        if (a.synth && hist_environment.synth_put) hist_environment.synth_put(a.synth);
}

// ---- parsing ----

// A parse step with the trigger's error position rule.
struct hist_parser {
    hist_trigger_data &hd;
    hist_error &err;
    int fail(hist_err e, unsigned pos, int errnum = EINVAL)
    {
        // What was logged on the way (err.before) stays ahead of it.
        hist_error r{errnum, e, pos};
        r.before = std::move(err.before);
        err = std::move(r);
        return -errnum;
    }
    int fail_at(hist_err e, std::string_view s) { return fail(e, hd.errpos(s)); }

    // parse_action_params()
    int params(std::string_view ps, hist_action &a)
    {
        bool first = true;
        for (;;) {
            if (a.params.size() >= SYNTH_FIELDS_MAX) return fail(hist_err::TOO_MANY_PARAMS, 0);
            size_t comma = ps.find(',');
            std::string_view p = strip(ps.substr(0, comma));
            if (p.size() < 2) return fail_at(hist_err::INVALID_PARAM, p);
            if (first && a.use_trace_keyword)
                a.synth_event_name = std::string(p);
            else
                a.params.emplace_back(p);
            first = false;
            if (comma == std::string_view::npos) return 0;
            ps = ps.substr(comma + 1);
        }
    }

    // action_parse(): STR is what follows the handler's ')': ".NAME(PARAMS)".
    int action(std::string_view str, hist_action &a)
    {
        size_t dot = str.find('.');
        if (dot == std::string_view::npos) return fail(hist_err::ACTION_NOT_FOUND, 0);
        str = str.substr(dot + 1);
        size_t paren = str.find('(');
        if (paren == std::string_view::npos) return fail(hist_err::ACTION_NOT_FOUND, 0);
        std::string_view name = str.substr(0, paren);
        std::string_view rest = str.substr(paren + 1);
        size_t close = rest.find(')');
        std::string_view ps = rest.substr(0, close);
        const bool onmatch = a.handler == hist_action::handler_id::ONMATCH;
        if (has_prefix(name, "save")) {
            if (int r = params(ps, a)) return r;
            if (onmatch) return fail_at(hist_err::ACTION_MISMATCH, name);
            a.action = hist_action::action_id::SAVE;
        } else if (has_prefix(name, "snapshot")) {
            if (close == std::string_view::npos) return fail_at(hist_err::NO_CLOSING_PAREN, ps);
            if (onmatch) return fail_at(hist_err::ACTION_MISMATCH, name);
            a.action = hist_action::action_id::SNAPSHOT;
        } else {
            if (has_prefix(name, "trace")) a.use_trace_keyword = true;
            if (int r = params(ps, a)) return r;
            a.action = hist_action::action_id::TRACE;
        }
        a.action_name = std::string(name);
        return 0;
    }

    int onmatch(std::string_view str, hist_action &a)
    {
        size_t close = str.find(')');
        std::string_view match = str.substr(0, close);
        if (close == std::string_view::npos) return fail_at(hist_err::NO_CLOSING_PAREN, match);
        size_t dot = match.find('.');
        if (dot == std::string_view::npos) return fail_at(hist_err::SUBSYS_NOT_FOUND, match);
        std::string_view sys = match.substr(0, dot), ev = match.substr(dot + 1);
        if (hd.ev_.event_exists && !hd.ev_.event_exists(sys, ev))
            return fail_at(hist_err::INVALID_SUBSYS_EVENT, ev);
        a.match_system = std::string(sys);
        a.match_event = std::string(ev);
        return action(str.substr(close + 1), a);
    }

    int track(std::string_view str, hist_action &a)
    {
        size_t close = str.find(')');
        if (close == std::string_view::npos) return fail(hist_err::NONE, 0);
        a.var_str = std::string(str.substr(0, close));
        return action(str.substr(close + 1), a);
    }
};

int hist_trigger_data::parse_actions(hist_error &err)
{
    hist_parser p{*this, err};
    for (const std::string &s : action_strs_) {
        hist_action a;
        int r;
        if (has_prefix(s, "onmatch(")) {
            a.handler = hist_action::handler_id::ONMATCH;
            r = p.onmatch(std::string_view(s).substr(8), a);
        } else if (has_prefix(s, "onmax(")) {
            a.handler = hist_action::handler_id::ONMAX;
            r = p.track(std::string_view(s).substr(6), a);
        } else {
            a.handler = hist_action::handler_id::ONCHANGE;
            r = p.track(std::string_view(s).substr(9), a);
        }
        if (r) return r;
        actions_.push_back(std::move(a));
    }
    return 0;
}

// ---- creating ----

namespace
{

// FIRST's log entries, then SECOND's (its error the one that counts).
hist_error after(const hist_error &first, hist_error second)
{
    second.before.insert(second.before.begin(), first.before.begin(), first.before.end());
    if (first.logged())
        second.before.insert(second.before.begin() + long(first.before.size()),
                             {first.err, first.pos});
    return second;
}

// check_synth_field(): a param's type against the synthetic field at POS.
bool synth_field_ok(const trace_synth &se, const hist_field &f, unsigned pos)
{
    if (pos >= se.def.args.size()) return false;
    synth_field_info sf = synth_field_of(se.def.args[pos]);
    if (f.type.find("char[") != std::string::npos && sf.is_string && sf.is_dynamic) return true;
    if (f.type.find("long[") != std::string::npos && sf.is_stack) return true;
    if (sf.type != f.type) {
        if (sf.size != f.size || (!sf.is_string && sf.is_signed != f.is_signed)) return false;
    }
    return true;
}

} // namespace

int hist_trigger_data::create_actions(std::span<const filter_field> fields, hist_error &err)
{
    // err.before gathers the entries logged on the way, even to a success (a field looked
    // for on this event before the onmatch() one).
    hist_parser p{*this, err};
    for (hist_action &a : actions_) {
        if (a.handler != hist_action::handler_id::ONMATCH) {
            // track_data_create()
            if (a.var_str.empty() || a.var_str[0] != '$')
                return p.fail_at(hist_err::ONX_NOT_VAR, a.var_str);
            std::string_view name = std::string_view(a.var_str).substr(1);
            const hist_field *var = nullptr;
            for (const hist_field &v : vars_)
                if (v.var_name == name) var = &v;
            if (!var) return p.fail_at(hist_err::ONX_VAR_NOT_FOUND, name);
            a.track_ref = create_var_ref(this, *var, {}, {});
            const char *track = a.handler == hist_action::handler_id::ONMAX ? "__max" : "__change";
            if (find_var_field(track)) return p.fail(hist_err::ONX_VAR_CREATE_FAIL, 0);
            a.track_var.flags = HIST_FIELD_FL_VAR;
            a.track_var.var_name = track;
            a.track_var.var_idx = static_cast<int>(n_map_vars_++);
            a.track_var.type = "u64";
            a.track_var.size = 8;
        }
        // action_create()
        if (a.action == hist_action::action_id::SNAPSHOT) {
            if (!ev_.tr || !hist_environment.snapshot_alloc) return p.fail(hist_err::NONE, 0);
            if (int r = hist_environment.snapshot_alloc(*ev_.tr)) {
                err = {-r};
                return r;
            }
            a.snap = std::make_unique<hist_action::snapshot_state>();
            continue;
        }
        if (a.action == hist_action::action_id::SAVE) {
            if (!save_vars_.empty()) return p.fail(hist_err::TOO_MANY_SAVE_ACTIONS, 0, EEXIST);
            for (const std::string &param : a.params) {
                const hist_field *v;
                hist_error fe;
                if (create_field_var(param, fields, true, &v, fe)) {
                    err = after(err, fe.then(hist_err::FIELD_VAR_CREATE_FAIL, errpos(param)));
                    return -EINVAL;
                }
            }
            continue;
        }
        // trace_action_create()
        const std::string &synth_name = a.use_trace_keyword ? a.synth_event_name : a.action_name;
        a.synth = hist_environment.synth_get ? hist_environment.synth_get(synth_name) : nullptr;
        if (!a.synth) return p.fail_at(hist_err::SYNTH_EVENT_NOT_FOUND, synth_name);
        unsigned field_pos = 0;
        for (const std::string &param : a.params) {
            std::string_view system, event, name = param;
            if (size_t d1 = name.find('.'); d1 != std::string_view::npos) {
                size_t d2 = name.find('.', d1 + 1);
                if (d2 == std::string_view::npos) return p.fail(hist_err::NONE, 0);
                system = name.substr(0, d1);
                event = name.substr(d1 + 1, d2 - d1 - 1);
                name = name.substr(d2 + 1);
            }
            const hist_field *var = nullptr;
            hist_trigger_data *owner = this;
            const bool own = system.empty() || (system == ev_.system && event == ev_.event);
            if (!name.empty() && name[0] == '$') {
                // trace_action_find_var()
                std::string_view vname = name.substr(1);
                if (own)
                    for (const hist_field &v : vars_)
                        if (v.var_name == vname) var = &v;
                if (!var) {
                    std::string_view s = system, e = event;
                    if (s.empty() && a.handler == hist_action::handler_id::ONMATCH) {
                        s = a.match_system;
                        e = a.match_event;
                    }
                    var = find_event_var(s, e, vname, &owner, err);
                }
                if (!var) return p.fail_at(hist_err::PARAM_NOT_FOUND, vname);
            } else {
                // trace_action_create_field_var(): a variable of this trigger for a field of
                // its event (create_target_field_var); failing that, of the onmatch() event
                // or the one named, in a hist trigger made there.
                hist_error fe;
                if (own && create_field_var(name, fields, false, &var, fe)) var = nullptr;
                if (!var) {
                    std::string_view s = system, e = event;
                    if (s.empty() && a.handler == hist_action::handler_id::ONMATCH) {
                        s = a.match_system;
                        e = a.match_event;
                    }
                    // What the attempt on this event logged stays logged (the kernel's).
                    err = after(err, fe.then(hist_err::NONE, 0));
                    if (e.empty()) {
                        err.errnum = EINVAL;
                        return -EINVAL;
                    }
                    var = create_field_var_hist(s, e, name, &owner, err);
                    if (!var) return -err.errnum;
                }
            }
            if (!synth_field_ok(*a.synth, *var, field_pos))
                return p.fail_at(hist_err::SYNTH_TYPE_MISMATCH, name);
            a.param_refs.push_back(create_var_ref(owner, *var, system, event));
            field_pos++;
        }
        if (field_pos != a.synth->def.args.size())
            return p.fail_at(hist_err::SYNTH_COUNT_MISMATCH, a.synth->def.event);
    }
    return 0;
}

const hist_field *hist_trigger_data::create_field_var_hist(std::string_view system,
                                                           std::string_view event,
                                                           std::string_view field,
                                                           hist_trigger_data **owner,
                                                           hist_error &err)
{
    auto fail = [&](hist_err e) -> const hist_field * {
        err = err.then(e, errpos(field));
        return nullptr;
    };
    if (field_var_hists_.size() >= SYNTH_FIELDS_MAX) return fail(hist_err::TOO_MANY_FIELD_VARS);
    if (!ev_.compatible_hist || !ev_.hist_command ||
        (ev_.event_exists && !ev_.event_exists(system, event)))
        return fail(hist_err::EVENT_FILE_NOT_FOUND);
    std::string keys, filter;
    if (!ev_.compatible_hist(ev_, *this, system, event, keys, filter))
        return fail(hist_err::HIST_NOT_FOUND);
    // find_synthetic_field_var(): made already (by this trigger or another).
    const std::string var_name = "synthetic_" + std::string(field);
    hist_error ignored;
    if (const hist_field *v = find_event_var(system, event, var_name, owner, ignored)) return v;
    std::string cmd = "keys=" + keys + ":" + var_name + "=" + std::string(field);
    if (!filter.empty()) cmd += " if " + filter;
    if (int r = ev_.hist_command(ev_, system, event, cmd, false)) {
        err = err.then(hist_err::HIST_CREATE_FAIL, errpos(field), -r);
        return nullptr;
    }
    const hist_field *v = find_event_var(system, event, var_name, owner, ignored);
    if (!v) {
        ev_.hist_command(ev_, system, event, cmd, true);
        return fail(hist_err::SYNTH_VAR_NOT_FOUND);
    }
    field_var_hists_.push_back({std::string(system), std::string(event), std::move(cmd)});
    return v;
}

void hist_trigger_data::unregister_field_var_hists()
{
    if (field_var_hists_.empty()) return;
    remove_hist_vars();
    std::vector<field_var_hist> v = std::move(field_var_hists_);
    field_var_hists_.clear();
    for (const field_var_hist &h : v)
        if (ev_.hist_command) ev_.hist_command(ev_, h.system, h.event, h.cmd, true);
}

// ---- the hit ----

DPROBE_NOPROBE void hist_trigger_data::run_actions(tracing_map_elt *elt, const uint8_t *key,
                                                   const uint8_t *rec, size_t len,
                                                   const hist_hit_ctx &ctx,
                                                   const uint64_t *refs) const noexcept
{
    for (const hist_action &a : actions_) {
        if (a.handler != hist_action::handler_id::ONMATCH) {
            // ontrack_action(): only when the tracked value passes.
            const uint64_t v = refs[a.track_ref];
            const unsigned slot = static_cast<unsigned>(a.track_var.var_idx);
            const uint64_t track = tracing_map::read_var(elt, slot);
            const bool pass = a.handler == hist_action::handler_id::ONMAX ? v > track : v != track;
            if (!pass) continue;
            tracing_map::set_var(elt, slot, v);
            if (a.action == hist_action::action_id::SAVE) {
                update_vars(elt, rec, len, ctx, refs, save_vars_);
                continue;
            }
            if (a.action == hist_action::action_id::SNAPSHOT) {
                // cond_snapshot_update(): the value must pass against the triggering one.
                hist_action::snapshot_state &st = *a.snap;
                const uint64_t cur = st.track_val.load(std::memory_order_relaxed);
                const bool take = a.handler == hist_action::handler_id::ONMAX ? v > cur : v != cur;
                if (!take || !ctx.tr || st.busy.test_and_set(std::memory_order_acquire)) continue;
                st.track_val.store(v, std::memory_order_relaxed);
                std::memcpy(st.key, key, key_size_);
                std::memcpy(st.comm, elt->private_data, sizeof st.comm);
                st.updated.store(true, std::memory_order_release);
                st.busy.clear(std::memory_order_release);
                if (hist_environment.snapshot_take) hist_environment.snapshot_take(*ctx.tr);
                continue;
            }
        }
        // action_trace()
        uint64_t vals[SYNTH_FIELDS_MAX];
        for (size_t i = 0; i < a.param_refs.size(); i++)
            vals[i] = refs[a.param_refs[i]];
        hist_environment.synth_trace(*a.synth, vals, ctx.regs); // set with synth_get
    }
}

// ---- text ----

void hist_trigger_data::print_actions_spec(std::string &s) const
{
    for (const hist_action &a : actions_) {
        if (a.handler == hist_action::handler_id::ONMATCH)
            s += ":onmatch(" + a.match_system + "." + a.match_event + ").";
        else
            s += std::string(a.handler == hist_action::handler_id::ONMAX ? ":onmax("
                                                                         : ":onchange(") +
                 a.var_str + ").";
        s += a.action_name + "(";
        if (a.action == hist_action::action_id::SAVE) {
            for (size_t i = 0; i < save_vars_.size(); i++)
                s += (i ? "," : "") + save_vars_[i].var_name;
        } else if (a.action == hist_action::action_id::TRACE) {
            if (a.use_trace_keyword) s += a.synth_event_name;
            for (size_t i = 0; i < a.params.size(); i++)
                s += (i || a.use_trace_keyword ? "," : "") + a.params[i];
        }
        s += ")";
    }
}

void hist_trigger_data::print_actions(std::string &s, const tracing_map_elt *elt) const
{
    char buf[64];
    for (const hist_action &a : actions_) {
        if (a.action == hist_action::action_id::SNAPSHOT ||
            a.handler == hist_action::handler_id::ONMATCH)
            continue;
        // track_data_print()
        const uint64_t track = tracing_map::read_var(elt, unsigned(a.track_var.var_idx));
        std::snprintf(buf, sizeof buf, "\n\t%s: %10" PRIu64,
                      a.handler == hist_action::handler_id::ONMAX ? "max" : "changed", track);
        s += buf;
        for (const hist_field &v : save_vars_) {
            const uint64_t val = tracing_map::read_var(elt, unsigned(v.var_idx));
            if (v.flags & HIST_FIELD_FL_STRING) {
                const char *str = tracing_map::var_set(elt, unsigned(v.var_idx))
                                      ? reinterpret_cast<const char *>(uintptr_t(val))
                                      : "";
                char sb[STR_VAR_LEN_MAX + 48];
                std::snprintf(sb, sizeof sb, "  %s: %-32s", v.var_name.c_str(), str);
                s += sb;
            } else {
                std::snprintf(buf, sizeof buf, "  %s: %10" PRIu64, v.var_name.c_str(), val);
                s += buf;
            }
        }
    }
}

void hist_trigger_data::print_snapshot(std::string &s) const
{
    for (const hist_action &a : actions_) {
        if (a.action != hist_action::action_id::SNAPSHOT) continue;
        const hist_action::snapshot_state &st = *a.snap;
        if (!st.updated.load(std::memory_order_acquire)) return;
        char buf[96];
        s += "\nSnapshot taken (see tracing/snapshot).  Details:\n";
        std::snprintf(buf, sizeof buf, "\ttriggering value { %s(%s) }: %10" PRIu64,
                      a.handler == hist_action::handler_id::ONMAX ? "onmax" : "onchange",
                      a.var_str.c_str(), st.track_val.load(std::memory_order_relaxed));
        s += buf;
        s += "\ttriggered by event with key: ";
        uint8_t comm[comm_len];
        std::memcpy(comm, st.comm, comm_len);
        tracing_map_elt e{};
        e.private_data = comm;
        print_key(s, st.key, &e);
        s += '\n';
        return;
    }
}

bool hist_trigger_data::actions_match(const hist_trigger_data &o) const
{
    if (actions_.size() != o.actions_.size()) return false;
    for (size_t i = 0; i < actions_.size(); i++) {
        const hist_action &a = actions_[i], &b = o.actions_[i];
        if (a.handler != b.handler || a.action != b.action || a.params != b.params) return false;
        const std::string &na = a.use_trace_keyword ? a.synth_event_name : a.action_name;
        const std::string &nb = b.use_trace_keyword ? b.synth_event_name : b.action_name;
        if (na != nb) return false;
        if (a.handler == hist_action::handler_id::ONMATCH) {
            if (a.match_system != b.match_system || a.match_event != b.match_event) return false;
        } else if (a.var_str != b.var_str) {
            return false;
        }
    }
    return true;
}

} // namespace dprobe
