// The hot side of arguments and return values in the graph (graph_args.h): the layouts as
// the handlers read them, the table that finds a function's, and the writing of a graph
// record with values (tracefs/ftrace_entries.h, ftrace_graph_values_compact): the call's
// funcgraph_entry with its arguments, or its funcgraph_exit with its return value, in one
// ring-buffer record, so that a function with values costs one reservation and one time stamp
// an event, as on the plain graph.
//
// Two fprobes share the functions that get values: the *light* one (graph_args_light.cpp,
// built without vector code) takes the functions whose values are all plain loads - a
// register the entry or the return keeps (argument and return registers, the stack and
// frame pointers), an immediate, or 1-8 bytes read once at such a register plus an offset
// ($argN, $retval, $stackN, +8(%di)) - stored by a few compiled stores
// (graph_value_store): its sites take the light and the direct path as the plain graph's
// do. The *full* one (graph_args.cpp) takes the others (strings, arrays, dereference chains,
// bitfields, callee-saved registers), whose values the fetch programs store
// (tracefs/fetch_fast.h, or the interpreter), on the full path.
//
// Hot path: noexcept, no allocation, no locks. The layouts and the table are built before
// the fprobes are registered and never change while they are.
#pragma once

#include "core/compiler.h"
#include "core/ring_buffer.h"
#include "tools/agent/funcgraph_record.h"
#include "tracefs/fetch_fast.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/probe_parse.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <dprobe/fprobe.h>

namespace dprobe::agent
{

// One value of a light layout: load an immediate, or a register of the handler's pt_regs
// (and read SIZE bytes at it plus OFF, nofault), and store its SIZE low bytes at DEST.
struct graph_value_store {
    enum : uint8_t { REG, MEM, IMM };
    uint8_t kind;
    uint8_t size;  // 1, 2, 4 or 8
    uint16_t reg;  // byte offset in pt_regs (REG, MEM)
    uint16_t dest; // from the start of the values
    uint64_t imm;  // IMM's value, MEM's offset
};

// One record layout: the values of the functions that share it (an event of the group
// graph_args: tools/trace_file.h).
struct graph_arg_spec {
    probe_definition def;
    uint16_t id = 0;
    uint16_t exit_flag = 0; // FTRACE_GRAPH_VALUES_FL_EXIT for a return value
    uint32_t args_off = 0;  // where the values start in the probe record (16 or 24)
    uint32_t fixed_len = 0; // the record's length without dynamic data, a multiple of 4
    bool has_dyn = false;   // strings: the length is measured at each hit
    bool light = false;     // stores holds every value
    bool fast = false;      // fast_args holds every value (full path)
    std::vector<graph_value_store> stores;   // light
    std::vector<fetch_fast_store> fast_args; // full path, dest from the probe record's start
    std::string payload;                     // its EVENT chunk
};

// A hooked function's layouts, found by the handler's ip.
struct func_slot {
    unsigned long ip = 0; // 0: empty
    const graph_arg_spec *entry = nullptr, *exit = nullptr;
};

// Everything the handlers read.
struct graph_args_state {
    std::vector<std::unique_ptr<graph_arg_spec>> specs;
    std::vector<func_slot> table; // open addressing, a power of two
    size_t mask = 0;
};
// Set before the fprobes are registered; freed after they are unregistered (kept, never
// freed, when a call may still be on its way back).
inline graph_args_state *graph_args_table = nullptr;

// A recorded call's entry data: its graph data and its return value's layout.
struct graph_args_data {
    graph_data g;
    const graph_arg_spec *exit;
};
static_assert(sizeof(graph_args_data) <= MAX_FPROBE_DATA_SIZE);

DPROBE_NOPROBE inline size_t graph_args_slot_of(unsigned long ip, size_t mask) noexcept
{
    return ((ip >> 4) * 0x9E3779B97F4A7C15ull >> 32) & mask;
}

DPROBE_NOPROBE inline const func_slot *graph_args_find(unsigned long ip) noexcept
{
    const graph_args_state *s = graph_args_table;
    for (size_t i = graph_args_slot_of(ip, s->mask);; i = (i + 1) & s->mask) {
        const func_slot &f = s->table[i];
        if (f.ip == ip) return &f;
        if (!f.ip) return nullptr;
    }
}

// Reserves a graph record with values of LEN bytes (a multiple of 4) for SPEC and writes its
// head: the layout's id, DEPTH (with the exit flag) and FUNC. Returns the event (for
// ring_buffer_commit), nullptr when nothing was reserved; *VALUES is where the values go.
DPROBE_NOPROBE inline void *graph_values_begin(const graph_arg_spec &spec, size_t len,
                                               int32_t depth, unsigned long func,
                                               uint8_t **values) noexcept
{
    void *p = len <= rb::k_small_max ? ring_buffer_reserve_small(len) : ring_buffer_reserve(len);
    if (!p) return nullptr;
    const uint16_t d =
        static_cast<uint16_t>(depth < 0                        ? 0
                              : depth > FTRACE_GRAPH_DEPTH_MAX ? FTRACE_GRAPH_DEPTH_MAX
                                                               : depth);
    // Field by field, as write_graph_event (funcgraph_record.h) does, for the same reason.
    const uint32_t head = spec.id | uint32_t{static_cast<uint16_t>(d | spec.exit_flag)} << 16;
    static_assert(offsetof(ftrace_graph_values_compact, depth) == 2 &&
                  offsetof(ftrace_graph_values_compact, func) == 4);
    std::memcpy(p, &head, sizeof head);
    std::memcpy(static_cast<char *>(p) + offsetof(ftrace_graph_values_compact, func), &func,
                sizeof func);
    *values = static_cast<uint8_t *>(p) + FTRACE_GRAPH_VALUES_OFF;
    return p;
}

// The handlers of both fprobes, around their way of writing the values (WRITE: SPEC, depth,
// function, regs): a call without values writes the plain graph's records.
template <void (*WRITE)(const graph_arg_spec &, int32_t, unsigned long, const pt_regs *)>
DPROBE_NOPROBE int graph_args_entry(struct fprobe *, unsigned long ip, unsigned long,
                                    struct ftrace_regs *fregs, void *data) noexcept
{
    if (t_depth >= g_max_depth) return 1; // no exit wanted either
    auto *ad = static_cast<graph_args_data *>(data);
    const int32_t depth = t_depth++;
    ad->g.depth = depth;
    ad->g.func = ip;
    const func_slot *f = graph_args_find(ip);
    ad->exit = f ? f->exit : nullptr;
    if (f && f->entry)
        WRITE(*f->entry, depth, ip, &fregs->regs);
    else
        write_graph_event(tracefile::FUNCGRAPH_ENTRY_ID, depth, 0, ip);
    return 0;
}

template <void (*WRITE)(const graph_arg_spec &, int32_t, unsigned long, const pt_regs *)>
DPROBE_NOPROBE void graph_args_exit(struct fprobe *, unsigned long, unsigned long,
                                    struct ftrace_regs *fregs, void *data) noexcept
{
    const auto *ad = static_cast<const graph_args_data *>(data);
    if (!ad->exit) {
        write_graph_exit(&ad->g, 0);
        return;
    }
    t_depth = ad->g.depth; // the caller's depth from now on (as write_graph_exit)
    WRITE(*ad->exit, ad->g.depth, ad->g.func, &fregs->regs);
}

// The light fprobe's handlers (graph_args_light.cpp), and the unwound handler of both: a call
// left without returning has no return value.
int graph_args_light_entry(struct fprobe *fp, unsigned long ip, unsigned long parent_ip,
                           struct ftrace_regs *fregs, void *data) noexcept;
void graph_args_light_exit(struct fprobe *fp, unsigned long ip, unsigned long parent_ip,
                           struct ftrace_regs *fregs, void *data) noexcept;
void graph_args_unwound(struct fprobe *fp, void *data) noexcept;

} // namespace dprobe::agent
