// C variables to dynamic_events fetch args (perf's convert_variable_location,
// convert_variable_fields and convert_variable_type): where a variable is at one address
// (a register, memory at a register plus an offset, a static address, a constant), the
// dereferences that `->`, `.` and `[N]` add, and the fetch type its C type gives.
// Nothing is guessed: a variable without a location at the address, or one the fetch-arg
// language can't express (computed values, values known only at the function entry,
// variables split in pieces, SSE registers), is refused with the reason.
//
// Used by `dprobe probe` for variables anywhere in a function, and (the member paths and
// types) by the dynamic_events parser's DWARF arguments (tracefs/trace_btf.h).
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace dprobe
{

// One step of a member path after a variable: "->name", ".name" or "[index]".
struct dwarf_field {
    std::string name;   // member name; empty for an index
    bool arrow = false; // '->' (dereference first); '.' otherwise
    bool is_index = false;
    long index = 0;
};

// A value in fetch-arg terms: a base, then memory reads.
struct fetch_loc {
    enum class base_kind { reg, arg, sym, imm };
    base_kind kind = base_kind::reg;
    std::string name;            // "di" (reg), "$arg1" (arg), "counter" (sym), "5" (imm)
    int64_t sym_off = 0;         // sym: the base reads memory at name + sym_off
    std::vector<int64_t> derefs; // then each reads memory at value + offset

    // Whether the value was read from memory (so its address can be moved by an offset).
    bool in_memory() const { return kind == base_kind::sym || !derefs.empty(); }
    // The offset of the last memory read (in_memory() only).
    int64_t &last_offset() { return derefs.empty() ? sym_off : derefs.back(); }
    // The fetch arg text: "%di", "-20(%bp)", "@counter+8", "+8(+0(%si))", "\5".
    std::string text() const;
};

// What translate_location needs besides the expression.
struct location_env {
    // DW_AT_frame_base of the function at the address (may be empty).
    std::span<const Dwarf_Op> frame_base;
    // The CFA rule at the address (DW_OP_call_frame_cfa); false when unknown.
    std::function<bool(std::vector<Dwarf_Op> &)> cfa;
    // A symbol for a static address: (name, offset from it); nullopt when none fits.
    std::function<std::optional<std::pair<std::string, int64_t>>(uint64_t)> symbolize;
};

// Translates a DWARF location expression (already chosen for the probe address) into a
// fetch_loc. False with *why set when it can't be read at the probe.
bool translate_location(std::span<const Dwarf_Op> ops, const location_env &env, fetch_loc &out,
                        std::string *why);

// A translated variable: fetch text and type, ready for "NAME=FETCH:TYPE".
struct var_fetch {
    std::string name;
    std::string fetch;
    std::string type;
};

// A bitfield member, as the kernel's b<W>@<O>/<C> type reads it: WIDTH bits at OFFSET from
// the least significant bit of the CONTAINER-bit word loaded at the member's address.
struct bitfield_info {
    unsigned width = 0, offset = 0, container = 0;
};

// Applies FIELDS (->, ., [N]) to LOC, a value of type TYPE (updated to the final type;
// BITFIELD set when the last member is one). False with *why on a semantic error.
bool apply_fields(fetch_loc &loc, Dwarf_Die &type, std::optional<bitfield_info> &bitfield,
                  const std::vector<dwarf_field> &fields, const std::string &varname,
                  std::string *why);

// The fetch type for a value of TYPE at LOC (perf's convert_variable_type): CAST when the
// user gave one (":string" on a char pointer reads the string it points to), bitfields as
// b<W>@<O>/<C>, integers u/s8..64, char pointers and char arrays as strings, other pointers
// x64, arrays of scalars as TYPE[N]. May add a memory read to LOC. False with *why for types with
// no fetch type (structs, floats without a cast).
bool convert_type(fetch_loc &loc, Dwarf_Die *type, const std::optional<bitfield_info> &bitfield,
                  const std::string &cast, const std::string &varname, std::string &type_out,
                  std::string *why);

// ---- Type helpers (shared with tracefs/trace_btf.cpp) ----

// The DW_AT_type of DIE.
std::optional<Dwarf_Die> type_of(Dwarf_Die *die);
// TYPE without typedefs and qualifiers.
std::optional<Dwarf_Die> real_type(Dwarf_Die *type);
// Bytes of TYPE, -1 when unknown.
int64_t byte_size(Dwarf_Die *type);
bool is_struct_tag(int tag);
// A one-byte integer type (char, signed or unsigned char, int8_t, uint8_t).
bool is_char(Dwarf_Die *type);
// Plain `char` (not signed/unsigned char, which usually hold bytes, not text).
bool is_text_char(Dwarf_Die *type);
// Number of subranges of ARRAY and the element count of the first one (-1 when unknown).
int array_shape(Dwarf_Die *array, int64_t &count);
// Finds member NAME of struct/union/class STRUCT_DIE, looking into anonymous members and
// C++ base classes. OFF is the member's byte offset (for a bitfield, of its container); BF
// its bitfield layout. False when there is no such member, or with *WHY set when its
// layout can't be read.
bool find_member(Dwarf_Die *struct_die, const std::string &name, int64_t &off, Dwarf_Die &member,
                 std::optional<bitfield_info> &bf, std::string *why);

} // namespace dprobe
