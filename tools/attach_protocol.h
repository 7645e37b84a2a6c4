// The conversation between `dprobe attach` / `dprobe detach` and the agent they load into a
// running process (tools/agent/attach.cpp), shared by both sides.
//
// The command listens on an abstract Unix SOCK_SEQPACKET socket (one message per send, no
// file to leave behind, reachable whatever the process's user) and makes a thread of the
// process call dprobe_agent_attach(NAME) or dprobe_agent_detach(NAME), NAME being the
// socket's name without its leading NUL. Those only start an agent thread and return: the
// work happens on that thread once the command has restored and released the process's
// thread. The agent thread connects, and the command checks the peer is the process
// (SO_PEERCRED) before it trusts anything.
//
//   agent -> command  "hello PID attach" | "hello PID detach"
//   command -> agent  (attach) the settings below, with the trace file's descriptor
//                     (SCM_RIGHTS): the process may not be able to open the path itself;
//                     (detach) "detach". Either is the go-ahead: the agent thread waits for
//                     it, since the borrowed thread cannot be stopped (stop_machine) while
//                     the command holds it
//   agent -> command  what `dprobe record`'s status socket carries: "error MSG",
//                     "warn MSG", "mount PATH", "socket PATH",
//                     "ready PID EVENTS FUNCTIONS", "stat PID RECORDS LOST BYTES",
//                     and at the end "detached PID RECORDS LOST BYTES"
//   command -> agent  "detach": end the session (attach in the foreground, on Ctrl-C)
//   Sessions end (and "detached" comes) with no probe left, the trace file ended, and the
//   agent's threads on their way out; the command waits for those to be gone.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

namespace dprobe::attach
{

// The exported entry points of libdprobe-preload.so the command calls in the process. They
// return 0 when the agent thread started, else a negative errno: -EBUSY (attach: a session
// is active), -EEXIST (a `dprobe record` session owns the process), -ENOENT (detach: no
// attach session), -ESTALE (attach: the runtime was taken apart by a detach whose dlclose
// could not unload it), -ENAMETOOLONG, -EAGAIN.
inline constexpr const char *attach_symbol = "dprobe_agent_attach";
inline constexpr const char *detach_symbol = "dprobe_agent_detach";
// After the session ended (detach): int dprobe_agent_unload(ip, sp, char *why, size_t len),
// on a borrowed thread stopped at IP/SP; 0 when the command may dlclose the agent
// (tools/agent/unload.cpp).
inline constexpr const char *unload_symbol = "dprobe_agent_unload";

// Agent threads are named "dprobe-..." (threads they create inherit the name): the command
// never borrows one of them to run a call.
inline constexpr const char *thread_name_prefix = "dprobe-";

inline constexpr size_t max_message = 1 << 16;

struct settings {
    std::vector<std::string> events;   // dynamic_events lines, applied and enabled
    std::vector<std::string> triggers; // --trigger: "GROUP:EVENT:TRIGGER", after the events
    std::vector<std::string> graph;    // function-graph globs
    bool graph_main = false;           // and the functions of the program's own executable
    std::vector<std::string> notrace;  // globs left out of the graph
    bool follow_loads = false;         // the graph follows libraries loaded later
    unsigned max_graph_depth = 0;      // calls nested deeper are left out (0: no limit)
    bool function_tracer = false;      // calls only (the kernel's function tracer), no returns
    // record -A / -R / -a: "GLOB ARGS" lines of fetch args for the graph's functions, at
    // their entry and at their return; every function's from DWARF (tools/agent/graph_args.h)
    std::vector<std::string> graph_args, graph_retvals;
    bool graph_args_auto = false;
    size_t buffer_kb = 0;          // 0: the default
    std::string clock;             // "": the default
    bool tracefs = true;           // serve the tracefs tree (FUSE mount and socket)
    bool nowait = false;           // a full buffer drops rather than waits for the streamer
    bool detach_on_hangup = false; // the command's end (even killed) ends the session
    std::string resident;          // core/resident_pages.h: the note taken before the attach
};

// One "key value" line each; values never hold a newline (dynamic_events lines are lines).
inline std::string encode(const settings &s)
{
    std::string out;
    for (const auto &e : s.events)
        out += "event " + e + "\n";
    for (const auto &t : s.triggers)
        out += "trigger " + t + "\n";
    for (const auto &g : s.graph)
        out += "graph " + g + "\n";
    for (const auto &n : s.notrace)
        out += "notrace " + n + "\n";
    if (s.graph_main) out += "graph_main 1\n";
    if (s.follow_loads) out += "follow_loads 1\n";
    if (s.function_tracer) out += "tracer function\n";
    for (const auto &a : s.graph_args)
        out += "graph_args " + a + "\n";
    for (const auto &a : s.graph_retvals)
        out += "graph_retval " + a + "\n";
    if (s.graph_args_auto) out += "graph_args_auto 1\n";
    if (s.max_graph_depth) out += "max_graph_depth " + std::to_string(s.max_graph_depth) + "\n";
    if (s.buffer_kb) out += "buffer_kb " + std::to_string(s.buffer_kb) + "\n";
    if (!s.clock.empty()) out += "clock " + s.clock + "\n";
    out += std::string("tracefs ") + (s.tracefs ? "1" : "0") + "\n";
    if (s.nowait) out += "nowait 1\n";
    out += std::string("hangup ") + (s.detach_on_hangup ? "detach" : "stay") + "\n";
    // Its lines, one "resident" line each.
    for (size_t pos = 0; pos < s.resident.size();) {
        size_t nl = s.resident.find('\n', pos);
        if (nl == std::string::npos) nl = s.resident.size();
        out += "resident " + s.resident.substr(pos, nl - pos) + "\n";
        pos = nl + 1;
    }
    return out;
}

inline settings decode(const std::string &text)
{
    settings s;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
        pos = nl == std::string::npos ? text.size() : nl + 1;
        size_t sp = line.find(' ');
        std::string key = line.substr(0, sp);
        std::string val = sp == std::string::npos ? "" : line.substr(sp + 1);
        if (key == "event")
            s.events.push_back(val);
        else if (key == "trigger")
            s.triggers.push_back(val);
        else if (key == "graph")
            s.graph.push_back(val);
        else if (key == "notrace")
            s.notrace.push_back(val);
        else if (key == "graph_main")
            s.graph_main = val != "0";
        else if (key == "follow_loads")
            s.follow_loads = val != "0";
        else if (key == "tracer")
            s.function_tracer = val == "function";
        else if (key == "graph_args")
            s.graph_args.push_back(val);
        else if (key == "graph_retval")
            s.graph_retvals.push_back(val);
        else if (key == "graph_args_auto")
            s.graph_args_auto = val != "0";
        else if (key == "max_graph_depth")
            s.max_graph_depth = static_cast<unsigned>(std::strtoul(val.c_str(), nullptr, 10));
        else if (key == "buffer_kb")
            s.buffer_kb = std::strtoul(val.c_str(), nullptr, 10);
        else if (key == "clock")
            s.clock = val;
        else if (key == "tracefs")
            s.tracefs = val != "0";
        else if (key == "nowait")
            s.nowait = val != "0";
        else if (key == "hangup")
            s.detach_on_hangup = val == "detach";
        else if (key == "resident")
            s.resident += val + "\n";
    }
    return s;
}

} // namespace dprobe::attach
