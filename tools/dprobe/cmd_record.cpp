// dprobe record: run a program with the preload agent and record its trace into a file
// (perf record, trace-cmd record, uftrace record).
#include "tools/dprobe/cli.h"
#include "tools/dprobe/elf_image.h"
#include "tools/dprobe/event_args.h"
#include "tools/dprobe/perf_probe.h"
#include "tools/dprobe/probe_list.h"
#include "tools/dprobe/record_util.h"
#include "tools/dprobe/trace_opts.h"
#include "tools/trace_file.h"
#include "tracefs/tracefs_client.h"

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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dprobe::cli {

namespace {

struct record_opts : trace_opts {
    std::vector<std::string> command;
};

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_interrupted = 0;

void forward_signal(int sig)
{
    g_interrupted = sig;
    if (g_child > 0)
        kill(g_child, sig);
}

std::string join_lines(const std::vector<std::string> &v)
{
    std::string s;
    for (const auto &l : v)
        s += l + "\n";
    return s;
}

struct live_status {
    std::map<int, std::array<uint64_t, 3>> per_pid; // records, lost, bytes
    std::string error;
    std::vector<std::string> mounts, warnings;
    bool ready = false;
    unsigned functions = 0, events = 0;
    void take(const std::string &msg)
    {
        if (msg.rfind("error ", 0) == 0) {
            if (error.empty())
                error = msg.substr(6);
        } else if (msg.rfind("stat ", 0) == 0) {
            int pid = 0;
            unsigned long long r = 0, l = 0, b = 0;
            if (std::sscanf(msg.c_str() + 5, "%d %llu %llu %llu", &pid, &r, &l, &b) == 4)
                per_pid[pid] = {r, l, b};
        } else if (msg.rfind("mount ", 0) == 0) {
            mounts.push_back(msg.substr(6));
        } else if (msg.rfind("warn ", 0) == 0) {
            warnings.push_back(msg.substr(5));
        } else if (msg.rfind("ready ", 0) == 0) {
            int pid = 0;
            if (std::sscanf(msg.c_str() + 6, "%d %u %u", &pid, &events, &functions) >= 1)
                ready = true;
        }
    }
    std::array<uint64_t, 3> total() const
    {
        std::array<uint64_t, 3> t{};
        for (const auto &[p, v] : per_pid)
            for (int i = 0; i < 3; i++)
                t[i] += v[i];
        return t;
    }
};

void drain_status(int fd, live_status &ls)
{
    char buf[8192];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0)
            break;
        ls.take(std::string(buf, static_cast<size_t>(n)));
    }
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
    std::string why;
    if (!tools::can_preload(prog, why))
        return fail("record", prog + ": " + why);
    std::string err;
    auto img = tools::elf_image::open(prog, &err); // null for scripts: checks are skipped

    std::vector<std::string> lines;
    if (!resolve_events("record", o.events, img.get(), lines))
        return 1;
    std::vector<std::string> globs, notrace;
    graph_filter(o, !lines.empty(), img.get(), globs, notrace);

    std::string agent;
    if (!tools::find_agent(agent))
        return fail("record", "cannot find libdprobe-preload.so (set DPROBE_AGENT to its path)");

    int out = create_trace_file(o.output, 0, err);
    if (out < 0)
        return fail("record", err);
    ::close(out);

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
        return fail("record", std::string("socketpair: ") + std::strerror(errno));
    int rcvbuf = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);

    char abs_out[PATH_MAX];
    std::string out_path = realpath(o.output.c_str(), abs_out) ? abs_out : o.output;
    std::fflush(nullptr);
    pid_t child = fork();
    if (child < 0)
        return fail("record", std::string("fork: ") + std::strerror(errno));
    if (child == 0) {
        ::close(sv[0]);
        int fd = fcntl(sv[1], F_DUPFD, 3); // inherited by the program (no CLOEXEC)
        setenv("DPROBE_OUTPUT", out_path.c_str(), 1);
        setenv("DPROBE_STATUS_FD", std::to_string(fd).c_str(), 1);
        setenv("DPROBE_EVENTS", join_lines(lines).c_str(), 1);
        setenv("DPROBE_GRAPH", join_lines(globs).c_str(), 1);
        setenv("DPROBE_GRAPH_NOTRACE", join_lines(notrace).c_str(), 1);
        if (o.follow_loads)
            setenv("DPROBE_FOLLOW_LOADS", "1", 1);
        if (o.buffer_kb)
            setenv("DPROBE_BUFFER_KB", std::to_string(o.buffer_kb).c_str(), 1);
        if (!o.clock.empty())
            setenv("DPROBE_CLOCK", o.clock.c_str(), 1);
        if (o.no_tracefs)
            setenv("DPROBE_TRACEFS", "0", 1);
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
    ::close(sv[1]);
    g_child = child;
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);

    live_status ls;
    bool tty = !o.quiet && isatty(STDERR_FILENO);
    int status = 0;
    for (;;) {
        struct pollfd p {sv[0], POLLIN, 0};
        poll(&p, 1, 200);
        drain_status(sv[0], ls);
        pid_t w = waitpid(child, &status, WNOHANG);
        if (tty && w == 0) {
            auto t = ls.total();
            std::fprintf(stderr, "\r\033[K[ dprobe record: %s (pid %d): %llu events, %llu lost, %.2f MB ]",
                         o.command.front().c_str(), static_cast<int>(child), static_cast<unsigned long long>(t[0]),
                         static_cast<unsigned long long>(t[1]), t[2] / 1048576.0);
            std::fflush(stderr);
        }
        if (w == child)
            break;
        if (w < 0 && errno != EINTR)
            break;
    }
    g_child = 0;
    drain_status(sv[0], ls);
    ::close(sv[0]);
    if (tty)
        std::fprintf(stderr, "\r\033[K");
    for (const std::string &w : ls.warnings)
        if (!o.quiet)
            std::fprintf(stderr, "dprobe record: warning: %s\n", w.c_str());
    // A program killed before its atexit handlers ran leaves its FUSE mount: remove it.
    ls.mounts.push_back(tracefs_default_mountpoint(child));
    for (const std::string &m : ls.mounts)
        if (tools::unmount_if_mounted(m))
            std::fprintf(stderr, "dprobe record: removed the tracefs mount left at %s\n", m.c_str());

    if (!ls.error.empty()) {
        auto nl = ls.error.find('\n');
        fail("record", ls.error.substr(0, nl));
        if (nl != std::string::npos)
            std::fputs(indent(ls.error.substr(nl + 1)).c_str(), stderr);
        return 1;
    }
    int code = 0;
    if (WIFSIGNALED(status)) {
        std::fprintf(stderr, "dprobe record: %s terminated by signal %d (%s)\n",
                     o.command.front().c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
        code = 128 + WTERMSIG(status);
    } else if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
    }
    if (!ls.ready) {
        fail("record", "the dprobe agent did not start in " + prog +
                           " (is it dynamically linked against glibc?)");
        return code ? code : 1;
    }
    tools::print_record_summary(o.output);
    return code;
}

} // namespace

namespace {

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
        if (arg.find('=') != std::string::npos)
            return false; // --output=FILE
    } else if (arg.size() > 2) {
        const CLI::Option *first = sub->get_option_no_throw(arg.substr(0, 2));
        if (first && first->get_items_expected_min() > 0)
            return false; // -oFILE
        name = "-" + arg.substr(arg.size() - 1); // -qF GLOB: flags, then one with a value
    }
    const CLI::Option *opt = sub->get_option_no_throw(name);
    return opt && opt->get_items_expected_min() > 0;
}

} // namespace

int record_take_program(CLI::App &app, int argc, char **argv)
{
    if (argc < 2 || std::string(argv[1]) != "record")
        return argc;
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
        if (takes_next_arg(sub, a))
            ++i;
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
    add_trace_options(sub, *o);
    sub->add_flag("-q,--quiet", o->quiet, "No status line while the program runs");
    sub->add_flag("--no-tracefs", o->no_tracefs, "Do not serve the tracefs tree of the program");
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
        "\n"
        "Then: dprobe report [-i FILE] [--format text|graph|chrome]");
    sub->callback([o, sub] {
        o->command = program_args();
        exit_status = run_record(*o);
    });
}

} // namespace dprobe::cli
