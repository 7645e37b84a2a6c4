// dprobe report --format flamegraph: the call tree (call_tree.h) as a self-contained,
// interactive SVG flame graph, the picture of Brendan Gregg's flamegraph.pl drawn by dprobe
// itself: one box per call path, as wide as its inclusive time (or, --weight calls, as the
// calls made on it and below it), callees stacked on their caller, siblings in name order;
// --icicle hangs the graph from the top. Click to zoom, search, tooltips with time, calls
// and share: the script in flamegraph_js.h.
//
// The layout is computed here, so the file shows the whole graph without its script too.
// Frames narrower than 0.1 pixel at full width are left out (with what they called), as
// flamegraph.pl does: the file stays small whatever the trace, and the subtitle says how
// many were left out.
#include "tools/dprobe/report/call_tree.h"
#include "tools/dprobe/report/flamegraph_js.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>

namespace dprobe::report
{

namespace
{

constexpr double k_width = 1200, k_pad = 10, k_frame_h = 16, k_top = 62, k_bottom = 30;
constexpr double k_char_w = 7.08; // monospace 12px: the script's CHAR
constexpr double k_min_px = 0.1;

std::string xml_escape(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        default:
            if (static_cast<unsigned char>(c) >= 0x20 || c == '\n') out += c;
        }
    }
    return out;
}

std::string human_time(uint64_t ns)
{
    char b[48];
    if (ns < 1000)
        std::snprintf(b, sizeof b, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        std::snprintf(b, sizeof b, "%.3f us", ns / 1e3);
    else if (ns < 1000000000)
        std::snprintf(b, sizeof b, "%.3f ms", ns / 1e6);
    else
        std::snprintf(b, sizeof b, "%.3f s", ns / 1e9);
    return b;
}

std::string calls_text(uint64_t n)
{
    return std::to_string(n) + (n == 1 ? " call" : " calls");
}

// A warm colour from the name, the same for a function wherever it appears.
std::string frame_colour(const std::string &name)
{
    uint32_t h = 2166136261u;
    for (unsigned char c : name)
        h = (h ^ c) * 16777619u;
    const unsigned r = 205 + (h & 0xff) % 50, g = (h >> 8 & 0xff) % 230, b = (h >> 16 & 0xff) % 55;
    return "rgb(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

// The label that fits in W pixels (the script's fit()).
std::string fitted(const std::string &name, double w)
{
    const double room = std::floor((w - 6) / k_char_w);
    if (room < 3) return "";
    if (name.size() <= room) return name;
    return name.substr(0, static_cast<size_t>(room) - 2) + "..";
}

std::string program_of(const model &m)
{
    for (const auto &sv : m.sessions)
        if (std::string c = sv->s->get("comm"); !c.empty()) return c;
    return "?";
}

} // namespace

report_counts format_flamegraph(const model &m, const report_opts &o, std::FILE *out)
{
    call_tree t;
    report_counts rc = t.build(m, o, o.per_thread);
    const bool by_calls = o.weight == report_opts::weight_kind::calls;
    const size_t n = t.nodes.size();
    // Each node's weight: inclusive time, or its calls and those below it.
    std::vector<uint64_t> val(n);
    for (size_t i = n; i-- > 1;) {
        val[i] += by_calls ? t.nodes[i].calls : t.nodes[i].total_ns;
        if (by_calls) val[t.nodes[i].parent] += val[i];
    }
    val[0] = by_calls ? val[0] : t.total_ns();
    const double root = static_cast<double>(std::max<uint64_t>(val[0], 1));
    const double span = k_width - 2 * k_pad;

    // Lay out depth first: offsets in weight units, children by name.
    struct placed {
        uint32_t node;
        uint64_t off;
        int depth;
    };
    std::vector<placed> frames;
    size_t left_out = 0;
    int max_depth = 0;
    std::vector<placed> todo{{0, 0, 0}};
    while (!todo.empty()) {
        placed p = todo.back();
        todo.pop_back();
        if (p.node && val[p.node] / root * span < k_min_px) {
            left_out++;
            continue;
        }
        frames.push_back(p);
        max_depth = std::max(max_depth, p.depth);
        std::vector<uint32_t> kids = t.nodes[p.node].children;
        std::sort(kids.begin(), kids.end(), [&](uint32_t a, uint32_t b) {
            return t.functions[t.nodes[a].func].name < t.functions[t.nodes[b].func].name;
        });
        uint64_t off = p.off;
        for (uint32_t k : kids) {
            todo.push_back({k, off, p.depth + 1});
            off += val[k];
        }
    }
    const double height = k_top + (max_depth + 1) * k_frame_h + k_bottom;
    auto y_of = [&](int depth) {
        return o.icicle ? k_top + depth * k_frame_h : height - k_bottom - (depth + 1) * k_frame_h;
    };

    const std::string title =
        o.title.empty()
            ? std::string(o.icicle ? "Icicle graph" : "Flame graph") + " of " + program_of(m)
            : o.title;
    std::string subtitle = std::string("by ") + (by_calls ? "calls" : "inclusive time") + ", " +
                           (o.per_thread ? "one tree per thread" : "threads merged") + "; " +
                           (by_calls ? calls_text(val[0]) : human_time(val[0])) + " in all";
    if (left_out)
        subtitle += "; " + std::to_string(left_out) + " call path" + (left_out == 1 ? "" : "s") +
                    " narrower than 0.1 px left out";
    std::fprintf(out,
                 "<?xml version=\"1.0\" standalone=\"no\"?>\n"
                 "<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                 "xmlns=\"http://www.w3.org/2000/svg\" "
                 "data-weight=\"%s\" data-total=\"%" PRIu64 "\">\n"
                 "<!-- a flame graph drawn by dprobe report -->\n"
                 "<style>%s</style>\n<script type=\"text/ecmascript\"><![CDATA[%s]]></script>\n"
                 "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f0\"/>\n"
                 "<text id=\"title\" x=\"%.0f\" y=\"24\">%s</text>\n"
                 "<text id=\"subtitle\" x=\"%.0f\" y=\"44\">%s</text>\n"
                 "<text id=\"unzoom\" class=\"button hide\" x=\"%.0f\" y=\"24\">Reset zoom</text>\n"
                 "<text id=\"search\" class=\"button\" x=\"%.0f\" y=\"24\" "
                 "text-anchor=\"end\">Search</text>\n"
                 "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n"
                 "<text id=\"matched\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\"> </text>\n"
                 "<g id=\"frames\">\n",
                 k_width, height, k_width, height, by_calls ? "calls" : "time", val[0],
                 k_flamegraph_style, k_flamegraph_script, k_width / 2, xml_escape(title).c_str(),
                 k_width / 2, xml_escape(subtitle).c_str(), k_pad, k_width - k_pad, k_pad,
                 height - 10, k_width - k_pad, height - 10);
    const uint64_t all_calls = by_calls ? val[0] : t.total_calls();
    for (const placed &p : frames) {
        const call_node &c = t.nodes[p.node];
        const bool is_root = p.node == 0;
        const bool is_thread = o.per_thread && c.parent == 0 && !is_root;
        const std::string name = is_root ? "all" : t.functions[c.func].name;
        const double x = k_pad + p.off / root * span, w = val[p.node] / root * span;
        const double pct = 100.0 * val[p.node] / root;
        char share[32];
        std::snprintf(share, sizeof share, "%.2f%%", pct);
        std::string tip = name + "\n";
        if (is_root)
            tip += (by_calls ? calls_text(all_calls) : human_time(val[0])) + " (100%), " +
                   (by_calls ? human_time(t.total_ns()) : calls_text(all_calls));
        else if (is_thread)
            tip += "thread: " + human_time(c.total_ns) + ", " +
                   calls_text(t.subtree_calls(p.node)) + " (" + share + ")";
        else if (by_calls)
            tip += calls_text(val[p.node]) + " here and below (" + share + "), " +
                   calls_text(c.calls) + " of it, " + human_time(c.total_ns) + " (self " +
                   human_time(c.self_ns) + ")";
        else
            tip += human_time(c.total_ns) + " (" + share + "), " + calls_text(c.calls) + ", self " +
                   human_time(c.self_ns);
        const std::string fill = is_root     ? "rgb(200,200,200)"
                                 : is_thread ? "rgb(150,180,230)"
                                             : frame_colour(name);
        std::fprintf(out,
                     "<g class=\"f\" data-o=\"%" PRIu64 "\" data-v=\"%" PRIu64 "\" data-d=\"%d\">"
                     "<title>%s</title><rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" "
                     "fill=\"%s\" rx=\"2\"/><text x=\"%.2f\" y=\"%.0f\">%s</text></g>\n",
                     p.off, val[p.node], p.depth, xml_escape(tip).c_str(), x, y_of(p.depth), w,
                     k_frame_h - 1, fill.c_str(), x + 3, y_of(p.depth) + 12,
                     xml_escape(fitted(name, w)).c_str());
    }
    std::fputs("</g>\n</svg>\n", out);
    return rc;
}

} // namespace dprobe::report
