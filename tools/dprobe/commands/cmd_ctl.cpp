// dprobe ctl: the tracefs tree of a traced process through its Unix socket, for machines
// (or users) without FUSE: `echo` and `cat` as subcommands.
#include "tools/dprobe/commands/cli.h"

#include "tracefs/tracefs_client.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace dprobe::cli
{

namespace
{

struct ctl_opts {
    std::string target; // pid or socket path
    std::string op;
    std::string file;
    std::vector<std::string> text;
    bool append = false;
    int timeout_ms = -1;
};

volatile sig_atomic_t g_stop = 0;
void on_sigint(int)
{
    g_stop = 1;
}

// Why TARGET's tracefs cannot be reached (ERR: connect's -errno): the process is not there,
// or serves none (it is not traced), rather than the socket file's errno.
std::string unreachable(const std::string &target, int err)
{
    const bool pid = target.find_first_not_of("0123456789") == std::string::npos;
    if (!pid)
        return err == -ENOENT         ? "no tracefs socket at " + target
               : err == -ECONNREFUSED ? target + ": nothing serves it (its process is gone)"
                                      : target + ": " + std::strerror(-err);
    std::ifstream comm_file("/proc/" + target + "/comm");
    std::string comm;
    if (!std::getline(comm_file, comm)) return "no process " + target;
    const std::string who = "process " + target + " (" + comm + ")";
    if (err == -EACCES) return who + ": its tracefs socket is not yours: " + std::strerror(-err);
    if (err != -ENOENT && err != -ECONNREFUSED) return who + ": " + std::strerror(-err);
    return who + " is not traced: it serves no tracefs (run it with 'dprobe record -- PROG', " +
           "or 'dprobe attach -p " + target +
           "'; a program linked with libdprobe serves one after dprobe_tracefs_start())";
}

int run_ctl(const ctl_opts &o)
{
    if (o.target.empty()) return fail("ctl", "-p PID (or --socket PATH) is required");
    {
        tracefs_client c;
        if (int r = c.connect(o.target)) return fail("ctl", unreachable(o.target, r));
    }
    std::string file = o.file;
    while (!file.empty() && file.front() == '/')
        file.erase(0, 1);
    std::string text;
    for (const auto &t : o.text)
        text += (text.empty() ? "" : " ") + t;
    auto who = [&] {
        return o.target.find('/') == std::string::npos ? "process " + o.target : o.target;
    };
    if (o.op == "cat" && (file == "trace_pipe" || file.ends_with("/trace_pipe"))) {
        // Streams like `cat trace_pipe` until interrupted (or --timeout of silence).
        struct sigaction sa {
        };
        sa.sa_handler = on_sigint;
        sigaction(SIGINT, &sa, nullptr);
        int r = tracefs_socket_pipe(o.target, file, o.timeout_ms, [](std::string_view d) {
            std::fwrite(d.data(), 1, d.size(), stdout);
            std::fflush(stdout);
            return !g_stop;
        });
        if (r < 0 && !g_stop) return fail("ctl", who() + ": " + file + ": " + std::strerror(-r));
        return 0;
    }
    tracefs_reply rep;
    if (o.op == "read" || o.op == "cat") {
        rep = tracefs_socket_request(o.target, tracefs_op::read, file);
    } else if (o.op == "ls") {
        rep = tracefs_socket_request(o.target, tracefs_op::list, file);
    } else if (o.op == "mkdir" || o.op == "rmdir") {
        // Instances: `mkdir instances/foo` in the kernel's tree.
        rep = tracefs_socket_request(o.target,
                                     o.op == "mkdir" ? tracefs_op::mkdir : tracefs_op::rmdir, file);
    } else if (o.op == "write") {
        if (o.text.empty())
            rep = tracefs_socket_request(o.target, tracefs_op::trunc, file);
        else
            rep = tracefs_socket_request(o.target,
                                         o.append ? tracefs_op::write : tracefs_op::write_trunc,
                                         file, text + "\n");
    } else {
        return fail("ctl", "unknown operation '" + o.op + "' (read, cat, write, ls, mkdir, rmdir)");
    }
    if (rep.err) {
        const bool write = o.op == "write";
        // A write that failed on a file the tree has is a rejected text (its errno is the
        // kernel's for that rejection, ENOENT for an unknown symbol too); on one it does not
        // have, writing cannot create it (the kernel's tracefs has no ->create: EACCES there).
        bool exists = true;
        if (write && rep.err == ENOENT) {
            const size_t slash = file.rfind('/');
            const std::string dir = slash == std::string::npos ? "" : file.substr(0, slash);
            const std::string base = file.substr(slash == std::string::npos ? 0 : slash + 1);
            tracefs_reply ls = tracefs_socket_request(o.target, tracefs_op::list, dir);
            exists = !ls.err && ("\n" + ls.data).find("\n" + base + "\n") != std::string::npos;
        }
        const std::string name = file.empty() ? std::string("/") : file;
        if (!exists)
            fail("ctl", who() + ": " + name +
                            ": no such file in the tracefs (writing cannot create one; 'ls' "
                            "lists the files)");
        else if (write)
            fail("ctl", who() + ": " + name + ": the write was refused: " + std::strerror(rep.err));
        else
            fail("ctl", who() + ": " + name + ": " + std::strerror(rep.err));
        // A rejected probe line: show the kernel-style error_log entry, like perf probe.
        if (write && exists && (file.ends_with("_events") || file.ends_with("dynamic_events"))) {
            tracefs_reply log = tracefs_socket_request(o.target, tracefs_op::read, "error_log");
            if (!log.err && !log.data.empty()) {
                // The last entry is the last three lines.
                std::string d = log.data;
                size_t pos = d.size();
                for (int i = 0; i < 4 && pos > 0; i++)
                    pos = d.rfind('\n', pos - 1);
                std::fputs(d.substr(pos == std::string::npos ? 0 : pos + 1).c_str(), stderr);
            }
        }
        return 1;
    }
    std::fwrite(rep.data.data(), 1, rep.data.size(), stdout);
    return 0;
}

} // namespace

void setup_ctl(CLI::App &app)
{
    auto o = std::make_shared<ctl_opts>();
    CLI::App *sub = app.add_subcommand("ctl", "Read and write a traced process's tracefs");
    set_usage(sub, "dprobe ctl -p PID read|cat FILE\n"
                   "dprobe ctl -p PID write [-a] FILE [TEXT...]\n"
                   "dprobe ctl -p PID ls [DIR]\n"
                   "dprobe ctl -p PID mkdir|rmdir instances/NAME");
    sub->description("Talks to the tracefs socket the process serves (dprobe record starts it; "
                     "a program linked with libdprobe calls dprobe_tracefs_start()).");
    sub->add_option("-p,--pid", o->target, "The traced process")->type_name("PID");
    sub->add_option("--socket", o->target, "The tracefs socket path instead of a pid")
        ->type_name("PATH");
    sub->add_flag("-a,--append", o->append, "write: append (like >>) instead of truncating (>)");
    sub->add_option("-t,--timeout", o->timeout_ms,
                    "cat trace_pipe: stop after MS milliseconds without data")
        ->type_name("MS");
    sub->add_option("op", o->op, "read (= cat), write, ls, mkdir or rmdir")
        ->required()
        ->type_name("OP");
    sub->add_option("file", o->file, "A path inside the tracefs tree")->type_name("FILE");
    sub->add_option("text", o->text, "write: the text (words are joined, a newline added)")
        ->type_name("TEXT");
    sub->footer(
        "Examples:\n"
        "   dprobe ctl -p 4242 cat available_filter_functions\n"
        "   dprobe ctl -p 4242 write -a dynamic_events 'f:myev parse len=$arg2:u64'\n"
        "   dprobe ctl -p 4242 write events/fprobes/myev/enable 1\n"
        "   dprobe ctl -p 4242 cat trace_pipe          (streams until Ctrl-C)\n"
        "   dprobe ctl -p 4242 write trace              (empties the buffer, like > trace)\n"
        "   dprobe ctl -p 4242 mkdir instances/foo      (a trace array of its own)\n"
        "\n"
        "Note: while 'dprobe record' runs, its agent consumes the buffer too: trace_pipe\n"
        "readers share the events with the trace file.");
    sub->callback([o] { exit_status = run_ctl(*o); });
}

} // namespace dprobe::cli
