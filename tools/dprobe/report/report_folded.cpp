// dprobe report --format folded: the call tree as folded stacks, the input of Brendan Gregg's
// flamegraph.pl, inferno-flamegraph and speedscope: one line per call path with its own
// weight, "main;wf_count_range;wf_insert 25248". By time the weight is the path's self time
// in nanoseconds (the tools add a frame's callees to it, so a frame is as wide as its
// inclusive time); by calls, the calls that ended on that path. Paths with no weight of
// their own are left out, as those tools expect. A ';' inside a name becomes ':'.
#include "tools/dprobe/report/call_tree.h"

#include <algorithm>
#include <cinttypes>

namespace dprobe::report
{

report_counts format_folded(const model &m, const report_opts &o, std::FILE *out)
{
    call_tree t;
    report_counts rc = t.build(m, o, o.per_thread);
    std::vector<std::string> names;
    names.reserve(t.functions.size());
    for (const tree_function &f : t.functions) {
        std::string n = f.name;
        std::replace(n.begin(), n.end(), ';', ':');
        names.push_back(std::move(n));
    }
    // Depth first, children by name: the lines come out sorted by path.
    std::string line;
    auto by_name = [&](uint32_t a, uint32_t b) {
        return names[t.nodes[a].func] < names[t.nodes[b].func];
    };
    std::vector<std::pair<uint32_t, size_t>> todo; // node, length of line before it
    std::vector<uint32_t> kids = t.nodes[0].children;
    std::sort(kids.rbegin(), kids.rend(), by_name);
    for (uint32_t k : kids)
        todo.emplace_back(k, 0);
    while (!todo.empty()) {
        auto [n, len] = todo.back();
        todo.pop_back();
        line.resize(len);
        if (len) line += ';';
        line += names[t.nodes[n].func];
        const call_node &c = t.nodes[n];
        const uint64_t w = o.weight == report_opts::weight_kind::calls ? c.calls : c.self_ns;
        if (w) std::fprintf(out, "%s %" PRIu64 "\n", line.c_str(), w);
        kids = c.children;
        std::sort(kids.rbegin(), kids.rend(), by_name);
        for (uint32_t k : kids)
            todo.emplace_back(k, line.size());
    }
    return rc;
}

} // namespace dprobe::report
