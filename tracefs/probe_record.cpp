// Filling a probe event's record when the probe fires (event_format.h: probe_record_init,
// probe_record_store; the kernel's __kprobe_trace_func / store_trace_args step): the common
// header, the ip fields, then every argument through the fetch interpreter. Hot path, and
// runtime only: the format of the record is event_format.cpp's, offline.
#include "tracefs/event_format.h"

#include "core/compiler.h"
#include "tracefs/fetch_arg.h"

#include <cstring>

namespace dprobe
{

DPROBE_NOPROBE void probe_record_init(uint8_t *record, const probe_definition &def, uint16_t type,
                                      int32_t pid, uintptr_t ip, uintptr_t ret_ip) noexcept
{
    trace_entry_header h{type, 0, 0, pid};
    std::memcpy(record, &h, sizeof(h));
    const probe_event_layout l = probe_layout(def);
    if (!l.ip_off) return; // an event probe's record: the arguments only
    unsigned long v = ip;
    std::memcpy(record + l.ip_off, &v, sizeof(v));
    if (l.ret_ip_off) {
        v = ret_ip;
        std::memcpy(record + l.ret_ip_off, &v, sizeof(v));
    }
}

DPROBE_NOPROBE size_t probe_record_store(uint8_t *record, size_t capacity,
                                         const probe_definition &def, const fetch_context &ctx,
                                         uint16_t type, int32_t pid, uintptr_t ip,
                                         uintptr_t ret_ip) noexcept
{
    const size_t args_off = probe_layout(def).args_off;
    if (args_off + def.args_size > capacity) return 0;
    probe_record_init(record, def, type, pid, ip, ret_ip);
    return store_trace_args(def.args, def.args_size, ctx, record, args_off, capacity);
}

} // namespace dprobe
