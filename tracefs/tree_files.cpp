// The tracefs tree's files as their subsystems register them (tree_node.h, "registering
// files"): one table of top-level files and directories and one of each trace array's,
// filled by the registrars once, before the first lookup, and read-only after.
#include "tracefs/tree_node.h"

#include <map>
#include <mutex>

namespace dprobe::tree
{
namespace
{

using top_resolver = std::function<std::optional<node>(const std::vector<std::string> &p)>;
using array_resolver = std::function<std::optional<node>(
    const std::shared_ptr<trace_array> &tr, const std::vector<std::string> &p, size_t at)>;

struct registry {
    std::map<std::string, top_resolver, std::less<>> top;
    std::map<std::string, array_resolver, std::less<>> array;
};

// Every subsystem with files (the kernel's fs_initcalls that create them).
constexpr void (*k_registrars[])() = {
    tracefs_tree_files,     trace_array_files,   trace_kprobe_files,
    trace_uprobe_files,     ftrace_filter_files, tracer_graph_files,
    function_profile_files, stack_tracer_files,  saved_cmdlines_files,
};

registry *filling = nullptr; // while the registrars run

registry &files()
{
    static registry r;
    static std::once_flag once;
    std::call_once(once, [] {
        filling = &r;
        for (auto *reg : k_registrars)
            reg();
        filling = nullptr;
    });
    return r;
}

registry &being_filled()
{
    // A registration outside a registrar would race with lookups.
    if (!filling) std::abort();
    return *filling;
}

void add(std::map<std::string, top_resolver, std::less<>> &m, std::string name, top_resolver r)
{
    if (!m.emplace(std::move(name), std::move(r)).second) std::abort(); // one owner a name
}

} // namespace

void top_file(std::string name, std::function<node()> make)
{
    add(being_filled().top, std::move(name),
        [make = std::move(make)](const std::vector<std::string> &p) -> std::optional<node> {
            if (p.size() != 1) return std::nullopt;
            return make();
        });
}

void top_dir(std::string name, top_resolver resolve)
{
    add(being_filled().top, std::move(name), std::move(resolve));
}

void array_file(std::string name, std::function<node(const std::shared_ptr<trace_array> &tr)> make)
{
    array_dir(std::move(name),
              [make = std::move(make)](const std::shared_ptr<trace_array> &tr,
                                       const std::vector<std::string> &p,
                                       size_t at) -> std::optional<node> {
                  if (p.size() != at + 1) return std::nullopt;
                  return make(tr);
              });
}

void array_dir(std::string name, array_resolver resolve)
{
    if (!being_filled().array.emplace(std::move(name), std::move(resolve)).second) std::abort();
}

std::optional<node> resolve_top(const std::vector<std::string> &p, bool &is_top)
{
    const registry &r = files();
    auto it = r.top.find(p[0]);
    is_top = it != r.top.end();
    if (!is_top) return std::nullopt;
    return it->second(p);
}

std::optional<node> resolve_array(const std::shared_ptr<trace_array> &tr,
                                  const std::vector<std::string> &p, size_t at)
{
    if (p.size() <= at) return std::nullopt;
    const registry &r = files();
    auto it = r.array.find(p[at]);
    if (it == r.array.end()) return std::nullopt;
    std::optional<node> n = it->second(tr, p, at);
    if (n) n->arr = tr;
    return n;
}

std::vector<std::string> top_entries()
{
    std::vector<std::string> v;
    for (const auto &[name, _] : files().top)
        v.push_back(name);
    return v;
}

std::vector<std::string> array_entries()
{
    std::vector<std::string> v;
    for (const auto &[name, _] : files().array)
        v.push_back(name);
    return v;
}

} // namespace dprobe::tree
