// The light fprobe of arguments and return values in the graph (graph_args_record.h): its
// values are stored by a few compiled loads and stores, with general registers only (GCC
// builds this file with -mgeneral-regs-only), so that register_fprobe's scan finds its
// handlers clean and their sites take the light and direct paths (Documentation/fprobe.md,
// "Light hits"). What it calls: the ring buffer (core, clean) and copy_from_user_nofault
// (arch/x86_64/uaccess.S, general registers). Hot path: noexcept, no allocation, no locks.
#include "tools/agent/graph_args_record.h"

#include "arch/x86_64/uaccess.h"

namespace dprobe::agent
{

namespace
{

DPROBE_NOPROBE inline void store_low(uint8_t *dst, uint64_t v, unsigned size) noexcept
{
    switch (size) { // little-endian: the low bytes
    case 8:
        std::memcpy(dst, &v, 8);
        break;
    case 4: {
        const uint32_t x = static_cast<uint32_t>(v);
        std::memcpy(dst, &x, 4);
        break;
    }
    case 2: {
        const uint16_t x = static_cast<uint16_t>(v);
        std::memcpy(dst, &x, 2);
        break;
    }
    default:
        *dst = static_cast<uint8_t>(v);
        break;
    }
}

// The record of SPEC's values, read from REGS as the call (or its return) left them.
DPROBE_NOPROBE void write_light(const graph_arg_spec &spec, int32_t depth, unsigned long func,
                                const pt_regs *regs) noexcept
{
    uint8_t *values;
    void *ev = graph_values_begin(spec, spec.fixed_len, depth, func, &values);
    if (!ev) return;
    const auto *r = reinterpret_cast<const char *>(regs);
    const graph_value_store *s = spec.stores.data();
    for (const graph_value_store *end = s + spec.stores.size(); s != end; s++) {
        uint64_t v = s->imm;
        if (s->kind != graph_value_store::IMM) {
            std::memcpy(&v, r + s->reg, sizeof v);
            if (s->kind == graph_value_store::MEM) {
                const uint64_t at = v + s->imm;
                v = 0; // a fault stores zeroes, as fetch_run does
                if (copy_from_user_nofault(&v, reinterpret_cast<const void *>(at), s->size)) v = 0;
            }
        }
        store_low(values + s->dest, v, s->size);
    }
    ring_buffer_commit(ev);
}

} // namespace

DPROBE_NOPROBE int graph_args_light_entry(struct fprobe *fp, unsigned long ip,
                                          unsigned long parent_ip, struct ftrace_regs *fregs,
                                          void *data) noexcept
{
    return graph_args_entry<write_light>(fp, ip, parent_ip, fregs, data);
}

DPROBE_NOPROBE void graph_args_light_exit(struct fprobe *fp, unsigned long ip,
                                          unsigned long parent_ip, struct ftrace_regs *fregs,
                                          void *data) noexcept
{
    graph_args_exit<write_light>(fp, ip, parent_ip, fregs, data);
}

DPROBE_NOPROBE void graph_args_unwound(struct fprobe *, void *data) noexcept
{
    write_graph_exit(&static_cast<const graph_args_data *>(data)->g,
                     tracefile::FUNCGRAPH_FL_UNWOUND);
}

} // namespace dprobe::agent
