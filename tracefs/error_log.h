// Probe-event parse errors and the tracefs `error_log` file.
//
// Every error a probe parser (or the code that registers a parsed probe) reports is a
// probe_error: the kernel's error NAME (trace_probe.h ERRORS list), the index of the command
// token it refers to (0 = "p:grp/ev", 1 = the place, i+2 = the i-th fetch arg), the byte
// offset inside that token where the caret goes, and the errno the write() fails with.
// error_log keeps the last 8 of them, printed exactly as the kernel's error_log file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

namespace dprobe
{

// X-macro list: NAME and the message text. Order is the kernel's; never rely on numbers.
#define DPROBE_PROBE_ERRORS                                                                        \
    C(FILE_NOT_FOUND, "Failed to find the given file")                                             \
    C(NO_REGULAR_FILE, "Not a regular file")                                                       \
    C(BAD_REFCNT, "Invalid reference counter offset")                                              \
    C(REFCNT_OPEN_BRACE, "Reference counter brace is not closed")                                  \
    C(BAD_REFCNT_SUFFIX, "Reference counter has wrong suffix")                                     \
    C(BAD_UPROBE_OFFS, "Invalid uprobe offset")                                                    \
    C(BAD_MAXACT_TYPE, "Maxactive is only for function exit")                                      \
    C(BAD_MAXACT, "Invalid maxactive number")                                                      \
    C(MAXACT_TOO_BIG, "Maxactive is too big")                                                      \
    C(BAD_PROBE_ADDR, "Invalid probed address or symbol")                                          \
    C(NON_UNIQ_SYMBOL, "The symbol is not unique")                                                 \
    C(BAD_RETPROBE, "Retprobe address must be an function entry")                                  \
    C(NO_TRACEPOINT, "Tracepoint is not found")                                                    \
    C(BAD_TP_NAME, "Invalid character in tracepoint name")                                         \
    C(BAD_ADDR_SUFFIX, "Invalid probed address suffix")                                            \
    C(NO_GROUP_NAME, "Group name is not specified")                                                \
    C(GROUP_TOO_LONG, "Group name is too long")                                                    \
    C(BAD_GROUP_NAME, "Group name must follow the same rules as C identifiers")                    \
    C(NO_EVENT_NAME, "Event name is not specified")                                                \
    C(EVENT_TOO_LONG, "Event name is too long")                                                    \
    C(BAD_EVENT_NAME, "Event name must follow the same rules as C identifiers")                    \
    C(EVENT_EXIST, "Given group/event name is already used by another event")                      \
    C(RETVAL_ON_PROBE, "$retval is not available on probe")                                        \
    C(NO_RETVAL, "This function returns 'void' type")                                              \
    C(BAD_STACK_NUM, "Invalid stack number")                                                       \
    C(BAD_ARG_NUM, "Invalid argument number")                                                      \
    C(BAD_VAR, "Invalid $-valiable specified")                                                     \
    C(BAD_REG_NAME, "Invalid register name")                                                       \
    C(BAD_MEM_ADDR, "Invalid memory address")                                                      \
    C(BAD_IMM, "Invalid immediate value")                                                          \
    C(IMMSTR_NO_CLOSE, "String is not closed with '\"'")                                           \
    C(FILE_ON_KPROBE, "File offset is not available with kprobe")                                  \
    C(BAD_FILE_OFFS, "Invalid file offset value")                                                  \
    C(SYM_ON_UPROBE, "Symbol is not available with uprobe")                                        \
    C(TOO_MANY_OPS, "Dereference is too much nested")                                              \
    C(DEREF_NEED_BRACE, "Dereference needs a brace")                                               \
    C(BAD_DEREF_OFFS, "Invalid dereference offset")                                                \
    C(DEREF_OPEN_BRACE, "Dereference brace is not closed")                                         \
    C(COMM_CANT_DEREF, "$comm can not be dereferenced")                                            \
    C(BAD_FETCH_ARG, "Invalid fetch argument")                                                     \
    C(ARRAY_NO_CLOSE, "Array is not closed")                                                       \
    C(BAD_ARRAY_SUFFIX, "Array has wrong suffix")                                                  \
    C(BAD_ARRAY_NUM, "Invalid array size")                                                         \
    C(ARRAY_TOO_BIG, "Array number is too big")                                                    \
    C(BAD_TYPE, "Unknown type is specified")                                                       \
    C(BAD_STRING, "String accepts only memory argument")                                           \
    C(BAD_SYMSTRING, "Symbol String doesn't accept data/userdata")                                 \
    C(BAD_BITFIELD, "Invalid bitfield")                                                            \
    C(ARG_NAME_TOO_LONG, "Argument name is too long")                                              \
    C(NO_ARG_NAME, "Argument name is not specified")                                               \
    C(BAD_ARG_NAME, "Argument name must follow the same rules as C identifiers")                   \
    C(USED_ARG_NAME, "This argument name is already used")                                         \
    C(ARG_TOO_LONG, "Argument expression is too long")                                             \
    C(NO_ARG_BODY, "No argument expression")                                                       \
    C(BAD_INSN_BNDRY, "Probe point is not an instruction boundary")                                \
    C(FAIL_REG_PROBE, "Failed to register probe event")                                            \
    C(DIFF_PROBE_TYPE, "Probe type is different from existing probe")                              \
    C(DIFF_ARG_TYPE, "Argument type or name is different from existing probe")                     \
    C(SAME_PROBE, "There is already the exact same probe event")                                   \
    C(NO_EVENT_INFO, "This requires both group and event name to attach")                          \
    C(BAD_ATTACH_EVENT, "Attached event does not exist")                                           \
    C(BAD_ATTACH_ARG, "Attached event does not have this field")                                   \
    C(NO_EP_FILTER, "No filter rule after 'if'")                                                   \
    C(NOSUP_BTFARG, "BTF is not available or not supported")                                       \
    C(NO_BTFARG, "This variable is not found at this probe point")                                 \
    C(NO_BTF_ENTRY, "No BTF entry for this probe point")                                           \
    C(BAD_VAR_ARGS, "$arg* must be an independent parameter without name etc.")                    \
    C(NOFENTRY_ARGS, "$arg* can be used only on function entry or exit")                           \
    C(DOUBLE_ARGS, "$arg* can be used only once in the parameters")                                \
    C(ARGS_2LONG, "$arg* failed because the argument list is too long")                            \
    C(ARGIDX_2BIG, "$argN index is too big")                                                       \
    C(NO_PTR_STRCT, "This is not a pointer to union/structure.")                                   \
    C(NOSUP_DAT_ARG, "Non pointer structure/union argument is not supported.")                     \
    C(BAD_HYPHEN, "Failed to parse single hyphen. Forgot '>'?")                                    \
    C(NO_BTF_FIELD, "This field is not found.")                                                    \
    C(BAD_BTF_TID, "Failed to get BTF type info.")                                                 \
    C(BAD_TYPE4STR, "This type does not fit for string.")                                          \
    C(NEED_STRING_TYPE, "$comm and immediate-string only accepts string type")                     \
    C(TOO_MANY_ARGS, "Too many arguments are specified")                                           \
    C(TOO_MANY_EARGS, "Too many entry arguments specified")                                        \
    C(EVENT_TOO_BIG, "Event too big (too many fields?)")

#define C(name, text) name,
enum class probe_err : uint8_t { NONE, DPROBE_PROBE_ERRORS };
#undef C

// "BAD_MAXACT"; "NONE" for probe_err::NONE.
const char *probe_err_name(probe_err e) noexcept;
// The kernel's message text, e.g. "Invalid maxactive number"; "" for NONE.
const char *probe_err_text(probe_err e) noexcept;
// Reverse of probe_err_name (NONE when unknown).
probe_err probe_err_from_name(std::string_view name) noexcept;

// One failure. `err` NONE with a non-zero errnum is an error that the kernel does not log
// (ECANCELED "not my line", an over-long line, ENOENT of a delete request, ...).
struct probe_error {
    probe_err err = probe_err::NONE;
    int index = 0;  // argv index the caret refers to
    int offset = 0; // byte offset inside argv[index]
    int errnum = 0; // positive errno of the failed write; 0 = success
    // Why, in this process, and what to do instead, for the tools that report the failure
    // (dprobe record and attach): never in the error_log file, whose text is the kernel's.
    std::string detail = {};

    bool ok() const noexcept { return errnum == 0; }
    explicit operator bool() const noexcept { return errnum != 0; } // true = failed
    bool logged() const noexcept { return err != probe_err::NONE; }

    static probe_error make(probe_err e, int index, int offset, int errnum)
    {
        return probe_error{e, index, offset, errnum};
    }
    static probe_error plain(int errnum) { return probe_error{probe_err::NONE, 0, 0, errnum}; }
    probe_error &with_detail(std::string d)
    {
        detail = std::move(d);
        return *this;
    }
};

// Caret column of ERR in the command built by joining ARGV with single spaces: the offset
// of argv[index] plus err.offset, or one past the end (+1) when index >= argc.
size_t probe_error_pos(std::span<const std::string> argv, const probe_error &err);

// ARGV joined with single spaces, as the kernel shows a command.
std::string join_argv(std::span<const std::string> argv);

// The tracefs error_log: the 8 most recent errors, oldest first.
class error_log
{
  public:
    static constexpr size_t max_entries = 8;   // TRACING_LOG_ERRS_MAX
    static constexpr size_t max_loc_len = 128; // TRACING_LOG_LOC_MAX

    struct entry {
        uint64_t ts_ns;  // CLOCK_MONOTONIC at the time of the error
        std::string loc; // "trace_kprobe"
        probe_err err;
        std::string command; // argv joined with single spaces
        uint16_t pos;        // caret column inside command (u16 like the kernel's)
        std::string message; // overrides probe_err_text(err) when set (event filter errors)
        std::string detail;  // probe_error::detail: not in the file
    };

    // Logs ERR for the command ARGV (does nothing when err.err is NONE).
    void append(std::string_view loc, std::span<const std::string> argv, const probe_error &err);
    // Low-level form: an already joined command and caret position.
    void append_raw(std::string_view loc, probe_err err, std::string command, size_t pos,
                    uint64_t ts_ns, std::string detail = {});

    // An error whose message is not a probe_err (the event filter's "event filter parse
    // error" entries): MESSAGE is printed after "error: ".
    void append_message(std::string_view loc, std::string_view message, std::string command,
                        size_t pos);
    // The text of the error_log file.
    std::string read() const;
    // Formats one entry as it appears in the file (3 lines).
    static std::string format_entry(const entry &e);
    // `echo > error_log` (O_TRUNC) clears it.
    void clear();
    size_t size() const;
    // A copy of the entries, oldest first.
    std::deque<entry> entries() const;

  private:
    mutable std::mutex lock_;
    std::deque<entry> entries_;
};

} // namespace dprobe
