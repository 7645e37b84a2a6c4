// SDT notes to dynamic_events lines (see sdt_notes.h).
#include "tools/dprobe/resolve/sdt_notes.h"

#include "core/glob.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace dprobe::tools
{

std::string sdt_probe_line(const sdt_probe &p, const std::string &path,
                           const std::vector<std::string> &extra, std::vector<std::string> &notes)
{
    char *real = ::realpath(path.c_str(), nullptr);
    std::string file = real ? real : path;
    std::free(real);
    char place[64];
    std::snprintf(place, sizeof place, ":0x%016" PRIx64, p.pc_offset); // as listed
    std::string line = "p:sdt_" + p.provider + "/" + p.name + " " + file + place;
    if (p.semaphore) {
        std::snprintf(place, sizeof place, "(0x%" PRIx64 ")", p.sem_offset);
        line += place;
    }
    for (size_t i = 0; i < p.args.size(); i++) {
        std::string why;
        std::string a = sdt_arg_fetch(p.args[i], static_cast<int>(i + 1), p, file, &why);
        if (a.empty())
            notes.push_back(p.full_name() + ": left out arg" + std::to_string(i + 1) + " (" +
                            p.args[i] + "): " + why);
        else
            line += " " + a;
    }
    for (const std::string &x : extra)
        line += " " + x;
    return line;
}

bool is_sdt_spec(const std::string &spec)
{
    size_t colon = spec.find(':');
    return spec.starts_with("sdt_") && colon != std::string::npos && colon > 4 &&
           colon + 1 < spec.size() && spec.find_first_of(" \t/") == std::string::npos;
}

bool sdt_spec_matches(const std::string &spec, const sdt_probe &p)
{
    size_t colon = spec.find(':');
    return glob_match(spec.substr(4, colon - 4), p.provider) &&
           glob_match(spec.substr(colon + 1), p.name);
}

namespace
{

// "arg1:s32 arg2:u64": what decides whether two sites can be one event.
std::string arg_signature(const std::string &line)
{
    std::string sig;
    size_t pos = line.find(' ', line.find(' ') + 1);
    while (pos != std::string::npos) {
        size_t next = line.find(' ', pos + 1);
        std::string a = line.substr(pos + 1, next == std::string::npos ? next : next - pos - 1);
        size_t colon = a.rfind(':');
        sig += a.substr(0, a.find('=')) + (colon == std::string::npos ? "" : a.substr(colon)) + " ";
        pos = next;
    }
    return sig;
}

} // namespace

bool sdt_lines(const std::vector<std::string> &spec, const std::vector<std::string> &objects,
               std::vector<std::string> &lines, std::vector<std::string> &notes, std::string *err)
{
    std::vector<std::string> extra(spec.begin() + 1, spec.end());
    // Per event name: the signatures used so far and the names they got.
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> events;
    size_t found = 0;
    for (const std::string &obj : objects) {
        std::vector<sdt_probe> probes;
        std::string e;
        if (!read_sdt_probes(obj, probes, &e)) continue;
        for (sdt_probe &p : probes) {
            if (!sdt_spec_matches(spec.front(), p)) continue;
            std::string line = sdt_probe_line(p, obj, extra, notes);
            std::string sig = arg_signature(line);
            auto &used = events[p.full_name()];
            std::string name;
            for (const auto &[s, n] : used)
                if (s == sig) name = n;
            if (name.empty()) {
                name = used.empty() ? p.name : p.name + "_" + std::to_string(used.size());
                used.emplace_back(sig, name);
            }
            if (name != p.name) line.replace(line.find('/') + 1, p.name.size(), name);
            lines.push_back(line);
            found++;
        }
    }
    if (found) return true;
    std::string where;
    for (const std::string &o : objects)
        where += (where.empty() ? "" : ", ") + o;
    *err = "no SDT probe matches '" + spec.front() + "' in " + where;
    return false;
}

} // namespace dprobe::tools
