// What `dprobe report` works on: a trace file read as it goes (tools/trace_reader.h), offline
// symbols for each session's objects (which object was at an address when), the text of
// each event, and the per-thread call stacks that give a function-graph exit its duration.
// Memory stays bounded whatever the trace's size: symbols, one chunk per thread read, and the
// open calls of each thread.
#pragma once

#include "core/symbols.h"
#include "tools/dprobe/resolve/demangle.h"
#include "tools/trace_reader.h"
#include "tracefs/probe_parse.h"

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace dprobe::report
{

// The functions of one session's objects, read from the files they were loaded from. An
// object holds from its load to its unload: a library unloaded and another loaded at the
// same address name the events of their own time.
class offline_symbols
{
  public:
    // Objects in the order of the trace (loads and unloads, each from its time on).
    void build(const std::vector<tracefile::object_info> &objects,
               const std::vector<std::pair<uint64_t, std::string>> &names = {});
    // "name+0xoff/0xsize", "0x<hex>" when unknown; at trace time TS.
    std::string sym(uintptr_t addr, uint64_t ts, bool with_offset = true) const;
    // The function name containing addr, or "0x<hex>".
    std::string name(uintptr_t addr, uint64_t ts) const { return sym(addr, ts, false); }
    std::vector<std::string> missing; // objects that could not be read
    // Where the function containing ADDR (at trace time TS) comes from: its object's file
    // and load bias, and its symbol as the symbol table has it (mangled). False when unknown.
    struct origin {
        std::string path;
        uint64_t load_bias = 0;
        std::string symbol;
        uintptr_t start = 0; // the function's runtime address
    };
    bool where(uintptr_t addr, uint64_t ts, origin *out) const;
    // How C++ names are shown (demangle.h); simple by default.
    void set_demangle(demangle_mode mode) { demangle_ = mode; }

  private:
    struct span {
        std::shared_ptr<loaded_object> obj;
        uint64_t from = 0, to = UINT64_MAX; // [from, to) in trace time
    };
    const ksym *find(uintptr_t addr, uint64_t ts) const;
    std::vector<span> spans_;
    std::map<uintptr_t, ksym> names_; // functions named by the recording (IFUNC targets)
    std::map<std::pair<std::string, uintptr_t>, std::shared_ptr<loaded_object>> files_;
    demangle_mode demangle_ = demangle_mode::simple;
    const std::string &shown(const ksym *s) const;
    mutable std::unordered_map<const ksym *, std::string> shown_; // names as shown, by symbol
};

struct event_decoder {
    tracefile::event_info info;
    std::string group, event;
    bool has_def = false;
    probe_definition def;
};

struct session_view {
    const tracefile::session *s = nullptr;
    offline_symbols syms;
    std::map<uint32_t, event_decoder> events;
    bool in_ns = true;
    std::map<int32_t, std::string> comms; // from the thread streams
    std::string comm_of(int32_t tid) const;
};

struct model {
    tracefile::trace_reader reader;
    std::vector<std::unique_ptr<session_view>> sessions; // reader.sessions' views
    // reader.streams in the order their threads started (first event's time).
    std::vector<size_t> stream_order;
};

// Opens PATH and builds the model (metadata and symbols only), C++ names shown as DEMANGLE
// says. False with *err on failure.
bool load_model(const std::string &path, model &m, std::string *err,
                demangle_mode demangle = demangle_mode::simple);

// ftrace's records come in two forms: the agent's compact ones (`record`'s and `attach`'s
// graph, `record -p function`) and the full ones the tracefs tree's tracers write (echo
// function_graph > current_tracer); both decode alike (tracefs/ftrace_entries.h).
// A function-graph event, decoded.
struct graph_event {
    bool entry;
    bool unwound;
    int32_t depth;
    uint64_t func;
};
bool decode_graph(const tracefile::event &e, graph_event &g);
// A function event (`record -p function`), decoded: the call of IP, from PARENT_IP.
struct function_event {
    uint64_t ip, parent_ip;
};
bool decode_function(const tracefile::event &e, function_event &f);
uint16_t event_type(const tracefile::event &e);
// Whose record E is: the common_pid of a full record (a trace_marker write's is the writer's),
// else the thread whose buffer held it.
int32_t record_pid(const tracefile::event &e);

// The open calls of one thread: an exit's duration is its time less its entry's.
class call_stack
{
  public:
    void entry(const graph_event &g, uint64_t ts);
    // The entry time of the call G exits (its frame and those above it are popped); false
    // when its entry was not recorded (lost, or before the recording started).
    bool exit(const graph_event &g, uint64_t *calltime);
    // After lost events: the open calls may be wrong; keep them (an exit still finds its
    // own entry by address and depth).
  private:
    struct frame {
        uint64_t func;
        int32_t depth;
        uint64_t ts;
    };
    std::vector<frame> frames_;
};

// The values `record -a/-A/-R` put after a call's entry (its arguments) or after its exit
// (its return value): a probe record of the graph_args group (tools/trace_file.h). False when
// E is no such record.
struct graph_values {
    bool retval = false;
    std::vector<std::pair<std::string, std::string>> values; // name, value as text
    // "0x7ff..., 12" (arguments) or "3" (a return value): what the graph shows inline.
    std::string inline_text() const;
};
bool decode_graph_values(const session_view &sv, const tracefile::event &e, graph_values &out);

// The text of an event: "myprobe: (func+0x0/0x20) a=1", or for function-graph events
// "funcgraph_entry: --> func (1)" / "funcgraph_exit: <-- func (1) 0.120 us".
// DURATION_NS is the exit's (UINT64_MAX: unknown).
std::string event_text(const session_view &sv, const tracefile::event &e,
                       uint64_t duration_ns = UINT64_MAX);
// The event's short name ("myprobe", "funcgraph_entry"), "" for an unknown id.
std::string event_name(const session_view &sv, const tracefile::event &e);

// The signal that killed session S's process (0: it was not killed), from its END chunk, and
// a signal's name ("SIGSEGV").
int killed_by(const tracefile::session &s);
std::string signal_name(int sig);

// Makes SV the symbolizer format_probe_record() calls back into (it takes a plain function).
void set_current_symbols(const offline_symbols *syms, uint64_t ts);
size_t current_symbolize(char *buf, size_t len, uintptr_t addr);

} // namespace dprobe::report
