// The function graph's records and its per-thread depth, shared by the plain graph
// (funcgraph.cpp) and the graph with arguments and return values (graph_args.cpp): both
// write the same funcgraph_entry / funcgraph_exit records at the same depths, whichever
// fprobe a function is on. Hot path: noexcept, no allocation, no locks.
#pragma once

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tools/trace_file.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dprobe::agent
{

// The thread's call depth in the graph: calls in progress that were recorded.
inline __attribute__((tls_model("initial-exec"))) thread_local int32_t t_depth;
// --graph-depth (the kernel's max_graph_depth): calls at this depth and deeper are not
// recorded; INT32_MAX without a limit. A call left out does not move t_depth, so its callees
// are at or beyond the limit too.
inline int32_t g_max_depth = INT32_MAX;

// A recorded call's entry data: the function (an unwound call's handler gets no ip) and its
// depth.
struct graph_data {
    unsigned long func;
    int32_t depth;
    int32_t pad;
};

// One 16-byte event (4 bytes of header, the rest tracefile::funcgraph_rec); its time stamp is
// the call's or the return's.
DPROBE_NOPROBE inline void write_graph_event(uint16_t type, int32_t depth, uint16_t flags,
                                             unsigned long func) noexcept
{
    void *p = ring_buffer_reserve_small(sizeof(tracefile::funcgraph_rec));
    if (!p) return;
    const uint16_t d = static_cast<uint16_t>(depth < 0 ? 0
                                             : depth > tracefile::FUNCGRAPH_DEPTH_MAX
                                                 ? tracefile::FUNCGRAPH_DEPTH_MAX
                                                 : depth);
    // Stored field by field, straight from registers: a record built on the stack and then
    // copied is read back wider than it was written, which defeats store-to-load forwarding
    // (a stall of about 5 ns per event measured on AMD EPYC).
    const uint32_t head = type | uint32_t{static_cast<uint16_t>(d | flags)} << 16;
    static_assert(offsetof(tracefile::funcgraph_rec, depth) == 2 &&
                  offsetof(tracefile::funcgraph_rec, func) == 4);
    std::memcpy(p, &head, sizeof head);
    std::memcpy(static_cast<char *>(p) + offsetof(tracefile::funcgraph_rec, func), &func,
                sizeof func);
    ring_buffer_commit(p);
}

DPROBE_NOPROBE inline void write_graph_exit(const graph_data *gd, uint16_t flags) noexcept
{
    // The caller's depth from now on. (Frames left without returning are reported before
    // the next hit of the thread, innermost first, so this stays right after them too.)
    t_depth = gd->depth;
    write_graph_event(tracefile::FUNCGRAPH_EXIT_ID, gd->depth, flags, gd->func);
}

} // namespace dprobe::agent
