// dprobe record: run a program with the preload agent and record its trace into a file
// (perf record, trace-cmd record, uftrace record).
#include "tools/dprobe/commands/cli.h"
#include "tools/dprobe/resolve/elf_image.h"
#include "tools/dprobe/record/event_args.h"
#include "tools/dprobe/resolve/perf_probe.h"
#include "tools/dprobe/resolve/probe_list.h"
#include "tools/dprobe/attach/session_watch.h"
#include "tools/dprobe/record/record_util.h"
#include "tools/dprobe/record/recorder.h"
#include "tools/dprobe/record/trace_opts.h"
#include "tools/trace_file.h"
#include "tools/unique_fd.h"
#include "tracefs/tracefs_client.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <map>
#include <poll.h>
#include <set>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dprobe::cli
{

namespace
{

struct record_opts : trace_opts {
    std::vector<std::string> command;
};

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_interrupted = 0;

void forward_signal(int sig)
{
    g_interrupted = sig;
    if (g_child > 0) kill(g_child, sig);
}

std::string join_lines(const std::vector<std::string> &v)
{
    std::string s;
    for (const auto &l : v)
        s += l + "\n";
    return s;
}

// One environment string may hold at most 128 KiB (MAX_ARG_STRLEN): past this size the
// events go through a file the agent reads (DPROBE_EVENTS_FILE), removed when the program
// has ended.
constexpr size_t k_env_events_max = 64 * 1024;

// Writes TEXT to a new private file; its path, or "" with *ERR set.
std::string write_events_file(const std::string &text, std::string *err)
{
    const char *tmp = getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/dprobe-events-XXXXXX";
    tools::unique_fd fd(mkstemp(path.data()));
    if (!fd) {
        *err = "cannot create a file for the events in " + path + ": " + std::strerror(errno);
        return "";
    }
    size_t off = 0;
    while (off < text.size()) {
        ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
        if (n <= 0) {
            *err = "cannot write the events to " + path + ": " + std::strerror(errno);
            unlink(path.c_str());
            return "";
        }
        off += static_cast<size_t>(n);
    }
    return path;
}

struct events_file_remover {
    std::string path;
    ~events_file_remover()
    {
        if (!path.empty()) unlink(path.c_str());
    }
};

// The processes' warnings, each text once: "COMM (pid N): TEXT" said by several processes
// (a script's every command, when the globs are for the program it ends up running) becomes
// "TEXT, in N processes (COMM, COMM...)".
std::vector<std::string> merge_process_warnings(const std::vector<std::string> &warnings)
{
    std::vector<std::string> order;
    std::map<std::string, std::pair<std::vector<std::string>, std::string>> by_text;
    for (const std::string &w : warnings) {
        const size_t at = w.find(" (pid ");
        const size_t colon = at == std::string::npos ? at : w.find("): ", at);
        const std::string text = colon == std::string::npos ? w : w.substr(colon + 3);
        auto [it, fresh] = by_text.try_emplace(text);
        if (fresh) order.push_back(text);
        it->second.second = w;
        if (colon != std::string::npos) {
            const std::string comm = w.substr(0, at);
            auto &comms = it->second.first;
            comms.push_back(comm);
        }
    }
    std::vector<std::string> out;
    for (const std::string &text : order) {
        const auto &[comms, last] = by_text[text];
        if (comms.size() < 2) {
            out.push_back(last);
            continue;
        }
        std::vector<std::string> names(comms);
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        std::string line = text + ", in " + std::to_string(comms.size()) + " processes (";
        for (size_t i = 0; i < names.size(); i++)
            line += (i ? ", " : "") + names[i];
        out.push_back(line + ")");
    }
    return out;
}

int run_record(const record_opts &o)
{
    if (o.command.empty())
        return fail("record", "no program to run: dprobe record [<options>] -- PROG [ARGS]");
    std::string prog;
    if (!tools::find_program(o.command.front(), prog)) {
        fail("record", "'" + o.command.front() + "': command not found");
        return 127;
    }
    if (std::string c = trace_opts_conflict(o); !c.empty()) return fail("record", c);
    std::string why;
    if (!tools::can_preload(prog, why)) return fail("record", prog + ": " + why);
    std::string err;
    auto img = tools::elf_image::open(prog, &err); // null for scripts: checks are skipped

    std::vector<std::string> lines;
    if (!resolve_events("record", o.events, img.get(), lines)) return 1;
    std::vector<std::string> globs, notrace;
    const bool graph_main = graph_filter(o, !lines.empty(), globs, notrace);
    std::vector<std::string> graph_args, graph_retvals;
    if (!graph_args_lines(o, graph_args, graph_retvals, &err)) return fail("record", err);

    std::string agent;
    if (!tools::find_agent(agent))
        return fail("record", "cannot find libdprobe-preload.so (set DPROBE_AGENT to its path)");

    tools::unique_fd out(create_trace_file(o.output, O_APPEND, err));
    if (!out) return fail("record", err);

    std::string events_text = join_lines(lines);
    events_file_remover events_file; // removed however run_record returns from here on
    if (events_text.size() > k_env_events_max) {
        events_file.path = write_events_file(events_text, &err);
        if (events_file.path.empty()) return fail("record", err);
        events_text.clear();
    }

    // Messages keep their boundaries, and the recorder sees the end of the stream once every
    // process that inherited the other end is gone: then no announcement can still come.
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return fail("record", std::string("socketpair: ") + std::strerror(errno));
    tools::unique_fd status_end(sv[0]), program_end(sv[1]);
    int rcvbuf = 1 << 20;
    setsockopt(status_end.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    tools::unique_fd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake) return fail("record", std::string("eventfd: ") + std::strerror(errno));

    char abs_out[PATH_MAX];
    std::string out_path = realpath(o.output.c_str(), abs_out) ? abs_out : o.output;
    std::fflush(nullptr);
    // If this command is killed, the recorded processes' tracefs mounts and sockets must not
    // outlive them: the sweeper hears of each (recorder::sweeper_fd), from before the program
    // can make one.
    const int sweeper = tools::start_runtime_sweeper(status_end.get());
    pid_t child = fork();
    if (child < 0) return fail("record", std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
        status_end.reset();
        // Inherited by the program (no close-on-exec): the agent finds them by number.
        int fd = fcntl(program_end.get(), F_DUPFD, 3);
        int wfd = fcntl(wake.get(), F_DUPFD, 3);
        setenv("DPROBE_OUTPUT", out_path.c_str(), 1);
        setenv("DPROBE_STATUS_FD", std::to_string(fd).c_str(), 1);
        setenv("DPROBE_WAKE_FD", std::to_string(wfd).c_str(), 1);
        // The program named fails on a glob that matches nothing in it; a script's
        // interpreter does not (the globs are for the programs the script runs: a wrapper
        // such as pyenv's python3 exec's the real one).
        if (img)
            setenv("DPROBE_FIRST", "1", 1);
        else
            unsetenv("DPROBE_FIRST");
        setenv("DPROBE_EVENTS", events_text.c_str(), 1);
        if (!events_file.path.empty())
            setenv("DPROBE_EVENTS_FILE", events_file.path.c_str(), 1);
        else
            unsetenv("DPROBE_EVENTS_FILE");
        if (!o.triggers.empty())
            setenv("DPROBE_TRIGGERS", join_lines(o.triggers).c_str(), 1);
        else
            unsetenv("DPROBE_TRIGGERS");
        setenv("DPROBE_GRAPH", join_lines(globs).c_str(), 1);
        setenv("DPROBE_GRAPH_NOTRACE", join_lines(notrace).c_str(), 1);
        if (graph_main) setenv("DPROBE_GRAPH_MAIN", "1", 1);
        setenv("DPROBE_GRAPH_ARGS", join_lines(graph_args).c_str(), 1);
        setenv("DPROBE_GRAPH_RETVALS", join_lines(graph_retvals).c_str(), 1);
        if (o.auto_args)
            setenv("DPROBE_GRAPH_ARGS_AUTO", "1", 1);
        else
            unsetenv("DPROBE_GRAPH_ARGS_AUTO");
        if (o.tracer == "function")
            setenv("DPROBE_TRACER", "function", 1);
        else
            unsetenv("DPROBE_TRACER");
        if (o.graph_depth)
            setenv("DPROBE_GRAPH_DEPTH", std::to_string(o.graph_depth).c_str(), 1);
        else
            unsetenv("DPROBE_GRAPH_DEPTH");
        if (o.follow_loads) setenv("DPROBE_FOLLOW_LOADS", "1", 1);
        if (o.buffer_kb) setenv("DPROBE_BUFFER_KB", std::to_string(o.buffer_kb).c_str(), 1);
        if (!o.clock.empty()) setenv("DPROBE_CLOCK", o.clock.c_str(), 1);
        if (o.no_tracefs) setenv("DPROBE_TRACEFS", "0", 1);
        if (o.no_wait) setenv("DPROBE_NOWAIT", "1", 1);
        const char *pre = getenv("LD_PRELOAD");
        std::string preload = agent + (pre && *pre ? std::string(" ") + pre : "");
        setenv("LD_PRELOAD", preload.c_str(), 1);
        std::vector<char *> argv;
        for (const auto &a : o.command)
            argv.push_back(const_cast<char *>(a.c_str()));
        argv.push_back(nullptr);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(prog.c_str(), argv.data());
        std::string msg = "error cannot run " + prog + ": " + std::strerror(errno);
        send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
        _exit(127);
    }
    program_end.reset(); // the program's end: the stream ends once every process has closed it
    g_child = child;
    struct sigaction sa {
    };
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);

    recorder rec(out.get(), status_end.get(), wake.get());
    rec.sweeper_fd = sweeper;
    rec.blocking = !o.no_wait;
    rec.set_child(child);
    // The live status line: only on a terminal the program does not write to (its output
    // redirected), where it cannot run into the program's own lines.
    tools::unique_fd tty(o.quiet ? -1 : tools::status_terminal(0));
    rec.run(
        [&] {
            if (!tty) return;
            recorder::totals t = rec.counts();
            dprintf(tty.get(),
                    "\r\033[K[ dprobe record: %s (pid %d): %llu events, %llu lost, %.2f MB ]",
                    o.command.front().c_str(), static_cast<int>(child),
                    static_cast<unsigned long long>(t.events),
                    static_cast<unsigned long long>(t.lost), t.bytes / 1048576.0);
        },
        [&] { return g_interrupted != 0; });
    g_child = 0;
    status_end.reset();
    wake.reset();
    out.reset();
    if (tty) dprintf(tty.get(), "\r\033[K");
    tty.reset();
    if (!o.quiet)
        for (const std::string &w : merge_process_warnings(rec.warnings))
            std::fprintf(stderr, "dprobe record: warning: %s\n", w.c_str());
    // A program killed before its atexit handlers ran leaves its FUSE mount: remove it
    // (said unless -q: a process that ends with _exit, as daemon()'s parent does, leaves one
    // every time).
    rec.mounts.push_back(tracefs_default_mountpoint(child));
    for (const std::string &m : rec.mounts) {
        if (tools::unmount_if_mounted(m) && !o.quiet)
            std::fprintf(stderr, "dprobe record: removed the tracefs mount left at %s\n",
                         m.c_str());
        tools::remove_runtime_leftovers(m); // its directory and control socket
    }
    tools::session_watch_done(sweeper);

    if (!rec.error.empty()) {
        auto nl = rec.error.find('\n');
        fail("record", rec.error.substr(0, nl));
        if (nl != std::string::npos) std::fputs(indent(rec.error.substr(nl + 1)).c_str(), stderr);
        return 1;
    }
    const int status = rec.child_status();
    int code = 0;
    if (WIFSIGNALED(status)) {
        std::fprintf(stderr, "dprobe record: %s terminated by signal %d (%s)\n",
                     o.command.front().c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
        code = 128 + WTERMSIG(status);
    } else if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
    }
    if (!rec.ready) {
        fail("record", "the dprobe agent did not start in " + prog +
                           " (is it dynamically linked against glibc?)");
        return code ? code : 1;
    }
    recorder::totals t = rec.counts();
    std::fprintf(stderr,
                 "[ dprobe record: %llu events (%llu lost) from %zu thread%s in %zu process%s, "
                 "%.3f MB written to %s ]\n",
                 static_cast<unsigned long long>(t.events), static_cast<unsigned long long>(t.lost),
                 t.threads, t.threads == 1 ? "" : "s", t.processes, t.processes == 1 ? "" : "es",
                 (t.bytes + tracefile::k_file_header_size) / 1048576.0, o.output.c_str());
    for (const std::string &l : rec.loss_report())
        std::fprintf(stderr, "dprobe record: %s\n", l.c_str());
    tools::print_session_hists(o.output, stdout); // --trigger hist:... as the program left them
    // Nothing seen: the default graph (the program's own functions) had nothing to trace.
    if (t.events == 0 && !rec.default_graphs.empty()) {
        unsigned long syms = 0, traced = 0;
        char exe[4096] = "";
        std::sscanf(rec.default_graphs.front().c_str(), "%lu %lu %4095[^\n]", &syms, &traced, exe);
        if (syms == 0)
            std::fprintf(stderr,
                         "dprobe record: %s has no function symbols (it is stripped): the graph "
                         "of its own functions, recorded by default, is empty\n",
                         exe);
        else if (traced == 0)
            std::fprintf(stderr, "dprobe record: none of the %lu functions of %s could be traced\n",
                         syms, exe);
        else
            std::fprintf(stderr,
                         "dprobe record: %s has symbols for only %lu function%s of its own (it is "
                         "stripped), and none of them ran\n",
                         exe, syms, syms == 1 ? "" : "s");
        std::fprintf(stderr,
                     "  trace what it calls in its libraries:  dprobe record -F 'libc.so.6:*' -- "
                     "%s ...\n"
                     "  or probe events:                       dprobe record -e "
                     "'f:open libc.so.6:open path=+0($arg1):string' -- ...\n"
                     "  or give it its symbols: install its debug file (Debian: the -dbgsym "
                     "package), which dprobe reads from /usr/lib/debug\n",
                     o.command.front().c_str());
    }
    // Nothing seen with --follow-loads: a glob whose library never came is why.
    if (t.events == 0 && o.follow_loads)
        for (const std::string &gl : tools::libraries_never_loaded(o.output, o.graph_globs)) {
            const size_t sp = gl.rfind(' ');
            std::fprintf(stderr,
                         "dprobe record: -F '%s' matched nothing: the program never loaded %s "
                         "(--follow-loads arms a glob when its library is loaded)\n",
                         gl.substr(0, sp).c_str(), gl.substr(sp + 1).c_str());
        }
    // Functions that could get no site (nor jump site) have int3 entries: slower, said, every
    // one with its reason. Those left out are named too. A long list comes in several
    // messages with the same head (who and count); each dlopen of a library says the same.
    auto listing = [&](const std::vector<std::string> &msgs, const char *what) {
        std::vector<std::string> heads;
        std::map<std::string, std::vector<std::string>> lines;
        std::set<std::string> said;
        for (const std::string &m : msgs) {
            std::string text = m;
            for (size_t at; (at = text.find(" at 0x")) != std::string::npos;)
                text.erase(at, text.find_first_of(")\n", at) - at); // another load, another address
            const std::string head = text.substr(0, text.find('\n'));
            if (!lines.count(head)) heads.push_back(head);
            auto &l = lines[head];
            for (size_t pos = text.find('\n'); pos != std::string::npos;) {
                size_t nl = text.find('\n', pos + 1);
                std::string line =
                    text.substr(pos + 1, nl == std::string::npos ? nl : nl - pos - 1);
                if (said.insert(head + "\n" + line).second) l.push_back(line);
                pos = nl;
            }
        }
        for (const std::string &head : heads) {
            size_t sp = head.rfind(' ');
            std::string who = head.substr(0, sp), count = head.substr(sp + 1);
            std::fprintf(stderr, "dprobe record: %s: %s function%s %s:\n", who.c_str(),
                         count.c_str(), count == "1" ? "" : "s", what);
            for (const std::string &line : lines[head])
                std::fprintf(stderr, "  %s\n", line.c_str());
        }
    };
    if (o.quiet) return code; // notes, not the summary
    listing(rec.int3, "traced through an int3 breakpoint (no patch or jump site: a signal a "
                      "call, slower)");
    listing(rec.left_out, "matched but left out of the graph");
    return code;
}

} // namespace

namespace
{

std::vector<std::string> &program_args()
{
    static std::vector<std::string> args;
    return args;
}

// Whether OPT of SUB, spelled as ARG ("-F", "--filter", "-qF"), takes the next argument as
// its value.
bool takes_next_arg(const CLI::App *sub, const std::string &arg)
{
    std::string name = arg;
    if (arg.rfind("--", 0) == 0) {
        if (arg.find('=') != std::string::npos) return false; // --output=FILE
    } else if (arg.size() > 2) {
        const CLI::Option *first = sub->get_option_no_throw(arg.substr(0, 2));
        if (first && first->get_items_expected_min() > 0) return false; // -oFILE
        name = "-" + arg.substr(arg.size() - 1); // -qF GLOB: flags, then one with a value
    }
    const CLI::Option *opt = sub->get_option_no_throw(name);
    return opt && opt->get_items_expected_min() > 0;
}

} // namespace

int record_take_program(CLI::App &app, int argc, char **argv)
{
    if (argc < 2 || std::string(argv[1]) != "record") return argc;
    const CLI::App *sub = app.get_subcommand_ptr("record").get();
    // The program starts after "--", or at the first argument that is neither an option
    // nor an option's value; from there on every argument is the program's, verbatim.
    // (Left to CLI11, a positional "command" reordered them: "-- bash -c SCRIPT" ran bash
    // without its -c.)
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--" || a.size() < 2 || a[0] != '-') {
            program_args().assign(argv + i + (a == "--"), argv + argc);
            return i;
        }
        if (takes_next_arg(sub, a)) ++i;
    }
    return argc;
}

void setup_record(CLI::App &app)
{
    auto o = std::make_shared<record_opts>();
    CLI::App *sub = app.add_subcommand("record", "Run a program and record its trace");
    set_usage(sub, "dprobe record [<options>] [--] PROG [ARGS...]");
    sub->add_option("-e,--event", o->events,
                    "A dynamic_events line, a probe stored by 'dprobe probe --add' "
                    "([GROUP:]EVENT, globs allowed), a USDT probe of PROG or its libraries "
                    "(sdt_PROVIDER:NAME [ARG...]), or a perf-probe definition on PROG "
                    "('parse:4 len')")
        ->type_name("EVENT");
    add_trace_options(sub, *o, "-p,--tracer");
    sub->add_flag("-q,--quiet", o->quiet,
                  "No status line while the program runs, no warnings or notes (functions "
                  "with int3 entries or left out of the graph); the summary and errors stay");
    sub->add_flag("--no-tracefs", o->no_tracefs, "Do not serve the tracefs tree of the program");
    sub->add_flag("--no-wait", o->no_wait,
                  "Never slow the program down: a thread whose buffer is full drops its events "
                  "(counted) rather than wait for dprobe to copy them out");
    // PROG and its arguments are cut off argv before CLI11 parses (record_take_program).
    sub->footer(
        "Examples:\n"
        "   dprobe record --graph -- ./app                     every function with a site\n"
        "   dprobe record -F 'parse_*' -N parse_debug -- ./app\n"
        "   dprobe record --follow-loads -F 'libplugin.so:*' -- ./app   a library it dlopens\n"
        "   dprobe record -e 'f:parse_entry parse len=$arg2:u64' -- ./app input.txt\n"
        "   dprobe record -e 'p:myprobe libc.so.6:malloc size=%di:u64' -- ./app\n"
        "   dprobe record -e probe_app:parse -o app.dat -- ./app   a stored probe\n"
        "   dprobe record -e 'parse:4 len p->name:string' -- ./app  a line of parse (needs -g)\n"
        "   dprobe record -e 'f:parse_entry parse item->name count' -- ./app   names from DWARF\n"
        "   dprobe record -e sdt_libstdcxx:throw -- ./app          a USDT probe (throws)\n"
        "   dprobe record -F 'parse*' -a -- ./app          arguments and return values (DWARF)\n"
        "   dprobe record -F parse -A 'parse@arg1/s,arg2' -R parse@retval -- ./app\n"
        "\n"
        "Then: dprobe report [-i FILE] [--format text|graph|chrome]");
    sub->callback([o, sub] {
        o->command = program_args();
        exit_status = run_record(*o);
    });
}

} // namespace dprobe::cli
