// The call tree of a recorded graph (see call_tree.h).
#include "tools/dprobe/report/call_tree.h"

#include <algorithm>

namespace dprobe::report
{

namespace
{

struct open_frame {
    uint64_t func;
    int32_t depth;
    uint64_t ts;
    uint32_t node;
    uint64_t callees = 0; // time of its callees that ended
};

// Whether a session ever unloaded an object: then one address may name two functions over
// time, and names are looked up each time rather than cached by address.
bool has_unloads(const session_view &sv)
{
    return std::any_of(sv.s->objects.begin(), sv.s->objects.end(),
                       [](const tracefile::object_info &o) { return o.unloaded; });
}

} // namespace

call_tree::call_tree()
{
    nodes.emplace_back(); // the root
}

uint32_t call_tree::function(const std::string &name, uint64_t addr, size_t session)
{
    auto [it, fresh] = by_name_.try_emplace(name, static_cast<uint32_t>(functions.size()));
    if (fresh) functions.push_back({name, addr, session});
    return it->second;
}

uint32_t call_tree::child(uint32_t parent, uint32_t func)
{
    const uint64_t key = uint64_t{parent} << 32 | func;
    auto [it, fresh] = edges_.try_emplace(key, static_cast<uint32_t>(nodes.size()));
    if (fresh) {
        call_node n;
        n.func = func;
        n.parent = parent;
        nodes.push_back(std::move(n));
        nodes[parent].children.push_back(it->second);
    }
    return it->second;
}

report_counts call_tree::build(const model &m, const report_opts &o, bool per_thread)
{
    report_counts rc;
    for (size_t si : m.stream_order) {
        const tracefile::thread_stream &t = m.reader.streams[si];
        if (!o.wants(t.tid)) continue;
        const session_view &sv = *m.sessions[t.session];
        const bool cache = !has_unloads(sv);
        std::unordered_map<uint64_t, uint32_t> func_of; // address -> function, when cached
        auto func_at = [&](uint64_t addr, uint64_t ts) {
            if (cache)
                if (auto it = func_of.find(addr); it != func_of.end()) return it->second;
            const uint32_t f = function(sv.syms.name(addr, ts), addr, t.session);
            if (cache) func_of.emplace(addr, f);
            return f;
        };
        uint32_t base = 0;
        if (per_thread)
            base =
                child(0, function(sv.comm_of(t.tid) + "-" + std::to_string(t.tid), 0, t.session));
        std::vector<open_frame> st;
        auto close_top = [&](uint64_t ts) {
            open_frame f = st.back();
            st.pop_back();
            const uint64_t dur = ts > f.ts ? ts - f.ts : 0;
            call_node &n = nodes[f.node];
            n.total_ns += dur;
            n.self_ns += dur > f.callees ? dur - f.callees : 0;
            n.calls++;
            if (!st.empty()) st.back().callees += dur;
        };
        tracefile::trace_reader::cursor cur(m.reader, si);
        tracefile::event e;
        uint64_t last_ts = 0, first_ts = 0;
        bool any = false;
        while (cur.next(e)) {
            if (!any) first_ts = e.ts;
            any = true;
            last_ts = e.ts;
            graph_event g;
            if (!decode_graph(e, g)) continue;
            if (g.entry) {
                // Frames left at this depth or deeper without an exit (lost) end here.
                while (!st.empty() && st.back().depth >= g.depth)
                    close_top(e.ts);
                const uint32_t parent = st.empty() ? base : st.back().node;
                st.push_back({g.func, g.depth, e.ts, child(parent, func_at(g.func, e.ts))});
                continue;
            }
            rc.unwound += g.unwound;
            size_t match = st.size();
            for (size_t i = st.size(); i-- > 0;)
                if (st[i].func == g.func && st[i].depth == g.depth) {
                    match = i;
                    break;
                }
            if (match < st.size()) {
                while (st.size() > match)
                    close_top(e.ts);
            } else {
                while (!st.empty() && st.back().depth >= g.depth)
                    close_top(e.ts);
            }
        }
        while (!st.empty())
            close_top(last_ts);
        // The thread's own frame: from its first event to its last (no call of its own).
        if (per_thread && any) nodes[base].total_ns += last_ts - first_ts;
        if (!cur.error().empty()) rc.errors.push_back(cur.error());
    }
    if (per_thread)
        for (uint32_t c : nodes[0].children) {
            // A thread's frame is at least as wide as what it holds, and its self time is
            // the time it spent outside traced calls.
            call_node &n = nodes[c];
            uint64_t inner = 0;
            for (uint32_t g : n.children)
                inner += nodes[g].total_ns;
            n.total_ns = std::max(n.total_ns, inner);
            n.self_ns = n.total_ns - inner;
        }
    nodes[0].total_ns = total_ns();
    return rc;
}

uint64_t call_tree::total_ns() const
{
    uint64_t t = 0;
    for (uint32_t c : nodes[0].children)
        t += nodes[c].total_ns;
    return t;
}

uint64_t call_tree::total_calls() const
{
    return subtree_calls(0);
}

uint64_t call_tree::subtree_calls(uint32_t n) const
{
    uint64_t c = 0;
    std::vector<uint32_t> todo{n};
    while (!todo.empty()) {
        const uint32_t i = todo.back();
        todo.pop_back();
        c += nodes[i].calls;
        for (uint32_t k : nodes[i].children)
            todo.push_back(k);
    }
    return c;
}

std::vector<uint32_t> call_tree::path(uint32_t n) const
{
    std::vector<uint32_t> p;
    for (; n != 0; n = nodes[n].parent)
        p.push_back(nodes[n].func);
    std::reverse(p.begin(), p.end());
    return p;
}

} // namespace dprobe::report
