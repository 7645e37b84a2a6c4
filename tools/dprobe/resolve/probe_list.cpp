#include "tools/dprobe/resolve/probe_list.h"

#include "core/glob.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace dprobe::tools
{

std::optional<stored_probe> stored_probe_from_line(const std::string &line)
{
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string::npos || line[b] == '#') return std::nullopt;
    size_t e = line.find_first_of(" \t", b);
    std::string head = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
    auto colon = head.find(':');
    if (colon == std::string::npos || head[0] == '-') return std::nullopt;
    std::string name = head.substr(colon + 1);
    auto slash = name.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) return std::nullopt;
    stored_probe p;
    p.line = line.substr(b);
    while (!p.line.empty() && (p.line.back() == '\n' || p.line.back() == ' '))
        p.line.pop_back();
    p.group = name.substr(0, slash);
    p.event = name.substr(slash + 1);
    return p;
}

std::vector<stored_probe> load_probe_list(const std::string &path, std::string *err)
{
    std::vector<stored_probe> out;
    std::ifstream in(path);
    if (!in) {
        if (errno != ENOENT && err) *err = path + ": " + std::strerror(errno);
        return out;
    }
    std::string line;
    while (std::getline(in, line))
        if (auto p = stored_probe_from_line(line)) out.push_back(std::move(*p));
    return out;
}

static bool make_dirs(const std::string &dir)
{
    if (dir.empty()) return true;
    struct stat st {
    };
    if (stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
    auto slash = dir.rfind('/');
    if (slash != std::string::npos && slash > 0 && !make_dirs(dir.substr(0, slash))) return false;
    return mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST;
}

bool save_probe_list(const std::string &path, const std::vector<stored_probe> &list,
                     std::string *err)
{
    auto slash = path.rfind('/');
    if (slash != std::string::npos && !make_dirs(path.substr(0, slash))) {
        *err = path.substr(0, slash) + ": cannot create directory: " + std::strerror(errno);
        return false;
    }
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        if (!out) {
            *err = tmp + ": " + std::strerror(errno);
            return false;
        }
        out << "# dprobe probe definitions (dynamic_events lines), used by dprobe record -e\n";
        for (const auto &p : list)
            out << p.line << "\n";
        if (!out.flush()) {
            *err = tmp + ": write failed";
            std::remove(tmp.c_str());
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        *err = path + ": " + std::strerror(errno);
        std::remove(tmp.c_str());
        return false;
    }
    return true;
}

bool probe_selected(const std::string &selector, const stored_probe &p)
{
    auto sep = selector.find_first_of(":/");
    if (sep == std::string::npos) return glob_match(selector, p.event);
    return glob_match(selector.substr(0, sep), p.group) &&
           glob_match(selector.substr(sep + 1), p.event);
}

} // namespace dprobe::tools
