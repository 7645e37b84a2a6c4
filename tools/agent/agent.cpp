// The agent's start: apply the events, start the function graph, export the ring buffers,
// open the session in the trace file. Preloaded by `dprobe record`, from DPROBE_* before
// main; loaded by `dprobe attach`, from its settings (attach.cpp). And its stop, for detach.
#include "tools/agent/agent.h"
#include "tools/agent/graph_args.h"
#include "tools/agent/cpu_timers.h"
#include "tools/agent/private_alloc.h"
#include "arch/x86_64/private_ns.h"
#include "core/own_fds.h"

#include "core/ftrace.h"
#include "core/ring_buffer.h"
#include "core/symbols.h"
#include "core/trace_clock.h"
#include "tools/trace_file.h"
#include "core/dl_notify.h"
#include "core/resident_pages.h"
#include "core/sym_cfi.h"
#include "tracefs/btf_lookup.h"
#include "tracefs/event_trigger.h"
#include "tracefs/trace_array.h"
#include "tracefs/ftrace_worker.h"
#include "tracefs/probe_parse.h"
#include "tracefs/trace_events.h"
#include "tracefs/tracefs_reset.h"

#include <dprobe/tracefs.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unordered_set>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

namespace dprobe::agent
{

agent_state &state()
{
    static agent_state *st = new agent_state; // never destroyed: used until the last exit step
    return *st;
}

namespace
{
std::atomic<bool> g_active{false};
}

bool agent_active() noexcept
{
    return g_active.load(std::memory_order_acquire);
}

void status_send(const std::string &msg) noexcept
{
    int fd = state().status_fd;
    if (fd < 0) return;
    // A datagram socket: one message each; never SIGPIPE or block the traced program.
    (void)send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool write_chunk(uint32_t type, const std::string &payload)
{
    return write_chunks(type, {&payload, 1});
}

bool write_chunks(uint32_t type, std::span<const std::string> payloads)
{
    agent_state &st = state();
    if (st.out_fd < 0) return false;
    std::string c;
    for (const std::string &p : payloads)
        c += tracefile::make_chunk(static_cast<tracefile::chunk_type>(type), st.session, p);
    return tracefile::write_all(st.out_fd, c.data(), c.size());
}

quiet_section::quiet_section()
{
    ring_buffer_thread_mute(true);
}
quiet_section::~quiet_section()
{
    ring_buffer_thread_mute(false);
}

namespace
{

// The environment read and changed without the C library: a program may define its own
// getenv and unsetenv (bash does, for its shell variables), and the agent must not run the
// program's code.
const char *env_get(const char *name)
{
    const size_t n = std::strlen(name);
    for (char **e = environ; e && *e; e++)
        if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return nullptr;
}

// Removes NAME from the environment in place (what the program's main gets as envp too).
void env_remove(const char *name)
{
    const size_t n = std::strlen(name);
    char **w = environ;
    for (char **e = environ; e && *e; e++)
        if (!(std::strncmp(*e, name, n) == 0 && (*e)[n] == '=')) *w++ = *e;
    if (w) *w = nullptr;
}

// The non-blank lines of TEXT.
std::vector<std::string> split_lines(const std::string &s)
{
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t nl = s.find('\n', pos);
        std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        if (line.find_first_not_of(" \t") != std::string::npos) out.push_back(line);
        if (nl == std::string::npos) break;
        pos = nl + 1;
    }
    return out;
}

std::vector<std::string> env_lines(const char *name)
{
    const char *v = env_get(name);
    return v ? split_lines(v) : std::vector<std::string>{};
}

// The lines of the file NAME names (DPROBE_EVENTS_FILE: more events than one environment
// string can hold); *ERR set when it cannot be read.
std::vector<std::string> file_lines(const char *name, std::string *err)
{
    const char *path = env_get(name);
    if (!path || !*path) return {};
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = std::string("cannot read the events file ") + path + ": " + std::strerror(errno);
        return {};
    }
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
        text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return split_lines(text);
}

[[noreturn]] void agent_fail(const std::string &msg)
{
    agent_state &st = state();
    if (st.status_fd >= 0)
        status_send("error " + msg);
    else {
        std::string line = "dprobe agent: " + msg + "\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
    }
    // Nothing is mounted yet, and the program must not run untraced as if all was well.
    _exit(126);
}

// The last error_log entry, for a rejected line; *DETAIL: its cause in this process and
// what to do instead, when the tracefs knows more than the kernel's message says.
std::string last_error_log(std::string *detail)
{
    auto entries = trace_events::instance().errors().entries();
    if (entries.empty()) return "";
    *detail = entries.back().detail;
    return error_log::format_entry(entries.back());
}

// Every dynamic event of the process disabled and deleted (its triggers first: they keep
// events busy).
void remove_all_events()
{
    {
        std::lock_guard<std::mutex> g(trace_types_lock());
        clear_event_triggers(trace_array_top().id);
    }
    trace_events &te = trace_events::instance();
    te.set_group_enabled("", false);
    te.release_all(ACCEPT_DYNAMIC);
}

// An event created by a line of DPROBE_EVENTS, to enable.
struct created_event {
    trace_events::event_ref ref;
};

// Enables BATCH at once (their kprobes armed in one batch) and records their formats for the
// trace file; "" or what went wrong.
std::string enable_created(std::vector<created_event> &batch)
{
    if (batch.empty()) return "";
    agent_state &st = state();
    trace_events &te = trace_events::instance();
    std::vector<trace_events::event_ref> refs;
    refs.reserve(batch.size());
    for (const created_event &c : batch)
        refs.push_back(c.ref);
    size_t failed = 0;
    int r = te.set_enabled(refs, true, &failed);
    if (r < 0) {
        std::string detail;
        std::string log = last_error_log(&detail);
        return "cannot enable " + refs[failed].group + "/" + refs[failed].event + ": " +
               (detail.empty() ? std::strerror(-r) : detail) + (log.empty() ? "" : "\n" + log);
    }
    std::unordered_set<uint32_t> known;
    for (const auto &e : st.events)
        known.insert(e.first);
    for (const created_event &c : batch) {
        int id = te.event_id(c.ref.group, c.ref.event);
        auto fmt = te.format(c.ref.group, c.ref.event);
        if (id < 0 || !fmt || !known.insert(static_cast<uint32_t>(id)).second) continue;
        st.events.emplace_back(
            static_cast<uint32_t>(id),
            tracefile::event_payload(static_cast<uint32_t>(id), c.ref.group + "/" + c.ref.event,
                                     te.listing_of(c.ref.group, c.ref.event), *fmt));
    }
    batch.clear();
    return "";
}

// Applies and enables LINES; "" or what went wrong (with the error_log entry). The events
// of consecutive lines that create them are enabled together, before any other command runs
// (a line deleting an event sees it enabled, as if each had been enabled at once). Not
// STRICT (a program the named one runs): a line that does not apply to it is left out with a
// warning in *WARN instead.
std::string apply_events(const std::vector<std::string> &lines, bool strict, std::string *warn)
{
    trace_events &te = trace_events::instance();
    std::vector<created_event> batch;
    for (const std::string &line : lines) {
        dynevent_command cmd;
        parse_options po;
        po.check_files = false;
        po.btf_unchecked = true; // only the names are needed: te has checked the line
        auto argv = argv_split(line);
        const bool creates =
            !parse_dynevent(argv, po, cmd) && cmd.kind == dynevent_command::type::create;
        if (!creates)
            if (std::string err = enable_created(batch); !err.empty()) return err;
        te.errors().clear(); // before main, the log is the agent's own
        int r = te.write_commands(line, ACCEPT_DYNAMIC);
        if (r < 0) {
            std::string detail;
            std::string log = last_error_log(&detail);
            if (detail.empty()) detail = std::strerror(-r);
            std::string why =
                "event '" + line + "' rejected: " + detail + (log.empty() ? "" : "\n" + log);
            if (strict) return why;
            *warn += (warn->empty() ? "" : "; ") + ("event '" + line + "' left out: " + detail);
            continue;
        }
        if (creates) batch.push_back({{cmd.def.group, cmd.def.event}});
    }
    return enable_created(batch);
}

// Writes each --trigger "GROUP:EVENT:TRIGGER" to events/GROUP/EVENT/trigger of the top
// array; "" or what went wrong, naming the option's text (with the error_log entry when the
// kernel logs one). Not STRICT: a trigger whose event this program lacks is left out with
// a warning in *WARN.
std::string apply_triggers(const std::vector<std::string> &triggers, bool strict, std::string *warn)
{
    for (const std::string &t : triggers) {
        size_t a = t.find(':');
        size_t b = a == std::string::npos ? a : t.find(':', a + 1);
        if (b == std::string::npos) return "--trigger '" + t + "': not GROUP:EVENT:TRIGGER";
        const std::string group = t.substr(0, a), event = t.substr(a + 1, b - a - 1);
        trace_events::instance().errors().clear();
        int r = event_trigger_write(trace_array_top(), group, event, t.substr(b + 1));
        if (r == 0) continue;
        std::string detail;
        std::string log = last_error_log(&detail);
        std::string why =
            r == -ENODEV ? "no event " + group + "/" + event : std::string(std::strerror(-r));
        if (!strict && r == -ENODEV) {
            *warn += (warn->empty() ? "" : "; ") + ("--trigger '" + t + "' left out: " + why);
            continue;
        }
        return "--trigger '" + t + "' rejected: " + why + (log.empty() ? "" : "\n" + log);
    }
    return "";
}

// Whether this object was preloaded (LD_PRELOAD names it), rather than loaded later by
// dlopen (dprobe attach) into a process that inherited DPROBE_* from a recorded parent.
bool preloaded()
{
    const char *pre = env_get("LD_PRELOAD");
    Dl_info info{};
    if (!pre || !dladdr(reinterpret_cast<void *>(&preloaded), &info) || !info.dli_fname)
        return false;
    char self[PATH_MAX];
    if (!realpath(info.dli_fname, self)) return false;
    std::string list = pre;
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t end = list.find_first_of(" :", pos);
        std::string item =
            list.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        char rp[PATH_MAX];
        if (!item.empty() && realpath(item.c_str(), rp) && std::strcmp(rp, self) == 0) return true;
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return false;
}

// A descriptor the CLI passed down (by number, in the environment), checked to be what it
// should be and duplicated out of the program's way: the program may close or reuse the
// number, the agent's copy stays. -1 when it is not there or not of that kind.
int inherited_fd(const char *var, const char *kind)
{
    const char *v = env_get(var);
    if (!v || !*v) return -1;
    int fd = std::atoi(v);
    char link[64], path[64];
    std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return -1;
    link[n] = '\0';
    if (std::strncmp(link, kind, std::strlen(kind)) != 0) return -1;
    return fcntl(fd, F_DUPFD_CLOEXEC, 100);
}

__attribute__((constructor)) void dprobe_agent_init()
{
    const char *out = env_get("DPROBE_OUTPUT");
    if (!out || !*out || !preloaded())
        return; // preloaded without `dprobe record`, or loaded by `dprobe attach`
    quiet_section q;
    // The program's CPU-time timers do not count the agent's start (nor, after an exec, the
    // loader's work on this object: the exec'd image carried them here stopped).
    cpu_timers_paused cpu;
    if (const char *t = env_get(cpu_timers::k_env)) {
        cpu.timers().adopt(t);
        env_remove(cpu_timers::k_env);
    }
    agent_state &st = state();
    st.output = out;
    st.status_fd = inherited_fd("DPROBE_STATUS_FD", "socket:");
    if (st.status_fd >= 0) {
        struct timeval tv {
            1, 0
        }; // the CLI is there, or gone: never hang the program
        setsockopt(st.status_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    st.wake_fd = inherited_fd("DPROBE_WAKE_FD", "anon_inode:[eventfd]");
    // Only the program `dprobe record` named fails on a glob that matches nothing in it; the
    // programs it runs in turn are not told.
    const bool first = env_get("DPROBE_FIRST") != nullptr;
    if (first) env_remove("DPROBE_FIRST");
    st.pid = getpid();
    st.out_fd = ::open(out, O_WRONLY | O_APPEND | O_CLOEXEC);
    // Kept open when the program closes every descriptor (core/own_fds.h).
    own_fd_add(st.status_fd);
    own_fd_add(st.wake_fd);
    own_fd_add(st.out_fd);
    if (st.out_fd < 0) {
        if (!first) return; // not the program asked about: it runs untraced
        agent_fail(std::string("cannot open the trace file ") + out + ": " + std::strerror(errno));
    }

    agent_config c;
    c.events = env_lines("DPROBE_EVENTS");
    std::string ferr;
    for (std::string &l : file_lines("DPROBE_EVENTS_FILE", &ferr))
        c.events.push_back(std::move(l));
    if (!ferr.empty()) agent_fail(ferr);
    c.triggers = env_lines("DPROBE_TRIGGERS");
    c.graph = env_lines("DPROBE_GRAPH");
    c.notrace = env_lines("DPROBE_GRAPH_NOTRACE");
    if (const char *m = env_get("DPROBE_GRAPH_MAIN")) c.graph_main = std::strcmp(m, "1") == 0;
    if (const char *f = env_get("DPROBE_FOLLOW_LOADS")) c.follow_loads = std::strcmp(f, "1") == 0;
    c.graph_args = env_lines("DPROBE_GRAPH_ARGS");
    c.graph_retvals = env_lines("DPROBE_GRAPH_RETVALS");
    if (const char *a = env_get("DPROBE_GRAPH_ARGS_AUTO"))
        c.graph_args_auto = std::strcmp(a, "1") == 0;
    if (const char *tr = env_get("DPROBE_TRACER"))
        c.function_tracer = std::strcmp(tr, "function") == 0;
    if (const char *d = env_get("DPROBE_GRAPH_DEPTH"); d && *d)
        c.max_graph_depth = static_cast<unsigned>(std::strtoul(d, nullptr, 10));
    if (const char *kb = env_get("DPROBE_BUFFER_KB"); kb && *kb) {
        c.buffer_kb = std::strtoul(kb, nullptr, 10);
        if (!c.buffer_kb) agent_fail(std::string("bad buffer size '") + kb + "'");
    }
    if (const char *clk = env_get("DPROBE_CLOCK")) c.clock = clk;
    if (const char *nw = env_get("DPROBE_NOWAIT")) st.nowait = std::strcmp(nw, "1") == 0;
    const char *tfs = env_get("DPROBE_TRACEFS");
    c.tracefs = !(tfs && std::strcmp(tfs, "0") == 0);
    std::string err = agent_start(c, first ? "start" : "exec", first);
    if (err.empty()) return;
    if (first) agent_fail(err);
    status_send("warn " + std::string(program_invocation_short_name) + " (pid " +
                std::to_string(getpid()) + ") not traced: " + err);
}

// The globs of the graph: the program's own executable's functions, for `record --graph`
// (and by default), whichever program this is.
// Events created through the tracefs while the program runs: described in the trace file
// right away (on the tracefs thread, which records nothing).
void on_tracefs_commands()
{
    if (!agent_active()) return;
    quiet_section q;
    agent_state &st = state();
    std::lock_guard<fair_mutex> g(st.lock);
    describe_changes_locked();
}

std::vector<std::string> graph_globs(const agent_config &c)
{
    std::vector<std::string> globs = c.graph;
    if (c.graph_main) {
        auto objs = kallsyms::instance().objects();
        for (const object_ptr &o : *objs)
            if (o->is_main) globs.push_back(o->name + ":*");
    }
    return globs;
}

} // namespace

std::string agent_start(const agent_config &c, const char *reason, bool strict)
{
    agent_state &st = state();
    // What the session will read of the process's code is resident only while it lasts
    // (core/resident_pages.h); a recorded process keeps its runtime to the end.
    if (st.attached) resident_pages_adopt(c.resident);
    // libdw, libelf and Zydis, in the preload's own namespace: loaded here rather than at
    // their first call, so that a missing one fails the start with its reason.
    std::string why;
    if (!arch::private_ns_bind(&why)) return why;
    st.config = c;
    // The tree's values as this session finds them, for its end to write back.
    tracefs_capture_defaults();
    trace_clock_init();
    // The agent's own setup is not part of the program's trace.
    ring_buffer_set_tracing_on(false);
    ring_buffer_mute_threads_named(attach::thread_name_prefix);
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
    // The USDT probes of the process as static events (tracepoints), which -e t: lines
    // and --trigger may name.
    trace_events::instance().usdt_start();
    std::string warn;
    std::string err = apply_events(c.events, strict, &warn);
    if (err.empty()) err = apply_triggers(c.triggers, strict, &warn);
    if (!err.empty()) {
        remove_all_events();
        st.events.clear();
        return err;
    }
    st.graph_functions = 0;
    graph_plan plan;
    const std::vector<std::string> globs = graph_globs(c);
    if (!globs.empty() || c.graph_main) {
        int n = c.follow_loads ? session_follow_loads(true) : 0;
        if (n < 0)
            err = "--follow-loads: " + follow_loads_error(n);
        else
        // The program's own functions by default: a program without any (stripped) is
        // not an error; the CLI says what it can do instead.
        {
            const graph_args_config args{c.graph_args, c.graph_retvals, c.graph_args_auto};
            n = funcgraph_start(globs, c.notrace, c.follow_loads, c.max_graph_depth,
                                c.function_tracer, strict && !(c.graph_main && c.graph.empty()),
                                &err, &warn, &plan, &args);
        }
        if (n < 0) {
            session_follow_loads(false);
            remove_all_events();
            st.events.clear();
            return err;
        }
        st.graph_functions = static_cast<unsigned>(n);
        if (c.function_tracer) {
            st.events.emplace_back(tracefile::FUNCTION_ID,
                                   tracefile::event_payload(tracefile::FUNCTION_ID,
                                                            "ftrace/function", "",
                                                            tracefile::function_format()));
        } else {
            st.events.emplace_back(tracefile::FUNCGRAPH_ENTRY_ID,
                                   tracefile::event_payload(tracefile::FUNCGRAPH_ENTRY_ID,
                                                            "ftrace/funcgraph_entry", "",
                                                            tracefile::funcgraph_entry_format()));
            st.events.emplace_back(tracefile::FUNCGRAPH_EXIT_ID,
                                   tracefile::event_payload(tracefile::FUNCGRAPH_EXIT_ID,
                                                            "ftrace/funcgraph_exit", "",
                                                            tracefile::funcgraph_exit_format()));
            for (auto &ev : graph_args_events())
                st.events.push_back(std::move(ev));
        }
    }
    st.names = plan.names;
    const std::string who =
        std::string(program_invocation_short_name) + " (pid " + std::to_string(getpid()) + ")";
    if (c.graph_main && c.graph.empty() && c.events.empty()) {
        // The default graph: if nothing comes of it, the CLI says why (a stripped program)
        // and what to do instead.
        size_t syms = 0;
        std::string exe;
        for (const object_ptr &o : *kallsyms::instance().objects())
            if (o->is_main) {
                syms = o->funcs.size();
                exe = o->path;
            }
        status_send("graph " + std::to_string(syms) + " " + std::to_string(st.graph_functions) +
                    " " + exe);
        if (st.graph_functions == 0) warn.clear(); // that says it better
    }
    if (!warn.empty()) status_send("warn " + who + ": " + warn);
    funcgraph_report(who, plan);
    // The pages go to the file as they are: keep the oldest when the consumer falls behind
    // (the kernel's default overwrites them; a recording wants the whole story, and the
    // losses marked where they happened).
    ring_buffer_set_overwrite(false);
    // `dprobe record` copies the pages out as they fill: a thread finding its buffer full
    // waits for it (from the first event on, before the CLI has even mapped the buffers).
    // With `dprobe attach` the streamer turns that on once it runs (streamer.cpp).
    if (st.attached) st.nowait = c.nowait;
    if (int r = ring_buffer_export(st.wake_fd, !st.attached && !st.nowait); r < 0) {
        funcgraph_stop();
        session_follow_loads(false);
        remove_all_events();
        st.events.clear();
        return std::string("cannot share the ring buffers: ") + std::strerror(-r);
    }
    if (!c.follow_loads) session_describe_loads();
    st.active = true;
    g_active.store(true, std::memory_order_release);
    start_session(reason);
    if (st.attached)
        start_streamer();
    else if (!announce_buffers())
        status_send("warn " + std::to_string(getpid()) +
                    ": the ring buffers could not be handed to dprobe record");
    install_lifecycle_hooks();
    if (st.attached) install_signal_handlers();
    trace_events::set_commands_hook(on_tracefs_commands);
    // The tracepoints of the objects loaded so far, described before any can be enabled
    // (those of objects loaded later are described in their dlopen, through the hook).
    on_tracefs_commands();
    if (c.tracefs)
        tracefs_up(); // its stop, at exit too, records nothing on the thread that runs it
    ring_buffer_set_tracing_on(true);
    status_send("ready " + std::to_string(st.pid) + " " + std::to_string(st.events.size()) + " " +
                std::to_string(st.graph_functions));
    return "";
}

std::vector<std::string> agent_stop(const char *reason)
{
    agent_state &st = state();
    if (!st.active) return {};
    std::vector<std::string> failed;
    // Nothing new is recorded; the streamer copies the last pages and writes STATS and END.
    ring_buffer_set_tracing_on(false);
    write_session_hists(); // before END: a reader has them when the session is over
    std::string end;
    tracefile::append_kv(end, "reason", reason);
    stop_streamer(end);
    // The tree's bindings go first (no user's write can come in meanwhile), then the session's
    // probes: the graph, then whatever the tree holds (events, triggers, tracers, filters,
    // instances), as the kernel's selftests reset it.
    tracefs_down();
    funcgraph_stop();
    session_follow_loads(false);
    for (std::string &f : tracefs_reset())
        failed.push_back(std::move(f));
    trace_events::set_commands_hook(nullptr);
    ftrace_worker_stop();
    if (int r = dl_notify_release())
        failed.push_back(std::string("the loader's hook could not be removed: ") +
                         std::strerror(-r));
    // Files the session's lookups opened (ELF, DWARF of the objects).
    debuginfo_cache_release();
    cfi_cache_release();
    remove_signal_handlers();
    ring_buffer_unexport();
    std::lock_guard<fair_mutex> g(st.lock);
    st.active = false;
    g_active.store(false, std::memory_order_release);
    if (st.out_fd >= 0) {
        own_fd_remove(st.out_fd);
        ::close(st.out_fd);
    }
    st.out_fd = -1;
    st.events.clear();
    st.objects.clear();
    st.names.clear();
    return failed;
}

// The program's tracefs (FUSE mount and socket) for `dprobe ctl` and `echo`/`cat` while it
// runs; the CLI is told where, so it can clean a mount up if the program is killed. Its
// threads are named dprobe-*: they record nothing.
void tracefs_up()
{
    // The server threads, and the threads they start, take the name of the thread that
    // creates them: dprobe-*, which records nothing (and which `dprobe attach` never borrows).
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    pthread_setname_np(pthread_self(), "dprobe-tracefs");
    int r = dprobe_tracefs_start(nullptr);
    pthread_setname_np(pthread_self(), name);
    const char *m = dprobe_tracefs_mountpoint();
    const char *sock = dprobe_tracefs_socket();
    if (m) status_send(std::string("mount ") + m);
    if (sock) status_send(std::string("socket ") + sock);
    if (r < 0)
        status_send(std::string("warn tracefs: ") + (m ? "socket" : "FUSE mount") +
                    " not available: " + std::strerror(-r));
}

void tracefs_down()
{
    dprobe_tracefs_stop();
}

} // namespace dprobe::agent

// The runtime's own way out (its static destructors, which __cxa_finalize runs for this
// object) is not the program's: recording is off on the exiting thread from this object's
// first destructor (the agent's objects are linked last, so theirs run first) to its DT_FINI
// function, which the dynamic linker calls after all of them (-Wl,-fini, CMakeLists.txt).
// The program's CPU-time timers are stopped over the same span (cpu_timers.h).
static dprobe::agent::cpu_timers fini_cpu_timers;

// Muted before the timers are paused and unmuted after they are resumed: setitimer is the
// agent's call, not the program's (a graph of libc functions would show it).
__attribute__((destructor)) static void dprobe_agent_fini_first()
{
    dprobe::ring_buffer_thread_mute(true);
    fini_cpu_timers.pause();
}

extern "C" void dprobe_agent_fini_last()
{
    // Unloaded by `dprobe detach`: the agent's own memory goes last, after every destructor
    // that could still free into it (unload.cpp). Not at exit: other threads may still run.
    if (dprobe::agent::unloading()) {
        dprobe::agent::palloc_release_all();
        return;
    }
    fini_cpu_timers.resume();
    dprobe::ring_buffer_thread_mute(false);
}
