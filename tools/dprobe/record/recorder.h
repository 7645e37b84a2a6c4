// The recording side of `dprobe record` (trace-cmd record's reader threads, uftrace
// record's writer): each process the agent runs in hands over its ring buffers (a memfd, on
// the status socket); the recorder copies their pages into the trace file while the
// program runs, woken when a buffer gets half full, and once a process is gone (however it
// ended) copies what is left and closes its session with its end. It runs until the
// program it started and every process that announced itself are gone.
#pragma once

#include "tools/trace_drain.h"

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dprobe::cli
{

class recorder
{
  public:
    // OUT_FD: the trace file (O_APPEND); STATUS_FD: the CLI's end of the agents' datagram
    // socket; WAKE_FD: the eventfd agents write when a buffer is half full.
    recorder(int out_fd, int status_fd, int wake_fd);
    ~recorder();

    // The program `record` started (its status is the command's).
    void set_child(pid_t pid);
    // Runs until everything is recorded. PROGRESS is called about 5 times a second while the
    // program runs; STOP_REQUESTED is polled: true ends the recording of processes that
    // outlive the child (their sessions end "recording stopped").
    void run(const std::function<void()> &progress, const std::function<bool()> &stop_requested);

    int child_status() const { return child_status_; }
    bool child_reaped() const { return child_reaped_; }

    // From the agents' messages.
    std::string error; // the first "error" (the named program could not start)
    std::vector<std::string> warnings;
    std::vector<std::string> int3;     // "PROG (pid N) COUNT\nname (why)..." per process
    std::vector<std::string> left_out; // the same for functions left out of the graph
    // "NSYMS NTRACED EXE": what the default graph found in each program
    std::vector<std::string> default_graphs;
    std::vector<std::string> mounts; // tracefs mounts to clean up after a kill
    int sweeper_fd = -1; // told of each mount and socket (tools/dprobe/attach/session_watch.h)
    bool ready = false;  // the named program's agent started
    // A thread whose buffer is full waits for the drain (up to a second) rather than drop.
    bool blocking = true;
    unsigned functions = 0, events = 0;

    struct totals {
        uint64_t events = 0, lost = 0, bytes = 0;
        size_t threads = 0, processes = 0;
    };
    totals counts() const;
    // Threads that lost events: how many, which thread, when (seconds from the start).
    std::vector<std::string> loss_report() const;

  private:
    struct arena;
    void take_messages();
    void on_hello(pid_t pid, uint64_t session, int fd);
    void drain_all(bool *busy);
    void finish(arena &a, const std::string &reason_kv);
    void finish_dead();
    std::string end_of(arena &a);

    int out_fd_, status_fd_, wake_fd_;
    pid_t child_ = -1;
    int child_pidfd_ = -1;
    int child_status_ = 0;
    bool child_reaped_ = false;
    bool status_eof_ = false;
    uint64_t start_ms_ = 0; // CLOCK_MONOTONIC at the start, for the times of losses
    std::vector<std::unique_ptr<arena>> arenas_; // open ones
    std::vector<std::unique_ptr<arena>> done_;
};

} // namespace dprobe::cli
