// The preload agent's start: read DPROBE_*, apply the events, start the function graph,
// open the session in the trace file and start streaming, all before main.
#include "tools/agent/agent.h"

#include "core/ftrace.h"
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tools/trace_file.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_events.h"

#include <dprobe/tracefs.h>

#include <algorithm>
#include <cerrno>
#include <dirent.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace dprobe::agent {

agent_state &state()
{
    static agent_state *st = new agent_state; // never destroyed: used until the last exit step
    return *st;
}

void status_send(const std::string &msg) noexcept
{
    int fd = state().status_fd;
    if (fd < 0)
        return;
    // A datagram socket: one message each; never SIGPIPE or block the traced program.
    (void)send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool write_chunk(uint32_t type, const std::string &payload)
{
    agent_state &st = state();
    if (st.out_fd < 0)
        return false;
    std::string c = tracefile::make_chunk(static_cast<tracefile::chunk_type>(type), st.session,
                                          payload);
    if (!tracefile::write_all(st.out_fd, c.data(), c.size()))
        return false;
    st.bytes += c.size();
    return true;
}

namespace {

std::vector<std::string> env_lines(const char *name)
{
    std::vector<std::string> out;
    const char *v = std::getenv(name);
    if (!v)
        return out;
    std::string s = v;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t nl = s.find('\n', pos);
        std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        if (line.find_first_not_of(" \t") != std::string::npos)
            out.push_back(line);
        if (nl == std::string::npos)
            break;
        pos = nl + 1;
    }
    return out;
}

[[noreturn]] void agent_fail(const std::string &msg)
{
    agent_state &st = state();
    if (st.status_fd >= 0)
        status_send("error " + msg);
    else
        std::fprintf(stderr, "dprobe agent: %s\n", msg.c_str());
    // Nothing is mounted yet, and the program must not run untraced as if all was well.
    _exit(126);
}

// The last error_log entry, for a rejected line.
std::string last_error_log()
{
    auto entries = trace_events::instance().errors().entries();
    return entries.empty() ? std::string() : error_log::format_entry(entries.back());
}

void apply_events(const std::vector<std::string> &lines)
{
    agent_state &st = state();
    trace_events &te = trace_events::instance();
    for (const std::string &line : lines) {
        te.errors().clear(); // before main, the log is the agent's own
        int r = te.write_commands(line, ACCEPT_DYNAMIC);
        if (r < 0) {
            std::string log = last_error_log();
            agent_fail("event '" + line + "' rejected: " + std::strerror(-r) +
                       (log.empty() ? "" : "\n" + log));
        }
        dynevent_command cmd;
        parse_options po;
        po.check_files = false;
        auto argv = argv_split(line);
        if (parse_dynevent(argv, po, cmd) || cmd.kind != dynevent_command::type::create)
            continue;
        const probe_definition &def = cmd.def;
        r = te.set_enabled(def.group, def.event, true);
        if (r < 0) {
            std::string log = last_error_log();
            agent_fail("cannot enable " + def.group + "/" + def.event + ": " +
                       std::strerror(-r) + (log.empty() ? "" : "\n" + log));
        }
        int id = te.event_id(def.group, def.event);
        auto fmt = te.format(def.group, def.event);
        if (id < 0 || !fmt)
            continue;
        bool known = false;
        for (const auto &e : st.events)
            known |= e.first == static_cast<uint32_t>(id);
        if (!known)
            st.events.emplace_back(static_cast<uint32_t>(id),
                                   tracefile::event_payload(static_cast<uint32_t>(id),
                                                            def.group + "/" + def.event,
                                                            def.listing(), *fmt));
    }
}

void on_process_exit(int status, void *)
{
    if (!state().active)
        return;
    exit_in_fork_child();
    if (state().pid == getpid())
        finish("exit", status);
}

__attribute__((constructor)) void dprobe_agent_init()
{
    const char *out = std::getenv("DPROBE_OUTPUT");
    if (!out || !*out)
        return; // preloaded without `dprobe record`: the runtime only
    agent_state &st = state();
    st.output = out;
    if (const char *fd = std::getenv("DPROBE_STATUS_FD"); fd && *fd)
        st.status_fd = std::atoi(fd);
    st.pid = getpid();
    st.out_fd = ::open(out, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (st.out_fd < 0)
        agent_fail(std::string("cannot open the trace file ") + out + ": " + std::strerror(errno));

    trace_clock_init();
    // The agent's own setup is not part of the program's trace.
    ring_buffer_set_tracing_on(false);
    if (const char *c = std::getenv("DPROBE_CLOCK"); c && *c)
        if (ring_buffer_set_clock(c) < 0)
            agent_fail(std::string("unknown trace clock '") + c + "'");
    if (const char *kb = std::getenv("DPROBE_BUFFER_KB"); kb && *kb)
        if (ring_buffer_set_size_kb(std::strtoul(kb, nullptr, 10)) < 0)
            agent_fail(std::string("bad buffer size '") + kb + "'");

    ftrace_update_objects();
    apply_events(env_lines("DPROBE_EVENTS"));
    auto graph = env_lines("DPROBE_GRAPH");
    if (!graph.empty()) {
        std::string err;
        int n = funcgraph_start(graph, env_lines("DPROBE_GRAPH_NOTRACE"), &err);
        if (n < 0)
            agent_fail(err);
        st.graph_functions = static_cast<unsigned>(n);
        st.events.emplace_back(tracefile::FUNCGRAPH_ENTRY_ID,
                               tracefile::event_payload(tracefile::FUNCGRAPH_ENTRY_ID,
                                                        "ftrace/funcgraph_entry", "",
                                                        tracefile::funcgraph_entry_format()));
        st.events.emplace_back(tracefile::FUNCGRAPH_EXIT_ID,
                               tracefile::event_payload(tracefile::FUNCGRAPH_EXIT_ID,
                                                        "ftrace/funcgraph_exit", "",
                                                        tracefile::funcgraph_exit_format()));
    }
    st.active = true;
    start_session("start");
    install_signal_handlers();
    install_fork_handlers();
    on_exit(on_process_exit, nullptr);
    start_consumer();
    tracefs_up();
    ring_buffer_set_tracing_on(true);
    status_send("ready " + std::to_string(st.pid) + " " + std::to_string(st.events.size()) + " " +
                std::to_string(st.graph_functions));
}

} // namespace

// The program's tracefs (FUSE mount and socket) for `dprobe ctl` and `echo`/`cat` while it
// runs; the CLI is told where, so it can clean a mount up if the program is killed.
void tracefs_up()
{
    const char *v = std::getenv("DPROBE_TRACEFS");
    if (v && std::strcmp(v, "0") == 0)
        return;
    auto tasks = [] {
        std::vector<int32_t> v;
        if (DIR *d = opendir("/proc/self/task")) {
            while (struct dirent *e = readdir(d))
                if (e->d_name[0] != '.')
                    v.push_back(std::atoi(e->d_name));
            closedir(d);
        }
        return v;
    };
    auto before = tasks();
    int r = dprobe_tracefs_start(nullptr);
    // Its server threads are the agent's too: keep their own probe hits out of the trace.
    for (int32_t t : tasks())
        if (std::find(before.begin(), before.end(), t) == before.end())
            state().add_own_tid(t);
    const char *m = dprobe_tracefs_mountpoint();
    const char *sock = dprobe_tracefs_socket();
    if (m)
        status_send(std::string("mount ") + m);
    if (sock)
        status_send(std::string("socket ") + sock);
    if (r < 0)
        status_send(std::string("warn tracefs: ") + (m ? "socket" : "FUSE mount") +
                    " not available: " + std::strerror(-r));
}

void tracefs_down() { dprobe_tracefs_stop(); }

} // namespace dprobe::agent
