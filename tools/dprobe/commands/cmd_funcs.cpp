// dprobe funcs -x BIN [GLOB]: the functions of a binary that can be probed and how
// (perf probe -F, uftrace -F style), read from the file without running it; with --sdt,
// its USDT probes (perf list sdt).
#include "tools/dprobe/commands/cli.h"
#include "tools/dprobe/resolve/elf_image.h"
#include "tools/dprobe/resolve/sdt_notes.h"

#include "core/glob.h"

#include <algorithm>
#include <cstdio>

namespace dprobe::cli
{

namespace
{

struct funcs_opts {
    std::string bin;
    std::vector<std::string> globs;
    std::string notglob;
    bool names_only = false;
    bool verbose = false;
    bool probeable_only = false;
    bool sdt = false;
};

// --sdt: the USDT probes of the binary, as `perf list sdt` and `tplist` show them.
int run_sdt(const funcs_opts &o)
{
    std::vector<tools::sdt_probe> probes;
    std::string err;
    if (!tools::read_sdt_probes(o.bin, probes, &err)) return fail("funcs", err);
    size_t shown = 0;
    if (!o.names_only)
        std::printf("%-40s %-18s %-18s %s\n", "EVENT", "ADDRESS", "SEMAPHORE", "ARGUMENTS");
    for (const auto &p : probes) {
        const std::string name = p.full_name();
        if (!o.globs.empty() &&
            std::none_of(o.globs.begin(), o.globs.end(), [&](const std::string &g) {
                return tools::is_sdt_spec(g) ? tools::sdt_spec_matches(g, p) : glob_match(g, name);
            }))
            continue;
        shown++;
        if (o.names_only) {
            std::printf("%s\n", name.c_str());
            continue;
        }
        std::string args;
        for (const auto &a : p.args)
            args += (args.empty() ? "" : " ") + a;
        char sem[32] = "-";
        if (p.semaphore)
            std::snprintf(sem, sizeof sem, "0x%016lx", static_cast<unsigned long>(p.semaphore));
        std::printf("%-40s 0x%016lx %-18s %s\n", name.c_str(), static_cast<unsigned long>(p.pc),
                    sem, args.c_str());
    }
    if (shown == 0) {
        if (!o.globs.empty())
            return fail("funcs", "no SDT probe of " + o.bin + " matches '" + o.globs.front() + "'");
        return fail("funcs", o.bin + " has no SDT probes (no .note.stapsdt section)");
    }
    if (!o.names_only) std::printf("%zu SDT probes\n", shown);
    return 0;
}

int run_funcs(const funcs_opts &o)
{
    if (o.sdt) return run_sdt(o);
    std::string err;
    auto img = tools::elf_image::open(o.bin, &err);
    if (!img) return fail("funcs", err);
    auto infos = tools::classify_functions(*img);
    // Stripped: only what it exports is named; its other functions are not listed.
    const std::string stripped =
        img->has_symtab()
            ? ""
            : o.bin + " is stripped (no .symtab): only the " + std::to_string(infos.size()) +
                  " functions it exports (.dynsym) have names; its debug file "
                  "(Debian: the -dbgsym package) names the others";
    if (infos.empty())
        return fail("funcs", o.bin +
                                 (img->has_symtab() ? " has no function symbols"
                                                    : " is stripped (no .symtab) and "
                                                      "exports no function") +
                                 ": probe it by file offset (p:EV " + o.bin +
                                 ":0xOFFSET), or the library functions it calls");
    std::sort(infos.begin(), infos.end(), [&](const auto &a, const auto &b) {
        return o.names_only ? a.sym->name < b.sym->name : a.sym->addr < b.sym->addr;
    });
    unsigned counts[5] = {};
    size_t shown = 0;
    if (!o.names_only) std::printf("%-18s %6s  %-11s %s\n", "ADDRESS", "SIZE", "SITE", "FUNCTION");
    for (const auto &fi : infos) {
        const std::string &name = fi.sym->name;
        if (!o.globs.empty() &&
            std::none_of(o.globs.begin(), o.globs.end(),
                         [&](const std::string &g) { return glob_match(g, name); }))
            continue;
        if (!o.notglob.empty() && glob_match(o.notglob, name)) continue;
        if (o.probeable_only && fi.kind == tools::entry_site::untraced) continue;
        counts[static_cast<int>(fi.kind)]++;
        shown++;
        if (o.names_only) {
            std::printf("%s\n", name.c_str());
            continue;
        }
        std::printf("0x%016lx %6lu  %-11s %s", static_cast<unsigned long>(fi.sym->addr),
                    static_cast<unsigned long>(fi.sym->size), tools::entry_site_name(fi.kind),
                    name.c_str());
        if (fi.kind == tools::entry_site::int3 || fi.kind == tools::entry_site::untraced ||
            o.verbose)
            std::printf("  (%s)", fi.detail.c_str());
        std::printf("\n");
    }
    if (shown == 0 && !o.globs.empty())
        return fail("funcs", "no function of " + o.bin + " matches '" + o.globs.front() + "'" +
                                 (stripped.empty() ? "" : "; " + stripped));
    if (!o.names_only)
        std::printf("%zu functions: %u fentry, %u patchable, %u jump, %u int3, %u untraced\n",
                    shown, counts[0], counts[1], counts[2], counts[3], counts[4]);
    if (!stripped.empty()) std::fprintf(stderr, "dprobe funcs: note: %s\n", stripped.c_str());
    return 0;
}

} // namespace

void setup_funcs(CLI::App &app)
{
    auto o = std::make_shared<funcs_opts>();
    CLI::App *sub =
        app.add_subcommand("funcs", "List the functions of a binary that can be probed");
    set_usage(sub, "dprobe funcs [<options>] -x BIN [GLOB...]");
    sub->add_option("-x,--exec", o->bin, "Executable or shared library to read")
        ->required()
        ->type_name("BIN");
    sub->add_option("globs", o->globs, "Only functions matching these globs (lib/glob.c syntax)")
        ->type_name("GLOB");
    sub->add_option("-N,--notrace", o->notglob, "Leave out functions matching this glob")
        ->type_name("GLOB");
    sub->add_flag("-F,--names", o->names_only, "Names only, sorted (like perf probe -F)");
    sub->add_flag("-p,--probeable", o->probeable_only, "Hide functions that cannot be probed");
    sub->add_flag("-v,--verbose", o->verbose, "Show how each entry looks");
    sub->add_flag("--sdt", o->sdt,
                  "List the USDT/SDT probes (.note.stapsdt) instead, as sdt_PROVIDER:NAME");
    sub->footer(
        "SITE is how `dprobe record` and fprobes reach the function entry:\n"
        "   fentry     a call of __fentry__ (built with -pg -mfentry), turned into a NOP\n"
        "   patchable  a NOP sled from -fpatchable-function-entry\n"
        "   jump       no site; a jmp replaces the first instructions, moved out of line\n"
        "   int3       no site and no jump: an int3 breakpoint, a signal a call (why is shown;\n"
        "              in the C library and the loader a wildcard leaves these out)\n"
        "   untraced   never hooked (what dprobe runs on, a cold fragment; why is shown)\n"
        "\n"
        "Examples:\n"
        "   dprobe funcs -x ./app                 every function with its site\n"
        "   dprobe funcs -x ./app 'parse_*'       only the parsers\n"
        "   dprobe funcs -F -x /lib/x86_64-linux-gnu/libc.so.6 'str*'\n"
        "   dprobe funcs --sdt -x /usr/bin/python3            its USDT probes and their arguments\n"
        "\n"
        "A USDT probe is used as sdt_PROVIDER:NAME: dprobe record -e sdt_python:function__entry");
    sub->callback([o] { exit_status = run_funcs(*o); });
}

} // namespace dprobe::cli
