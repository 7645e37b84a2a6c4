// Which loaded objects exist only for dprobe (see self_objects.h).
#include "core/self_objects.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace dprobe
{

namespace
{

using reach_set = std::unordered_set<const loaded_object *>;

// Every object reachable from ROOTS through DT_NEEDED names, not walking through SKIP.
reach_set reach(const std::vector<const loaded_object *> &roots,
                const std::unordered_multimap<std::string, const loaded_object *> &by_name,
                const loaded_object *skip)
{
    reach_set seen(roots.begin(), roots.end());
    std::deque<const loaded_object *> todo(roots.begin(), roots.end());
    while (!todo.empty()) {
        const loaded_object *o = todo.front();
        todo.pop_front();
        for (const std::string &n : o->needed) {
            auto [b, e] = by_name.equal_range(n);
            for (auto it = b; it != e; ++it)
                if (it->second != skip && seen.insert(it->second).second)
                    todo.push_back(it->second);
        }
    }
    return seen;
}

} // namespace

std::vector<object_ptr> objects_only_for(const object_ptr &self,
                                         const std::vector<object_ptr> &objs)
{
    if (!self || self->is_main) return {};
    // A DT_NEEDED entry names an object by its soname; objects without one by file name.
    std::unordered_multimap<std::string, const loaded_object *> by_name;
    for (const object_ptr &o : objs) {
        if (!o->soname.empty()) by_name.emplace(o->soname, o.get());
        if (o->name != o->soname) by_name.emplace(o->name, o.get());
    }
    reach_set mine = reach({self.get()}, by_name, nullptr);
    std::vector<const loaded_object *> others;
    for (const object_ptr &o : objs)
        if (o.get() != self.get() && !mine.count(o.get()))
            others.push_back(o.get()); // the program, what it dlopen'ed, the vdso...
    reach_set theirs = reach(others, by_name, self.get());
    std::vector<object_ptr> out;
    for (const object_ptr &o : objs)
        if (o.get() != self.get() && mine.count(o.get()) && !theirs.count(o.get()))
            out.push_back(o);
    return out;
}

bool loaded_for_dprobe_only(const loaded_object &obj)
{
    static std::mutex mu;
    static auto *cached_for = new std::shared_ptr<const std::vector<object_ptr>>;
    static auto *cached = new std::vector<uint64_t>; // object ids, sorted
    auto &ks = kallsyms::instance();
    auto objs = ks.objects();
    std::lock_guard<std::mutex> g(mu);
    if (*cached_for != objs) {
        cached->clear();
        object_ptr self = ks.object_of(reinterpret_cast<uintptr_t>(&loaded_for_dprobe_only));
        for (const object_ptr &o : objects_only_for(self, *objs))
            cached->push_back(o->id);
        std::sort(cached->begin(), cached->end());
        *cached_for = objs;
    }
    return std::binary_search(cached->begin(), cached->end(), obj.id);
}

} // namespace dprobe
