#include "tools/dprobe/perf_probe.h"

#include "arch/x86_64/insn_analysis.h"
#include "tools/dprobe/dwarf_params.h"
#include "tracefs/fetch_arg.h"

#include <cctype>
#include <cerrno>
#include <set>

namespace dprobe::tools {

std::string perf_group_for(const std::string &module_name)
{
    std::string g = "probe_";
    for (char c : module_name) {
        if (c == '.' || c == '-')
            break;
        g += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    }
    return g;
}

namespace {

std::string log_one(const std::vector<std::string> &argv, const probe_error &e, const char *loc)
{
    error_log log;
    log.append(loc ? loc : "trace_kprobe", argv, e);
    return log.read();
}

// Registration checks the tracefs would do in the process (BAD_PROBE_ADDR, NON_UNIQ_SYMBOL,
// BAD_INSN_BNDRY), done on the file.
probe_error check_place(const probe_definition &def, const elf_image &img, std::string &why)
{
    if (def.kind != probe_kind::kprobe && def.kind != probe_kind::fprobe)
        return {};
    const probe_place &pl = def.place;
    if (pl.kind != probe_place::form::symbol)
        return {};
    if (!pl.object.empty() && pl.object != img.module_name() &&
        pl.object.rfind(img.module_name() + ".", 0) != 0 && pl.object != img.real_path()) {
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
    if (pl.offset >= s->size && pl.offset != 0) {
        why = pl.symbol + "+" + std::to_string(pl.offset) + " is past the end of " + pl.symbol +
              " (" + std::to_string(s->size) + " bytes)";
        return registration_error(probe_err::BAD_PROBE_ADDR, ENOENT);
    }
    if (pl.offset != 0) {
        size_t avail = 0;
        const uint8_t *code = img.code_at(s->addr, &avail);
        if (code && avail >= s->size) {
            auto fa = arch::analyze_function(code, s->addr, s->size);
            if (!fa.decode_failed && !fa.is_boundary(s->addr + pl.offset)) {
                why = pl.symbol + "+" + std::to_string(pl.offset) +
                      " is not the start of an instruction";
                return registration_error(probe_err::BAD_INSN_BNDRY, EILSEQ);
            }
        }
    }
    return {};
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
    dynevent_command cmd;
    const char *loc = nullptr;
    probe_error e = parse_dynevent(argv, po, cmd, &loc);
    if (e) {
        r.message = e.logged() ? std::string(probe_err_text(e.err))
                               : "not a probe definition: '" + line + "'";
        if (e.logged())
            r.error_log = log_one(argv, e, loc);
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
    bool is_return = false;
    if (auto pct = head.find('%'); pct != std::string::npos) {
        if (head.substr(pct) != "%return") {
            r.message = "'" + spec.front() + "': unknown suffix '" + head.substr(pct) +
                        "' (only %return)";
            return r;
        }
        is_return = true;
        head.resize(pct);
    }
    std::string func = head;
    unsigned long off = 0;
    if (auto plus = head.find('+'); plus != std::string::npos) {
        func = head.substr(0, plus);
        std::string o = head.substr(plus + 1);
        unsigned long long v = 0;
        if (o.empty() || kstrtoull(o, 0, v) != 0 || v > 0xffffffffull) {
            r.message = "'" + spec.front() + "': bad offset '" + o + "'";
            return r;
        }
        off = v;
    }
    if (func.empty() || func.find_first_of("@:;") != std::string::npos) {
        r.message = "'" + spec.front() +
                    "': expected FUNC[+OFF|%return] (source lines and files need debug info, "
                    "which dprobe probe does not read)";
        return r;
    }
    if (is_return && off) {
        r.message = "'" + spec.front() + "': %return needs the function entry, not +" +
                    std::to_string(off);
        return r;
    }
    if (group.empty())
        group = perf_group_for(img.module_name());
    if (event.empty()) {
        event = func;
        if (is_return)
            event += "__return";
        else if (off)
            event += "_" + std::to_string(off);
        event = sanitize_event_name(event);
    }
    std::string line = std::string(is_return ? "r:" : "p:") + group + "/" + event + " " +
                       img.module_name() + ":" + func;
    if (off)
        line += "+" + std::to_string(off);
    // Parameter names (perf's local variables, for the parameters): from DWARF.
    std::vector<dwarf_param> params;
    bool params_loaded = false;
    std::string dwarf_err;
    auto load_params = [&] {
        if (!params_loaded)
            params = dwarf_function_params(img.real_path(), func, &dwarf_err);
        params_loaded = true;
    };
    auto is_ident = [](const std::string &w) {
        if (w.empty() || !(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_'))
            return false;
        for (char c : w)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
                return false;
        return true;
    };
    for (size_t i = 1; i < spec.size(); i++) {
        std::string a = spec[i];
        if (a.empty())
            continue;
        if (a == "$params") {
            load_params();
            if (params.empty()) {
                r.message = "$params: " + (dwarf_err.empty() ? "no parameters" : dwarf_err);
                return r;
            }
            for (const auto &p : params)
                if (!p.fetch.empty())
                    line += " " + p.name + "=" + p.fetch + ":" + p.type;
            continue;
        }
        // [NAME=]VAR[:TYPE] where VAR is a parameter name.
        std::string name, body = a, type;
        if (auto eq = a.find('='); eq != std::string::npos) {
            name = a.substr(0, eq);
            body = a.substr(eq + 1);
        }
        if (auto colon = body.find(':'); colon != std::string::npos) {
            type = body.substr(colon + 1);
            body.resize(colon);
        }
        if (!is_ident(body)) {
            line += " " + a;
            continue;
        }
        load_params();
        const dwarf_param *found = nullptr;
        for (const auto &p : params)
            if (p.name == body)
                found = &p;
        if (!found) {
            r.message = "'" + body + "' is not a parameter of " + func +
                        (dwarf_err.empty() ? "" : " (" + dwarf_err + ")");
            return r;
        }
        if (found->fetch.empty()) {
            r.message = "parameter '" + body + "' of " + func + " cannot be fetched: " +
                        found->why + "; use %REG or $stackN";
            return r;
        }
        // A pointer read as a string is the string it points to, as in perf.
        std::string fetch = found->fetch;
        if ((type == "string" || type == "ustring") && found->type == "x64")
            fetch = "+0(" + fetch + ")";
        line += " " + (name.empty() ? body : name) + "=" + fetch + ":" +
                (type.empty() ? found->type : type);
    }
    r = check_dynevent_line(line, &img);
    if (r.ok)
        r.line = r.def.listing();
    return r;
}

} // namespace dprobe::tools
