// hist triggers (the kernel's kernel/trace/trace_events_hist.c): the `hist:` event trigger
// command that aggregates an event's records into a tracing_map where they happen, and the
// text of its trigger listing and of the events/GROUP/EVENT/hist file.
//
//   hist:keys=K1[,K2,K3][:vals=V1[,V2]][:sort=S1[.descending][,S2]][:size=N][:name=NAME]
//       [:clock=CLOCK][:pause|:cont|:clear] [if FILTER]
//
// Keys are the event's fields, common_pid, common_cpu (cpu, CPU), common_timestamp, comm, or
// stacktrace / common_stacktrace; modifiers .hex .sym .sym-offset .execname (common_pid)
// .syscall .log2 .buckets=N .usecs, and for values .hex .percent .graph. `hitcount` is
// always the first value. Every limit and every error (name, caret) is the kernel's: at
// most 3 keys, 2 values besides hitcount, 2 sort keys, a compound key of at most
// HIST_KEY_SIZE_MAX bytes, size= between 128 and 131072 entries.
//
// Variables, expressions and actions (the kernel's inter-event hist triggers):
//   hist:keys=K:VAR=EXPR[,VAR=EXPR]...:onmatch(SYS.EVENT).trace(SYNTH,$VAR,FIELD,...)
//   ...:onmatch(SYS.EVENT).SYNTH(PARAMS)  onmax($VAR).save(F,...)|.snapshot()|.trace(...)
//   onchange($VAR).save(...)|.snapshot()|.trace(...)
// EXPR is a field, common_timestamp[.usecs], a constant, $VAR (a variable of this or another
// event's hist, matched by key: the kernel's inter-event reference, read once) or a binary
// expression of those (+ - * /, at most 3 subexpressions) or -(EXPR). Those parts are in
// hist_vars.cpp (parsing, references across events) and hist_actions.cpp (the actions);
// synthetic events in trace_events_synth.h.
//
// Split in three:
//  - hist_trigger_data (this file): one parsed trigger and its table. parse() is ordinary
//    C++; hit() is the hot path (noexcept, no allocation, no lock: the key is built on the
//    stack and the table is tracing_map).
//  - its text: trigger_print() (the trigger file's line, "# trigger info:") and show()
//    (the hist file's entries and Totals), as the kernel's event_hist_trigger_print and
//    hist_trigger_show print them.
//  - the registration with the event trigger framework (event_trigger.h): trigger_hist.cpp.
#pragma once

#include "tracefs/event_filter.h"
#include "tracefs/tracing_map.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pt_regs;

namespace dprobe
{

// The kernel's err_text[] of trace_events_hist.c, in its order.
#define DPROBE_HIST_ERRORS                                                                         \
    C(NONE, "No error")                                                                            \
    C(DUPLICATE_VAR, "Variable already defined")                                                   \
    C(VAR_NOT_UNIQUE,                                                                              \
      "Variable name not unique, need to use fully qualified name (subsys.event.var) for "         \
      "variable")                                                                                  \
    C(TOO_MANY_VARS, "Too many variables defined")                                                 \
    C(MALFORMED_ASSIGNMENT, "Malformed assignment")                                                \
    C(NAMED_MISMATCH,                                                                              \
      "Named hist trigger doesn't match existing named trigger (includes variables)")              \
    C(TRIGGER_EEXIST, "Hist trigger already exists")                                               \
    C(TRIGGER_ENOENT_CLEAR, "Can't clear or continue a nonexistent hist trigger")                  \
    C(SET_CLOCK_FAIL, "Couldn't set trace_clock")                                                  \
    C(BAD_FIELD_MODIFIER, "Invalid field modifier")                                                \
    C(TOO_MANY_SUBEXPR, "Too many subexpressions (3 max)")                                         \
    C(TIMESTAMP_MISMATCH, "Timestamp units in expression don't match")                             \
    C(TOO_MANY_FIELD_VARS, "Too many field variables defined")                                     \
    C(EVENT_FILE_NOT_FOUND, "Event file not found")                                                \
    C(HIST_NOT_FOUND, "Matching event histogram not found")                                        \
    C(HIST_CREATE_FAIL, "Couldn't create histogram for field")                                     \
    C(SYNTH_VAR_NOT_FOUND, "Couldn't find synthetic variable")                                     \
    C(SYNTH_EVENT_NOT_FOUND, "Couldn't find synthetic event")                                      \
    C(SYNTH_TYPE_MISMATCH, "Param type doesn't match synthetic event field type")                  \
    C(SYNTH_COUNT_MISMATCH, "Param count doesn't match synthetic event field count")               \
    C(FIELD_VAR_PARSE_FAIL, "Couldn't parse field variable")                                       \
    C(VAR_CREATE_FIND_FAIL, "Couldn't create or find variable")                                    \
    C(ONX_NOT_VAR, "For onmax(x) or onchange(x), x must be a variable")                            \
    C(ONX_VAR_NOT_FOUND, "Couldn't find onmax or onchange variable")                               \
    C(ONX_VAR_CREATE_FAIL, "Couldn't create onmax or onchange variable")                           \
    C(FIELD_VAR_CREATE_FAIL, "Couldn't create field variable")                                     \
    C(TOO_MANY_PARAMS, "Too many action params")                                                   \
    C(PARAM_NOT_FOUND, "Couldn't find param")                                                      \
    C(INVALID_PARAM, "Invalid action param")                                                       \
    C(ACTION_NOT_FOUND, "No action found")                                                         \
    C(NO_SAVE_PARAMS, "No params found for save()")                                                \
    C(TOO_MANY_SAVE_ACTIONS, "Can't have more than one save() action per hist")                    \
    C(ACTION_MISMATCH, "Handler doesn't support action")                                           \
    C(NO_CLOSING_PAREN, "No closing paren found")                                                  \
    C(SUBSYS_NOT_FOUND, "Missing subsystem")                                                       \
    C(INVALID_SUBSYS_EVENT, "Invalid subsystem or event name")                                     \
    C(INVALID_REF_KEY, "Using variable references in keys not supported")                          \
    C(VAR_NOT_FOUND, "Couldn't find variable")                                                     \
    C(FIELD_NOT_FOUND, "Couldn't find field")                                                      \
    C(EMPTY_ASSIGNMENT, "Empty assignment")                                                        \
    C(INVALID_SORT_MODIFIER, "Invalid sort modifier")                                              \
    C(EMPTY_SORT_FIELD, "Empty sort field")                                                        \
    C(TOO_MANY_SORT_FIELDS, "Too many sort fields (Max = 2)")                                      \
    C(INVALID_SORT_FIELD, "Sort field must be a key or a val")                                     \
    C(INVALID_STR_OPERAND, "String type can not be an operand in expression")                      \
    C(EXPECT_NUMBER, "Expecting numeric literal")                                                  \
    C(UNARY_MINUS_SUBEXPR, "Unary minus not supported in sub-expressions")                         \
    C(DIVISION_BY_ZERO, "Division by zero")

#define C(name, text) name,
enum class hist_err : uint8_t { DPROBE_HIST_ERRORS };
#undef C

const char *hist_err_name(hist_err e) noexcept;
const char *hist_err_text(hist_err e) noexcept;

// A failed parse: the errno, and when the kernel logs it, the error and the caret's column
// inside the command "hist:" + param_and_filter (the kernel's last_cmd and errpos()).
struct hist_error {
    hist_error() = default;
    hist_error(int errnum_, hist_err err_ = hist_err::NONE, unsigned pos_ = 0)
        : errnum(errnum_), err(err_), pos(pos_)
    {
    }
    int errnum = 0; // positive
    hist_err err = hist_err::NONE;
    unsigned pos = 0;
    // Entries the kernel logs before ERR for the same command (an unknown $var is also tried
    // as a field; a param's field is tried on this event before the onmatch() event), in
    // order. They are logged even when the command succeeds in the end, as the kernel's.
    std::vector<std::pair<hist_err, unsigned>> before;
    bool logged() const noexcept { return err != hist_err::NONE; }
    // ERR (when logged) and what came before it, followed by E at POS.
    hist_error then(hist_err e, unsigned at, int errnum_ = EINVAL) const
    {
        hist_error r{errnum_, e, at};
        r.before = before;
        if (logged()) r.before.emplace_back(err, pos);
        return r;
    }
};

inline constexpr unsigned HIST_STACKTRACE_DEPTH = 16;
inline constexpr unsigned HIST_STACKTRACE_SIZE = HIST_STACKTRACE_DEPTH * 8;
inline constexpr unsigned HIST_KEY_SIZE_MAX = MAX_FILTER_STR_VAL + HIST_STACKTRACE_SIZE;
inline constexpr unsigned HITCOUNT_IDX = 0;
inline constexpr unsigned HIST_ACTIONS_MAX = 8;

enum hist_field_flags : uint32_t {
    HIST_FIELD_FL_HITCOUNT = 1u << 0,
    HIST_FIELD_FL_KEY = 1u << 1,
    HIST_FIELD_FL_STRING = 1u << 2,
    HIST_FIELD_FL_HEX = 1u << 3,
    HIST_FIELD_FL_SYM = 1u << 4,
    HIST_FIELD_FL_SYM_OFFSET = 1u << 5,
    HIST_FIELD_FL_EXECNAME = 1u << 6,
    HIST_FIELD_FL_SYSCALL = 1u << 7,
    HIST_FIELD_FL_STACKTRACE = 1u << 8,
    HIST_FIELD_FL_LOG2 = 1u << 9,
    HIST_FIELD_FL_TIMESTAMP = 1u << 10,
    HIST_FIELD_FL_TIMESTAMP_USECS = 1u << 11,
    HIST_FIELD_FL_VAR = 1u << 12,
    HIST_FIELD_FL_EXPR = 1u << 13,
    HIST_FIELD_FL_VAR_REF = 1u << 14,
    HIST_FIELD_FL_CPU = 1u << 15,
    HIST_FIELD_FL_ALIAS = 1u << 16,
    HIST_FIELD_FL_BUCKET = 1u << 17,
    HIST_FIELD_FL_CONST = 1u << 18,
    HIST_FIELD_FL_PERCENT = 1u << 19,
    HIST_FIELD_FL_GRAPH = 1u << 20,
};

// How a field's value is read from a record (the kernel's hist_field_fn).
enum class hist_field_fn : uint8_t {
    NOP,
    COUNTER,
    U8,
    S8,
    U16,
    S16,
    U32,
    S32,
    U64,
    S64,
    STRING,    // char name[N] in the record
    DYNSTRING, // __data_loc char[]
    COMM,      // the writing thread's name (comm, COMM)
    TIMESTAMP,
    CPU,
    STACKTRACE,
    CONST,   // constant
    VAR_REF, // the hit's value of var_refs_[var_ref_idx]
    UMINUS,  // -(operand 0)
    MINUS,   // operand 0 - operand 1
    PLUS,
    DIV, // 0 divisor: -1, as the kernel
    MULT,
};

// The kernel's enum field_op_id.
enum class hist_field_op : uint8_t { NONE, PLUS, MINUS, UNARY_MINUS, DIV, MULT };

struct hist_field {
    uint32_t flags = 0;
    hist_field_fn fn = hist_field_fn::NOP;
    bool is_signed = false;
    bool has_field = false;  // an event field (the kernel's hist_field->field)
    uint16_t rec_offset = 0; // in the record
    uint16_t rec_size = 0;
    unsigned size = 0;   // keys: bytes in the compound key (8-aligned); values: 8
    unsigned offset = 0; // keys: offset in the compound key
    unsigned long buckets = 0;
    std::string name; // the kernel's hist_field_name(); an expression's text
    std::string type; // for hist_debug
    // Expressions: operands (indexes in the trigger's node pool) and operator; constants.
    int16_t operands[2] = {-1, -1};
    hist_field_op op = hist_field_op::NONE;
    uint64_t constant = 0;
    // A variable (flag VAR): its name and slot in the map's elements; a string variable's
    // copy lives in the element's private area, slot str_idx.
    std::string var_name;
    int var_idx = -1;
    int str_idx = -1;
    // A reference (VAR_REF): its index in the trigger's references, and the qualified form
    // ("sys.event.$var") when written so.
    unsigned var_ref_idx = 0;
    std::string system, event_name;
};

class hist_trigger_data;
struct trace_synth;
class trace_array;

// A reference to a variable (the kernel's var_refs[] entries): the trigger that owns the
// variable, its slot, and whether a read consumes it (read_once: references in another
// event's expressions; self references and action params keep it).
struct hist_var_ref {
    hist_trigger_data *var_data = nullptr;
    unsigned var_idx = 0;
    bool read_once = false;
    hist_field field; // the VAR_REF field (name, type, size, flags)
};

// A hist action (the kernel's struct action_data).
struct hist_action {
    enum class handler_id : uint8_t { ONMATCH = 1, ONMAX, ONCHANGE };
    enum class action_id : uint8_t { SAVE = 1, TRACE, SNAPSHOT };
    handler_id handler = handler_id::ONMATCH;
    action_id action = action_id::TRACE;
    std::string action_name, synth_event_name;
    bool use_trace_keyword = false;
    std::vector<std::string> params;
    std::string match_system, match_event; // onmatch
    std::string var_str;                   // onmax / onchange: "$var"
    // Created: the synthetic event (a reference held), the references its params read,
    // the tracked variable's reference and the tracking variable (__max, __change).
    trace_synth *synth = nullptr;
    std::vector<unsigned> param_refs;
    unsigned track_ref = 0;
    hist_field track_var; // its var_idx is the tracking slot
    // snapshot(): the triggering value and key (the kernel's cond snapshot track_data).
    struct snapshot_state {
        std::atomic<uint64_t> track_val{0};
        std::atomic<bool> updated{false};
        std::atomic_flag busy = ATOMIC_FLAG_INIT;
        uint8_t key[HIST_KEY_SIZE_MAX] = {};
        char comm[16] = {};
    };
    std::unique_ptr<snapshot_state> snap;
};

// Where a trigger is created: its event and array, and what it may reference there.
struct hist_event_ctx {
    std::string system, event;
    unsigned array = 0;
    trace_array *tr = nullptr;
    // Whether GROUP/EVENT exists (onmatch's event); nullptr: every event exists.
    bool (*event_exists)(std::string_view group, std::string_view event) = nullptr;
    // A '!hist:' removal: parsed to be matched only (no duplicate-variable check, the
    // actions parsed but not created), as the kernel's hist_data->remove.
    bool remove = false;
    // For an action param naming a field of another event (the kernel's
    // create_field_var_hist), the traced process's trigger files (trigger_hist.cpp); nullptr
    // where there are none (a reader of recordings: such a param is refused).
    // compatible_hist: the first hist trigger of SYSTEM.EVENT in this array whose keys have
    // TARGET's types, sizes and signs (find_compatible_hist): true, and its key fields' names
    // (comma-separated) and its filter ("" for none) in KEYS and FILTER.
    bool (*compatible_hist)(const hist_event_ctx &ctx, const hist_trigger_data &target,
                            std::string_view system, std::string_view event, std::string &keys,
                            std::string &filter) = nullptr;
    // "hist:CMD" (or "!hist:CMD" with REMOVE) written to SYSTEM.EVENT's trigger file in this
    // array: 0 or -errno.
    int (*hist_command)(const hist_event_ctx &ctx, std::string_view system, std::string_view event,
                        const std::string &cmd, bool remove) = nullptr;
};

// What a hit knows besides the record.
struct hist_hit_ctx {
    uint64_t ts = 0; // the record's timestamp in the trace clock's unit
    unsigned cpu = 0;
    const pt_regs *regs = nullptr; // for stacktrace keys; nullptr: no stack
    trace_array *tr = nullptr;     // the trigger's array (snapshot actions)
};

// What a hist needs of the process it counts in, besides the records: the traced process's
// runtime fills it in (trigger_hist.cpp); a reader of recordings (dprobe report --format
// hist) puts the recording's in its place. nullptr: timestamps in nanoseconds (the default
// clocks'), no stack (stacktrace keys stay empty), this process's symbols
// (sprint_symbol) and its thread's name (fetch_current_comm). Set before any hist exists.
struct hist_env {
    bool (*clock_in_ns)() noexcept = nullptr;
    // The hit's stack at REGS, anywhere in a function: REGS->ip first, then its callers; at
    // most MAX addresses, how many returned.
    size_t (*stack_save)(const pt_regs *regs, uint64_t *ips, size_t max) noexcept = nullptr;
    void (*symbolize)(char *buf, size_t len, uintptr_t addr) = nullptr;
    const char *(*current_comm)() noexcept = nullptr;
    // The actions' side effects, the traced process's (trace_events_synth.h, snapshot.h):
    // nullptr in a reader of recordings, where .snapshot() and trace actions are refused.
    int (*snapshot_alloc)(trace_array &tr) = nullptr;
    void (*snapshot_take)(trace_array &tr) noexcept = nullptr;
    trace_synth *(*synth_get)(std::string_view name) = nullptr;
    void (*synth_put)(trace_synth *se) = nullptr;
    void (*synth_trace)(const trace_synth &se, const uint64_t *vals,
                        const pt_regs *regs) noexcept = nullptr;
};
extern hist_env hist_environment;

// A field's modifier as the hist file prints it ("hex", "log2", ...), nullptr for none (the
// kernel's get_hist_field_flags).
const char *get_hist_field_flags(uint32_t flags);

// "sys_read" for a syscall number, nullptr when unknown (.syscall keys).
const char *hist_syscall_name(uint64_t nr) noexcept;

class hist_trigger_data
{
  public:
    struct attrs {
        std::string keys_str, vals_str, sort_key_str, name, clock;
        bool pause = false, cont = false, clear = false, ts_in_usecs = false;
        unsigned map_bits = 0;
    };

    // Parses PARAM (after "hist:", the filter already split off) against FIELDS (the
    // event's, probe_filter_fields()) and creates the trigger with its table. CMD is the
    // whole command "hist:" + param_and_filter the caret positions refer to. Returns 0 or
    // -errno with ERR filled.
    // EV (optional) is where the trigger goes: variables of other events' hist triggers in
    // the same array are found through the registry below.
    static int create(std::string_view param, std::string_view cmd,
                      std::span<const filter_field> fields, std::unique_ptr<hist_trigger_data> &out,
                      hist_error &err, const hist_event_ctx *ev = nullptr);
    ~hist_trigger_data();

    // The registry of triggers with variables or references (the kernel's tr->hist_vars),
    // event_trigger_lock() held: a trigger joins it once registered and leaves it when
    // freed; references_vars_of() says whether another trigger references one of its
    // variables (it may not be removed then: EBUSY).
    void save_hist_vars();
    void remove_hist_vars();
    bool vars_referenced() const;

    // One record. Hot path.
    void hit(const uint8_t *rec, size_t len, const hist_hit_ctx &ctx) noexcept;

    // The trigger's listing line without " if FILTER", " [active]" and the newline: the
    // caller (which owns the filter and the paused state) appends them. NAME: the named
    // trigger's "name=..." or empty.
    std::string print_spec(std::string_view name) const;
    // The hist file's body for this trigger: the sorted entries and the Totals block.
    std::string show() const;
    // hist_debug's body (the kernel's hist_trigger_debug_show after its header).
    std::string debug_show() const;

    // The kernel's hist_trigger_match on the parts a data holds (fields, sort keys).
    bool same_layout(const hist_trigger_data &o) const;

    // The hist triggers this one added on other events to hold the fields its action params
    // name there (the kernel's field_var_hists), removed ("!hist:...") now: when this trigger
    // is removed, or was not registered after all. Takes it out of the variables' registry
    // first (the kernel's remove_hist_vars before unregister_field_var_hists), so that they
    // are no longer referenced. Lock held.
    void unregister_field_var_hists();

    const attrs &attr() const noexcept { return attrs_; }
    tracing_map &map() noexcept { return *map_; }
    const tracing_map &map() const noexcept { return *map_; }
    bool enable_timestamps() const noexcept { return enable_timestamps_; }
    unsigned n_vals() const noexcept { return n_vals_; }
    unsigned n_keys() const noexcept { return n_keys_; }
    unsigned key_size() const noexcept { return key_size_; }
    const std::vector<hist_field> &fields() const noexcept { return fields_; }
    const std::vector<hist_field> &vars() const noexcept { return vars_; }
    const hist_event_ctx &event() const noexcept { return ev_; }
    // The variable NAME of this trigger, nullptr when it has none (find_var_field).
    const hist_field *find_var_field(std::string_view name) const;

  private:
    friend struct hist_parser;
    // ---- hist_vars.cpp ----
    int parse_var_defs(hist_error &err);
    int create_var_fields(std::span<const filter_field> fields, hist_error &err);
    // The kernel's parse_expr / parse_atom: F is filled, its operands go to nodes_.
    int parse_expr(std::string_view str, uint32_t flags, std::string_view var_name,
                   unsigned &n_subexprs, std::span<const filter_field> fields, hist_field &f,
                   hist_error &err);
    int parse_atom(std::string_view str, uint32_t flags, std::string_view var_name,
                   std::span<const filter_field> fields, hist_field &f, hist_error &err);
    // A reference to VAR (of OWNER) in var_refs_: its index (create_var_ref).
    unsigned create_var_ref(hist_trigger_data *owner, const hist_field &var,
                            std::string_view system, std::string_view event);
    // find_event_var(): the variable NAME of SYSTEM.EVENT (any event when empty).
    const hist_field *find_event_var(std::string_view system, std::string_view event,
                                     std::string_view name, hist_trigger_data **owner,
                                     hist_error &err);
    // A variable of this trigger holding FIELD_NAME's value (create_field_var).
    int create_field_var(std::string_view field_name, std::span<const filter_field> fields,
                         bool save, const hist_field **var, hist_error &err);
    // The variable "synthetic_FIELD" of a hist trigger on SYSTEM.EVENT holding FIELD, made
    // there if needed with the keys of a compatible hist trigger of that event
    // (create_field_var_hist, hist_actions.cpp). *OWNER: that trigger.
    const hist_field *create_field_var_hist(std::string_view system, std::string_view event,
                                            std::string_view field, hist_trigger_data **owner,
                                            hist_error &err);
    // SELF: this trigger's own variables, read from ELT (the hit's element).
    bool resolve_var_refs(const uint8_t *key, uint64_t *vals, bool self,
                          tracing_map_elt *elt = nullptr) const noexcept;
    void update_vars(tracing_map_elt *elt, const uint8_t *rec, size_t len, const hist_hit_ctx &ctx,
                     const uint64_t *refs, std::span<const hist_field> vars) const noexcept;
    std::string expr_str(const hist_field &f, unsigned level) const;
    bool has_var_ref(const hist_field &f, unsigned level = 0) const; // field_has_hist_vars
    // ---- hist_actions.cpp ----
    int parse_actions(hist_error &err);
    int create_actions(std::span<const filter_field> fields, hist_error &err);
    void run_actions(tracing_map_elt *elt, const uint8_t *key, const uint8_t *rec, size_t len,
                     const hist_hit_ctx &ctx, const uint64_t *refs) const noexcept;
    void print_actions_spec(std::string &s) const;
    void print_actions(std::string &s, const tracing_map_elt *elt) const;
    void print_snapshot(std::string &s) const;
    void debug_field(std::string &s, const hist_field &f) const; // hist_field_debug_show
    bool actions_match(const hist_trigger_data &o) const;
    // ---- trace_events_hist.cpp ----
    uint64_t value(const hist_field &f, const uint8_t *rec, size_t len, const hist_hit_ctx &ctx,
                   const uint64_t *refs, tracing_map_elt *elt) const noexcept;
    void field_text(std::string &s, const hist_field &f) const; // hist_field_print

    hist_trigger_data() = default;
    int parse_attrs(std::string_view param, hist_error &err);
    int parse_field(std::string_view field_str, uint32_t flags,
                    std::span<const filter_field> fields, hist_field &out, hist_error &err);
    int create_val_fields(std::span<const filter_field> fields, hist_error &err);
    int create_key_fields(std::span<const filter_field> fields, hist_error &err);
    int create_sort_keys(hist_error &err);
    unsigned errpos(std::string_view s) const;
    void print_field(std::string &s, const hist_field &f) const;
    void print_key(std::string &s, const uint8_t *key, const tracing_map_elt *elt) const;

    attrs attrs_;
    std::vector<std::string> assignments_, action_strs_;
    std::vector<std::pair<std::string, std::string>> var_defs_; // name, expression
    hist_event_ctx ev_;
    std::vector<hist_field> nodes_;      // expression operands
    std::vector<hist_field> vars_;       // variables (the kernel's VAR val fields)
    std::vector<hist_field> field_vars_; // variables made for action params (name: field)
    std::vector<hist_field> save_vars_;  // save() params
    std::vector<hist_var_ref> var_refs_;
    std::vector<hist_action> actions_;
    struct field_var_hist {
        std::string system, event, cmd;
    };
    std::vector<field_var_hist> field_var_hists_;
    unsigned n_map_vars_ = 0, n_str_ = 0, lookup_key_size_ = 0;
    bool registered_ = false;
    std::string cmd_;                // the kernel's last_cmd
    std::vector<hist_field> fields_; // values (hitcount first), then keys
    unsigned n_vals_ = 0, n_keys_ = 0, key_size_ = 0;
    bool enable_timestamps_ = false;
    bool has_execname_ = false;
    tracing_map_sort_key sort_keys_[TRACING_MAP_SORT_KEYS_MAX];
    unsigned n_sort_keys_ = 0;
    std::unique_ptr<tracing_map> map_;
};

} // namespace dprobe
