// trace.dat (version 6) output of dprobe report (see trace_dat.h).
#include "tools/dprobe/report/trace_dat.h"

#include "core/symbols.h"
#include "tools/dprobe/report/report_model.h"
#include "tracefs/ftrace_entries.h"
#include "tracefs/raw_page.h"

#include <algorithm>
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
    std::map<std::pair<std::string, std::string>, std::string> seen;
    for (const auto &sv : m.sessions)
        for (const auto &[id, ev] : sv->s->events) {
            // The function graph's compact records go out as the kernel's (see below).
            if (id == tracefile::FUNCGRAPH_ENTRY_ID || id == tracefile::FUNCGRAPH_EXIT_ID ||
                id == tracefile::FUNCTION_ID)
                continue;
            std::string name = ev.name, system = "ftrace";
            if (size_t slash = name.find('/'); slash != std::string::npos) {
                system = name.substr(0, slash);
                name = name.substr(slash + 1);
            }
            if (!ev.format.empty()) seen.emplace(std::make_pair(system, name), ev.format);
        }
    for (const char *n : {"function", "funcgraph_entry", "funcgraph_exit"})
        seen[{"ftrace", n}] = ftrace_event_format(n);
    std::vector<fmt> v;
    for (auto &[k, text] : seen)
        v.push_back(fmt{k.first, k.second, text});
    return v;
}

// /proc/kallsyms lines for the functions of every recorded object: "addr t name [lib]".
std::string kallsyms(const model &m)
{
    std::map<uintptr_t, std::string> lines;
    std::set<std::pair<std::string, uint64_t>> done;
    for (const auto &sv : m.sessions)
        for (size_t i = 0; i < sv->s->objects.size(); i++) {
            const tracefile::object_info &o = sv->s->objects[i];
            if (o.path.empty() || !done.insert({o.path, o.load_bias}).second) continue;
            auto obj = read_object_file(o.path, o.load_bias);
            if (!obj) continue;
            const bool main = i == 0; // a session's first object is its program
            for (const ksym &f : obj->funcs) {
                char buf[64];
                std::snprintf(buf, sizeof buf, "%016" PRIxPTR " %c ", f.addr,
                              f.bind == 0 /* STB_LOCAL */ ? 't' : 'T');
                std::string line = buf + f.name;
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
    // function graph's compact records become the kernel's funcgraph_entry / funcgraph_exit
    // records, with the common header (the pid) and the exit's call time, which trace-cmd's
    // graph output needs; the call time comes from the entry, as `dprobe report` finds it.
    std::map<unsigned, kpage_writer> cpus;
    unsigned max_cpu = 0;
    for (const auto &sv : m.sessions)
        max_cpu = std::max<unsigned>(
            max_cpu, unsigned(std::max(1, std::atoi(sv->s->get("nr_cpus", "1").c_str()))) - 1);
    std::map<std::pair<size_t, int32_t>, call_stack> stacks; // (session, tid)
    tracefile::trace_reader::merged mg(m.reader);
    tracefile::event e;
    size_t stream;
    while (mg.next(e, stream)) {
        if (!o.wants(e.tid)) continue;
        kpage_writer &w = cpus[e.cpu];
        max_cpu = std::max<unsigned>(max_cpu, e.cpu);
        graph_event g;
        function_event f;
        if (decode_function(e, f)) {
            ftrace_entry r{};
            r.ent = trace_entry_header{TRACE_FN, 0, 0, e.tid};
            r.ip = f.ip;
            r.parent_ip = f.parent_ip;
            w.add(e.ts, &r, sizeof r, e.lost_before);
            continue;
        }
        if (!decode_graph(e, g)) {
            w.add(e.ts, e.payload, e.len, e.lost_before);
            continue;
        }
        call_stack &cs = stacks[{m.reader.streams[stream].session, e.tid}];
        if (g.entry) {
            cs.entry(g, e.ts);
            ftrace_graph_ent_entry r{};
            r.ent = trace_entry_header{TRACE_GRAPH_ENT, 0, 0, e.tid};
            r.func = g.func;
            r.depth = g.depth;
            w.add(e.ts, &r, sizeof r, e.lost_before);
            continue;
        }
        uint64_t calltime = e.ts;
        cs.exit(g, &calltime);
        ftrace_graph_ret_entry r{};
        r.ent = trace_entry_header{TRACE_GRAPH_RET, 0, 0, e.tid};
        r.func = g.func;
        r.depth = g.depth;
        r.calltime = calltime;
        r.rettime = e.ts;
        w.add(e.ts, &r, sizeof r, e.lost_before);
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
    std::string ks = kallsyms(m);
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
