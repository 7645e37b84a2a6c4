// The pprof writer (see report_pprof.h). Field numbers: proto/profile.proto.
#include "tools/dprobe/report/report_pprof.h"

#include "tools/dprobe/report/call_tree.h"
#include "tools/dprobe/report/proto_writer.h"
#include "tracefs/dwarf/debuginfo.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <zlib.h>

namespace dprobe::report
{

namespace
{

// profile.proto's field numbers.
enum : uint32_t {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
    PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10,
    PROFILE_COMMENT = 13,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUE_TYPE_TYPE = 1,
    VALUE_TYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1,
    SAMPLE_VALUE = 2,
    LOCATION_ID = 1,
    LOCATION_ADDRESS = 3,
    LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1,
    LINE_LINE = 2,
    FUNCTION_ID = 1,
    FUNCTION_NAME = 2,
    FUNCTION_SYSTEM_NAME = 3,
    FUNCTION_FILENAME = 4,
    FUNCTION_START_LINE = 5,
};

class string_table
{
  public:
    string_table() { (*this)(""); }
    uint64_t operator()(const std::string &s)
    {
        auto [it, fresh] = index_.try_emplace(s, strings_.size());
        if (fresh) strings_.push_back(s);
        return it->second;
    }
    const std::vector<std::string> &strings() const { return strings_; }

  private:
    std::unordered_map<std::string, uint64_t> index_;
    std::vector<std::string> strings_;
};

// A function's source file and first line, from the DWARF of the file it was loaded from.
struct source_place {
    std::string file, symbol;
    int line = 0;
};

class dwarf_places
{
  public:
    source_place find(const session_view &sv, const tree_function &f)
    {
        source_place p;
        offline_symbols::origin o;
        if (!f.addr || !sv.syms.where(f.addr, UINT64_MAX, &o)) return p;
        p.symbol = o.symbol;
        auto it = files_.find(o.path);
        if (it == files_.end()) {
            std::string err;
            it = files_.emplace(o.path, std::shared_ptr<debuginfo>(debuginfo::open(o.path, &err)))
                     .first;
        }
        if (!it->second) return p;
        auto fn = it->second->function_at(o.start - o.load_bias);
        if (!fn || !fn->decl_file) return p;
        p.file = it->second->source_path(&fn->cu, fn->decl_file);
        p.line = fn->decl_line;
        return p;
    }

  private:
    std::map<std::string, std::shared_ptr<debuginfo>> files_; // null: no DWARF
};

bool write_gzip(const std::string &path, const std::string &data, std::string *err)
{
    gzFile f = gzopen(path.c_str(), "wb6");
    if (!f) {
        *err = "cannot write " + path + ": " + std::strerror(errno ? errno : ENOMEM);
        return false;
    }
    size_t off = 0;
    while (off < data.size()) {
        const unsigned n = static_cast<unsigned>(std::min<size_t>(data.size() - off, 1u << 30));
        if (gzwrite(f, data.data() + off, n) != static_cast<int>(n)) {
            int e;
            *err = "cannot write " + path + ": " + gzerror(f, &e);
            gzclose(f);
            return false;
        }
        off += n;
    }
    if (gzclose(f) != Z_OK) {
        *err = "cannot write " + path;
        return false;
    }
    return true;
}

} // namespace

std::string write_pprof(const model &m, const report_opts &o, const std::string &path,
                        report_counts &rc)
{
    call_tree t;
    rc = t.build(m, o, o.per_thread);
    string_table str;
    proto_msg prof, sub;
    auto value_type = [&](const char *type, const char *unit) {
        sub.clear();
        sub.varint(VALUE_TYPE_TYPE, str(type));
        sub.varint(VALUE_TYPE_UNIT, str(unit));
        prof.message(PROFILE_SAMPLE_TYPE, sub);
    };
    value_type("calls", "count");
    value_type("time", "nanoseconds");

    // Samples: one per call path, its stack leaf first (location ids are function index + 1).
    std::vector<uint64_t> stack, values(2);
    for (uint32_t n = 1; n < t.nodes.size(); n++) {
        const call_node &c = t.nodes[n];
        if (!c.calls && !c.self_ns) continue;
        stack.clear();
        for (uint32_t i = n; i != 0; i = t.nodes[i].parent)
            stack.push_back(t.nodes[i].func + 1);
        values[0] = c.calls;
        values[1] = c.self_ns;
        sub.clear();
        sub.packed(SAMPLE_LOCATION_ID, stack);
        sub.packed(SAMPLE_VALUE, values);
        prof.message(PROFILE_SAMPLE, sub);
    }

    // A location and a function for each function, with its source place.
    dwarf_places places;
    proto_msg line;
    for (uint32_t i = 0; i < t.functions.size(); i++) {
        const tree_function &f = t.functions[i];
        const source_place p = places.find(*m.sessions[f.session], f);
        line.clear();
        line.varint(LINE_FUNCTION_ID, i + 1);
        if (p.line) line.varint(LINE_LINE, static_cast<uint64_t>(p.line));
        sub.clear();
        sub.varint(LOCATION_ID, i + 1);
        if (f.addr) sub.varint(LOCATION_ADDRESS, f.addr);
        sub.message(LOCATION_LINE, line);
        prof.message(PROFILE_LOCATION, sub);
        sub.clear();
        sub.varint(FUNCTION_ID, i + 1);
        sub.varint(FUNCTION_NAME, str(f.name));
        sub.varint(FUNCTION_SYSTEM_NAME, str(p.symbol.empty() ? f.name : p.symbol));
        if (!p.file.empty()) sub.varint(FUNCTION_FILENAME, str(p.file));
        if (p.line) sub.varint(FUNCTION_START_LINE, static_cast<uint64_t>(p.line));
        prof.message(PROFILE_FUNCTION, sub);
    }
    uint64_t start = 0;
    for (const auto &sv : m.sessions)
        if (uint64_t s = std::strtoull(sv->s->get("start_realtime_ns", "0").c_str(), nullptr, 10);
            s && (!start || s < start))
            start = s;
    if (start) prof.varint(PROFILE_TIME_NANOS, start);
    prof.varint(PROFILE_DURATION_NANOS, t.total_ns());
    prof.varint(PROFILE_COMMENT, str("dprobe report --format pprof: every call of the recorded "
                                     "function graph; time is each call path's self time"));
    prof.varint(PROFILE_DEFAULT_SAMPLE_TYPE,
                str(o.weight == report_opts::weight_kind::calls ? "calls" : "time"));
    // The string table last: every string is in it by now.
    for (const std::string &s : str.strings())
        prof.bytes(PROFILE_STRING_TABLE, s);
    std::string err;
    if (!write_gzip(path, prof.str(), &err)) return err;
    return "";
}

} // namespace dprobe::report
