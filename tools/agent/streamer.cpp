// `dprobe attach`: the agent copies the ring buffers' pages into the trace file itself (with
// `dprobe record` the command does it from outside). One thread, named dprobe-stream (so
// it records nothing), drains the exported buffers as `record` does (tools/trace_drain.h),
// and sends the counts to the command now and then.
//
// Nothing is lost by default: as with `record`, a thread whose buffer is full waits for this
// thread to take pages (the arena's consumer_blocking; `attach --no-wait` turns it off). It
// sleeps on the arena's consumer_waiting word, which writers wake when a buffer is half
// full or when they wait. So that such a wait always ends, this thread never waits for a
// program thread: it records nothing itself (muted), takes only its own lock and the
// agent's allocator (whose holders never wait: private_alloc.cpp), describes loaded objects
// only when state().lock is free (a thread in dlopen or fork holds it), and never takes the
// tracefs's lock. A wait
// without progress ends after a second (core/ring_buffer_write.cpp, wait_for_room). Blocking is
// on only while this thread runs: stop_streamer turns it off after its last copy (detach,
// exit, exec), and a forked child's arena starts without it until its own streamer runs.
#include "tools/agent/agent.h"

#include "core/kthread.h"
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tools/trace_drain.h"
#include "tools/trace_file.h"

#include <atomic>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <memory>
#include <pthread.h>
#include <unistd.h>

namespace dprobe::agent
{

namespace
{

struct streamer {
    kthread thread;
    std::atomic<bool> stop{false};
    std::unique_ptr<tracefile::arena_drain> drain;
    std::mutex lock;                   // the drain: the thread, and the final copy at stop
    std::string last_counts = "0 0 0"; // of the session that ended last
};

streamer &the_streamer()
{
    static streamer *s = new streamer; // never destroyed: an exit may still stop it
    return *s;
}

// The counts; s.lock held.
std::string counts_locked(const streamer &s)
{
    if (!s.drain) return s.last_counts;
    return std::to_string(s.drain->events()) + " " + std::to_string(s.drain->lost()) + " " +
           std::to_string(s.drain->bytes());
}

void send_stat(const std::string &counts)
{
    status_send("stat " + std::to_string(state().pid) + " " + counts);
}

void streamer_main()
{
    streamer &s = the_streamer();
    ring_buffer_thread_mute(true);
    uint64_t last_stat = 0;
    while (!s.stop.load(std::memory_order_acquire)) {
        bool busy;
        std::string counts;
        tracefile::arena_drain *d;
        {
            std::lock_guard<std::mutex> g(s.lock);
            if (!s.drain) break;
            d = s.drain.get();
            const uint64_t moved = d->drain(false);
            busy = moved >= 64 * 1024 || d->backlog() >= 64 * 1024;
            counts = counts_locked(s);
            // Not waited for: its holder may be waiting for this thread. Nor the tracefs's
            // lock (a detach holds it while it waits for the probes' handlers, which may wait
            // for this thread): events created there are described as they are created
            // (agent.cpp, on_tracefs_commands).
            std::unique_lock<fair_mutex> sg(state().lock, std::try_to_lock);
            if (sg.owns_lock()) describe_changes_locked(false);
        }
        // Asleep until a buffer is half full or a writer waits for room (the drain lives
        // until this thread is joined). A busy program fills its buffers in milliseconds.
        d->wait(busy ? 1 : 20);
        uint64_t now = trace_clock_read(trace_clock_id::mono);
        if (now - last_stat > 250000000ull) {
            send_stat(counts);
            last_stat = now;
        }
    }
}

} // namespace

void start_streamer()
{
    streamer &s = the_streamer();
    agent_state &st = state();
    // A forked child: the parent's thread is not here; forget its handle (and its stack).
    s.thread.forget();
    new (&s.lock) std::mutex();
    s.stop.store(false);
    s.last_counts = "0 0 0";
    const int fd = ring_buffer_export_fd();
    if (fd < 0) return;
    s.drain = std::make_unique<tracefile::arena_drain>(st.out_fd, st.session);
    std::string err = s.drain->open(fcntl(fd, F_DUPFD_CLOEXEC, 100));
    if (!err.empty()) {
        s.drain.reset();
        status_send("warn the trace stream could not start: " + err);
        return;
    }
    // The thread takes no asynchronous signal (they are the program's), and its name keeps
    // it out of the trace.
    sigset_t all, old;
    sigfillset(&all);
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT})
        sigdelset(&all, sig);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    pthread_setname_np(pthread_self(), "dprobe-stream");
    if (!kthread_run(s.thread, streamer_main))
        status_send("warn no thread for the trace stream: its events are not recorded");
    else if (!st.nowait)
        s.drain->set_blocking(true); // a full buffer waits for this thread: nothing lost
    pthread_setname_np(pthread_self(), name);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void stop_streamer(const std::string &end_kv)
{
    streamer &s = the_streamer();
    s.stop.store(true, std::memory_order_release);
    if (s.thread.joinable()) {
        if (s.thread.is_current())
            s.thread.forget(); // its own stack: left mapped
        else
            s.thread.join();
    }
    std::lock_guard<std::mutex> g(s.lock);
    if (!s.drain) return;
    s.drain->drain(true);
    s.drain->set_blocking(false); // no one copies pages from here on: writers drop
    s.drain->finish(end_kv);
    s.last_counts = counts_locked(s);
    send_stat(s.last_counts);
    s.drain.reset();
}

std::string streamer_counts()
{
    streamer &s = the_streamer();
    std::lock_guard<std::mutex> g(s.lock);
    return counts_locked(s);
}

} // namespace dprobe::agent
