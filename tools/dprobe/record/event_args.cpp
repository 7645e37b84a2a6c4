#include "tools/dprobe/record/event_args.h"

#include "tools/dprobe/commands/cli.h"
#include "tools/dprobe/resolve/needed_libs.h"
#include "tools/dprobe/resolve/perf_probe.h"
#include "tools/dprobe/resolve/sdt_notes.h"
#include "tools/dprobe/resolve/probe_list.h"
#include "tracefs/probe_parse.h"

#include <cctype>
#include <cstdio>
#include <cstring>

namespace dprobe::cli
{

bool looks_like_line(const std::string &e)
{
    auto argv = argv_split(e);
    if (argv.size() < 2 || argv[0].empty())
        return !argv.empty() && argv[0].size() >= 2 && argv[0][0] == '-' && argv[0][1] == ':';
    const std::string &h = argv[0];
    if (!std::strchr("pfrte-", h[0])) return false;
    size_t i = 1;
    while (i < h.size() && std::isdigit(static_cast<unsigned char>(h[i])))
        i++;
    return i == h.size() || h[i] == ':';
}

namespace
{

// A dynamic_events line with a type that is none (a typo: "x:foo bar"), which the perf-probe
// reading would take for FUNC:LINE with a bad line number: a single letter, optional digits
// (maxactive), ':', and an event name where perf's line number would be.
bool mistyped_line(const std::string &e)
{
    auto argv = argv_split(e);
    if (argv.empty()) return false;
    const std::string &h = argv[0];
    const size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0 || h.compare(colon, 2, "::") == 0) return false;
    if (!std::isalpha(static_cast<unsigned char>(h[0]))) return false;
    for (size_t i = 1; i < colon; i++)
        if (!std::isdigit(static_cast<unsigned char>(h[i]))) return false;
    const std::string rest = h.substr(colon + 1);
    return !rest.empty() && !std::isdigit(static_cast<unsigned char>(rest[0]));
}

} // namespace

std::string indent(const std::string &text)
{
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        out += "  " + text.substr(pos, nl - pos) + "\n";
        pos = nl == std::string::npos ? text.size() : nl + 1;
    }
    return out;
}

bool resolve_events(const char *cmd, const std::vector<std::string> &events,
                    const tools::elf_image *img, std::vector<std::string> &lines)
{
    std::vector<tools::stored_probe> stored;
    bool stored_loaded = false;
    for (const std::string &e : events) {
        std::vector<std::string> words = argv_split(e);
        if (!words.empty() && tools::is_sdt_spec(words.front())) {
            // USDT probes of the program and the libraries it loads.
            if (!img) {
                fail(cmd, "event '" + e +
                              "': SDT probes are read from the program's ELF file, "
                              "and the program is not one");
                return false;
            }
            std::vector<std::string> objects{img->real_path()};
            for (const std::string &lib : tools::needed_libraries(img->real_path()))
                objects.push_back(lib);
            std::vector<std::string> found, notes;
            std::string err;
            if (!tools::sdt_lines(words, objects, found, notes, &err)) {
                fail(cmd, err);
                return false;
            }
            for (const std::string &n : notes)
                std::fprintf(stderr, "dprobe %s: note: %s\n", cmd, n.c_str());
            for (const std::string &l : found) {
                tools::perf_probe_result r = tools::check_dynevent_line(l, nullptr);
                if (!r.ok) {
                    fail(cmd, "event '" + e + "' gives a bad line '" + l + "': " + r.message);
                    if (!r.error_log.empty()) std::fputs(indent(r.error_log).c_str(), stderr);
                    return false;
                }
                lines.push_back(l);
            }
            continue;
        }
        if (!looks_like_line(e)) {
            if (!stored_loaded) {
                std::string err;
                stored = tools::load_probe_list(probe_list_path(), &err);
                stored_loaded = true;
            }
            size_t before = lines.size();
            for (const auto &p : stored)
                if (tools::probe_selected(e, p)) lines.push_back(p.line);
            if (lines.size() != before) continue;
            if (mistyped_line(e)) {
                fail(cmd, "event '" + e + "': '" + e.substr(0, e.find(':')) +
                              ":' is not a probe type: a dynamic_events line starts with p: "
                              "(kprobe), r: (kretprobe), f: (fprobe), t: (tracepoint) or e: "
                              "(event probe), and a perf-probe definition FUNC:LINE has a line "
                              "number after the ':'");
                return false;
            }
            // perf-probe syntax on the program itself, as `dprobe probe -x PROG` reads it.
            tools::perf_probe_result r;
            if (img) {
                r = tools::translate_perf_probe(argv_split(e), *img);
                if (r.ok) {
                    for (const auto &n : r.notes)
                        std::fprintf(stderr, "dprobe %s: note: %s\n", cmd, n.c_str());
                    lines.push_back(r.line);
                    continue;
                }
            }
            fail(cmd, "event '" + e +
                          "' is neither a dynamic_events line, a probe defined "
                          "with 'dprobe probe --add' (see 'dprobe probe --list'), nor a "
                          "probe of " +
                          (img ? img->module_name() + ": " + r.message : "the program"));
            if (!r.error_log.empty()) std::fputs(indent(r.error_log).c_str(), stderr);
            return false;
        }
        // Parse errors, and for places in the program itself, the symbol checks and the
        // names its debug info resolves too.
        tools::perf_probe_result r = tools::check_dynevent_line(e, nullptr);
        if (r.ok && img && (r.def.kind == probe_kind::kprobe || r.def.kind == probe_kind::fprobe) &&
            r.def.place.kind == probe_place::form::symbol) {
            const std::string &obj = r.def.place.object;
            bool in_prog = obj.empty() ? !img->object().funcs_named(r.def.place.symbol).empty()
                                       : obj == img->module_name();
            if (in_prog) r = tools::check_dynevent_line(e, img);
        }
        if (!r.ok) {
            fail(cmd, "bad event '" + e + "': " + r.message);
            if (!r.error_log.empty()) std::fputs(indent(r.error_log).c_str(), stderr);
            return false;
        }
        lines.push_back(e);
    }
    return true;
}

} // namespace dprobe::cli
