// Copying a process's ring buffers (an exported arena) into a trace file: the PAGES chunks
// as the pages fill, then STATS and END. `dprobe record` does it for every process it
// records, from outside them; the agent's streamer does it for `dprobe attach` from inside.
// The pages are written as they are (16 bytes a function-graph event), straight from the
// consumer's copy with one writev a batch: no event is decoded on the way.
#pragma once

#include "core/ring_buffer_consumer.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dprobe::tracefile
{

class arena_drain
{
  public:
    // Chunks go to OUT_FD (O_APPEND) under SESSION.
    arena_drain(int out_fd, uint64_t session) : out_fd_(out_fd), session_(session) {}
    // Takes MEMFD over. "" or why it is not an arena.
    std::string open(int memfd) { return c_.open(memfd); }
    const rb::arena_header &header() const { return c_.header(); }

    // Copies what the buffers hold: whole pages, and with FINAL also the pages being
    // written (the process is gone, or its threads are). Exited threads' buffers, drained,
    // are given back to the process. Returns the bytes written; *FAILED is set when the file
    // could not be written.
    uint64_t drain(bool final, bool *failed = nullptr);
    // Bytes waiting in the buffers (roughly).
    uint64_t backlog();
    // Writers with a full buffer wait for this drain rather than drop (rb_consumer).
    void set_blocking(bool on) { c_.set_blocking(on); }
    // Sleeps until there is something to drain or TIMEOUT_MS passes (a consumer in the
    // process itself: rb_consumer::wait).
    bool wait(int timeout_ms) { return c_.wait(timeout_ms); }

    struct thread_count {
        int32_t tid;
        uint64_t written = 0, dropped = 0, lost = 0;
        // When the drain first and last saw its losses grow (CLOCK_MONOTONIC, ms; 0: never).
        uint64_t first_loss_ms = 0, last_loss_ms = 0;
    };
    // Per buffer owner so far (buffers given back included).
    std::vector<thread_count> threads() const;
    uint64_t events() const;
    uint64_t lost() const; // dropped + overwritten + orphans
    uint64_t bytes() const { return bytes_; }

    // The STATS chunk, then END with KV ("reason=exit\nstatus=0\n" ...). False on a write
    // error.
    bool finish(const std::string &end_kv);

  private:
    struct owner {
        int32_t tid = -1;
        uint64_t gen_written = 0, gen_dropped = 0; // the counters of the current owner
        uint64_t lost = 0;                         // overwritten, seen by the drain
        uint64_t first_loss_ms = 0, last_loss_ms = 0, seen_lost = 0;
    };
    void settle(size_t i, const rb_consumer::buffer_info &bi);

    rb_consumer c_;
    int out_fd_;
    uint64_t session_;
    uint64_t bytes_ = 0;
    std::vector<owner> owners_;      // per buffer, its current owner
    std::vector<thread_count> done_; // owners whose buffer was given back
};

} // namespace dprobe::tracefile
