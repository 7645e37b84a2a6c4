// The agent of `dprobe record` and `dprobe attach` (libdprobe-preload.so): internal
// interfaces.
//
// Preloaded by `dprobe record`, it starts from the environment in a constructor (below).
// The ring buffers are exported (core/ring_buffer.h) and `dprobe record` copies their pages
// into the trace file from outside: the agent writes only the metadata (session, objects,
// event formats) and runs no thread of its own for the trace, so whatever ends the program
// (_exit, abort, a fatal signal, SIGKILL) what it recorded reaches the file.
// Loaded into a running process by `dprobe attach` (attach.cpp), it gets the same settings
// over a socket from the command, copies the pages itself (streamer.cpp), and stops again on
// `dprobe detach`.
//
// Environment (set by `dprobe record`; without DPROBE_OUTPUT the agent does nothing):
//   DPROBE_OUTPUT         trace file to append to (created with its header by the CLI)
//   DPROBE_EVENTS         dynamic_events lines, one per line, applied and enabled before main
//   DPROBE_EVENTS_FILE    a file of more such lines (after those of DPROBE_EVENTS): for more
//                         events than one environment string may hold
//   DPROBE_GRAPH          function-graph globs, one per line ("*" for every function with a
//                         site; ":main:*" for the functions of the program's own executable);
//                         DPROBE_GRAPH_NOTRACE: globs left out
//   DPROBE_FOLLOW_LOADS   "1": the graph globs apply to libraries loaded later too
//   DPROBE_GRAPH_ARGS     "GLOB ARGS" lines: fetch args recorded at the entry of the graph's
//                         functions GLOB matches (record -A); DPROBE_GRAPH_RETVALS: at their
//                         return (-R); DPROBE_GRAPH_ARGS_AUTO "1": parameters and return
//                         values from DWARF for every other one (-a); see graph_args.h
//   DPROBE_BUFFER_KB      per-thread ring-buffer size
//   DPROBE_CLOCK          trace clock name
//   DPROBE_STATUS_FD      a datagram socket to the CLI: "hello" (with the ring buffers' memfd),
//                         "error ...", "warn ...", "ready ...", "mount ..."
//   DPROBE_WAKE_FD        an eventfd the CLI sleeps on: written when a buffer is half full
//   DPROBE_TRACEFS        "0": do not serve the tracefs tree
//   DPROBE_NOWAIT         "1": a thread whose buffer is full drops its events rather than
//                         wait for the CLI to copy pages out
//   DPROBE_FIRST          set for the program `dprobe record` starts (not passed on): only
//                         there does an -F glob that matches nothing stop the program
#pragma once

#include "core/fair_mutex.h"
#include "core/symbols.h"
#include "tools/attach_protocol.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace dprobe::agent
{

// What to record: from DPROBE_* (record) or the attach command's settings message.
using agent_config = attach::settings;

struct agent_state {
    bool active = false;
    bool attached = false; // loaded by `dprobe attach` (the agent copies the pages itself)
    int out_fd = -1;
    int status_fd = -1;
    int wake_fd = -1;    // the CLI's eventfd (record)
    bool nowait = false; // --no-wait: a full buffer drops rather than waits for the consumer
    pid_t pid = 0;
    uint64_t session = 0;
    std::string output;
    agent_config config;

    fair_mutex lock;        // chunk writing (a dlopen takes it: objects_notifier)
    std::string session_kv; // the SESSION chunk's keys but pid, ppid and reason (fork)
    std::vector<std::pair<uint32_t, std::string>> events;  // id, EVENT payload
    std::vector<std::pair<uint64_t, std::string>> objects; // described so far: id, "0xbias path"
    std::vector<std::pair<uintptr_t, std::string>> names;  // symbols of their own (IFUNC)
    unsigned graph_functions = 0;
};

agent_state &state();
// Whether a session is running (a flag: safe in signal handlers and before state() exists).
bool agent_active() noexcept;

// Sends one status datagram to the CLI (no-op without a status socket).
void status_send(const std::string &msg) noexcept;

// Writes one chunk (under state().lock). False when the write failed.
bool write_chunk(uint32_t type, const std::string &payload);
// Several chunks of one type with one write (the formats of thousands of events).
bool write_chunks(uint32_t type, std::span<const std::string> payloads);

// ---- session.cpp ----
// SESSION + OBJECTS + EVENT chunks of a new session (start, exec, attach).
void start_session(const char *reason);
// The same in a forked child, from what the parent described (no lock the parent's other
// threads could hold is taken), and the child's ring buffers announced to the CLI.
void fork_session();
// Sends "hello PID SESSION" with the ring buffers' memfd to the CLI. False if it could not.
bool announce_buffers();
// Objects loaded or unloaded since the last OBJECTS chunk, with the time from which the
// change holds; with EVENTS, events created since (through the tracefs) described (that
// takes the tracefs's lock). Caller holds the lock.
void describe_changes_locked(bool events = true);
// --follow-loads: each dlopen/dlclose is described as it happens (inside the loader), so that
// report names the functions of every load. 0 or -errno (the loader hook could not be
// installed). Off: stops that.
int session_follow_loads(bool on);
// Without --follow-loads: each dlopen/dlclose is still described as it happens whenever the
// loader hook is there for another reason (a probe waiting for its library, the function
// tracer), so that report names the functions of a library loaded later. Undone by
// session_follow_loads(false).
void session_describe_loads();

// ---- streamer.cpp (dprobe attach) ----
// Starts / stops the thread that copies the ring buffers into the trace file; stop writes
// the STATS and END chunks with END_KV.
void start_streamer();
void stop_streamer(const std::string &end_kv);
// Counts for the attach command: events, lost, bytes.
std::string streamer_counts();

// ---- funcgraph.cpp ----
// Registers the function-graph fprobe on GLOBS minus NOTRACE, and with FOLLOW_LOADS on
// matching functions of libraries loaded later. STRICT: a glob that matches nothing is an
// error (the program the user named), else it only leaves a warning in *WARN. Returns the
// number of functions (now), or -errno with *err set.
// What the graph ended up with, for the summary and the trace file.
struct graph_plan {
    std::vector<std::pair<uintptr_t, std::string>> names; // IFUNC implementations: address, name
    std::vector<std::string> int3;                        // functions with an int3 entry
    std::vector<std::pair<std::string, std::string>> int3_why; // why they have no site
    std::vector<std::pair<std::string, std::string>> left_out; // name, why
    std::string left_out_hint; // how to get them anyway, when there is a way
};
// ARGS (may be null): the arguments and return values some functions get (graph_args.h).
struct graph_args_config;
int funcgraph_start(const std::vector<std::string> &globs, const std::vector<std::string> &notrace,
                    bool follow_loads, unsigned max_depth, bool function_tracer, bool strict,
                    std::string *err, std::string *warn, graph_plan *plan,
                    const graph_args_config *args = nullptr);
// Unregisters the function-graph fprobe, if registered.
void funcgraph_stop();
// --follow-loads, inside the loader after the fprobe took what it could of ADDED: the
// functions the globs match there that have no usable site get an int3 entry, as at the
// start (else they are left out, with why): said in PLAN.
void funcgraph_objects_added(std::span<const object_ptr> added, graph_plan *plan);
// The "int3" and "leftout" messages of PLAN for the command's summary (WHO: "prog (pid N)").
void funcgraph_report(const std::string &who, const graph_plan &plan);
// What an -errno of the loader hook (FPROBE_FL_FOLLOW_LOADS) means, for the user.
std::string follow_loads_error(int err);

// ---- agent.cpp ----
// Applies CONFIG (events enabled, the graph registered) and starts recording: the ring
// buffers exported, a new session (REASON "start" or "attach"), the tracefs. Returns "" or
// what went wrong, with nothing of CONFIG left applied. STRICT: see funcgraph_start.
std::string agent_start(const agent_config &config, const char *reason, bool strict);
// Everything the session did, undone (detach): the last pages copied with an END of REASON,
// the tracefs stopped and reset to its boot state (events, triggers, tracers, filters,
// instances: tracefs_reset.h), the graph unregistered, the loader's hook removed, the files
// and signal handlers of the session closed. The process keeps running untraced; unloading
// the runtime is the next step (unload.cpp). Returns what could not be undone (empty).
std::vector<std::string> agent_stop(const char *reason);
// The hist files of the events the session's --trigger hist:... triggers are on, as HIST
// chunks of the trace file (session_hist.cpp); at the session's end, triggers still there.
void write_session_hists();
void tracefs_up();
void tracefs_down();

// ---- attach.cpp ----
// Joins every thread the attach entry points started (after the session ended). 0, -EBUSY
// (a session still runs), -EAGAIN (a thread did not end within 2 s), with *WHY.
int join_agent_threads(std::string *why);
// In the child of a fork (one thread, the forking one): the attach threads of the parent are
// not here; their handles are dropped (their stacks unmapped) and the lock they may have
// held starts free, so that the child's own detach can end and unload.
void attach_fork_child() noexcept;

// ---- unload.cpp ----
// Whether the agent is being unloaded (dprobe_agent_unload succeeded): its DT_FINI then
// frees the agent's own memory.
bool unloading() noexcept;

// ---- lifecycle.cpp ----
void install_lifecycle_hooks();
// dprobe attach: fatal signals copy the last pages before the process dies.
void install_signal_handlers();
void remove_signal_handlers();

// Runs the agent's own work on a thread of the program without recording it.
struct quiet_section {
    quiet_section();
    ~quiet_section();
    quiet_section(const quiet_section &) = delete;
    quiet_section &operator=(const quiet_section &) = delete;
};

} // namespace dprobe::agent
