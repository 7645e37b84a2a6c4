// trace.dat (version 6) output of dprobe report (see trace_dat.h).
#include "tools/dprobe/report/trace_dat.h"

#include "core/symbols.h"
#include "tools/dprobe/report/report_model.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/raw_page.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

namespace dprobe::report
{
namespace
{

// trace-cmd's option ids (trace-cmd-local.h, enum tracecmd_file_options).
constexpr uint16_t TRACECMD_OPTION_DONE = 0;
constexpr uint16_t TRACECMD_OPTION_TRACECLOCK = 4;

template <class T> void put(std::string &s, T v)
{
    s.append(reinterpret_cast<const char *>(&v), sizeof v);
}

// One event format for the file, and where it goes.
struct fmt {
    std::string system, name, text;
};

std::vector<fmt> formats(const model &m)
{
    // ftrace's own records, in their full form (the compact ones are written so, below): all
    // of them, whatever wrote them (the agent's graph, a tracer, a trigger's stack trace,
    // trace_marker).
    std::vector<fmt> v;
    for (const std::string &n : ftrace_event_names())
        v.push_back(fmt{"ftrace", n, ftrace_event_format(n)});
    // Every event by its id: an event deleted and created again under its name (with other
    // arguments) has a format of its own, and its records are read by the id they carry.
    std::set<uint32_t> ids;
    for (const auto &sv : m.sessions)
        for (const auto &[id, ev] : sv->s->events) {
            if (is_ftrace_type(uint16_t(id)) || ev.format.empty()) continue;
            if (!ids.insert(id).second) continue; // another session's, at the same id
            std::string name = ev.name, system = "ftrace";
            if (size_t slash = name.find('/'); slash != std::string::npos) {
                system = name.substr(0, slash);
                name = name.substr(slash + 1);
            }
            v.push_back(fmt{system, name, ev.format});
        }
    return v;
}

// A name as a kallsyms line holds it: one word (libtraceevent reads the name up to the first
// white space), so the spaces of a demangled C++ name ("(anonymous namespace)::f",
// "operator new") are left out where they separate nothing and made '_' elsewhere.
std::string kallsyms_name(std::string name)
{
    std::string out;
    out.reserve(name.size());
    for (size_t i = 0; i < name.size(); i++) {
        if (name[i] != ' ') {
            out += name[i];
            continue;
        }
        auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
        if (!out.empty() && i + 1 < name.size() && word(out.back()) && word(name[i + 1]))
            out += '_';
    }
    return out;
}

// /proc/kallsyms lines for the functions of every recorded object: "addr t name [lib]", C++
// names shown as `dprobe report` shows them (--demangle).
std::string kallsyms(const model &m, demangle_mode demangle_as)
{
    std::map<uintptr_t, std::string> lines;
    std::set<std::pair<std::string, uint64_t>> done;
    for (const auto &sv : m.sessions)
        for (size_t i = 0; i < sv->s->objects.size(); i++) {
            const tracefile::object_info &o = sv->s->objects[i];
            if (o.path.empty() || !done.insert({o.path, o.load_bias}).second) continue;
            // Names from debug files too, as `dprobe report` names them.
            auto obj = read_object_file(o.path, o.load_bias, nullptr, true);
            if (!obj) continue;
            const bool main = i == 0; // a session's first object is its program
            for (const ksym &f : obj->funcs) {
                char buf[64];
                std::snprintf(buf, sizeof buf, "%016" PRIxPTR " %c ", f.addr,
                              f.bind == 0 /* STB_LOCAL */ ? 't' : 'T');
                std::string line = buf + kallsyms_name(demangle(f.name, demangle_as));
                if (!main) line += " [" + obj->name + "]";
                lines.emplace(f.addr, line + "\n");
            }
        }
    std::string s;
    for (auto &[a, l] : lines)
        s += l;
    return s;
}

std::string cmdlines(const model &m)
{
    std::map<int32_t, std::string> names;
    for (const auto &st : m.reader.streams)
        if (!st.comm.empty()) names[st.tid] = st.comm;
    std::string s;
    for (auto &[tid, comm] : names)
        s += std::to_string(tid) + " " + comm + "\n";
    return s;
}

std::string clock_option(const model &m)
{
    std::string clock = "local";
    if (!m.sessions.empty()) clock = m.sessions.front()->s->get("clock", "local");
    // The trace_clock file's text, the current clock in brackets.
    std::string s;
    for (const char *c :
         {"local", "global", "counter", "perf", "mono", "mono_raw", "boot", "tai", "x86-tsc"}) {
        if (!s.empty()) s += ' ';
        s += clock == c ? "[" + std::string(c) + "]" : std::string(c);
    }
    return s + "\n";
}

} // namespace

std::string write_trace_dat(const model &m, const report_opts &o, const std::string &path)
{
    // Per CPU, the records written on it, in time order (every thread's merged). The
    // agent's compact graph and function records become the kernel's function,
    // funcgraph_entry and funcgraph_exit records, with the common header (the pid) and the
    // exit's call time, which trace-cmd's graph output needs (its entry's time).
    std::map<unsigned, kpage_writer> cpus;
    unsigned max_cpu = 0;
    for (const auto &sv : m.sessions)
        max_cpu = std::max<unsigned>(
            max_cpu, unsigned(std::max(1, std::atoi(sv->s->get("nr_cpus", "1").c_str()))) - 1);
    // The compact records' open calls, per session (thread ids are per process).
    std::map<size_t, ftrace_compact_expander> compact;
    tracefile::trace_reader::merged mg(m.reader);
    tracefile::event e;
    size_t stream;
    while (mg.next(e, stream)) {
        if (!o.wants(e.tid)) continue;
        kpage_writer &w = cpus[e.cpu];
        max_cpu = std::max<unsigned>(max_cpu, e.cpu);
        ftrace_full_record full;
        if (size_t n = compact[m.reader.streams[stream].session].expand(e.payload, e.len, e.tid,
                                                                        e.ts, full))
            w.add(e.ts, &full, n, e.lost_before);
        else
            w.add(e.ts, e.payload, ftrace_raw_data_len(e.payload, e.len), e.lost_before);
    }
    for (auto &[cpu, w] : cpus)
        w.flush();
    const unsigned ncpus = max_cpu + 1;

    std::string h;
    h += "\x17\x08\x44tracing";
    h += "6";
    h += '\0';
    h += '\0';                                // little endian
    h += char(8);                             // long size
    put<uint32_t>(h, uint32_t(RB_PAGE_SIZE)); // page size

    auto section8 = [&h](const char *tag, const std::string &data) {
        h.append(tag, std::strlen(tag) + 1);
        put<uint64_t>(h, data.size());
        h += data;
    };
    section8("header_page", ring_buffer_header_page());
    section8("header_event", ring_buffer_header_event());

    std::vector<fmt> fm = formats(m);
    std::vector<const fmt *> ftrace;
    std::map<std::string, std::vector<const fmt *>> systems;
    for (const fmt &f : fm) {
        if (f.system == "ftrace")
            ftrace.push_back(&f);
        else
            systems[f.system].push_back(&f);
    }
    put<uint32_t>(h, uint32_t(ftrace.size()));
    for (const fmt *f : ftrace) {
        put<uint64_t>(h, f->text.size());
        h += f->text;
    }
    put<uint32_t>(h, uint32_t(systems.size()));
    for (auto &[sys, list] : systems) {
        h.append(sys.c_str(), sys.size() + 1);
        put<uint32_t>(h, uint32_t(list.size()));
        for (const fmt *f : list) {
            put<uint64_t>(h, f->text.size());
            h += f->text;
        }
    }
    std::string ks = kallsyms(m, o.demangle);
    put<uint32_t>(h, uint32_t(ks.size()));
    h += ks;
    put<uint32_t>(h, 0); // no trace_printk formats: dprobe's print records carry their text
    std::string cl = cmdlines(m);
    put<uint64_t>(h, cl.size());
    h += cl;

    put<uint32_t>(h, ncpus);
    h.append("options  ", 10);
    std::string clk = clock_option(m);
    put<uint16_t>(h, TRACECMD_OPTION_TRACECLOCK);
    put<uint32_t>(h, uint32_t(clk.size()));
    h += clk;
    put<uint16_t>(h, TRACECMD_OPTION_DONE);
    h.append("flyrecord", 10);

    // The CPU offsets follow; the data starts at the next page boundary.
    const size_t table = h.size();
    h.append(size_t(ncpus) * 16, '\0');
    uint64_t off = (h.size() + RB_PAGE_SIZE - 1) & ~uint64_t(RB_PAGE_SIZE - 1);
    std::vector<std::pair<uint64_t, uint64_t>> where(ncpus, {0, 0});
    for (unsigned c = 0; c < ncpus; c++) {
        auto it = cpus.find(c);
        uint64_t size = it == cpus.end() ? 0 : it->second.pages.size() * RB_PAGE_SIZE;
        where[c] = {size ? off : 0, size};
        off += size;
    }
    for (unsigned c = 0; c < ncpus; c++) {
        std::memcpy(&h[table + c * 16], &where[c].first, 8);
        std::memcpy(&h[table + c * 16 + 8], &where[c].second, 8);
    }

    std::ofstream f(path, std::ios::trunc | std::ios::binary);
    if (!f) return "cannot write " + path;
    f.write(h.data(), std::streamsize(h.size()));
    uint64_t at = h.size();
    for (unsigned c = 0; c < ncpus; c++) {
        auto it = cpus.find(c);
        if (it == cpus.end() || it->second.pages.empty()) continue;
        std::string pad(size_t(where[c].first - at), '\0');
        f.write(pad.data(), std::streamsize(pad.size()));
        for (const std::string &pg : it->second.pages)
            f.write(pg.data(), std::streamsize(pg.size()));
        at = where[c].first + where[c].second;
    }
    f.flush();
    if (!f) return "cannot write " + path;
    return "";
}

} // namespace dprobe::report
