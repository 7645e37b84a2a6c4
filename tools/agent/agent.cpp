// The agent's start: apply the events, start the function graph, open the session in the
// trace file and start streaming. Preloaded by `dprobe record`, from DPROBE_* before main;
// loaded by `dprobe attach`, from its settings (attach.cpp). And its stop, for detach.
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
#include <climits>
#include <cstdio>
#include <dirent.h>
#include <dlfcn.h>
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

// Every dynamic event of the process disabled and deleted.
void remove_all_events()
{
    trace_events &te = trace_events::instance();
    te.set_group_enabled("", false);
    te.release_all(ACCEPT_DYNAMIC);
}

// Applies and enables LINES; "" or what went wrong (with the error_log entry).
std::string apply_events(const std::vector<std::string> &lines)
{
    agent_state &st = state();
    trace_events &te = trace_events::instance();
    for (const std::string &line : lines) {
        te.errors().clear(); // before main, the log is the agent's own
        int r = te.write_commands(line, ACCEPT_DYNAMIC);
        if (r < 0) {
            std::string log = last_error_log();
            return "event '" + line + "' rejected: " + std::strerror(-r) +
                   (log.empty() ? "" : "\n" + log);
        }
        dynevent_command cmd;
        parse_options po;
        po.check_files = false;
        po.btf_unchecked = true; // only the names are needed: te has checked the line
        auto argv = argv_split(line);
        if (parse_dynevent(argv, po, cmd) || cmd.kind != dynevent_command::type::create)
            continue;
        const probe_definition &def = cmd.def;
        r = te.set_enabled(def.group, def.event, true);
        if (r < 0) {
            std::string log = last_error_log();
            return "cannot enable " + def.group + "/" + def.event + ": " + std::strerror(-r) +
                   (log.empty() ? "" : "\n" + log);
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
                                                            te.listing_of(def.group, def.event),
                                                            *fmt));
    }
    return "";
}

void on_process_exit(int status, void *)
{
    if (!state().active)
        return;
    exit_in_fork_child();
    if (state().pid == getpid())
        finish("exit", status);
}

// Whether this object was preloaded (LD_PRELOAD names it), rather than loaded later by
// dlopen (dprobe attach) into a process that inherited DPROBE_* from a recorded parent.
bool preloaded()
{
    const char *pre = std::getenv("LD_PRELOAD");
    Dl_info info {};
    if (!pre || !dladdr(reinterpret_cast<void *>(&preloaded), &info) || !info.dli_fname)
        return false;
    char self[PATH_MAX];
    if (!realpath(info.dli_fname, self))
        return false;
    std::string list = pre;
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t end = list.find_first_of(" :", pos);
        std::string item = list.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        char rp[PATH_MAX];
        if (!item.empty() && realpath(item.c_str(), rp) && std::strcmp(rp, self) == 0)
            return true;
        if (end == std::string::npos)
            break;
        pos = end + 1;
    }
    return false;
}

__attribute__((constructor)) void dprobe_agent_init()
{
    const char *out = std::getenv("DPROBE_OUTPUT");
    if (!out || !*out || !preloaded())
        return; // preloaded without `dprobe record`, or loaded by `dprobe attach`
    agent_state &st = state();
    st.output = out;
    if (const char *fd = std::getenv("DPROBE_STATUS_FD"); fd && *fd)
        st.status_fd = std::atoi(fd);
    st.pid = getpid();
    st.out_fd = ::open(out, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (st.out_fd < 0)
        agent_fail(std::string("cannot open the trace file ") + out + ": " + std::strerror(errno));

    agent_config c;
    c.events = env_lines("DPROBE_EVENTS");
    c.graph = env_lines("DPROBE_GRAPH");
    c.notrace = env_lines("DPROBE_GRAPH_NOTRACE");
    if (const char *f = std::getenv("DPROBE_FOLLOW_LOADS"))
        c.follow_loads = std::strcmp(f, "1") == 0;
    if (const char *kb = std::getenv("DPROBE_BUFFER_KB"); kb && *kb) {
        c.buffer_kb = std::strtoul(kb, nullptr, 10);
        if (!c.buffer_kb)
            agent_fail(std::string("bad buffer size '") + kb + "'");
    }
    if (const char *clk = std::getenv("DPROBE_CLOCK"))
        c.clock = clk;
    const char *tfs = std::getenv("DPROBE_TRACEFS");
    c.tracefs = !(tfs && std::strcmp(tfs, "0") == 0);
    std::string err = agent_start(c, "start");
    if (!err.empty())
        agent_fail(err);
}

} // namespace

std::string agent_start(const agent_config &c, const char *reason)
{
    agent_state &st = state();
    trace_clock_init();
    // The agent's own setup is not part of the program's trace.
    ring_buffer_set_tracing_on(false);
    if (!c.clock.empty() && ring_buffer_set_clock(c.clock.c_str()) < 0)
        return "unknown trace clock '" + c.clock + "'";
    if (c.buffer_kb && ring_buffer_set_size_kb(c.buffer_kb) < 0)
        return "bad buffer size '" + std::to_string(c.buffer_kb) + "'";

    ftrace_update_objects();
    if (st.attached) {
        // gcc's one-byte NOP sleds of a program that already runs threads: made usable with
        // every thread stopped outside them.
        int n = ftrace_convert_sleds();
        if (n < 0)
            status_send(std::string("warn patchable-function-entry sites left unused: cannot "
                                    "stop the threads: ") +
                        std::strerror(-n));
    }
    std::string err = apply_events(c.events);
    if (!err.empty()) {
        remove_all_events();
        st.events.clear();
        return err;
    }
    st.graph_functions = 0;
    if (!c.graph.empty()) {
        int n = c.follow_loads ? stream_follow_loads(true) : 0;
        if (n < 0)
            err = "--follow-loads: " + follow_loads_error(n);
        else
            n = funcgraph_start(c.graph, c.notrace, c.follow_loads, &err);
        if (n < 0) {
            stream_follow_loads(false);
            remove_all_events();
            st.events.clear();
            return err;
        }
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
    st.finished.store(false);
    st.records = st.lost = st.bytes = 0;
    st.active = true;
    start_session(reason);
    install_signal_handlers();
    static bool once = false; // neither can be undone: they check st.active
    if (!once) {
        install_fork_handlers();
        on_exit(on_process_exit, nullptr);
        once = true;
    }
    start_consumer();
    if (c.tracefs)
        tracefs_up();
    ring_buffer_set_tracing_on(true);
    status_send("ready " + std::to_string(st.pid) + " " + std::to_string(st.events.size()) + " " +
                std::to_string(st.graph_functions));
    return "";
}

void agent_stop(const char *reason)
{
    agent_state &st = state();
    if (!st.active)
        return;
    // Probes first, so nothing new arrives; then the last records, STATS and END.
    remove_all_events();
    funcgraph_stop();
    finish(reason, 0);
    stream_follow_loads(false);
    tracefs_down();
    remove_signal_handlers();
    std::lock_guard<std::mutex> g(st.lock);
    st.active = false;
    if (st.out_fd >= 0)
        ::close(st.out_fd);
    st.out_fd = -1;
    st.events.clear();
    st.event_chunks.clear();
    st.comms.clear();
    st.objects.clear();
    for (auto &t : st.own_tids)
        t.store(0);
}

// The program's tracefs (FUSE mount and socket) for `dprobe ctl` and `echo`/`cat` while it
// runs; the CLI is told where, so it can clean a mount up if the program is killed.
void tracefs_up()
{
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
