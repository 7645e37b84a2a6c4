// The record layout of a probe event, its events/<grp>/<ev>/format file, and the trace-file
// text of one record (the kernel's print_kprobe_event / print_kretprobe_event /
// print_uprobe_event / print_fprobe_event).
//
// Record layout (64-bit, packed like the kernel's):
//   0   common header: u16 common_type, u8 common_flags, u8 common_preempt_count, s32 common_pid
//   8   entry probes: unsigned long __probe_ip
//       return probes: unsigned long __probe_func, then unsigned long __probe_ret_ip
//   16 / 24  the arguments, packed in order without padding
//   then the bytes of the __data_loc strings, whose offsets count from the record start.
#pragma once

#include "tracefs/probe_parse.h"
#include "tracefs/probe_types.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dprobe
{

inline constexpr size_t TRACE_ENTRY_HEADER_SIZE = 8;

struct trace_entry_header {
    uint16_t type; // the event id
    uint8_t flags;
    uint8_t preempt_count;
    int32_t pid; // the thread id
};
static_assert(sizeof(trace_entry_header) == TRACE_ENTRY_HEADER_SIZE);

struct probe_event_layout {
    size_t ip_off;     // __probe_ip, or __probe_func of a return probe (0: none)
    size_t ret_ip_off; // __probe_ret_ip of a return probe (0 for entry probes)
    size_t args_off;   // first argument
    size_t fixed_size; // args_off + the fixed part of the args (dynamic data follows)
};
// Where the fields of DEF's records are (inline: the record writer asks at every hit).
inline probe_event_layout probe_layout(const probe_definition &def) noexcept
{
    constexpr size_t word = sizeof(unsigned long);
    probe_event_layout l{};
    switch (probe_print_type_of(def)) {
    case probe_print_type::normal:
        l.ip_off = TRACE_ENTRY_HEADER_SIZE;
        l.args_off = l.ip_off + word;
        break;
    case probe_print_type::ret:
        l.ip_off = TRACE_ENTRY_HEADER_SIZE;
        l.ret_ip_off = l.ip_off + word;
        l.args_off = l.ret_ip_off + word;
        break;
    case probe_print_type::event: // no probe address: the arguments follow the header
        l.args_off = TRACE_ENTRY_HEADER_SIZE;
        break;
    }
    l.fixed_size = l.args_off + def.args_size;
    return l;
}

// A kind whose records, format file and listing are its own (probe_kind_ops::format): the
// synthetic events' (trace_synth_format.h).
struct probe_format_ops {
    std::string (*listing)(const probe_definition &def);
    std::string (*print_fmt)(const probe_definition &def);
    std::string (*format_file)(const probe_definition &def, int id);
    std::string (*format_record)(const probe_definition &def, const uint8_t *record, size_t size,
                                 symbolize_fn sym);
    std::vector<filter_field> (*filter_fields)(const probe_definition &def);
};
extern const probe_format_ops synth_probe_format;

// `print fmt` of the format file: "\"(%lx) a=%u\", REC->__probe_ip, REC->a".
std::string probe_print_fmt(const probe_definition &def);
// The whole events/<group>/<event>/format file for event id ID.
std::string probe_format_file(const probe_definition &def, int id);

// Fills the common header and the probe ip fields of RECORD (at least layout.fixed_size
// bytes). IP is the probed address (or the function of a return probe), RET_IP the return
// address (return probes only).
void probe_record_init(uint8_t *record, const probe_definition &def, uint16_t type, int32_t pid,
                       uintptr_t ip, uintptr_t ret_ip) noexcept;

// Fills a whole record: header, ip fields and every argument (store_trace_args). Returns the
// bytes used (at most CAPACITY; 0 when even the fixed part does not fit). Hot path.
size_t probe_record_store(uint8_t *record, size_t capacity, const probe_definition &def,
                          const fetch_context &ctx, uint16_t type, int32_t pid, uintptr_t ip,
                          uintptr_t ret_ip) noexcept;

// Gives DEF's arguments the types, array counts and record offsets the `format` file FORMAT
// of the same event shows (field sizes and offsets, and the print fmt, which tells u from x,
// char and symbol). A reader of a recorded trace parses the event's listing with names left
// unchecked (it cannot resolve them against the traced process's debug info); this restores
// what the names resolved to. False (DEF unchanged) when FORMAT does not describe exactly
// DEF's arguments.
bool probe_args_from_format(probe_definition &def, std::string_view format);

// The trace-file text of one record, without the line prefix and the newline:
//   "myprobe: (do_work+0x4/0x20) a=1 b=0x2 s=\"str\""
//   "myret: (caller+0x1d/0x40 <- do_work) arg1=0x0"
//   uprobe-style: "myu: (0x401000)" / "myu: (0x401050 <- 0x401000)"
// SYM symbolizes addresses ("sym+0xoff/0xsize", "0x<hex>" when unknown); nullptr prints
// every address as "0x<hex>".
std::string format_probe_record(const probe_definition &def, const uint8_t *record, size_t size,
                                symbolize_fn sym);

} // namespace dprobe
