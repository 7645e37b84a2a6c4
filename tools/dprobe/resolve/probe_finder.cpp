#include "tools/dprobe/resolve/probe_finder.h"

#include "tracefs/dwarf/dwarf_params.h"

#include <dwarf.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

namespace dprobe::tools
{

namespace
{

bool fail(std::string *err, std::string msg)
{
    if (err) *err = std::move(msg);
    return false;
}

std::string hex(uint64_t v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
}

std::string place_text(const std::string &sym, uint64_t off)
{
    return off ? sym + "+" + std::to_string(off) : sym;
}

bool is_function_scope(Dwarf_Die *d)
{
    int t = dwarf_tag(d);
    return t == DW_TAG_subprogram || t == DW_TAG_inlined_subroutine;
}

std::optional<Dwarf_Die> type_of(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    Dwarf_Die t;
    if (dwarf_attr_integrate(die, DW_AT_type, &a) && dwarf_formref_die(&a, &t)) return t;
    return std::nullopt;
}

// The child of SCOPE named NAME that is a variable or parameter, preferring one that has a
// location (a global is often declared once and defined once in the same unit).
std::optional<Dwarf_Die> child_var(Dwarf_Die *scope, const std::string &name)
{
    std::optional<Dwarf_Die> best;
    Dwarf_Die c;
    if (dwarf_child(scope, &c) != 0) return best;
    do {
        int t = dwarf_tag(&c);
        if (t != DW_TAG_variable && t != DW_TAG_formal_parameter) continue;
        const char *n = dwarf_diename(&c);
        if (!n || name != n) continue;
        if (!best || dwarf_hasattr(&c, DW_AT_location) ||
            dwarf_hasattr_integrate(&c, DW_AT_const_value))
            best = c;
    } while (dwarf_siblingof(&c, &c) == 0);
    return best;
}

// Whether FUNC (or a block in it) declares a local variable NAME.
bool declares_local(Dwarf_Die *func, const std::string &name)
{
    Dwarf_Die c;
    if (dwarf_child(func, &c) != 0) return false;
    do {
        int t = dwarf_tag(&c);
        if (t == DW_TAG_variable) {
            const char *n = dwarf_diename(&c);
            if (n && name == n) return true;
        } else if (t == DW_TAG_lexical_block && declares_local(&c, name)) {
            return true;
        }
    } while (dwarf_siblingof(&c, &c) == 0);
    return false;
}

struct scopes_at {
    Dwarf_Die *dies = nullptr;
    int n = 0;
    scopes_at(Dwarf_Die *cu, uint64_t addr) { n = dwarf_getscopes(cu, addr, &dies); }
    ~scopes_at() { std::free(dies); }
    scopes_at(const scopes_at &) = delete;
    scopes_at &operator=(const scopes_at &) = delete;
};

} // namespace

struct probe_finder::found_var {
    fetch_loc loc;
    std::optional<Dwarf_Die> type;
};

std::vector<dwarf_function> probe_finder::functions(const std::string &name,
                                                    const std::string &file) const
{
    auto funcs = di_.find_functions(name, file);
    if (!funcs.empty() || !file.empty()) return funcs;
    std::set<uintptr_t> addrs;
    for (const ksym *k : img_.object().funcs_named(name))
        addrs.insert(k->addr);
    if (addrs.size() == 1)
        if (auto f = di_.function_at(*addrs.begin()); f && f->entry == *addrs.begin())
            funcs.push_back(*f);
    return funcs;
}

bool probe_finder::resolve(const perf_probe_point &pp, probe_site &site, std::string *err) const
{
    site = probe_site{};
    struct cand {
        uint64_t addr;
        dwarf_function f;
        const char *file;
        int line;
    };
    std::vector<cand> cands;
    if (!pp.function.empty()) {
        auto funcs = functions(pp.function, pp.file);
        if (funcs.empty()) {
            if (!pp.file.empty())
                return fail(err, "no function '" + pp.function + "' declared in a file matching '" +
                                     pp.file + "' in the debug info of " + img_.path());
            if (!img_.object().funcs_named(pp.function).empty())
                return fail(err, "no debug info for function '" + pp.function + "' in " +
                                     img_.path() + " (build it with -g)");
            return fail(err, "no function '" + pp.function + "' in " + img_.path());
        }
        for (const auto &f : funcs) {
            if (!pp.has_line) {
                cands.push_back({f.entry + pp.offset, f, f.decl_file, 0});
                continue;
            }
            const int abs = f.decl_line + pp.line;
            std::optional<uint64_t> best;
            for (const dwarf_line &row : di_.function_lines(f))
                if (row.line == abs && (!best || row.addr < *best)) best = row.addr;
            if (best) cands.push_back({*best, f, f.decl_file, abs});
        }
        if (cands.empty()) {
            const auto &f = funcs.front();
            return fail(err, "line " + std::to_string(pp.line) + " of " + pp.function + " (" +
                                 (f.decl_file ? f.decl_file : "?") + ":" +
                                 std::to_string(f.decl_line + pp.line) +
                                 ") has no code to probe; 'dprobe probe -x " + img_.path() +
                                 " --line " + pp.function + "' shows the lines that have");
        }
    } else {
        // SRC:ALN: the lowest statement address of that line in each function it lands in.
        std::map<Dwarf_Off, cand> by_func;
        bool file_known = false;
        for (Dwarf_Die &cu : di_.units()) {
            for (const dwarf_line &row : di_.lines(&cu)) {
                if (!row.file || !file_matches(row.file, pp.file)) continue;
                file_known = true;
                if (!row.is_stmt || row.line != pp.line) continue;
                auto f = di_.function_at(row.addr);
                if (!f) continue;
                Dwarf_Off key = dwarf_dieoffset(&f->die);
                auto it = by_func.find(key);
                if (it == by_func.end())
                    by_func.emplace(key, cand{row.addr, *f, row.file, row.line});
                else if (row.addr < it->second.addr)
                    it->second.addr = row.addr;
            }
        }
        if (!file_known)
            return fail(err, "no source file matching '" + pp.file + "' in the debug info of " +
                                 img_.path());
        if (by_func.empty())
            return fail(err, pp.file + ":" + std::to_string(pp.line) +
                                 " has no code to probe; 'dprobe probe -x " + img_.path() +
                                 " --line " + pp.file + "' shows the lines that have");
        for (auto &[k, c] : by_func)
            cands.push_back(c);
    }
    std::sort(cands.begin(), cands.end(),
              [](const cand &a, const cand &b) { return a.addr < b.addr; });
    cands.erase(std::unique(cands.begin(), cands.end(),
                            [](const cand &a, const cand &b) { return a.addr == b.addr; }),
                cands.end());
    if (cands.size() > 1) {
        std::string where;
        for (const auto &c : cands) {
            const ksym *s = img_.object().func_at(c.addr);
            where += (where.empty() ? "" : ", ") +
                     (s ? place_text(s->name, c.addr - s->addr) : hex(c.addr));
        }
        return fail(err, "the probe point is in " + std::to_string(cands.size()) + " places (" +
                             where +
                             "); dprobe makes one probe per definition: "
                             "name one of them (FUNC+OFF, or the line in its caller)");
    }
    const cand &c = cands.front();
    site.addr = c.addr;
    site.func = c.f;
    site.line = c.line;
    site.file = c.file;
    auto sub = c.f.inlined ? di_.function_at(c.addr) : std::optional<dwarf_function>(c.f);
    if (!sub) return fail(err, "no function in the debug info contains " + hex(c.addr));
    site.subprogram = sub->die;
    const ksym *s = img_.object().func_at(c.addr);
    if (!s)
        return fail(err, "no function symbol of " + img_.path() + " covers " + hex(c.addr) +
                             " (is it stripped?)");
    site.symbol = s->name;
    site.offset = c.addr - s->addr;
    // Among aliases (free, cfree), the name the user gave.
    for (const ksym *k : img_.object().funcs_named(pp.function))
        if (k->addr == s->addr) site.symbol = k->name;
    // Also for a line whose code starts at the entry: before the prologue, the DWARF
    // location of a parameter at -O0 is a stack slot not written yet.
    site.entry = !c.f.inlined && c.addr == c.f.entry && site.offset == 0;
    site.retprobe = pp.retprobe;
    if (pp.retprobe && !site.entry)
        return fail(err, "'" + pp.function +
                             "' is only inlined here: an inlined copy has no "
                             "return to probe");
    std::string base = pp.function.empty() ? sub->name : pp.function;
    if (pp.retprobe)
        site.event = base + "__return";
    else if (pp.has_line)
        site.event = base + "_L" + std::to_string(pp.line);
    else if (pp.offset)
        site.event = base + "_" + std::to_string(pp.offset);
    else
        site.event = base;
    return true;
}

std::optional<std::pair<std::string, int64_t>> probe_finder::symbolize(uint64_t vaddr) const
{
    // @SYM resolves by name in the running process: use a name this file defines once.
    const loaded_object &o = img_.object();
    auto unique = [&](const std::string &name) {
        int n = 0;
        for (const ksym &k : o.data)
            n += k.name == name;
        return n == 1;
    };
    const ksym *s = o.data_at(vaddr);
    if (s && unique(s->name)) return std::make_pair(s->name, static_cast<int64_t>(vaddr - s->addr));
    const ksym *near = nullptr;
    for (const ksym &k : o.data) {
        auto dist = [&](const ksym *x) {
            return x->addr > vaddr ? x->addr - vaddr : vaddr - x->addr;
        };
        if ((!near || dist(&k) < dist(near)) && unique(k.name)) near = &k;
    }
    if (!near) return std::nullopt;
    return std::make_pair(near->name,
                          static_cast<int64_t>(vaddr) - static_cast<int64_t>(near->addr));
}

bool probe_finder::locate(const probe_site &site, Dwarf_Die *var, fetch_loc &loc,
                          std::string *why) const
{
    loc = fetch_loc{};
    Dwarf_Attribute a;
    if (dwarf_attr_integrate(var, DW_AT_const_value, &a)) {
        Dwarf_Sword v;
        if (dwarf_formsdata(&a, &v) != 0)
            return fail(why, "is a constant dprobe can't read (not an integer)");
        loc.kind = fetch_loc::base_kind::imm;
        loc.name = std::to_string(v);
        return true;
    }
    if (!dwarf_attr(var, DW_AT_location, &a)) {
        if (dwarf_hasattr_integrate(var, DW_AT_external)) {
            // Declared here, defined in another unit or object: by its symbol.
            const char *n = dwarf_diename(var);
            loc.kind = fetch_loc::base_kind::sym;
            loc.name = n ? n : "";
            return true;
        }
        return fail(why, "is optimized out (it has no location)");
    }
    Dwarf_Op *ops = nullptr;
    size_t nops = 0;
    if (dwarf_getlocation_addr(&a, site.addr, &ops, &nops, 1) <= 0)
        return fail(why, "has no location at " + place_text(site.symbol, site.offset) +
                             " (optimized out there)");
    for (size_t i = 0; i < nops; i++)
        if (ops[i].atom == DW_OP_form_tls_address || ops[i].atom == DW_OP_GNU_push_tls_address)
            return fail(why, "is thread-local, which fetch args can't address");
    location_env env;
    Dwarf_Attribute fa;
    Dwarf_Die sub = site.subprogram;
    Dwarf_Op *fb = nullptr;
    size_t nfb = 0;
    if (dwarf_attr(&sub, DW_AT_frame_base, &fa) &&
        dwarf_getlocation_addr(&fa, site.addr, &fb, &nfb, 1) > 0)
        env.frame_base = std::span<const Dwarf_Op>(fb, nfb);
    const uint64_t addr = site.addr;
    env.cfa = [this, addr](std::vector<Dwarf_Op> &v) { return di_.cfa_at(addr, v); };
    env.symbolize = [this](uint64_t va) { return symbolize(va); };
    return translate_location(std::span<const Dwarf_Op>(ops, nops), env, loc, why);
}

bool probe_finder::lookup(const probe_site &site, const std::string &name, found_var &out,
                          std::string *err) const
{
    std::string why;
    const std::string fname = site.func.name;
    if (site.entry) {
        Dwarf_Die fdie = site.func.die;
        for (const dwarf_param &p : dwarf_die_params(&fdie)) {
            if (p.name != name) continue;
            if (p.fetch.empty())
                return fail(err, "parameter '" + name + "' of " + fname +
                                     " can't be fetched at the entry: " + p.why);
            out.loc = fetch_loc{};
            out.loc.kind = fetch_loc::base_kind::arg;
            out.loc.name = p.fetch;
            out.type = p.type_die;
            return true;
        }
        if (declares_local(&fdie, name))
            return fail(err, "'" + name + "' is a local variable of " + fname +
                                 ": at the function entry it has no value yet; probe one of its "
                                 "lines (" +
                                 fname + ":N, see --line " + fname + ")");
        Dwarf_Die cu = site.func.cu;
        auto g = child_var(&cu, name);
        if (!g)
            return fail(err, "'" + name + "' is not a parameter of " + fname +
                                 ", nor a global variable of its file");
        if (!locate(site, &*g, out.loc, &why)) return fail(err, "'" + name + "' " + why);
        out.type = type_of(&*g);
        return true;
    }
    Dwarf_Die cu = site.func.cu;
    scopes_at sc(&cu, site.addr);
    for (int i = 0; i < sc.n; i++) {
        auto v = child_var(&sc.dies[i], name);
        if (!v) continue;
        if (!locate(site, &*v, out.loc, &why)) return fail(err, "'" + name + "' " + why);
        out.type = type_of(&*v);
        return true;
    }
    return fail(err, "no variable '" + name + "' is visible at " +
                         place_text(site.symbol, site.offset) + " (" + fname +
                         (site.line ? ", line " + std::to_string(site.line) : "") + ")");
}

bool probe_finder::finish(const probe_site &site, fetch_loc loc, Dwarf_Die type,
                          const perf_probe_arg &arg, var_fetch &out, std::string *err) const
{
    (void)site;
    std::string why;
    std::optional<bitfield_info> bf;
    if (!apply_fields(loc, type, bf, arg.fields, arg.var, &why)) return fail(err, why);
    std::string shown = arg.var;
    for (const auto &f : arg.fields)
        shown += f.is_index ? "[" + std::to_string(f.index) + "]" : (f.arrow ? "->" : ".") + f.name;
    std::string t;
    if (!convert_type(loc, &type, bf, arg.type, shown, t, &why)) return fail(err, why);
    out.name = arg.name.empty() ? arg.default_name() : arg.name;
    out.fetch = loc.text();
    out.type = t;
    return true;
}

bool probe_finder::translate(const probe_site &site, const perf_probe_arg &arg, var_fetch &out,
                             std::string *err) const
{
    found_var fv;
    if (!lookup(site, arg.var, fv, err)) return false;
    if (!fv.type) return fail(err, "'" + arg.var + "' has no type information");
    return finish(site, fv.loc, *fv.type, arg, out, err);
}

std::vector<site_variable> probe_finder::variables(const probe_site &site) const
{
    std::vector<site_variable> out;
    auto add = [&](Dwarf_Die *die, bool param, const fetch_loc *given,
                   const std::string *given_why) {
        site_variable v;
        const char *n = dwarf_diename(die);
        v.name = n ? n : "";
        v.param = param;
        auto t = type_of(die);
        v.type_name = t ? dwarf_type_name(&*t) : "void";
        fetch_loc loc;
        if (given) {
            loc = *given;
            v.located = true;
        } else if (given_why) {
            v.why = *given_why;
        } else {
            v.located = locate(site, die, loc, &v.why);
        }
        if (v.located && t) {
            perf_probe_arg a;
            a.var = v.name;
            v.fetchable = finish(site, loc, *t, a, v.fetch, &v.why);
        } else if (v.located) {
            v.why = "has no type information";
        }
        out.push_back(std::move(v));
    };
    if (site.entry) {
        Dwarf_Die fdie = site.func.die;
        std::vector<Dwarf_Die> dies;
        Dwarf_Die c;
        if (dwarf_child(&fdie, &c) == 0) {
            do {
                if (dwarf_tag(&c) == DW_TAG_formal_parameter) dies.push_back(c);
            } while (dwarf_siblingof(&c, &c) == 0);
        }
        auto params = dwarf_die_params(&fdie);
        for (size_t i = 0; i < dies.size() && i < params.size(); i++) {
            if (params[i].fetch.empty()) {
                add(&dies[i], true, nullptr, &params[i].why);
                continue;
            }
            fetch_loc loc;
            loc.kind = fetch_loc::base_kind::arg;
            loc.name = params[i].fetch;
            add(&dies[i], true, &loc, nullptr);
        }
        return out;
    }
    Dwarf_Die cu = site.func.cu;
    scopes_at sc(&cu, site.addr);
    int k = 0;
    while (k < sc.n && !is_function_scope(&sc.dies[k]))
        k++;
    if (k == sc.n) return out;
    for (int i = k; i >= 0; i--) {
        Dwarf_Die c;
        if (dwarf_child(&sc.dies[i], &c) != 0) continue;
        do {
            int tag = dwarf_tag(&c);
            bool param = tag == DW_TAG_formal_parameter;
            if (!param && tag != DW_TAG_variable) continue;
            if (!dwarf_diename(&c) || dwarf_hasattr(&c, DW_AT_declaration) ||
                (!param && dwarf_hasattr_integrate(&c, DW_AT_artificial)))
                continue;
            add(&c, param, nullptr, nullptr);
        } while (dwarf_siblingof(&c, &c) == 0);
    }
    return out;
}

} // namespace dprobe::tools
