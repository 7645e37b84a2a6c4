#include "tracefs/probe_types.h"

#include "core/symbols.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace dprobe
{
namespace
{

using id = fetch_type_id;

constexpr const char str_fmt[] = "\\\"%s\\\"";
constexpr const char str_fmttype[] = "__data_loc char[]";

constexpr fetch_type types[] = {
    {"u8", id::u8, 1, false, false, "%u", "u8"},
    {"u16", id::u16, 2, false, false, "%u", "u16"},
    {"u32", id::u32, 4, false, false, "%u", "u32"},
    {"u64", id::u64, 8, false, false, "%Lu", "u64"},
    {"s8", id::s8, 1, true, false, "%d", "s8"},
    {"s16", id::s16, 2, true, false, "%d", "s16"},
    {"s32", id::s32, 4, true, false, "%d", "s32"},
    {"s64", id::s64, 8, true, false, "%Ld", "s64"},
    {"x8", id::x8, 1, false, false, "0x%x", "u8"},
    {"x16", id::x16, 2, false, false, "0x%x", "u16"},
    {"x32", id::x32, 4, false, false, "0x%x", "u32"},
    {"x64", id::x64, 8, false, false, "0x%Lx", "u64"},
    {"char", id::char_, 1, false, false, "'%c'", "u8"},
    {"string", id::string, 4, true, true, str_fmt, str_fmttype},
    {"ustring", id::ustring, 4, true, true, str_fmt, str_fmttype},
    {"symbol", id::symbol, 8, false, false, "%pS", "u64"},
    {"symstr", id::symstr, 4, true, true, str_fmt, str_fmttype},
};

// kstrtoul(base 0) for the bitfield container size.
bool parse_container(std::string_view s, unsigned long &out)
{
    if (s.empty()) return false;
    unsigned base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    } else if (s[0] == '0') {
        base = 8;
    }
    unsigned long v = 0;
    for (char c : s) {
        unsigned d;
        if (c >= '0' && c <= '9')
            d = static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = static_cast<unsigned>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = static_cast<unsigned>(c - 'A' + 10);
        else
            return false;
        if (d >= base || v > 0xffffffffu) return false;
        v = v * base + d;
    }
    out = v;
    return true;
}

} // namespace

const fetch_type &fetch_type_of(fetch_type_id i)
{
    return types[static_cast<size_t>(i)];
}

const fetch_type &default_fetch_type()
{
    return fetch_type_of(id::x64);
}

const fetch_type *find_fetch_type(std::string_view name, bool user_probe)
{
    if (name.empty()) return &default_fetch_type();
    if (user_probe && (name == "symbol" || name == "symstr")) return nullptr;
    if (name[0] == 'b') {
        auto slash = name.find('/');
        if (slash == std::string_view::npos) return nullptr;
        unsigned long bits = 0;
        if (!parse_container(name.substr(slash + 1), bits)) return nullptr;
        switch (bits) {
        case 8:
            return &fetch_type_of(id::u8);
        case 16:
            return &fetch_type_of(id::u16);
        case 32:
            return &fetch_type_of(id::u32);
        case 64:
            return &fetch_type_of(id::u64);
        default:
            return nullptr;
        }
    }
    for (const auto &t : types)
        if (name == t.name) return &t;
    return nullptr;
}

size_t sprint_symbol_hook(char *buf, size_t len, uintptr_t addr)
{
    return sprint_symbol(buf, len, addr);
}

void print_fetch_value(std::string &out, const fetch_type &t, const uint8_t *data,
                       const uint8_t *record, size_t record_size, symbolize_fn sym)
{
    char buf[512];
    uint64_t u = 0;
    if (!t.is_string) std::memcpy(&u, data, t.size); // little-endian: the low bytes
    switch (t.id) {
    case id::u8:
    case id::u16:
    case id::u32:
    case id::u64:
        std::snprintf(buf, sizeof(buf), "%" PRIu64, u);
        break;
    case id::s8:
        std::snprintf(buf, sizeof(buf), "%d", static_cast<int>(static_cast<int8_t>(u)));
        break;
    case id::s16:
        std::snprintf(buf, sizeof(buf), "%d", static_cast<int>(static_cast<int16_t>(u)));
        break;
    case id::s32:
        std::snprintf(buf, sizeof(buf), "%d", static_cast<int32_t>(u));
        break;
    case id::s64:
        std::snprintf(buf, sizeof(buf), "%" PRId64, static_cast<int64_t>(u));
        break;
    case id::x8:
    case id::x16:
    case id::x32:
    case id::x64:
        std::snprintf(buf, sizeof(buf), "0x%" PRIx64, u);
        break;
    case id::char_:
        std::snprintf(buf, sizeof(buf), "'%c'", static_cast<char>(u));
        break;
    case id::symbol:
        if (sym)
            sym(buf, sizeof(buf), static_cast<uintptr_t>(u));
        else
            std::snprintf(buf, sizeof(buf), "0x%" PRIx64, u);
        break;
    case id::string:
    case id::ustring:
    case id::symstr: {
        uint32_t dl;
        std::memcpy(&dl, data, sizeof(dl));
        size_t len = data_loc_len(dl), off = data_loc_offset(dl);
        if (!len || off >= record_size) {
            out += "(fault)";
            return;
        }
        if (len > record_size - off) len = record_size - off;
        const char *s = reinterpret_cast<const char *>(record + off);
        out += '"';
        out.append(s, strnlen(s, len));
        out += '"';
        return;
    }
    }
    out += buf;
}

} // namespace dprobe
