// The fetch-arg type table (the kernel's probe_fetch_types[]): names, record sizes, the type
// names of the `format` file, the print formats of `print fmt`, and the printer the `trace`
// file uses for one stored value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dprobe
{

// Limits of the kernel's trace_probe.h (user-space values where the kernel's depend on it).
inline constexpr int MAX_TRACE_ARGS = 128;
inline constexpr int MAX_ARGSTR_LEN = 63;
inline constexpr int MAX_ARG_NAME_LEN = 32;
inline constexpr int MAX_ARRAY_LEN = 64;
inline constexpr int MAX_STRING_SIZE = 4096;
inline constexpr int MAX_PROBE_EVENT_SIZE = 3072;
inline constexpr int MAX_EVENT_NAME_LEN = 64;
inline constexpr int FETCH_INSN_MAX = 16;
inline constexpr int KRETPROBE_MAXACTIVE_MAX = 4096;
inline constexpr int KRETPROBE_MAX_DATA_SIZE = 4096;
inline constexpr int MAX_FPROBE_DATA_SIZE = 15 * 8;
inline constexpr int PARAM_MAX_STACK = 2048; // THREAD_SIZE / sizeof(long), kept from the kernel
inline constexpr int WRITE_BUFSIZE = 4096;
inline constexpr int MAX_BTF_ARGS_LEN = 128; // the $arg* / $argN expansion buffer

enum class fetch_type_id : uint8_t {
    u8,
    u16,
    u32,
    u64,
    s8,
    s16,
    s32,
    s64,
    x8,
    x16,
    x32,
    x64,
    char_,
    string,
    ustring,
    symbol,
    symstr,
};

struct fetch_type {
    const char *name; // "u8", "string", ...
    fetch_type_id id;
    uint8_t size;        // bytes of one element in the record (4 = __data_loc for strings)
    bool is_signed;      // the format file's signed: flag (1 for the string types, as the kernel)
    bool is_string;      // stored as __data_loc with the bytes in the dynamic area
    const char *fmt;     // element format inside `print fmt` ("%u", "0x%Lx", "\\\"%s\\\"", "%pS")
    const char *fmttype; // type name in the format file ("u32", "__data_loc char[]")
};

// Looks a type up by name. A bitfield "b<W>@<O>/<C>" yields its container's unsigned type
// (only C is checked here). USER_PROBE rejects symbol/symstr (uprobes cannot symbolize, as in
// the kernel). nullptr when unknown.
const fetch_type *find_fetch_type(std::string_view name, bool user_probe = false);
// The type used when an argument names none: x64.
const fetch_type &default_fetch_type();
const fetch_type &fetch_type_of(fetch_type_id id);

// Symbolizer: writes "sym+0xoff/0xsize" (or "0x<hex>" when unknown) for ADDR into BUF,
// NUL-terminated, and returns its length (the shape of dprobe::sprint_symbol).
using symbolize_fn = size_t (*)(char *buf, size_t len, uintptr_t addr);

// The process symbolizer (dprobe::sprint_symbol of core/symbols.h) as a symbolize_fn, for
// fetch_context::symbolize and format_probe_record(). Addresses print in hex until
// kallsyms::instance() has been created.
size_t sprint_symbol_hook(char *buf, size_t len, uintptr_t addr);

// Appends to OUT one element of type T stored at DATA, printed as the trace file does.
// RECORD/RECORD_SIZE are the whole record, which __data_loc offsets are relative to.
// A null SYM prints symbol values as "0x<hex>".
void print_fetch_value(std::string &out, const fetch_type &t, const uint8_t *data,
                       const uint8_t *record, size_t record_size, symbolize_fn sym);

// __data_loc helpers: a u32 holding (length << 16) | offset from the record start.
inline constexpr uint32_t make_data_loc(uint32_t len, uint32_t offs)
{
    return (len << 16) | (offs & 0xffff);
}
inline constexpr uint32_t data_loc_len(uint32_t dl)
{
    return dl >> 16;
}
inline constexpr uint32_t data_loc_offset(uint32_t dl)
{
    return dl & 0xffff;
}

} // namespace dprobe
