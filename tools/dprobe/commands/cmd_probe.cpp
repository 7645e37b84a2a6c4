// dprobe probe: perf-probe syntax to dynamic_events lines; a probe list for `record`.
#include "tools/dprobe/commands/cli.h"
#include "tracefs/dwarf/debuginfo.h"
#include "tools/dprobe/resolve/perf_probe.h"
#include "tools/dprobe/resolve/probe_list.h"
#include "tools/dprobe/resolve/probe_show.h"
#include "tools/dprobe/resolve/sdt_notes.h"

#include <cstdio>

namespace dprobe::cli
{

namespace
{

struct probe_opts {
    std::string bin;
    std::vector<std::string> words;
    std::vector<std::string> adds;
    std::vector<std::string> dels;
    std::vector<std::string> line_ranges; // --line
    std::vector<std::string> var_points;  // --vars
    bool list = false;
    bool force = false;
};

std::string join(const std::vector<std::string> &v)
{
    std::string s;
    for (const auto &w : v)
        s += (s.empty() ? "" : " ") + w;
    return s;
}

// "(on wordfreq:wf_insert with len=$arg3:u64)" from a listing line.
std::string describe(const tools::stored_probe &p)
{
    auto argv = argv_split(p.line);
    std::string s = "(on " + (argv.size() > 1 ? argv[1] : std::string("?"));
    if (argv.size() > 2) {
        s += " with";
        for (size_t i = 2; i < argv.size(); i++)
            s += " " + argv[i];
    }
    return s + ")";
}

void show_notes(const tools::perf_probe_result &r)
{
    for (const auto &n : r.notes)
        std::fprintf(stderr, "dprobe probe: note: %s\n", n.c_str());
}

// --line and --vars: listings from the debug info.
int show_debuginfo(const probe_opts &o, const tools::elf_image &img)
{
    std::string err;
    auto di = debuginfo::open(img.real_path(), &err);
    if (!di) return fail("probe", err);
    for (const auto &range : o.line_ranges) {
        std::string out;
        if (!tools::show_line_range(*di, img, range, out, &err))
            return fail("probe", "--line '" + range + "': " + err);
        std::fputs(out.c_str(), stdout);
    }
    for (const auto &point : o.var_points) {
        std::string out;
        if (!tools::show_available_vars(*di, img, point, out, &err))
            return fail("probe", "--vars '" + point + "': " + err);
        std::fputs(out.c_str(), stdout);
    }
    return 0;
}

void show_failure(const std::string &what, const tools::perf_probe_result &r)
{
    fail("probe", what + ": " + r.message);
    if (!r.error_log.empty()) {
        std::string indented;
        size_t pos = 0;
        while (pos < r.error_log.size()) {
            size_t nl = r.error_log.find('\n', pos);
            indented += "  " + r.error_log.substr(pos, nl - pos) + "\n";
            pos = nl == std::string::npos ? r.error_log.size() : nl + 1;
        }
        std::fputs(indented.c_str(), stderr);
    }
}

int run_probe(const probe_opts &o)
{
    const std::string list_path = probe_list_path();
    int actions = !o.words.empty() + !o.adds.empty() + !o.dels.empty() + o.list +
                  !o.line_ranges.empty() + !o.var_points.empty();
    if (actions == 0)
        return fail("probe", "nothing to do: give a PROBEDEF, --add, --del, --list, --line or "
                             "--vars (see 'dprobe probe --help')");
    if (o.list || !o.dels.empty()) {
        std::string err;
        auto list = tools::load_probe_list(list_path, &err);
        if (!err.empty()) return fail("probe", err);
        if (o.list) {
            for (const auto &p : list)
                std::printf("  %-32s %s\n", p.name().c_str(), describe(p).c_str());
            if (list.empty()) std::fprintf(stderr, "no probes defined (%s)\n", list_path.c_str());
        }
        if (!o.dels.empty()) {
            std::vector<tools::stored_probe> keep;
            std::vector<bool> used(o.dels.size());
            for (const auto &p : list) {
                bool del = false;
                for (size_t i = 0; i < o.dels.size(); i++)
                    if (tools::probe_selected(o.dels[i], p)) del = used[i] = true;
                if (del)
                    std::printf("Removed event: %s\n", p.name().c_str());
                else
                    keep.push_back(p);
            }
            for (size_t i = 0; i < o.dels.size(); i++)
                if (!used[i])
                    return fail("probe", "no event matches '" + o.dels[i] + "' in " + list_path);
            if (!tools::save_probe_list(list_path, keep, &err)) return fail("probe", err);
        }
        if (o.words.empty() && o.adds.empty()) return 0;
    }
    if (o.bin.empty())
        return fail("probe", "-x BIN is required: name the executable or library to probe");
    std::string err;
    auto img = tools::elf_image::open(o.bin, &err);
    if (!img) return fail("probe", err);
    if (!o.line_ranges.empty() || !o.var_points.empty()) {
        if (int rc = show_debuginfo(o, *img)) return rc;
    }

    // sdt_PROVIDER:NAME [ARG...]: the USDT probes of BIN, as uprobe-style lines.
    auto sdt = [&](const std::string &spec, std::vector<std::string> &lines) {
        std::vector<std::string> notes;
        std::string err;
        if (!tools::sdt_lines(argv_split(spec), {img->real_path()}, lines, notes, &err))
            return fail("probe", err) == 0;
        for (const auto &n : notes)
            std::fprintf(stderr, "dprobe probe: note: %s\n", n.c_str());
        return true;
    };
    const std::vector<std::string> spec_words = argv_split(join(o.words));
    if (!spec_words.empty() && tools::is_sdt_spec(spec_words.front())) {
        std::vector<std::string> lines;
        if (!sdt(join(o.words), lines)) return 1;
        for (const auto &l : lines)
            std::printf("%s\n", l.c_str());
    } else if (!o.words.empty()) {
        std::string spec = join(o.words);
        auto r = tools::translate_perf_probe(argv_split(spec), *img);
        if (!r.ok) {
            show_failure("'" + spec + "'", r);
            return 1;
        }
        show_notes(r);
        std::printf("%s\n", r.line.c_str());
    }
    if (o.adds.empty()) return 0;

    auto list = tools::load_probe_list(list_path, &err);
    if (!err.empty()) return fail("probe", err);
    std::vector<tools::stored_probe> added;
    std::vector<std::string> add_lines;
    for (const auto &spec : o.adds) {
        auto words = argv_split(spec);
        if (!words.empty() && tools::is_sdt_spec(words.front())) {
            if (!sdt(spec, add_lines)) return 1;
            continue;
        }
        auto r = tools::translate_perf_probe(words, *img);
        if (!r.ok) {
            show_failure("'" + spec + "'", r);
            return 1;
        }
        show_notes(r);
        add_lines.push_back(r.line);
    }
    for (const auto &line : add_lines) {
        auto p = tools::stored_probe_from_line(line);
        if (!p) return fail("probe", "internal: generated line has no event name: " + line);
        bool replaced = false, appended = false;
        for (const auto &a : added)
            appended |= a.group == p->group && a.event == p->event; // another site of it
        for (auto &q : list) {
            if (appended || q.group != p->group || q.event != p->event) continue;
            if (!o.force)
                return fail("probe", "event \"" + p->name() +
                                         "\" already exists.\n"
                                         "  Hint: remove it with 'dprobe probe --del " +
                                         p->name() + "' or use --force");
            q = *p;
            replaced = true;
        }
        if (!replaced) list.push_back(*p);
        added.push_back(*p);
    }
    if (!tools::save_probe_list(list_path, list, &err)) return fail("probe", err);
    std::printf("Added new event%s:\n", added.size() > 1 ? "s" : "");
    for (const auto &p : added)
        std::printf("  %-32s %s\n", p.name().c_str(), describe(p).c_str());
    std::printf(
        "\nYou can now use it with dprobe record, such as:\n\n\tdprobe record -e %s -- %s\n\n",
        added.front().name().c_str(), o.bin.c_str());
    return 0;
}

} // namespace

void setup_probe(CLI::App &app)
{
    auto o = std::make_shared<probe_opts>();
    CLI::App *sub = app.add_subcommand("probe", "Define probe events in perf-probe syntax");
    set_usage(sub, "dprobe probe [<options>] -x BIN 'PROBEDEF' [ARG...]\n"
                   "dprobe probe [<options>] -x BIN --add 'PROBEDEF' [--add 'PROBEDEF' ...]\n"
                   "dprobe probe [<options>] --del EVENT ...\n"
                   "dprobe probe --list\n"
                   "dprobe probe -x BIN --line 'FUNC[:RLN[+NUM|-RLN2]]|SRC[:ALN[+NUM|-ALN2]]'\n"
                   "dprobe probe -x BIN --vars 'PROBEPOINT'");
    sub->description("Without --add, prints the dynamic_events line of PROBEDEF.");
    sub->add_option("-x,--exec", o->bin, "Executable or library the probe is in")->type_name("BIN");
    sub->add_option("-a,--add", o->adds, "Define a probe event and store it for dprobe record")
        ->type_name("PROBEDEF");
    sub->add_option("-d,--del", o->dels, "Delete stored probe events (globs allowed)")
        ->type_name("[GROUP:]EVENT");
    sub->add_flag("-l,--list", o->list, "List the stored probe events");
    sub->add_option("-L,--line", o->line_ranges,
                    "Show the source lines of a function or file, numbering those a probe can "
                    "go on (needs -g)")
        ->type_name("RANGE");
    sub->add_option("-V,--vars", o->var_points,
                    "Show the variables a probe at PROBEPOINT can fetch (needs -g)")
        ->type_name("PROBEPOINT");
    sub->add_flag("-f,--force", o->force, "Replace a stored event of the same name");
    sub->add_option("probedef", o->words, "The probe definition (words are joined)")
        ->type_name("PROBEDEF");
    sub->footer(
        "PROBEDEF:\n"
        "   [[GROUP:]EVENT=]PROBEPOINT [[NAME=]ARG[:TYPE] ...]\n"
        "   PROBEPOINT: FUNC[@SRC][+OFF|%return|:RLN]  or  SRC:ALN\n"
        "         RLN counts lines from FUNC's declaration, ALN is a line of SRC (with -g)\n"
        "      or sdt_PROVIDER:NAME [ARG...]   a USDT probe of BIN (see dprobe funcs --sdt)\n"
        "   ARG:  VAR[->FIELD|.FIELD|[N]]... | $vars | $params (from the debug info)\n"
        "         | %REG | $argN | $retval | $stackN | $comm | @SYM[+-OFF] | +|-OFF(ARG) | \\IMM\n"
        "   TYPE: u8..u64 s8..s64 x8..x64 string symbol b<W>@<O>/<C>, TYPE[N]\n"
        "   GROUP defaults to probe_<BIN>, EVENT to FUNC, FUNC_OFF, FUNC_L<RLN> or FUNC__return.\n"
        "\n"
        "The probe list is $DPROBE_PROBES, else ~/.cache/dprobe/probes.\n"
        "\n"
        "Examples:\n"
        "   dprobe probe -x ./app 'parse'                      print the line for parse's entry\n"
        "   dprobe probe -x ./app 'parse%return $retval'       its return value\n"
        "   dprobe probe -x ./app 'parse len=$arg2:u64 s=+0($arg1):string'\n"
        "   dprobe probe -x ./app --line parse                 lines of parse a probe can go on\n"
        "   dprobe probe -x ./app --vars parse:4               variables at its line 4\n"
        "   dprobe probe -x ./app 'parse:4 len p->name:string' a line probe with variables\n"
        "   dprobe probe -x ./app 'app.c:120 $vars'            every variable at app.c:120\n"
        "   dprobe probe -x ./app --add 'myev=parse+4 x=%di:u32'\n"
        "   dprobe probe -x /usr/lib/x86_64-linux-gnu/libstdc++.so.6 sdt_libstdcxx:throw\n"
        "   dprobe record -e probe_app:parse -- ./app          use a stored probe\n"
        "   dprobe probe --del 'probe_app:*'");
    sub->callback([o] { exit_status = run_probe(*o); });
}

} // namespace dprobe::cli
