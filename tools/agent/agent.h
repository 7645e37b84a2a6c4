// The agent of `dprobe record` and `dprobe attach` (libdprobe-preload.so): internal
// interfaces.
//
// Preloaded by `dprobe record`, it starts from the environment in a constructor (below).
// Loaded into a running process by `dprobe attach` (attach.cpp), it gets the same settings
// over a socket from the command, and stops again on `dprobe detach`.
//
// Environment (set by `dprobe record`; without DPROBE_OUTPUT the agent does nothing):
//   DPROBE_OUTPUT         trace file to append to (created with its header by the CLI)
//   DPROBE_EVENTS         dynamic_events lines, one per line, applied and enabled before main
//   DPROBE_EVENTS_FILE    a file of more such lines (after those of DPROBE_EVENTS): for more
//                         events than one environment string may hold
//   DPROBE_GRAPH          function-graph globs, one per line ("*" for every function with a
//                         site); DPROBE_GRAPH_NOTRACE: globs left out
//   DPROBE_FOLLOW_LOADS   "1": the graph globs apply to libraries loaded later too
//   DPROBE_BUFFER_KB      per-thread ring-buffer size
//   DPROBE_CLOCK          trace clock name
//   DPROBE_STATUS_FD      a datagram socket to the CLI: "error ...", "stat ...", "mount ..."
//   DPROBE_TRACEFS        "0": do not serve the tracefs tree
#pragma once

#include "tools/attach_protocol.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace dprobe::agent {

// What to record: from DPROBE_* (record) or the attach command's settings message.
using agent_config = attach::settings;

struct agent_state {
    bool active = false;
    bool attached = false; // loaded by `dprobe attach` (no exec/sigaction interposition)
    int out_fd = -1;
    int status_fd = -1;
    pid_t pid = 0;
    uint64_t session = 0;
    std::string output;

    std::mutex lock; // chunk writing and draining
    std::thread consumer;
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};

    std::string event_chunks; // EVENT chunks payloads, re-sent for a forked child's session
    std::vector<std::pair<uint32_t, std::string>> events; // id, EVENT payload
    std::unordered_map<int32_t, std::string> comms;      // sent to the file
    std::vector<std::pair<uint64_t, std::string>> objects; // described so far: id, "0xbias path"
    uint64_t records = 0, lost = 0, bytes = 0;
    unsigned graph_functions = 0;
    // The agent's own threads: their hits of probes (malloc in the streamer, say) are
    // dropped when draining, so recording does not feed on itself.
    std::atomic<int32_t> own_tids[16] = {};
    void add_own_tid(int32_t tid) noexcept
    {
        for (auto &t : own_tids) {
            int32_t z = 0;
            if (t.compare_exchange_strong(z, tid))
                return;
        }
    }
    bool is_own_tid(int32_t tid) const noexcept
    {
        for (auto &t : own_tids)
            if (t.load(std::memory_order_relaxed) == tid)
                return true;
        return false;
    }
};

agent_state &state();

// Sends one status datagram to the CLI (no-op without a status socket).
void status_send(const std::string &msg) noexcept;

// Writes one chunk (under state().lock). False when the write failed.
bool write_chunk(uint32_t type, const std::string &payload);
// Several chunks of one type with one write (the formats of thousands of events).
bool write_chunks(uint32_t type, std::span<const std::string> payloads);

// ---- stream.cpp ----
// SESSION + OBJECTS + EVENT chunks of a new session (start, fork, exec).
void start_session(const char *reason);
// Drains the ring buffer into RECORDS chunks (and new COMM/OBJECTS). Caller holds the lock.
void drain_locked();
// Starts / stops the consumer thread.
void start_consumer();
void stop_consumer();
// Final drain, STATS and END chunks. REASON: "exit", "signal", "exec".
void finish(const char *reason, int value);
// --follow-loads: the objects each dlopen maps are described in the next OBJECTS chunk even
// when a dlclose unmaps them before it is written, so that report names the functions of
// every load. 0 or -errno (the loader hook could not be installed). Off: stops that.
int stream_follow_loads(bool on);

// ---- funcgraph.cpp ----
// Registers the function-graph fprobe on GLOBS minus NOTRACE, and with FOLLOW_LOADS on
// matching functions of libraries loaded later. Returns the number of functions (now), or
// -errno with *err set.
int funcgraph_start(const std::vector<std::string> &globs, const std::vector<std::string> &notrace,
                    bool follow_loads, std::string *err);
// After fork: the calling thread's cached tid is stale.
void funcgraph_forget_tid() noexcept;

// Unregisters the function-graph fprobe, if registered.
void funcgraph_stop();
// What an -errno of the loader hook (FPROBE_FL_FOLLOW_LOADS) means, for the user.
std::string follow_loads_error(int err);

// ---- agent.cpp ----
// Applies CONFIG (events enabled, the graph registered) and starts recording into
// state().out_fd: a new session (REASON "start" or "attach"), the consumer thread, the
// fatal-signal handlers and the tracefs. Returns "" or what went wrong, with nothing of
// CONFIG left applied.
std::string agent_start(const agent_config &config, const char *reason);
// Everything agent_start did, undone: events disabled and deleted (also those added
// through the tracefs meanwhile), the graph unregistered, the final flush with an END record
// of REASON, the tracefs and the agent's threads stopped. The process keeps running untraced.
void agent_stop(const char *reason);
void tracefs_up();
void tracefs_down();

// ---- lifecycle.cpp ----
void install_signal_handlers();
// Puts back the dispositions install_signal_handlers() changed (where the program did not
// install its own since) and ends the watcher thread.
void remove_signal_handlers();
void install_fork_handlers();
// At exit in a forked child whose session was not opened yet.
void exit_in_fork_child();

} // namespace dprobe::agent
