// Function filters (see ftrace_filter.h).
#include "tracefs/ftrace_filter.h"
#include "tracefs/tree_node.h"

#include "core/ftrace.h"
#include "core/glob.h"
#include "tracefs/fetch_arg.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace dprobe
{
namespace
{

bool is_number(std::string_view s)
{
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Whether an object named LIB is loaded (the rule of kallsyms' "lib:" prefixes).
bool object_loaded(std::string_view lib)
{
    if (lib.empty()) return false;
    auto objs = kallsyms::instance().objects();
    for (const object_ptr &o : *objs)
        if (o->matches(lib)) return true;
    return false;
}

std::vector<ftrace_site *> usable(std::vector<ftrace_site *> v)
{
    std::erase_if(v, [](ftrace_site *s) { return !s || s->gone; });
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

} // namespace

ftrace_site *available_filter_site(size_t n)
{
    std::vector<ftrace_func_entry> all = ftrace_selectable_funcs();
    if (n == 0 || n > all.size()) return nullptr;
    return ftrace_location_or_jump(all[n - 1].sym->addr);
}

bool ftrace_hash::empty() const
{
    std::lock_guard<std::mutex> g(m_);
    return sites_.empty() && pending_.empty();
}

std::vector<ftrace_site *> ftrace_hash::sites() const
{
    std::lock_guard<std::mutex> g(m_);
    std::vector<ftrace_site *> v;
    for (ftrace_site *s : sites_)
        if (!s->gone) v.push_back(s);
    std::sort(v.begin(), v.end(),
              [](const ftrace_site *a, const ftrace_site *b) { return a->ip < b->ip; });
    return v;
}

void ftrace_hash::clear()
{
    std::lock_guard<std::mutex> g(m_);
    sites_.clear();
    pending_.clear();
    publish_locked();
}

void ftrace_hash::publish_locked()
{
    if (sites_.empty()) {
        published_.store(nullptr, std::memory_order_release);
        return;
    }
    auto l = std::make_unique<ip_list>();
    for (ftrace_site *s : sites_)
        l->ips.push_back(s->ip);
    std::sort(l->ips.begin(), l->ips.end());
    published_.store(l.get(), std::memory_order_release);
    lists_.push_back(std::move(l));
}

bool ftrace_hash::contains_ip(uintptr_t ip) const noexcept
{
    const ip_list *l = published_.load(std::memory_order_acquire);
    return l && std::binary_search(l->ips.begin(), l->ips.end(), ip);
}

int ftrace_hash::match(std::string_view glob, std::string_view lib, bool neg, bool mod_pending_ok)
{
    std::vector<ftrace_site *> hits;
    if (lib.empty() && is_number(glob)) {
        // An index into available_filter_functions, from 1.
        unsigned long long n = 0;
        if (kstrtoull(glob, 10, n) || n == 0) return -EINVAL;
        ftrace_site *site = available_filter_site(size_t(n));
        if (!site) return -EINVAL;
        hits.push_back(site);
    } else {
        if (!lib.empty() && !object_loaded(lib)) {
            if (!mod_pending_ok) return -EINVAL;
            std::lock_guard<std::mutex> g(m_);
            pending_mod pm{std::string(glob.empty() ? "*" : glob), std::string(lib)};
            auto same = [&](const pending_mod &p) { return p.glob == pm.glob && p.lib == pm.lib; };
            if (neg)
                std::erase_if(pending_, same);
            else if (std::none_of(pending_.begin(), pending_.end(), same))
                pending_.push_back(pm);
            return 1;
        }
        std::string spec = lib.empty()
                               ? std::string(glob)
                               : std::string(lib) + ":" + std::string(glob.empty() ? "*" : glob);
        hits = usable(ftrace_match_sites(spec, ""));
    }
    if (hits.empty()) return -EINVAL;
    std::lock_guard<std::mutex> g(m_);
    std::sort(sites_.begin(), sites_.end());
    std::vector<ftrace_site *> out;
    if (neg)
        std::set_difference(sites_.begin(), sites_.end(), hits.begin(), hits.end(),
                            std::back_inserter(out));
    else
        std::set_union(sites_.begin(), sites_.end(), hits.begin(), hits.end(),
                       std::back_inserter(out));
    sites_ = std::move(out);
    publish_locked();
    return static_cast<int>(hits.size());
}

bool ftrace_hash::objects_loaded(std::span<const object_ptr> added)
{
    std::vector<pending_mod> todo;
    {
        std::lock_guard<std::mutex> g(m_);
        for (const pending_mod &p : pending_)
            for (const object_ptr &o : added)
                if (!p.lib.empty() && o->matches(p.lib)) todo.push_back(p);
    }
    if (todo.empty()) return false;
    std::vector<ftrace_site *> hits;
    for (const pending_mod &p : todo) {
        auto v = ftrace_match_sites_in(added, p.lib + ":" + p.glob, "");
        hits.insert(hits.end(), v.begin(), v.end());
    }
    hits = usable(std::move(hits));
    std::lock_guard<std::mutex> g(m_);
    // Applied: the kernel drops a :mod: entry once its module is loaded.
    std::erase_if(pending_, [&](const pending_mod &p) {
        return std::any_of(todo.begin(), todo.end(), [&](const pending_mod &t) {
            return t.glob == p.glob && t.lib == p.lib;
        });
    });
    if (hits.empty()) return false;
    std::sort(sites_.begin(), sites_.end());
    std::vector<ftrace_site *> out;
    std::set_union(sites_.begin(), sites_.end(), hits.begin(), hits.end(), std::back_inserter(out));
    sites_ = std::move(out);
    publish_locked();
    return true;
}

std::string ftrace_hash::show(const char *empty_text) const
{
    std::vector<ftrace_site *> v = sites();
    std::vector<pending_mod> pend;
    {
        std::lock_guard<std::mutex> g(m_);
        pend = pending_;
    }
    if (v.empty() && pend.empty()) return empty_text;
    std::string s;
    for (ftrace_site *site : v) {
        s += site->sym ? site->sym->name : "0x" + std::to_string(site->ip);
        if (site->obj && !site->obj->is_main) s += " [" + site->obj->name + "]";
        s += '\n';
    }
    for (const pending_mod &p : pend)
        s += p.glob + ":mod:" + p.lib + "\n";
    return s;
}

std::vector<std::string> ftrace_split_tokens(std::string &carry, std::string_view text, bool final)
{
    std::vector<std::string> out;
    std::string buf = carry + std::string(text);
    carry.clear();
    size_t i = 0;
    while (i < buf.size()) {
        while (i < buf.size() && std::isspace(static_cast<unsigned char>(buf[i])))
            i++;
        size_t s = i;
        while (i < buf.size() && !std::isspace(static_cast<unsigned char>(buf[i])))
            i++;
        if (i == s) break;
        if (i == buf.size() && !final) {
            carry = buf.substr(s); // may continue in the next write
            break;
        }
        out.push_back(buf.substr(s, i - s));
    }
    return out;
}

int ftrace_filter_token(ftrace_hash &hash, std::string_view token,
                        const ftrace_command_fn &commands)
{
    bool neg = false;
    if (!token.empty() && token[0] == '!') {
        neg = true;
        token.remove_prefix(1);
    }
    size_t c1 = token.find(':');
    if (c1 == std::string_view::npos) return hash.match(token, "", neg, false) < 0 ? -EINVAL : 0;
    std::string_view func = token.substr(0, c1);
    std::string_view rest = token.substr(c1 + 1);
    size_t c2 = rest.find(':');
    std::string_view cmd = rest.substr(0, c2);
    std::string_view param =
        c2 == std::string_view::npos ? std::string_view() : rest.substr(c2 + 1);
    if (cmd == "mod") {
        if (param.empty()) return -EINVAL;
        return hash.match(func, param, neg, true) < 0 ? -EINVAL : 0;
    }
    // LIB:GLOB (the fprobe spelling) when LIB is a loaded object and GLOB no command: a
    // command's name is one, as in the kernel ("*:traceoff" is no glob in every object).
    if (c2 == std::string_view::npos && !cmd.empty() && !ftrace_command_exists(cmd) &&
        object_loaded(func))
        return hash.match(cmd, func, neg, false) < 0 ? -EINVAL : 0;
    if (!commands) return -EINVAL;
    ftrace_command_request r;
    r.glob = std::string(func);
    r.command = std::string(cmd);
    r.param = std::string(param);
    r.neg = neg;
    return commands(r);
}

namespace
{

std::string available_functions(bool with_addrs)
{
    ftrace_update_objects();
    std::string s;
    char addr[32];
    // What set_ftrace_filter accepts, as in the kernel: functions with a compiled-in site and
    // those a jump site can serve (uninstrumented libraries), not only the sites made so far.
    for (const ftrace_func_entry &f : ftrace_selectable_funcs()) {
        if (with_addrs) {
            std::snprintf(addr, sizeof addr, "%" PRIxPTR " ", f.ip);
            s += addr;
        }
        s += f.sym->name;
        if (f.obj && !f.obj->is_main) s += " [" + f.obj->name + "]";
        s += '\n';
    }
    return s;
}

std::string enabled_functions()
{
    ftrace_update_objects();
    std::string s;
    char buf[64];
    for (const ftrace_site *site : ftrace_all_sites()) {
        uint32_t n = ftrace_site_ops_count(site);
        if (!n || site->gone) continue;
        s += site->sym ? site->sym->name : std::string("0x") + std::to_string(site->ip);
        if (site->obj && !site->obj->is_main) s += " [" + site->obj->name + "]";
        // "(ops)" and the R I D O M flag columns of the kernel, all clear for our sites.
        std::snprintf(buf, sizeof buf, " (%u)%s%s%s%s%s\n", n, "  ", "  ", "  ", "  ", "   ");
        s += buf;
    }
    return s;
}

} // namespace

// The functions that can be traced and those that are (the kernel's ftrace_init_tracefs).
void tree::ftrace_filter_files()
{
    top_file("available_filter_functions",
             [] { return ro([] { return available_functions(false); }); });
    top_file("available_filter_functions_addrs",
             [] { return ro([] { return available_functions(true); }); });
    top_file("enabled_functions", [] { return ro(enabled_functions); });
}

} // namespace dprobe
