// The Perfetto writer (see report_perfetto.h). Field numbers: proto/perfetto_trace.proto.
#include "tools/dprobe/report/report_perfetto.h"

#include "tools/dprobe/report/proto_writer.h"
#include "tracefs/ftrace_entries.h"

#include <cerrno>
#include <cstdlib>
#include <set>
#include <unordered_map>

namespace dprobe::report
{

namespace
{

enum : uint32_t {
    TRACE_PACKET = 1,
    PACKET_TIMESTAMP = 8,
    PACKET_SEQUENCE_ID = 10,
    PACKET_TRACK_EVENT = 11,
    PACKET_INTERNED_DATA = 12,
    PACKET_SEQUENCE_FLAGS = 13,
    PACKET_DEFAULTS = 59,
    PACKET_TRACK_DESCRIPTOR = 60,
    DEFAULTS_TRACK_EVENT = 11,
    TRACK_EVENT_DEFAULTS_TRACK_UUID = 11,
    SEQ_INCREMENTAL_STATE_CLEARED = 1,
    SEQ_NEEDS_INCREMENTAL_STATE = 2,
    EVENT_CATEGORY_IIDS = 3,
    EVENT_DEBUG_ANNOTATIONS = 4,
    EVENT_TYPE = 9,
    EVENT_NAME_IID = 10,
    TYPE_SLICE_BEGIN = 1,
    TYPE_SLICE_END = 2,
    TYPE_INSTANT = 3,
    ANNOTATION_NAME_IID = 1,
    ANNOTATION_INT = 4,
    ANNOTATION_STRING = 6,
    INTERNED_CATEGORIES = 1,
    INTERNED_EVENT_NAMES = 2,
    INTERNED_ANNOTATION_NAMES = 3,
    INTERNED_IID = 1,
    INTERNED_NAME = 2,
    TRACK_UUID = 1,
    TRACK_PROCESS = 3,
    TRACK_THREAD = 4,
    TRACK_PARENT_UUID = 5,
    PROCESS_PID = 1,
    PROCESS_NAME = 6,
    THREAD_PID = 1,
    THREAD_TID = 2,
    THREAD_NAME = 5,
};

// Track ids: a process's and a thread's, unique across the recording's sessions (an exec'd
// image is a session of its own with the same pid).
uint64_t process_uuid(size_t session)
{
    return (uint64_t{session} + 1) << 32;
}
uint64_t thread_uuid(size_t session, int32_t tid)
{
    return process_uuid(session) | static_cast<uint32_t>(tid);
}

class writer
{
  public:
    explicit writer(std::FILE *out) : out_(out) {}
    ~writer() { flush(); }
    void packet(const proto_msg &p)
    {
        buf_.bytes(TRACE_PACKET, p.str());
        if (buf_.size() >= 1 << 16) flush();
    }
    void flush()
    {
        std::fwrite(buf_.str().data(), 1, buf_.size(), out_);
        buf_.clear();
    }

  private:
    std::FILE *out_;
    proto_msg buf_;
};

// One thread's packet sequence: its id and the names interned on it so far.
class sequence
{
  public:
    sequence(writer &w, uint32_t id, uint64_t track) : w_(w), id_(id), track_(track) {}

    ~sequence() { flush(); }

    // An event: SLICE_BEGIN, SLICE_END or INSTANT at TS, with NAME (not for an end),
    // CATEGORY ("" for none) and ARGS. A slice's begin or end is held until the next event:
    // the values `record -a` put after it become its arguments (values()).
    void event(uint64_t ts, uint32_t type, const std::string &name, const std::string &category,
               const std::vector<std::pair<std::string, std::string>> &args = {})
    {
        flush();
        held_ = {ts, type, name, category, args};
        holding_ = true;
        if (type == TYPE_INSTANT) flush();
    }
    // The arguments (or return value) of the slice begun (or ended) last; false when there is
    // no such event held.
    bool values(const std::vector<std::pair<std::string, std::string>> &v)
    {
        if (!holding_ || held_.type == TYPE_INSTANT) return false;
        held_.args.insert(held_.args.end(), v.begin(), v.end());
        flush();
        return true;
    }
    void flush()
    {
        if (!holding_) return;
        holding_ = false;
        write(held_.ts, held_.type, held_.name, held_.category, held_.args);
    }

  private:
    struct held_event {
        uint64_t ts;
        uint32_t type;
        std::string name, category;
        std::vector<std::pair<std::string, std::string>> args;
    };
    held_event held_{};
    bool holding_ = false;

    void write(uint64_t ts, uint32_t type, const std::string &name, const std::string &category,
               const std::vector<std::pair<std::string, std::string>> &args)
    {
        interned_.clear();
        ev_.clear();
        ev_.varint(EVENT_TYPE, type); // on the sequence's default track
        if (type != TYPE_SLICE_END) ev_.varint(EVENT_NAME_IID, intern(names_, name, 0));
        if (!category.empty()) ev_.varint(EVENT_CATEGORY_IIDS, intern(categories_, category, 1));
        for (const auto &[k, v] : args) {
            ann_.clear();
            ann_.varint(ANNOTATION_NAME_IID, intern(arg_names_, k, 2));
            char *end = nullptr;
            errno = 0;
            const long long n = std::strtoll(v.c_str(), &end, 10);
            if (!v.empty() && !*end && !errno && (v[0] != '0' || v.size() == 1))
                ann_.int64(ANNOTATION_INT, n);
            else
                ann_.bytes(ANNOTATION_STRING, v);
            ev_.message(EVENT_DEBUG_ANNOTATIONS, ann_);
        }
        pk_.clear();
        pk_.varint(PACKET_TIMESTAMP, ts);
        pk_.varint(PACKET_SEQUENCE_ID, id_);
        if (first_) {
            // The sequence's state starts here: its interned names and its default track,
            // the thread's (TracePacketDefaults), which its events then leave out.
            pk_.varint(PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
            proto_msg ted, dflt;
            ted.varint(TRACK_EVENT_DEFAULTS_TRACK_UUID, track_);
            dflt.message(DEFAULTS_TRACK_EVENT, ted);
            pk_.message(PACKET_DEFAULTS, dflt);
            first_ = false;
        } else {
            pk_.varint(PACKET_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        }
        if (interned_.size()) pk_.message(PACKET_INTERNED_DATA, interned_);
        pk_.message(PACKET_TRACK_EVENT, ev_);
        w_.packet(pk_);
    }

    // The iid of S in TABLE (KIND: which InternedData list), adding it to this packet's
    // interned data the first time.
    uint64_t intern(std::unordered_map<std::string, uint64_t> &table, const std::string &s,
                    int kind)
    {
        auto [it, fresh] = table.try_emplace(s, table.size() + 1);
        if (fresh) {
            entry_.clear();
            entry_.varint(INTERNED_IID, it->second);
            entry_.bytes(INTERNED_NAME, s);
            interned_.message(kind == 0   ? INTERNED_EVENT_NAMES
                              : kind == 1 ? INTERNED_CATEGORIES
                                          : INTERNED_ANNOTATION_NAMES,
                              entry_);
        }
        return it->second;
    }
    writer &w_;
    uint32_t id_;
    uint64_t track_;
    bool first_ = true;
    std::unordered_map<std::string, uint64_t> names_, categories_, arg_names_;
    proto_msg pk_, ev_, ann_, interned_, entry_;
};

struct frame {
    uint64_t func;
    int32_t depth;
};

void thread_events(const model &m, size_t si, const report_opts &o, writer &w, report_counts &rc)
{
    const tracefile::thread_stream &t = m.reader.streams[si];
    const session_view &sv = *m.sessions[t.session];
    sequence seq(w, static_cast<uint32_t>(si + 1), thread_uuid(t.session, t.tid));
    tracefile::trace_reader::cursor cur(m.reader, si);
    std::vector<frame> st;
    uint64_t last_ts = 0;
    tracefile::event e;
    std::vector<std::pair<std::string, std::string>> args;
    while (cur.next(e)) {
        last_ts = e.ts;
        graph_event g;
        if (decode_graph(e, g)) {
            if (g.entry) {
                while (!st.empty() && st.back().depth >= g.depth) {
                    seq.event(e.ts, TYPE_SLICE_END, "", "");
                    st.pop_back();
                }
                st.push_back({g.func, g.depth});
                seq.event(e.ts, TYPE_SLICE_BEGIN, sv.syms.name(g.func, e.ts), "");
                continue;
            }
            rc.unwound += g.unwound;
            size_t match = st.size();
            for (size_t i = st.size(); i-- > 0;)
                if (st[i].func == g.func && st[i].depth == g.depth) {
                    match = i;
                    break;
                }
            if (match < st.size()) {
                while (st.size() > match) {
                    seq.event(e.ts, TYPE_SLICE_END, "", "");
                    st.pop_back();
                }
            } else {
                while (!st.empty() && st.back().depth >= g.depth) {
                    seq.event(e.ts, TYPE_SLICE_END, "", "");
                    st.pop_back();
                }
                seq.event(e.ts, TYPE_INSTANT, sv.syms.name(g.func, e.ts) + " (return)", "");
            }
        } else if (graph_values v; decode_graph_values(sv, e, v) && seq.values(v.values)) {
            // record -a/-A/-R: the arguments of the slice's begin, the value of its end.
        } else if (function_event f; decode_function(e, f)) {
            args.assign(1, {"parent", sv.syms.name(f.parent_ip, e.ts)});
            seq.event(e.ts, TYPE_INSTANT, sv.syms.name(f.ip, e.ts), "", args);
        } else if (!o.no_events) {
            const uint16_t type = event_type(e);
            const std::string text = event_text(sv, e);
            std::string place;
            args.clear();
            if (is_ftrace_type(type)) {
                args.emplace_back("text", text);
            } else {
                split_probe_text(text, place, args);
                args.insert(args.begin(), {"place", place});
            }
            std::string name = event_name(sv, e);
            if (name.empty()) name = "type " + std::to_string(type);
            auto dit = sv.events.find(type);
            seq.event(e.ts, TYPE_INSTANT, name,
                      dit == sv.events.end() ? "event" : dit->second.group, args);
        }
    }
    if (const int sig = killed_by(*sv.s); sig && (!st.empty() || t.tid == sv.s->pid()))
        seq.event(last_ts, TYPE_INSTANT,
                  "killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")",
                  "process");
    while (!st.empty()) {
        seq.event(last_ts, TYPE_SLICE_END, "", "");
        st.pop_back();
    }
    seq.flush();
    if (!cur.error().empty()) rc.errors.push_back(cur.error());
}

} // namespace

report_counts format_perfetto(const model &m, const report_opts &o, std::FILE *out)
{
    report_counts rc;
    writer w(out);
    // The tracks first: each process, then its threads.
    std::set<size_t> procs;
    std::set<std::pair<size_t, int32_t>> threads;
    proto_msg pk, td, desc;
    for (size_t si : m.stream_order) {
        const tracefile::thread_stream &t = m.reader.streams[si];
        if (!o.wants(t.tid)) continue;
        const session_view &sv = *m.sessions[t.session];
        const int pid = sv.s->pid();
        if (procs.insert(t.session).second) {
            desc.clear();
            desc.varint(PROCESS_PID, static_cast<uint64_t>(pid));
            desc.bytes(PROCESS_NAME, sv.s->get("comm", "?"));
            td.clear();
            td.varint(TRACK_UUID, process_uuid(t.session));
            td.message(TRACK_PROCESS, desc);
            pk.clear();
            pk.message(PACKET_TRACK_DESCRIPTOR, td);
            w.packet(pk);
        }
        if (!threads.insert({t.session, t.tid}).second) continue;
        desc.clear();
        desc.varint(THREAD_PID, static_cast<uint64_t>(pid));
        desc.varint(THREAD_TID, static_cast<uint64_t>(t.tid));
        desc.bytes(THREAD_NAME, sv.comm_of(t.tid));
        td.clear();
        td.varint(TRACK_UUID, thread_uuid(t.session, t.tid));
        td.varint(TRACK_PARENT_UUID, process_uuid(t.session));
        td.message(TRACK_THREAD, desc);
        pk.clear();
        pk.message(PACKET_TRACK_DESCRIPTOR, td);
        w.packet(pk);
    }
    for (size_t si : m.stream_order)
        if (o.wants(m.reader.streams[si].tid)) thread_events(m, si, o, w, rc);
    return rc;
}

} // namespace dprobe::report
