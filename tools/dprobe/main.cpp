// dprobe: trace functions of user-space programs the way ftrace, perf probe and uftrace
// trace the kernel. Subcommands live in cmd_*.cpp.
#include "tools/dprobe/commands/cli.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <unistd.h>

namespace dprobe::cli
{

int exit_status = 0;

namespace
{

std::map<const CLI::App *, std::string> &usages()
{
    static std::map<const CLI::App *, std::string> m;
    return m;
}

// perf-style help: " Usage: dprobe probe [<options>] ..." first, then the description,
// the options, and the examples as the footer.
class perf_formatter : public CLI::Formatter
{
  public:
    std::string make_usage(const CLI::App *app, std::string name) const override
    {
        auto it = usages().find(app);
        if (it == usages().end()) return CLI::Formatter::make_usage(app, std::move(name));
        std::string out;
        bool first = true;
        size_t pos = 0;
        const std::string &u = it->second;
        while (pos <= u.size()) {
            size_t nl = u.find('\n', pos);
            std::string line =
                u.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
            out += (first ? " Usage: " : "    or: ") + line + "\n";
            first = false;
            if (nl == std::string::npos) break;
            pos = nl + 1;
        }
        return out + "\n";
    }
    std::string make_description(const CLI::App *app) const override
    {
        std::string d = app->get_description();
        return d.empty() ? std::string() : "    " + d + "\n\n";
    }
    std::string make_help(const CLI::App *app, std::string name,
                          CLI::AppFormatMode mode) const override
    {
        if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
        std::string out = make_usage(app, name) + make_description(app);
        out += make_groups(app, mode);
        if (app->get_parent()) out += make_subcommands(app, mode);
        std::string footer = app->get_footer();
        if (!footer.empty()) out += "\n" + footer + "\n";
        return out;
    }
};

} // namespace

void set_usage(CLI::App *sub, std::string usage)
{
    usages()[sub] = std::move(usage);
}

int fail(const char *cmd, const std::string &message)
{
    std::fprintf(stderr, "dprobe %s: %s\n", cmd, message.c_str());
    std::fflush(stderr);
    return 1;
}

std::string probe_list_path()
{
    if (const char *p = std::getenv("DPROBE_PROBES"); p && *p) return p;
    if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
        return std::string(x) + "/dprobe/probes";
    const char *home = std::getenv("HOME");
    return std::string(home && *home ? home : "/tmp") + "/.cache/dprobe/probes";
}

} // namespace dprobe::cli

int main(int argc, char **argv)
{
    using namespace dprobe::cli;
    CLI::App app{"trace functions of user-space programs: ftrace, kprobes and perf-probe "
                 "for one process"};
    app.name("dprobe");
    app.formatter(std::make_shared<perf_formatter>());
    app.require_subcommand(0, 1);
    app.set_version_flag("--version", "dprobe 0.1.0");
    set_usage(&app, "dprobe [--version] [--help] COMMAND [ARGS]");
    app.footer("Commands:\n"
               "   record   Run a program and record its trace into a file\n"
               "   attach   Trace a running process (until Ctrl-C, or 'dprobe detach')\n"
               "   detach   End the attach session of a process\n"
               "   report   Show a recorded trace: text, function graph or Chrome JSON\n"
               "   probe    Define probe events in perf-probe syntax\n"
               "   funcs    List the functions of a binary that can be probed\n"
               "   ctl      Read and write a traced process's tracefs through its socket\n"
               "\n"
               " See 'dprobe COMMAND --help' for more information on a specific command.");
    setup_record(app);
    setup_report(app);
    setup_probe(app);
    setup_funcs(app);
    setup_ctl(app);
    setup_attach(app);
    argc = record_take_program(app, argc, argv);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp &e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion &e) {
        return app.exit(e);
    } catch (const CLI::ParseError &e) {
        std::string sub;
        for (const CLI::App *s : app.get_subcommands())
            sub = s->get_name();
        std::fprintf(stderr, "dprobe%s%s: %s\n", sub.empty() ? "" : " ", sub.c_str(), e.what());
        std::fprintf(stderr, " See 'dprobe %s--help'.\n", sub.empty() ? "" : (sub + " ").c_str());
        return 129; // perf and git exit 129 on usage errors
    }
    if (app.get_subcommands().empty()) {
        std::fputs(app.help().c_str(), stdout);
        return 1;
    }
    return exit_status;
}
