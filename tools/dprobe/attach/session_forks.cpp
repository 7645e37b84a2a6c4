// The sessions forked from an attach session (see session_forks.h).
#include "tools/dprobe/attach/session_forks.h"

#include "tools/dprobe/attach/agent_link.h"

#include <algorithm>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace dprobe::tools
{

namespace
{

// Whether PID has a descriptor open on the file (DEV, INO).
bool holds_file(pid_t pid, dev_t dev, ino_t ino)
{
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    DIR *d = opendir(dir.c_str());
    if (!d) return false;
    bool found = false;
    while (dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        struct stat st {
        };
        if (stat((dir + "/" + e->d_name).c_str(), &st) == 0 && st.st_dev == dev &&
            st.st_ino == ino) {
            found = true;
            break;
        }
    }
    closedir(d);
    return found;
}

} // namespace

std::vector<pid_t> session_forks(const std::string &trace_path, pid_t except)
{
    std::vector<pid_t> out;
    struct stat file {
    };
    if (trace_path.empty() || stat(trace_path.c_str(), &file) != 0) return out;
    DIR *d = opendir("/proc");
    if (!d) return out;
    while (dirent *e = readdir(d)) {
        char *end = nullptr;
        const long v = std::strtol(e->d_name, &end, 10);
        if (v <= 0 || *end) continue;
        const pid_t pid = static_cast<pid_t>(v);
        if (pid == except || pid == getpid()) continue;
        // The descriptor first: reading every process's maps costs more.
        if (holds_file(pid, file.st_dev, file.st_ino) && !mapped_agent(pid).empty())
            out.push_back(pid);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace dprobe::tools
