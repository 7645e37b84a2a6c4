// Argument names and types for dynamic_events from DWARF: the kernel's BTF arguments
// (kernel/trace/trace_btf.c and the BTF half of trace_probe.c), with the probed function's
// debug information in place of BTF.
//
//   f:ev parse_item item count        parameters by name (entry: their registers)
//   f:ev parse_item%return item->len  an entry argument at exit (saved at entry)
//   p:ev parse_item $arg*             every parameter, named and typed
//   f:ev parse_item item->pos.x $retval     members through pointers, a typed return value
//
// Resolution happens once, at parse time, and yields the same fetch instructions an explicit
// fetch arg would (`count` at the entry is `$arg2` stored as u32; `item->len` is
// `+8($arg1):u64`), so a named argument costs what the explicit one costs on the hot path.
//
// Parameters are found by the SysV x86-64 calling convention (tracefs/dwarf/dwarf_params.h):
// a parameter in an integer register or stack slot is readable at the entry ($argN); a
// floating-point parameter or one after a struct passed by value is not.
//
// Types, when the argument names none: integers and enums by size and sign, pointers x64,
// bitfields b<W>@<O>/<C>, and, as perf probe types them, `char *` and char arrays as strings
// and arrays of scalars as TYPE[N]; anything else the default x64 (the kernel's fallback).
//
// Errors are the kernel's: NO_BTF_ENTRY (no debug info for the function), NO_BTFARG (no such
// parameter), NO_RETVAL (void function), NO_PTR_STRCT ("->" on something that does not point
// to a struct or union), NO_BTF_FIELD (no such member), NOSUP_DAT_ARG ('.' straight on a
// parameter, or a struct passed by value), BAD_HYPHEN ('-' without '>'), BAD_BTF_TID (a type
// the debug info does not describe), BAD_TYPE4STR (":string" on neither char* nor char[]),
// NOSUP_BTFARG (no type information at all, a parameter no register holds).
#pragma once

#include "tracefs/dwarf/debuginfo.h"
#include "tracefs/dwarf/dwarf_fetch.h"
#include "tracefs/fetch_arg.h"

#include <elfutils/libdw.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

// The function a probe at its entry or exit sits on, as its debug information describes it.
// Immutable once built; DI keeps the DIEs valid.
struct func_proto {
    std::shared_ptr<const debuginfo> di;
    Dwarf_Die die{}; // DW_TAG_subprogram with code
    std::string name;

    struct param {
        std::string name;              // "" for an unnamed parameter
        int slot = -1;                 // 0-based integer argument slot ($argN is N - 1), -1: none
        bool aggregate = false;        // passed by value as a struct or union
        std::string why;               // slot < 0: why no register holds it
        std::optional<Dwarf_Die> type; // DW_AT_type
    };
    std::vector<param> params;
    bool slots_complete = true;        // every integer slot is accounted for
    std::optional<Dwarf_Die> ret_type; // nullopt: returns void

    const param *named(std::string_view n) const;
    const param *at_slot(int slot) const;
};
using func_proto_ptr = std::shared_ptr<const func_proto>;

// The out-of-line function of DI whose code starts at VADDR (a file virtual address);
// nullptr when there is none.
func_proto_ptr func_proto_at(std::shared_ptr<const debuginfo> di, uint64_t vaddr);

// The type state one argument's parse leaves behind (the kernel's ctx->last_type and its
// bitfield position): what the last name component fetched.
struct btf_last {
    std::optional<Dwarf_Die> type;         // set when a name resolved
    std::optional<bitfield_info> bitfield; // the last member is a bitfield
    int offset = 0;                        // caret of the last name component
};

// Resolves VARNAME (an identifier or "$retval", optionally followed by "->field" and
// ".field" steps) for a probe with FLAGS (TPARG_FL_*), appending fetch instructions at
// PCODE (ARG, EDATA or RETVAL, then one DEREF per "->" step): the kernel's parse_btf_arg.
// OFFSET is VARNAME's caret position inside argv[ARGV_INDEX]. A return probe's parameter is
// saved at the entry (EARGS).
probe_error parse_btf_arg(std::string_view varname, int offset, int argv_index, unsigned flags,
                          const btf_context &btf, entry_arg_table &eargs, fetch_insn *&pcode,
                          fetch_insn *end, btf_last &last);

// The type LAST gets when the argument names none: a fetch type name ("u32", "string",
// "b3@2/8"), an array count, and whether a char pointer must be followed to its text (one
// more DEREF). An empty type name means the default (x64).
struct btf_type_choice {
    std::string type;
    uint32_t count = 0;
    bool deref = false;
};
btf_type_choice btf_infer_type(const btf_last &last);

// ":string"/":ustring" written on a name (the kernel's check_prepare_btf_string_fetch): a
// char array is read in place, a char pointer is followed (*DEREF: one more memory read);
// anything else is BAD_TYPE4STR.
probe_error btf_string_fetch(const btf_last &last, int argv_index, bool &deref);

} // namespace dprobe
