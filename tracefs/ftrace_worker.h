// A thread for the work a probe handler cannot do itself (it may run in a signal handler and
// must not block): the dump commands' formatting and writing, and a snapshot swap that found
// a reader holding the buffers. Started on first use; handlers wake it through a pipe
// (write() is async-signal-safe).
#pragma once

namespace dprobe
{

class trace_array;

enum ftrace_work : unsigned {
    FTRACE_WORK_DUMP = 1,     // the array's whole trace to standard error
    FTRACE_WORK_CPUDUMP = 2,  // only the records of the CPU the request came from
    FTRACE_WORK_SNAPSHOT = 4, // swap with the snapshot buffer
};

// Starts the worker (not from a handler). 0 or -errno.
int ftrace_worker_start();
// Ends the thread (requests made meanwhile are dropped) and closes its pipe: the end of a
// session. A later ftrace_worker_start() starts it again.
void ftrace_worker_stop();
// Queues WORK for TR. Hot path.
void ftrace_worker_request(trace_array &tr, ftrace_work work) noexcept;

} // namespace dprobe
