// The command's side of `dprobe attach` / `dprobe detach`: loading the agent into a running
// process and calling its entry points there (ptrace_call.h), and the socket it then talks
// over (tools/attach_protocol.h).
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace dprobe::tools
{

// A listening abstract socket and, once the agent of the process connected, the connection.
class agent_link
{
  public:
    agent_link() = default;
    ~agent_link();
    agent_link(const agent_link &) = delete;
    agent_link &operator=(const agent_link &) = delete;

    // Listens under a fresh name. 0 or -errno.
    int listen();
    const std::string &name() const { return name_; }
    // Waits (up to TIMEOUT_MS, less if PID exits) for the agent of PID to connect and say
    // "hello PID KIND". 0, or -errno with *ERR: -ESRCH (exited), -ETIMEDOUT.
    int accept_agent(pid_t pid, const char *kind, int timeout_ms, std::string *err);
    // Sends TEXT (and FD, when >= 0, with SCM_RIGHTS). False when the agent is gone.
    bool send(const std::string &text, int fd = -1);
    // The next message into MSG: 1, 0 on timeout, -1 when the agent closed the connection.
    int next(std::string &msg, int timeout_ms);
    int fd() const { return conn_; }
    // Hangs up: the agent's end reads end-of-file.
    void close();

  private:
    int listen_ = -1, conn_ = -1;
    std::string name_;
};

// Where the agent sits in PID and what calling into it returned.
struct agent_call {
    int result = 0;       // the entry point's return value (0 or -errno)
    std::string error;    // non-empty: the call did not happen (or not completely)
    int error_code = 0;   // -errno matching ERROR (-ESRCH: the process is gone)
    std::string borrowed; // "thread TID (blocked in read)": the thread that made the call
};

// Makes a thread of PID call ENTRY(SOCKET_NAME) in the agent library, loading AGENT (a path
// as seen from here) with dlopen first when LOAD, else through the reference dlopen's
// RTLD_NOLOAD gives (which waits for a load another thread of PID is in the middle of: the
// entry points never run before the agent's constructors). Signals that would end this
// command are held meanwhile: the borrowed thread must always be given back.
agent_call call_agent(pid_t pid, const std::string &agent, bool load, const char *entry,
                      const std::string &socket_name);

// Takes the agent out of PID after its session ended: a borrowed thread calls
// dprobe_agent_unload, through the loader's reference as call_agent does (retried while a thread of
// the process is inside dprobe's code, up to about TIMEOUT_MS), then dlclose. RESULT is 0 when the
// agent is gone; else ERROR says what keeps it (a thread still in dprobe's code, a mapping left
// behind).
agent_call unload_agent(pid_t pid, const std::string &agent, int timeout_ms);

// What of the agent is still mapped in PID after an unload: "0xLO-0xHI path" for each
// mapping of AGENT, of the allocator object beside it (libdprobe-nsalloc.so, which AGENT
// loads into its namespace) or of dprobe's memory files (empty when none).
std::vector<std::string> agent_leftovers(pid_t pid, const std::string &agent);

// The path of the agent library mapped in PID ("" when it has none).
std::string mapped_agent(pid_t pid);

} // namespace dprobe::tools
