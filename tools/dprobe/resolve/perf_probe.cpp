#include "tools/dprobe/resolve/perf_probe.h"

#include "arch/x86_64/insn_analysis.h"
#include "tracefs/dwarf/debuginfo.h"
#include "tools/dprobe/resolve/probe_finder.h"
#include "tools/dprobe/resolve/probe_point.h"
#include "tracefs/btf_lookup.h"
#include "tracefs/fetch_arg.h"

#include <cctype>
#include <cerrno>
#include <memory>
#include <optional>
#include <set>

namespace dprobe::tools
{

std::string perf_group_for(const std::string &module_name)
{
    std::string g = "probe_";
    for (char c : module_name) {
        if (c == '.' || c == '-') break;
        g += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    }
    return g;
}

namespace
{

std::string log_one(const std::vector<std::string> &argv, const probe_error &e, const char *loc)
{
    error_log log;
    log.append(loc ? loc : "trace_kprobe", argv, e);
    return log.read();
}

// Whether OBJECT (the "lib" of a lib:sym place) names IMG.
bool names_image(const std::string &object, const elf_image &img)
{
    return object == img.module_name() || object.rfind(img.module_name() + ".", 0) == 0 ||
           object == img.real_path();
}

// Whether place PL (a symbol place) names IMG's module, or no module and a function of IMG.
bool in_image(const probe_place &pl, const elf_image &img)
{
    if (pl.object.empty()) return !img.object().funcs_named(pl.symbol).empty();
    return names_image(pl.object, img);
}

// Registration checks the tracefs would do in the process (BAD_PROBE_ADDR, NON_UNIQ_SYMBOL,
// BAD_INSN_BNDRY), done on the file.
probe_error check_place(const probe_definition &def, const elf_image &img, std::string &why)
{
    if (def.kind != probe_kind::kprobe && def.kind != probe_kind::fprobe) return {};
    const probe_place &pl = def.place;
    if (pl.kind != probe_place::form::symbol) return {};
    if (!pl.object.empty() && !names_image(pl.object, img)) {
        why = "the place names module '" + pl.object + "', not " + img.module_name();
        return {};
    }
    auto hits = img.object().funcs_named(pl.symbol);
    std::set<uintptr_t> addrs;
    for (const ksym *s : hits)
        addrs.insert(s->addr);
    if (addrs.empty()) {
        why = "no function '" + pl.symbol + "' in " + img.path();
        return registration_error(probe_err::BAD_PROBE_ADDR, ENOENT);
    }
    if (addrs.size() > 1) {
        why = "'" + pl.symbol + "' names " + std::to_string(addrs.size()) + " functions in " +
              img.path();
        return registration_error(probe_err::NON_UNIQ_SYMBOL, EADDRNOTAVAIL);
    }
    const ksym *s = hits.front();
    const uintptr_t at = s->addr + pl.offset;
    if (pl.offset >= s->size && pl.offset != 0) {
        // Past the symbol: the function containing that address, as the kernel resolves it.
        s = img.object().func_at(at);
        if (!s) {
            why = pl.symbol + "+" + std::to_string(pl.offset) + " is past the end of " + pl.symbol +
                  " and in no other function of " + img.path();
            return registration_error(probe_err::FAIL_REG_PROBE, EINVAL);
        }
    }
    if (at != s->addr) {
        size_t avail = 0;
        const uint8_t *code = img.code_at(s->addr, &avail);
        if (code && avail >= s->size) {
            auto fa = arch::analyze_function(code, s->addr, s->size);
            if (!fa.decode_failed && !fa.is_boundary(at)) {
                why = pl.symbol + "+" + std::to_string(pl.offset) +
                      " is not the start of an instruction";
                return registration_error(probe_err::BAD_INSN_BNDRY, EILSEQ);
            }
        }
    }
    return {};
}

// The function a probe at an entry or exit sits on, when the place is a function of IMG:
// its prototype from IMG's debug info (nullptr without); nullopt for places elsewhere (a
// library the program loads), whose names the process checks.
std::optional<func_proto_ptr> func_proto_in_image(const probe_definition &def, const elf_image &img)
{
    const probe_place &pl = def.place;
    if (pl.kind != probe_place::form::symbol || !in_image(pl, img)) return std::nullopt;
    std::set<uintptr_t> addrs;
    for (const ksym *s : img.object().funcs_named(pl.symbol))
        addrs.insert(s->addr);
    if (addrs.size() != 1) return std::nullopt;
    return func_proto_at(debuginfo_of_file(img.real_path()), *addrs.begin());
}

} // namespace

perf_probe_result check_dynevent_line(const std::string &line, const elf_image *img)
{
    perf_probe_result r;
    r.line = line;
    std::vector<std::string> argv = argv_split(line);
    if (argv.empty()) {
        r.message = "empty probe line";
        return r;
    }
    parse_options po;
    po.check_files = true;
    if (img)
        po.func_info = [img](const probe_definition &def) {
            return func_proto_in_image(def, *img);
        };
    else
        po.btf_unchecked = true; // names are checked in the process
    dynevent_command cmd;
    const char *loc = nullptr;
    probe_error e = parse_dynevent(argv, po, cmd, &loc);
    if (e) {
        r.message = e.logged() ? std::string(probe_err_text(e.err))
                               : "not a probe definition: '" + line + "'";
        if (e.logged()) r.error_log = log_one(argv, e, loc);
        return r;
    }
    if (cmd.kind != dynevent_command::type::create) {
        r.message = "'" + line + "' deletes events; a definition was expected";
        return r;
    }
    r.def = cmd.def;
    if (img) {
        std::string why;
        probe_error pe = check_place(r.def, *img, why);
        if (pe) {
            r.message = why;
            r.error_log = log_one(argv, pe, r.def.error_loc());
            return r;
        }
    }
    r.ok = true;
    return r;
}

namespace
{

// "NAME=FETCH:TYPE" with a name not used yet (perf names an argument after its variable or
// last member; two "x" become x and x_1).
std::string arg_text(const var_fetch &v, bool named, std::set<std::string> &used)
{
    std::string name = v.name;
    if (!named)
        for (int i = 1; used.count(name); i++)
            name = v.name + "_" + std::to_string(i);
    used.insert(name);
    return name + "=" + v.fetch + ":" + v.type;
}

} // namespace

perf_probe_result translate_perf_probe(const std::vector<std::string> &spec, const elf_image &img)
{
    perf_probe_result r;
    if (spec.empty() || spec.front().empty()) {
        r.message = "empty probe definition";
        return r;
    }
    std::string head = spec.front();
    std::string group, event;
    if (auto eq = head.find('='); eq != std::string::npos) {
        std::string ev = head.substr(0, eq);
        head = head.substr(eq + 1);
        if (auto c = ev.find(':'); c != std::string::npos) {
            group = ev.substr(0, c);
            event = ev.substr(c + 1);
        } else {
            event = ev;
        }
        if (event.empty()) {
            r.message = "'" + spec.front() + "': empty event name before '='";
            return r;
        }
    }
    perf_probe_point pp;
    if (!parse_perf_probe_point(head, pp, &r.message)) return r;
    std::vector<perf_probe_arg> args;
    std::vector<std::string> raw; // the words, for arguments that pass through
    bool need_dwarf = pp.needs_debuginfo();
    for (size_t i = 1; i < spec.size(); i++) {
        if (spec[i].empty()) continue;
        perf_probe_arg a;
        if (!parse_perf_probe_arg(spec[i], a, &r.message)) return r;
        need_dwarf |= a.is_variable() || a.var == "$vars" || a.var == "$params";
        args.push_back(std::move(a));
        raw.push_back(spec[i]);
    }

    std::string place = pp.function + (pp.offset ? "+" + std::to_string(pp.offset) : "");
    std::string auto_event = pp.function + (pp.retprobe ? "__return"
                                            : pp.offset ? "_" + std::to_string(pp.offset)
                                                        : "");
    std::unique_ptr<debuginfo> di;
    std::optional<probe_finder> finder;
    probe_site site;
    if (need_dwarf) {
        std::string err;
        di = debuginfo::open(img.real_path(), &err);
        if (!di) {
            r.message = err;
            return r;
        }
        finder.emplace(*di, img);
        if (!finder->resolve(pp, site, &r.message)) return r;
        place = site.symbol + (site.offset ? "+" + std::to_string(site.offset) : "");
        auto_event = site.event;
    }
    if (group.empty()) group = perf_group_for(img.module_name());
    if (event.empty()) event = sanitize_event_name(auto_event);
    std::string line = std::string(pp.retprobe ? "r:" : "p:") + group + "/" + event + " " +
                       img.module_name() + ":" + place;
    std::set<std::string> used;
    for (size_t i = 0; i < args.size(); i++) {
        const perf_probe_arg &a = args[i];
        if (a.var == "$vars" || a.var == "$params") {
            if (!a.name.empty() || !a.type.empty() || !a.fields.empty()) {
                r.message = "'" + a.var + "' takes no name, type or member";
                return r;
            }
            bool params_only = a.var == "$params" || site.entry;
            size_t n = 0;
            for (const site_variable &v : finder->variables(site)) {
                if (params_only && !v.param) continue;
                if (!v.fetchable) {
                    r.notes.push_back(a.var + ": left out '" + v.name + "': " +
                                      (v.why.rfind("'", 0) == 0 ? v.why : v.name + " " + v.why));
                    continue;
                }
                if (used.count(v.fetch.name))
                    continue; // already named explicitly or by an earlier $vars
                line += " " + arg_text(v.fetch, false, used);
                n++;
            }
            if (n == 0) {
                r.message = a.var + ": no " + (params_only ? "parameter" : "variable") +
                            " can be fetched at " + place;
                return r;
            }
            continue;
        }
        if (a.is_variable()) {
            var_fetch v;
            if (!finder->translate(site, a, v, &r.message)) return r;
            line += " " + arg_text(v, !a.name.empty(), used);
            continue;
        }
        // Anything else is a fetch arg as dynamic_events writes it.
        if (!a.name.empty()) used.insert(a.name);
        line += " " + raw[i];
    }
    auto notes = std::move(r.notes);
    r = check_dynevent_line(line, &img);
    r.notes = std::move(notes);
    if (r.ok) r.line = r.def.listing();
    return r;
}

} // namespace dprobe::tools
