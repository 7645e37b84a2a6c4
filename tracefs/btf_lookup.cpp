// Function prototypes of the running process from its objects' DWARF (see btf_lookup.h).
#include "tracefs/btf_lookup.h"

#include "core/symbols.h"

#include <map>
#include <mutex>
#include <set>

namespace dprobe
{

namespace
{

bool is_glob(std::string_view s)
{
    return s.find_first_of("*?[") != std::string_view::npos;
}

} // namespace

namespace
{
std::mutex g_cache_mutex;
std::map<std::string, std::shared_ptr<const debuginfo>> &debuginfo_cache()
{
    static auto *cache = new std::map<std::string, std::shared_ptr<const debuginfo>>;
    return *cache;
}
} // namespace

void debuginfo_cache_release()
{
    std::lock_guard<std::mutex> g(g_cache_mutex);
    debuginfo_cache().clear();
}

std::shared_ptr<const debuginfo> debuginfo_of_file(const std::string &path)
{
    std::lock_guard<std::mutex> g(g_cache_mutex);
    auto *cache = &debuginfo_cache();
    auto it = cache->find(path);
    if (it != cache->end()) return it->second;
    std::string err;
    std::shared_ptr<const debuginfo> di = debuginfo::open(path, &err);
    cache->emplace(path, di);
    return di;
}

std::optional<func_proto_ptr> func_proto_of_place(const probe_definition &def)
{
    // Symbols and addresses of the process; a file offset (a uprobe's place) is none.
    const probe_place &pl = def.place;
    auto &ks = kallsyms::instance();
    object_ptr obj;
    uintptr_t func = 0;
    if (pl.kind == probe_place::form::symbol) {
        if (is_glob(pl.symbol)) return nullptr;
        std::set<uintptr_t> addrs;
        for (const sym_hit &h : bindable_funcs(ks.lookup_func(pl.qualified_symbol()))) {
            addrs.insert(h.sym->addr);
            obj = h.obj;
            func = h.sym->addr;
        }
        if (addrs.size() != 1) return nullptr;
    } else if (pl.kind == probe_place::form::address) {
        auto h = ks.lookup_addr(pl.address);
        if (!h) return nullptr;
        obj = h->obj;
        func = h->sym->addr;
    } else {
        return nullptr;
    }
    if (!obj || obj->path.empty()) return nullptr;
    return func_proto_at(debuginfo_of_file(obj->path), func - obj->load_bias);
}

} // namespace dprobe
