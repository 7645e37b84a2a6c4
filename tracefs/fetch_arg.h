// Fetch args: the text of one probe argument ("name=+8(%di):u32[4]") compiled into a small
// fixed-size program (the kernel's fetch_insn array), and the interpreter that runs it when
// the probe fires and stores the value into an event record.
//
// Compiling (parse_probe_arg, fetch_arg.cpp) is ordinary C++, reports kernel-style errors and
// belongs to the offline library. Resolving in this process and running (resolve_fetch_args,
// fetch_run, store_trace_args, store_entry_args: fetch_run.cpp) are the runtime's; running is
// hot-path code: noexcept, no allocation, no locks, async-signal-safe, and every read of
// traced memory goes through the nofault routines of arch/x86_64/uaccess.h, so a garbage
// pointer yields a "fault" value, not a crash.
#pragma once

#include "tracefs/error_log.h"
#include "tracefs/probe_types.h"

#include <dprobe/ptrace.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

enum class fetch_op : uint8_t {
    NOP = 0,
    // Stage 1: load a value.
    REG,    // pt_regs word at byte offset `param`
    STACK,  // `param`-th word above the stack pointer
    STACKP, // the stack pointer
    RETVAL, // the return value register
    IMM,    // `immediate`
    COMM,   // address of the thread's name
    ARG,    // function argument `param` (0-based; SysV: di si dx cx r8 r9, then the stack)
    FOFFS,  // uprobe file offset `offset`, resolved to the address `immediate`
    DATA,   // address of the program's immediate string
    EDATA,  // word at `offset` in the entry data saved for a return probe
    TP_ARG, // field of the attached event's record (event probes) at `offset`, `size`
            // bytes; `param`: 0 unsigned, 1 signed, 2 __data_loc string, 3 char array
            // (a string's value is its address)
    // Stage 2: dereference (value = *(value + offset)).
    DEREF,
    UDEREF,
    // Stage 3: store into the record.
    ST_RAW,    // the value itself, `size` bytes
    ST_MEM,    // `size` bytes at value + offset
    ST_UMEM,   // same, from "user" memory (identical in user space)
    ST_STRING, // string at value + offset into the dynamic area
    ST_USTRING,
    ST_SYMSTR, // "sym+0xoff/0xsize" of value + offset into the dynamic area
    // Stage 4: modify the stored value.
    MOD_BF, // bitfield: (x << lshift) >> rshift on a `basesize` container
    // Stage 5: repeat the store for array elements.
    LP_ARRAY, // `param` elements
    END,
    NOP_SYMBOL, // place holder for @SYM (name in fetch_prog::data); skipped when run
};

struct fetch_insn {
    fetch_op op = fetch_op::NOP;
    uint8_t size = 0;     // store size
    uint8_t basesize = 0; // bitfield container size
    uint8_t lshift = 0;
    uint8_t rshift = 0;
    uint32_t param = 0;
    int64_t offset = 0;
    uint64_t immediate = 0;
};

// One compiled argument. Plain data: copyable, no pointers into itself.
struct fetch_prog {
    std::array<fetch_insn, FETCH_INSN_MAX> code{};
    // The immediate string of \"..." (NUL-terminated), or the "sym[+-off]" text of @SYM.
    char data[MAX_ARGSTR_LEN + 1] = {};
    uint16_t field_size = 0; // bytes the argument takes in the fixed part of the record
};

const char *fetch_op_name(fetch_op op) noexcept;

// Flags describing where an argument is fetched (the kernel's TPARG_FL_*).
enum : unsigned {
    TPARG_FL_RETURN = 1u << 0, // return probe
    TPARG_FL_KERNEL = 1u << 1, // symbol-aware probe (p/r/f on a symbol): @SYM, symbol types
    TPARG_FL_FENTRY = 1u << 2, // at a function entry: $argN straight from registers
    TPARG_FL_USER = 1u << 4,   // uprobe-style (path:offset) probe
    TPARG_FL_FPROBE = 1u << 5, // fprobe: no %REG
    TPARG_FL_TEVENT = 1u << 6, // event probe: $FIELD of the attached event, no %REG/$stack
};

// Function arguments a return probe saves at entry ($argN on exit), the kernel's
// probe_entry_arg: slot i (8 bytes at offset 8*i of the entry data) holds argument arg[i].
struct entry_arg_table {
    std::array<uint16_t, MAX_TRACE_ARGS> arg{};
    uint16_t count = 0;
    // Bytes of entry data needed.
    size_t size() const noexcept { return size_t{count} * sizeof(unsigned long); }
    bool empty() const noexcept { return count == 0; }
    // Slot of function argument N (0-based), adding it when new; -1 when full.
    int slot_for(unsigned n) noexcept;
};

struct func_proto;   // tracefs/trace_btf.h
struct filter_field; // tracefs/event_filter.h

// What names in an argument resolve against: the kernel's BTF context, with the function's
// DWARF in place of BTF (tracefs/trace_btf.h).
struct btf_context {
    enum class mode : uint8_t {
        unsupported, // no type information: names and $arg* refused (NOSUP_BTFARG)
        unchecked,   // names accepted without a check, untyped (an offline check that cannot
                     // see the process's objects)
        resolve,     // names resolve against FUNC; nullptr: the function has no debug info
    };
    mode m = mode::unsupported;
    const func_proto *func = nullptr;
    // Event probes: the attached event's fields ($FIELD); nullptr: not checked.
    const std::vector<filter_field> *event_fields = nullptr;
};

// One parsed argument of a probe.
struct probe_arg {
    std::string name; // "arg1", "dfd"
    std::string comm; // text after "name=" (shown by the listing, used to match)
    const fetch_type *type = nullptr;
    std::string type_text; // the type as written ("b4@2/32", "u8"), "" when omitted
    uint32_t count = 0;    // array elements, 0 = scalar
    uint32_t offset = 0;   // offset inside the args area of the record
    bool dynamic = false;  // has __data_loc data (strings)
    std::string fmt;       // format-file type of an array ("u8[4]"); "" otherwise
    int sym_pos = -1;      // caret offset of '@' of an unresolved @SYM, else -1
    fetch_prog prog;

    // Fixed bytes in the record: type size times max(count, 1).
    uint32_t field_size() const noexcept { return prog.field_size; }
};

// Parses ARG, the text of argv[ARGV_INDEX] (arg number ARG_IDX, 0-based, of the probe),
// into OUT. PREVIOUS are the probe's earlier args (name clashes). FLAGS is TPARG_FL_*.
// $argN on a return probe is recorded in EARGS. Errors carry index ARGV_INDEX and the
// caret offset inside ARG.
// BTF says where a name ("count", "p->a.b", "$retval->len") resolves; without a name the
// argument is named after its text when that is an identifier, else arg<N>.
probe_error parse_probe_arg(std::string_view arg, int argv_index, int arg_idx,
                            std::span<const probe_arg> previous, unsigned flags,
                            entry_arg_table &eargs, probe_arg &out, const btf_context &btf = {});

// Assigns record offsets to ARGS (packed in order, no padding) and returns the size of the
// fixed part.
uint32_t layout_probe_args(std::span<probe_arg> args);

// Resolves what the parser could only name: @SYM (SYMBOL gets the text before any +/-
// offset) and uprobe @+OFFSET (FILE_OFFSET). Unset resolvers leave those args unresolved.
struct fetch_resolver {
    std::function<std::optional<uintptr_t>(std::string_view)> symbol;
    std::function<std::optional<uintptr_t>(uint64_t)> file_offset;
};
// Also installs the nofault fault handler (fetch_install_fault_handler) when an argument
// reads memory. Returns BAD_PROBE_ADDR (ENOENT) with the arg's index (first_argv_index + i) and the
// caret under its '@' for the first symbol that does not resolve.
probe_error resolve_fetch_args(std::span<probe_arg> args, const fetch_resolver &resolver,
                               int first_argv_index = 2);

// What the interpreter reads besides memory.
struct fetch_context {
    const pt_regs *regs = nullptr;
    const void *edata = nullptr;        // entry data of a return probe (store_entry_args output)
    symbolize_fn symbolize = nullptr;   // symstr; nullptr prints "0x<hex>"
    const uint8_t *event_rec = nullptr; // event probes: the attached event's record
};

// Runs PROG: the fixed field goes at RECORD + FIELD_OFF (zeroed first; a failed scalar fetch
// leaves zeroes), string bytes are appended at RECORD + DYN_OFF, using at most DYN_AVAIL
// bytes (and at most MAX_STRING_SIZE per string). Strings are stored as __data_loc
// ((len << 16) | offset from RECORD, len counting the NUL; len 0 = fault).
// Returns the number of dynamic bytes used.
size_t fetch_run(const fetch_prog &prog, const fetch_context &ctx, uint8_t *record,
                 size_t field_off, size_t dyn_off, size_t dyn_avail) noexcept;

// Dynamic bytes PROG would append now (the length pass before reserving a record).
size_t fetch_dynamic_size(const fetch_prog &prog, const fetch_context &ctx) noexcept;

// Stores every arg: the fixed part at RECORD + ARGS_OFF (args_size bytes), dynamic data
// right after it, within CAPACITY bytes of RECORD. Returns the total bytes used from RECORD.
size_t store_trace_args(std::span<const probe_arg> args, uint32_t args_size,
                        const fetch_context &ctx, uint8_t *record, size_t args_off,
                        size_t capacity) noexcept;
// Sum of fetch_dynamic_size over ARGS.
size_t trace_args_dynamic_size(std::span<const probe_arg> args, const fetch_context &ctx) noexcept;

// At function entry of a return probe: saves the arguments EARGS lists into EDATA
// (eargs.size() bytes).
void store_entry_args(const entry_arg_table &eargs, const pt_regs *regs, void *edata) noexcept;

// The calling thread's name ($comm), read once per thread. Never null.
const char *fetch_current_comm() noexcept;
// While COMM is set (nullptr clears it), fetch_current_comm() on this thread answers COMM: a
// server thread running the triggers of a write it serves for another process (trace_marker)
// names the writer, as the kernel's current does.
void fetch_comm_speak_for(const char *comm) noexcept;

// Installs the nofault fixup (uaccess_fixup_fault) for SIGSEGV and SIGBUS in the process
// signal chain. Idempotent; call before running fetch programs on untrusted pointers.
void fetch_install_fault_handler();

// Number parsing with the kernel's kstrto* rules (base 0: 0x hex, leading 0 octal, else
// decimal; one trailing '\n' allowed). Return 0 or -EINVAL / -ERANGE.
int kstrtoull(std::string_view s, unsigned base, unsigned long long &out) noexcept;
int kstrtoll(std::string_view s, unsigned base, long long &out) noexcept;

} // namespace dprobe
