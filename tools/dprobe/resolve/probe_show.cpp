#include "tools/dprobe/resolve/probe_show.h"

#include "tools/dprobe/resolve/probe_finder.h"

#include <cstdio>
#include <fstream>
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

// perf's lines after the last probe-able one when the range is open-ended.
constexpr int additional_lines = 2;

} // namespace

bool show_line_range(const debuginfo &di, const elf_image &img, const std::string &range,
                     std::string &out, std::string *err)
{
    line_range_spec lr;
    if (!parse_line_range(range, lr, err)) return false;
    std::set<int> lines;
    std::string path;
    int offset = 0; // FUNC's declaration line: numbers are relative to it
    int start, end;
    if (!lr.function.empty()) {
        auto funcs = probe_finder(di, img).functions(lr.function, lr.file);
        if (funcs.empty())
            return fail(err, "no function '" + lr.function + "'" +
                                 (lr.file.empty() ? "" : " declared in '" + lr.file + "'") +
                                 " in the debug info of " + di.path());
        const dwarf_function &f = funcs.front();
        offset = f.decl_line;
        start = offset + lr.start;
        end = lr.end == INT_MAX ? INT_MAX : offset + lr.end;
        Dwarf_Die cu = f.cu;
        path = di.source_path(&cu, f.decl_file);
        for (const dwarf_function &copy : funcs)
            for (const dwarf_line &row : di.function_lines(copy))
                if (row.line >= start && row.line <= end) lines.insert(row.line);
    } else {
        start = lr.start;
        end = lr.end;
        for (Dwarf_Die &cu : di.units()) {
            for (const dwarf_line &row : di.lines(&cu)) {
                if (!row.is_stmt || !row.file || !file_matches(row.file, lr.file) ||
                    row.line < start || row.line > end)
                    continue;
                if (path.empty()) path = di.source_path(&cu, row.file);
                lines.insert(row.line);
            }
        }
    }
    if (lines.empty())
        return fail(err, "no line of '" + range + "' has code to probe in " + di.path());
    std::ifstream src(path);
    if (!src) {
        std::string nums;
        for (int ln : lines)
            nums += (nums.empty() ? "" : " ") + std::to_string(ln - offset);
        return fail(err,
                    "cannot open the source file " + path + "; the lines with code are: " + nums);
    }
    char head[64];
    out = "<";
    if (!lr.function.empty()) {
        std::snprintf(head, sizeof head, ":%d>\n", start - offset);
        out += lr.function + "@" + path + head;
    } else {
        std::snprintf(head, sizeof head, ":%d>\n", start);
        out += path + head;
    }
    int l = 1;
    std::string text;
    auto next = [&]() { return static_cast<bool>(std::getline(src, text)); };
    while (l < start) {
        if (!next()) return fail(err, path + " is shorter than its debug info says");
        l++;
    }
    char num[32];
    for (int ln : lines) {
        for (; l <= ln; l++) {
            if (!next()) return fail(err, path + " is shorter than its debug info says");
            if (l == ln) {
                std::snprintf(num, sizeof num, "%7d  ", l - offset);
                out += num + text + "\n";
            } else {
                out += "         " + text + "\n";
            }
        }
    }
    if (end == INT_MAX) end = l + additional_lines;
    for (; l <= end && next(); l++)
        out += "         " + text + "\n";
    return true;
}

bool show_available_vars(const debuginfo &di, const elf_image &img, const std::string &point,
                         std::string &out, std::string *err)
{
    perf_probe_point pp;
    if (!parse_perf_probe_point(point, pp, err)) return false;
    probe_finder finder(di, img);
    probe_site site;
    if (!finder.resolve(pp, site, err)) return false;
    out = "Available variables at " + point + "\n";
    out += "\t@<" + site.symbol + "+" + std::to_string(site.offset) + ">\n";
    size_t n = 0;
    for (const site_variable &v : finder.variables(site)) {
        if (!v.located) continue;
        out += "\t\t" + v.type_name + "\t" + v.name + "\n";
        n++;
    }
    if (n == 0) out += "\t\t(No matched variables)\n";
    return true;
}

} // namespace dprobe::tools
