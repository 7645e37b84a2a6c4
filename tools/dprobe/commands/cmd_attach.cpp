// dprobe attach / dprobe detach: trace a process that is already running (perf record -p,
// trace-cmd record -P), without restarting it.
//
// attach loads the agent (libdprobe-preload.so) into the process with dlopen, called on one
// of its threads borrowed with ptrace (agent_link, ptrace_call), then hands it the same
// settings `dprobe record` passes in the environment. The agent sets its sites up with every
// thread stopped, applies the events and streams into the trace file, as under record.
// detach (or Ctrl-C in the foreground) removes every probe and leaves the runtime idle.
#include "tools/attach_protocol.h"
#include "core/resident_pages.h"
#include "tools/dprobe/attach/agent_link.h"
#include "tools/dprobe/commands/cli.h"
#include "tools/dprobe/resolve/elf_image.h"
#include "tools/dprobe/record/event_args.h"
#include "tools/dprobe/attach/proc_target.h"
#include "tools/dprobe/attach/session_forks.h"
#include "tools/dprobe/attach/session_watch.h"
#include "tools/dprobe/record/record_util.h"
#include "tools/dprobe/record/trace_opts.h"
#include "tools/trace_file.h"
#include "tools/unique_fd.h"

#include <cerrno>
#include <climits>
#include <dirent.h>
#include <fstream>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dprobe::cli
{

namespace
{

constexpr int k_answer_ms = 10000; // for the agent thread to connect once started
constexpr int k_setup_ms = 60000;  // for the sites and events to be set up
constexpr int k_unload_ms = 10000; // for every thread to leave dprobe's code

struct attach_opts : trace_opts {
    pid_t pid = 0;
    bool background = false;
    bool verbose = false;
};

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int sig)
{
    g_stop = sig;
}

std::string who(pid_t pid)
{
    tools::proc_status ps;
    std::string s = "process " + std::to_string(pid);
    if (tools::read_proc_status(pid, ps)) s += " (" + ps.comm + ")";
    return s;
}

// After a detach: the agent's threads end right after their last message; return once they
// are gone, so that "detached" means no thread of dprobe runs in the process.
void wait_agent_threads(pid_t pid)
{
    for (int i = 0; i < 400; i++) {
        bool any = false;
        std::string dir = "/proc/" + std::to_string(pid) + "/task";
        if (DIR *d = opendir(dir.c_str())) {
            while (struct dirent *e = readdir(d)) {
                if (e->d_name[0] == '.') continue;
                std::ifstream in(dir + "/" + e->d_name + "/comm");
                std::string comm;
                std::getline(in, comm);
                any |= comm.rfind(attach::thread_name_prefix, 0) == 0;
            }
            closedir(d);
        }
        if (!any) return;
        struct timespec ts {
            0, 5 * 1000 * 1000
        };
        nanosleep(&ts, nullptr);
    }
    std::fprintf(stderr, "dprobe: warning: threads of the dprobe agent still run in %s\n",
                 who(pid).c_str());
}

// "error MSG" with an error_log entry on the following lines, as record prints it.
void print_agent_error(const char *cmd, const std::string &err)
{
    auto nl = err.find('\n');
    fail(cmd, err.substr(0, nl));
    if (nl != std::string::npos) std::fputs(indent(err.substr(nl + 1)).c_str(), stderr);
}

// After the session ended: the agent taken out of the process (unload_agent), and what
// could not be undone said, each on a line. LEFT: what the agent reported it could not undo
// ("left ..." messages). 0 when the process is as it was before the attach, else 1.
int unload(const char *cmd, pid_t pid, const std::vector<std::string> &left)
{
    int status = 0;
    for (const std::string &l : left) {
        fail(cmd, who(pid) + ": could not undo: " + l);
        status = 1;
    }
    const std::string agent = tools::mapped_agent(pid);
    if (agent.empty()) return status;
    tools::agent_call c = tools::unload_agent(pid, agent, k_unload_ms);
    if (c.error_code == -ESRCH) return status; // the process is gone, and its agent with it
    if (!c.error.empty() && (c.error_code || c.result))
        fail(cmd, who(pid) + ": the dprobe runtime stays loaded, idle: " + c.error);
    std::vector<std::string> still = tools::agent_leftovers(pid, agent);
    if (!still.empty() && c.result == 0 && !c.error_code) {
        fail(cmd, who(pid) + ": the dprobe runtime did not go away; still mapped:");
        for (const std::string &m : still)
            std::fprintf(stderr, "  %s\n", m.c_str());
    }
    return still.empty() && !c.error_code && c.result == 0 ? status : 1;
}

// The agent library to load: the one already mapped in the process (an earlier attach left
// it idle), else ours as the process sees it.
bool agent_for(pid_t pid, std::string &path, std::string &err)
{
    path = tools::mapped_agent(pid);
    if (!path.empty()) return true;
    if (!tools::find_agent(path)) {
        err = "cannot find libdprobe-preload.so (set DPROBE_AGENT to its path)";
        return false;
    }
    char rp[PATH_MAX];
    if (realpath(path.c_str(), rp)) path = rp;
    struct stat a {
    }, b{};
    if (stat(path.c_str(), &a) != 0 ||
        stat(("/proc/" + std::to_string(pid) + "/root" + path).c_str(), &b) != 0 ||
        a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
        err =
            "the agent " + path + " is not at the same path in the mount namespace of " + who(pid);
        return false;
    }
    return true;
}

std::string call_error(pid_t pid, const tools::agent_call &c)
{
    if (c.error_code == -ESRCH) return who(pid) + " exited while dprobe was attaching";
    return c.error;
}

// What attach will ask of the agent, worked out before the process is touched.
struct attach_plan {
    std::vector<std::string> lines; // dynamic_events lines
    std::vector<std::string> globs, notrace;
    bool graph_main = false;
    std::vector<std::string> graph_args, graph_retvals; // -A, -R
    std::string agent; // the libdprobe-preload.so the process can load
    // Which pages of its code were resident before dprobe touched it (core/resident_pages.h).
    std::string resident;
};

// Step 1: the process, its executable's events and the agent's path checked; 0 or what
// went wrong (already printed).
int plan_attach(const char *cmd, const attach_opts &o, attach_plan &plan)
{
    if (std::string why = tools::check_attach_target(o.pid); !why.empty()) return fail(cmd, why);
    if (std::string c = trace_opts_conflict(o); !c.empty()) return fail(cmd, c);
    std::string exe = "/proc/" + std::to_string(o.pid) + "/exe";
    std::string err;
    auto img = tools::elf_image::open(exe, &err);
    if (!img) return fail(cmd, err);
    if (!resolve_events(cmd, o.events, img.get(), plan.lines)) return 1;
    plan.graph_main = graph_filter(o, !plan.lines.empty(), plan.globs, plan.notrace);
    if (!graph_args_lines(o, plan.graph_args, plan.graph_retvals, &err)) return fail(cmd, err);
    if (!agent_for(o.pid, plan.agent, err)) return fail(cmd, err);
    for (const tools::proc_map &m : tools::read_proc_maps(o.pid))
        if (m.path.size() > 12 && m.path.rfind("/libdprobe.so") != std::string::npos)
            return fail(cmd, who(o.pid) + " is linked with libdprobe.so, whose runtime it runs "
                                          "already: attach does not load a second one (serve "
                                          "its tracefs with dprobe_tracefs_start() and use "
                                          "'dprobe ctl')");
    return 0;
}

// Step 2: the agent loaded into the process (dlopen on a borrowed thread) and connected to
// LINK; 0 or what went wrong (printed).
int load_agent(const char *cmd, const attach_opts &o, const attach_plan &plan,
               tools::agent_link &link)
{
    if (int e = link.listen())
        return fail(cmd, std::string("cannot create a socket: ") + std::strerror(-e));
    tools::agent_call c =
        tools::call_agent(o.pid, plan.agent, true, attach::attach_symbol, link.name());
    if (o.verbose && !c.borrowed.empty())
        std::fprintf(stderr, "dprobe attach: loaded %s with %s\n", plan.agent.c_str(),
                     c.borrowed.c_str());
    if (!c.error.empty()) return fail(cmd, call_error(o.pid, c));
    const std::string pid = std::to_string(o.pid);
    if (c.result == -EBUSY)
        return fail(cmd, who(o.pid) +
                             " is already attached (or being attached or detached): "
                             "'dprobe detach -p " +
                             pid +
                             "' ends that session; "
                             "'dprobe ctl -p " +
                             pid + "' adds events to it");
    if (c.result == -EEXIST)
        return fail(cmd, who(o.pid) + " is being recorded by 'dprobe record' already");
    if (c.result == -ESTALE)
        return fail(cmd, "the dprobe runtime in " + who(o.pid) +
                             " was taken apart by the last detach but could not be unloaded "
                             "(see that detach's message): it cannot trace again; restart the "
                             "process to trace it");
    if (c.result < 0)
        return fail(cmd, "the dprobe agent in " + who(o.pid) +
                             " could not start: " + std::strerror(-c.result));
    std::string err;
    if (int e = link.accept_agent(o.pid, "attach", k_answer_ms, &err))
        return fail(cmd, e == -ESRCH ? who(o.pid) + " exited while dprobe was attaching" : err);
    return 0;
}

// Step 3: the settings and the open trace file handed to the agent.
int send_settings(const char *cmd, const attach_opts &o, const attach_plan &plan,
                  tools::agent_link &link, const tools::unique_fd &out)
{
    attach::settings s;
    s.events = plan.lines;
    s.triggers = o.triggers;
    s.graph = plan.globs;
    s.graph_main = plan.graph_main;
    s.notrace = plan.notrace;
    s.follow_loads = o.follow_loads;
    s.max_graph_depth = o.graph_depth;
    s.function_tracer = o.tracer == "function";
    s.graph_args = plan.graph_args;
    s.graph_retvals = plan.graph_retvals;
    s.graph_args_auto = o.auto_args;
    s.buffer_kb = o.buffer_kb;
    s.clock = o.clock;
    s.tracefs = !o.no_tracefs;
    s.nowait = o.no_wait;
    s.detach_on_hangup = !o.background;
    s.resident = plan.resident;
    // A note too long for one message (a process with hundreds of megabytes of code) is left
    // out: the pages dprobe read then stay resident after the detach.
    if (attach::encode(s).size() > attach::max_message) s.resident.clear();
    if (!link.send(attach::encode(s), out.get()))
        return fail(cmd, who(o.pid) + " exited while dprobe was attaching");
    return 0;
}

// What the agent said when it got ready.
struct agent_ready {
    std::string mount, tracefs_socket;
    unsigned functions = 0;
};

// Step 4: until the agent is ready, or says what is wrong; 0 or what went wrong (printed).
int wait_ready(const char *cmd, const attach_opts &o, tools::agent_link &link, agent_ready &ready)
{
    std::string msg;
    struct timespec start {
    }, now{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int r = link.next(msg, 200);
        if (r < 0)
            return fail(cmd, tools::process_alive(o.pid)
                                 ? "the dprobe agent in " + who(o.pid) + " went away"
                                 : "process " + std::to_string(o.pid) +
                                       " exited while dprobe was attaching");
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (r == 0) {
            if (now.tv_sec - start.tv_sec > k_setup_ms / 1000)
                return fail(cmd, "the dprobe agent in " + who(o.pid) + " did not get ready");
            continue;
        }
        if (msg.rfind("error ", 0) == 0) {
            print_agent_error(cmd, msg.substr(6));
            return 1;
        }
        if (msg.rfind("warn ", 0) == 0 && !o.quiet)
            std::fprintf(stderr, "dprobe attach: warning: %s\n", msg.c_str() + 5);
        if (msg.rfind("mount ", 0) == 0) ready.mount = msg.substr(6);
        if (msg.rfind("socket ", 0) == 0) ready.tracefs_socket = msg.substr(7);
        if (msg.rfind("ready ", 0) == 0) {
            // (Its event count includes the graph's two record types: say what the user
            // asked instead.)
            std::sscanf(msg.c_str() + 6, "%*d %*u %u", &ready.functions);
            return 0;
        }
    }
}

// "2 events and the function graph of 10 functions".
std::string describe(const attach_opts &o, const attach_plan &plan, const agent_ready &ready)
{
    std::string what;
    const size_t n = plan.lines.size();
    if (n) what = std::to_string(n) + " event" + (n == 1 ? "" : "s");
    if (ready.functions)
        what += std::string(what.empty() ? "" : " and ") + "the function graph of " +
                std::to_string(ready.functions) + " function" + (ready.functions == 1 ? "" : "s");
    if (o.follow_loads)
        what += std::string(what.empty() ? "" : " and ") +
                "the function graph of the matching functions of libraries loaded later";
    return what;
}

int detach_forks(const char *cmd, pid_t pid, const std::string &trace);

// Step 5, in the foreground (perf record -p): the session's counts until Ctrl-C, a
// 'dprobe detach' or the end of the process; then the summary.
int follow_session(const char *cmd, const attach_opts &o, tools::agent_link &link,
                   const agent_ready &ready)
{
    struct sigaction sa {
    };
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
        sigaction(sig, &sa, nullptr);
    // The live status line: only on a terminal the process does not write to.
    tools::unique_fd tty(o.quiet ? -1 : tools::status_terminal(o.pid));
    bool asked = false, detached = false, by_other = false;
    unsigned long long recs = 0, lost = 0, bytes = 0;
    std::string msg;
    std::vector<std::string> left;
    for (;;) {
        if (g_stop && !asked) {
            asked = link.send("detach");
            if (!asked) break;
        }
        int r = link.next(msg, 200);
        if (r < 0) break;
        if (r == 0) {
            if (tty)
                dprintf(tty.get(), "\r\033[K[ dprobe attach: %s: %llu events, %llu lost, %.2f MB ]",
                        who(o.pid).c_str(), recs, lost, bytes / 1048576.0);
            continue;
        }
        if (msg.rfind("stat ", 0) == 0)
            std::sscanf(msg.c_str() + 5, "%*d %llu %llu %llu", &recs, &lost, &bytes);
        else if (msg.rfind("warn ", 0) == 0 && !o.quiet) {
            if (tty) dprintf(tty.get(), "\r\033[K");
            std::fprintf(stderr, "dprobe attach: warning: %s\n", msg.c_str() + 5);
        } else if (msg.rfind("left ", 0) == 0) {
            left.push_back(msg.substr(5));
        } else if (msg.rfind("detached ", 0) == 0) {
            detached = true;
            by_other = !asked;
        }
    }
    if (tty) dprintf(tty.get(), "\r\033[K");
    tty.reset();
    if (detached) wait_agent_threads(o.pid);
    if (detached && by_other)
        std::fprintf(stderr, "dprobe attach: %s was detached by 'dprobe detach'\n",
                     who(o.pid).c_str());
    else if (!detached)
        std::fprintf(stderr, "dprobe attach: %s\n",
                     tools::process_alive(o.pid)
                         ? ("the dprobe agent in " + who(o.pid) + " went away").c_str()
                         : ("process " + std::to_string(o.pid) + " exited").c_str());
    if (!ready.mount.empty())
        tools::unmount_if_mounted(ready.mount); // a process killed outright leaves it behind
    // The command that ended the session takes the runtime out ('dprobe detach' when it did).
    int status = detached && !by_other ? unload(cmd, o.pid, left) : 0;
    if (detached && !by_other && detach_forks(cmd, o.pid, o.output) != 0 && status == 0) status = 1;
    tools::print_record_summary(o.output, cmd);
    tools::print_session_hists(o.output, stdout); // --trigger hist:... as the session left them
    return status;
}

int run_attach(const attach_opts &o)
{
    const char *cmd = "attach";
    attach_plan plan;
    if (int r = plan_attach(cmd, o, plan)) return r;
    // The trace file, created here (an unwritable path fails before the process is
    // touched) and handed to the agent open: the process may not be allowed to open it.
    std::string err;
    tools::unique_fd out(create_trace_file(o.output, O_APPEND, err));
    if (!out) return fail(cmd, err);
    tools::agent_link link;
    plan.resident = resident_pages_note(o.pid);
    if (int r = load_agent(cmd, o, plan, link)) return r;
    // A session that did not start (an event refused, a setting the process cannot take)
    // leaves the process as it found it: the agent, which may have prepared its code and
    // the loader's hook already, is taken out again as after a detach.
    auto refused = [&](int r) {
        link.close();
        if (tools::process_alive(o.pid)) {
            wait_agent_threads(o.pid);
            unload(cmd, o.pid, {});
        }
        return r;
    };
    if (int r = send_settings(cmd, o, plan, link, out)) return refused(r);
    out.reset(); // the agent has its own copy
    agent_ready ready;
    if (int r = wait_ready(cmd, o, link, ready)) return refused(r);
    const std::string what = describe(o, plan, ready);
    // Whatever is killed next, the process or this command, the session leaves nothing behind.
    tools::session_watch w;
    w.pid = o.pid;
    w.conn = link.fd();
    w.mount = ready.mount;
    w.socket = ready.tracefs_socket;
    w.foreground = !o.background;
    const pid_t pid = o.pid;
    w.on_orphaned = [pid] { unload("attach", pid, {}); };
    const int watch_fd = tools::start_session_watch(w);
    if (watch_fd < 0 && watch_fd != -1 && !o.quiet)
        std::fprintf(stderr,
                     "dprobe attach: warning: no watcher for the session (%s): if %s is "
                     "killed, its tracefs mount stays behind\n",
                     std::strerror(-watch_fd), who(o.pid).c_str());
    if (o.background) {
        std::printf("dprobe attach: %s: recording %s into %s\n", who(o.pid).c_str(), what.c_str(),
                    o.output.c_str());
        if (!ready.mount.empty()) std::printf("  tracefs: %s\n", ready.mount.c_str());
        std::printf("  'dprobe detach -p %d' ends the session\n", o.pid);
        return 0;
    }
    if (!o.quiet) {
        std::fprintf(stderr, "dprobe attach: %s: recording %s into %s; Ctrl-C to detach\n",
                     who(o.pid).c_str(), what.c_str(), o.output.c_str());
        if (!ready.mount.empty()) std::fprintf(stderr, "  tracefs: %s\n", ready.mount.c_str());
    }
    const int r = follow_session(cmd, o, link, ready);
    tools::session_watch_done(watch_fd);
    return r;
}

// Ends the session of PID and takes its runtime out. FORKED: PID is a child the session's
// process forked meanwhile (said so in the messages). *TRACE: the session's file, when PID
// said it.
int detach_process(const char *cmd, pid_t pid, bool forked, std::string *trace)
{
    // A forked child that exits (or execs) while its session is being ended takes its runtime
    // with it: nothing of it is left, and nothing to say.
    auto fail = [&](const char *c, const std::string &msg) {
        if (forked && (!tools::process_alive(pid) || tools::mapped_agent(pid).empty())) return 0;
        return ::dprobe::cli::fail(c, msg);
    };
    if (std::string why = tools::check_attach_target(pid); !why.empty()) return fail(cmd, why);
    std::string agent = tools::mapped_agent(pid);
    if (agent.empty())
        return fail(cmd, who(pid) + " is not attached (no dprobe runtime is loaded in it)");
    tools::agent_link link;
    if (int e = link.listen())
        return fail(cmd, std::string("cannot create a socket: ") + std::strerror(-e));
    tools::agent_call c = tools::call_agent(pid, agent, false, attach::detach_symbol, link.name());
    if (!c.error.empty()) return fail(cmd, c.error_code == -ESRCH ? who(pid) + " exited" : c.error);
    if (c.result == -ENOENT) {
        // No session, yet the runtime is there: the detach that ended the last session did not
        // get to unload it (killed, or a thread was in dprobe's code until it gave up). Taken
        // out now, the process is as before that session.
        link.close();
        const int r = unload(cmd, pid, {});
        if (r == 0)
            std::printf("dprobe detach: %s had no session; the dprobe runtime left by the last "
                        "one is unloaded\n",
                        who(pid).c_str());
        return r;
    }
    if (c.result == -EEXIST)
        return fail(cmd, who(pid) + " is being recorded by 'dprobe record': its session ends "
                                    "with the process");
    if (c.result == -EBUSY)
        return fail(cmd, who(pid) + " is being attached or detached right now; try again");
    if (c.result < 0)
        return fail(cmd,
                    std::string("the dprobe agent could not start: ") + std::strerror(-c.result));
    std::string err, msg;
    if (int e = link.accept_agent(pid, "detach", k_answer_ms, &err))
        return fail(cmd, e == -ESRCH ? who(pid) + " exited" : err);
    if (!link.send("detach")) return fail(cmd, who(pid) + " exited");
    std::vector<std::string> left;
    for (;;) {
        int r = link.next(msg, k_setup_ms);
        if (r <= 0)
            return fail(cmd, tools::process_alive(pid) ? "the dprobe agent did not answer"
                                                       : who(pid) + " exited");
        if (msg.rfind("error ", 0) == 0) {
            print_agent_error(cmd, msg.substr(6));
            return 1;
        }
        if (msg.rfind("left ", 0) == 0) left.push_back(msg.substr(5));
        if (msg.rfind("detached ", 0) == 0) break;
    }
    wait_agent_threads(pid);
    unsigned long long recs = 0, lost = 0, bytes = 0;
    char path[PATH_MAX] = {};
    int n =
        std::sscanf(msg.c_str() + 9, "%*d %llu %llu %llu %4095[^\n]", &recs, &lost, &bytes, path);
    std::printf("dprobe %s: %s%s detached: %llu events (%llu lost), %.3f MB written%s%s\n", cmd,
                who(pid).c_str(), forked ? ", forked during the session," : "", recs, lost,
                bytes / 1048576.0, n == 4 ? " to " : "", n == 4 ? path : "");
    if (n == 4) tools::print_session_hists(path, stdout, pid); // --trigger hist:... tables
    std::fflush(stdout);
    if (n == 4 && trace) *trace = path;
    return unload(cmd, pid, left);
}

// The children PID forked during its session (they write into TRACE too): their sessions
// end with it, and they are left as they were before it. 0, or 1 when one could not be.
int detach_forks(const char *cmd, pid_t pid, const std::string &trace)
{
    int status = 0;
    for (pid_t child : tools::session_forks(trace, pid))
        if (detach_process(cmd, child, true, nullptr) != 0) status = 1;
    return status;
}

int run_detach(pid_t pid)
{
    const char *cmd = "detach";
    std::string trace;
    const int r = detach_process(cmd, pid, false, &trace);
    const int forks = detach_forks(cmd, pid, trace);
    return r != 0 ? r : forks;
}

} // namespace

void setup_attach(CLI::App &app)
{
    auto o = std::make_shared<attach_opts>();
    CLI::App *sub = app.add_subcommand("attach", "Trace a running process until Ctrl-C");
    set_usage(sub, "dprobe attach -p PID [<options>]");
    sub->add_option("-p,--pid", o->pid, "The process to trace")->required()->type_name("PID");
    sub->add_option("-e,--event", o->events,
                    "A dynamic_events line, a probe stored by 'dprobe probe --add' "
                    "([GROUP:]EVENT, globs allowed), or a USDT probe of the program or its "
                    "libraries (sdt_PROVIDER:NAME [ARG...])")
        ->type_name("EVENT");
    add_trace_options(sub, *o, "--tracer");
    sub->add_flag("-B,--background", o->background,
                  "Start recording and return; 'dprobe detach -p PID' ends the session");
    sub->add_flag("-q,--quiet", o->quiet, "No status line");
    sub->add_flag("-v,--verbose", o->verbose, "Say which thread of the process loaded the agent");
    sub->add_flag("--no-tracefs", o->no_tracefs, "Do not serve the tracefs tree of the process");
    sub->add_flag("--no-wait", o->no_wait,
                  "Never slow the process down: a thread whose buffer is full drops its events "
                  "(counted) rather than wait for dprobe to copy them out");
    sub->footer(
        "Examples:\n"
        "   dprobe attach -p 1234                               the program's functions\n"
        "   dprobe attach -p 1234 -e 'f:parse_entry parse len=$arg2:u64'\n"
        "   dprobe attach -p 1234 -e 'p:alloc libc.so.6:malloc size=%di:u64' -F 'handle_*'\n"
        "   dprobe attach -B -p 1234 -F 'handle_*' -o server.dat; ...; dprobe detach -p 1234\n"
        "\n"
        "Needs the process's user or CAP_SYS_PTRACE (and what kernel.yama.ptrace_scope\n"
        "allows). Then: dprobe report [-i FILE] [--format text|graph|chrome]");
    sub->callback([o] { exit_status = run_attach(*o); });

    auto pid = std::make_shared<pid_t>(0);
    CLI::App *det = app.add_subcommand("detach", "End the dprobe attach session of a process");
    set_usage(det, "dprobe detach -p PID");
    det->add_option("-p,--pid", *pid, "The process")->required()->type_name("PID");
    det->footer("Ends the session: writes the end of its trace file, resets the process's\n"
                "tracefs to its defaults, removes every probe, puts back every byte of code\n"
                "dprobe changed and unloads the runtime. The process keeps running as it\n"
                "was before the attach; what could not be undone is named, with exit status 1.");
    det->callback([pid] { exit_status = run_detach(*pid); });
}

} // namespace dprobe::cli
