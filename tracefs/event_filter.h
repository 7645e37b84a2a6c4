// Event filters: the expressions written into events/<grp>/<ev>/filter (the kernel's
// kernel/trace/trace_events_filter.c), compiled once into a short branch program that the
// probe hot path runs over a filled record before committing it.
//
// Grammar (as the kernel's):
//   expr := pred | '(' expr ')' | '!' expr | expr '&&' expr | expr '||' expr
//   pred := FIELD OP VALUE
//   numeric fields:  ==  !=  <  <=  >  >=  &     VALUE a number (kstrtoll/kstrtoull base 0)
//   string fields:   ==  !=  ~                   VALUE quoted with '..' or ".."
// "&&" binds tighter than "||". `~` is a glob (*, ?, [...], \); a leading '!' in the
// pattern negates it. `&` is true when (field & value) != 0. Comparisons use the field's
// size and signedness. Besides the event's own fields: common_type, common_flags,
// common_preempt_count, common_pid, and the kernel's generic CPU/cpu (the CPU the event was
// written on) and COMM/comm (the writing thread's name).
//
// Errors are reported like the kernel: the write fails with EINVAL, and the filter file
// shows the expression, a caret and "parse_error: <message>" (filter_error_text()).
//
// Compiling is ordinary C++. event_filter::match() is hot-path code: noexcept, no
// allocation, no locks.
#pragma once

#include "tracefs/probe_parse.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

// The kernel's FILT_ERR_* list, in its order.
#define DPROBE_FILTER_ERRORS                                                                       \
    C(NONE, "No error")                                                                            \
    C(INVALID_OP, "Invalid operator")                                                              \
    C(TOO_MANY_OPEN, "Too many '('")                                                               \
    C(TOO_MANY_CLOSE, "Too few '('")                                                               \
    C(MISSING_QUOTE, "Missing matching quote")                                                     \
    C(OPERAND_TOO_LONG, "Operand too long")                                                        \
    C(EXPECT_STRING, "Expecting string field")                                                     \
    C(EXPECT_DIGIT, "Expecting numeric field")                                                     \
    C(ILLEGAL_FIELD_OP, "Illegal operation for field type")                                        \
    C(FIELD_NOT_FOUND, "Field not found")                                                          \
    C(ILLEGAL_INTVAL, "Illegal integer value")                                                     \
    C(BAD_SUBSYS_FILTER, "Couldn't find or set field in one of a subsystem's events")              \
    C(TOO_MANY_PREDS, "Too many terms in predicate expression")                                    \
    C(INVALID_FILTER, "Meaningless filter expression")                                             \
    C(IP_FIELD_ONLY, "Only 'ip' field is supported for function trace")                            \
    C(INVALID_VALUE, "Invalid value (did you forget quotes)?")                                     \
    C(ERRNO, "Error")                                                                              \
    C(NO_FILTER, "No filter found")

#define C(name, text) name,
enum class filter_err : uint8_t { DPROBE_FILTER_ERRORS };
#undef C

const char *filter_err_name(filter_err e) noexcept;
const char *filter_err_text(filter_err e) noexcept;

struct filter_parse_error {
    filter_err err = filter_err::NONE;
    int pos = 0; // byte offset in the expression (the kernel's lasterr_pos)
};

// A field a filter may name.
struct filter_field {
    enum class type : uint8_t {
        number,        // 1, 2, 4 or 8 bytes at `offset`
        dyn_string,    // __data_loc char[]: u32 (len << 16 | offset) at `offset`
        static_string, // char name[size] at `offset` (size 0: to its NUL, in the record)
        comm,          // the current thread's name (COMM/comm)
        cpu,           // the CPU the record was written on (CPU/cpu)
    };
    std::string name;
    type kind = type::number;
    uint16_t offset = 0;
    uint16_t size = 0;
    bool is_signed = false;
};

// The fields of a probe event's records: common_*, __probe_ip (or __probe_func and
// __probe_ret_ip) and every argument, then CPU/cpu and COMM/comm.
std::vector<filter_field> probe_filter_fields(const probe_definition &def);

class event_filter
{
  public:
    // What match() needs besides the record.
    struct context {
        unsigned cpu = 0;
        const char *comm = nullptr; // the writing thread's name; nullptr reads it when needed
    };

    // Compiles TEXT (surrounding whitespace and a trailing newline ignored) against FIELDS.
    // On error returns nullptr and fills ERR.
    static std::unique_ptr<event_filter>
    compile(std::string_view text, std::span<const filter_field> fields, filter_parse_error &err);

    // True when the record passes. RECORD/SIZE: the whole record (header included). Hot path.
    bool match(const uint8_t *record, size_t size, const context &ctx) const noexcept;

    // The expression as written (stripped), which the filter file shows.
    const std::string &text() const noexcept { return text_; }
    size_t nr_preds() const noexcept { return prog_.size(); }

    // Program internals (public for the compiler in event_filter.cpp).
    enum class op : uint8_t { GLOB, NE, EQ, LE, LT, GE, GT, BAND };
    struct pred {
        op o = op::EQ;
        filter_field::type kind = filter_field::type::number;
        bool is_signed = false;
        bool negate = false; // != and "!pattern" globs
        bool glob = false;   // string: glob match rather than exact
        uint8_t size = 0;
        uint16_t offset = 0;
        uint16_t field_len = 0; // static strings
        uint64_t val = 0;
        uint32_t pattern_off = 0; // into patterns_
        uint32_t pattern_len = 0;
    };
    struct entry {
        int target = 0; // index to jump to; N = TRUE, N + 1 = FALSE
        bool when_to_branch = false;
        pred p;
    };

  private:
    std::string text_;
    std::vector<entry> prog_;
    std::string patterns_; // NUL-separated string operands
};

// Maximum length of a string operand (the kernel's MAX_FILTER_STR_VAL).
inline constexpr size_t MAX_FILTER_STR_VAL = 256;

// The filter file after a failed write: the expression, a caret line and the message,
// exactly as the kernel's append_filter_err() builds it ("a == x\n     ^\nparse_error: ...\n").
std::string filter_error_text(std::string_view text, const filter_parse_error &err);

} // namespace dprobe
