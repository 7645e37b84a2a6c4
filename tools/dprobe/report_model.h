// What `dprobe report` works on: a trace file's sessions, their records merged in time,
// offline symbols for each session's objects, and the text of each record.
#pragma once

#include "core/symbols.h"
#include "tools/trace_file.h"
#include "tracefs/probe_parse.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dprobe::report {

// The functions of one session's objects, read from the files they were loaded from.
class offline_symbols {
public:
    void add(const std::string &path, uintptr_t bias);
    // "name+0xoff/0xsize" ([obj] appended for objects other than the first when WITH_OBJ),
    // "0x<hex>" when unknown.
    std::string sym(uintptr_t addr, bool with_offset = true) const;
    // The function name containing addr, or "0x<hex>".
    std::string name(uintptr_t addr) const;
    std::vector<std::string> missing; // objects that could not be read

private:
    const ksym *find(uintptr_t addr, const loaded_object **obj) const;
    std::vector<std::shared_ptr<loaded_object>> objs_;
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
    std::string comm_of(int32_t tid) const;
};

// One record in time order, with its session.
struct record_ref {
    const tracefile::record *r;
    session_view *sv;
};

struct model {
    tracefile::trace_data data;
    std::vector<std::unique_ptr<session_view>> sessions;
    std::vector<record_ref> records; // every session's records merged by timestamp
};

// Reads PATH and builds the model. False with *err on failure.
bool load_model(const std::string &path, model &m, std::string *err);

// The payload text of a record: "myprobe: (func+0x0/0x20) a=1", or for function-graph
// records "funcgraph_entry: --> func (1)".
std::string record_text(const record_ref &ref);
// The event's short name ("myprobe", "funcgraph_entry"), "" for an unknown id.
std::string record_event_name(const record_ref &ref);
uint16_t record_type(const tracefile::record &r);
// Function-graph exits of calls that did not return (unwound by longjmp, an exception or
// thread exit), among the records of the threads report_opts selects.
uint64_t count_unwound(const model &m);

// Makes SV the symbolizer format_probe_record() calls back into (it takes a plain function).
void set_current_symbols(const offline_symbols *syms);
size_t current_symbolize(char *buf, size_t len, uintptr_t addr);

} // namespace dprobe::report
