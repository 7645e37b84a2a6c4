// One parser of /proc/PID/maps (core/proc_maps.h).
#include "core/proc_maps.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace dprobe
{

namespace
{

// The whole file, read in one go: the kernel builds each read from the current mappings,
// and one large buffer keeps the view as consistent as the kernel allows.
bool read_text(const char *path, std::string &text, int *err)
{
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (err) *err = errno;
        return false;
    }
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0)
        text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return true;
}

std::string real_path(const std::string &path)
{
    char *real = realpath(path.c_str(), nullptr);
    std::string out = real ? real : path;
    std::free(real);
    return out;
}

} // namespace

std::vector<proc_map> read_proc_maps(pid_t pid, int *err)
{
    std::vector<proc_map> out;
    char path[64];
    if (pid)
        std::snprintf(path, sizeof path, "/proc/%d/maps", static_cast<int>(pid));
    else
        std::snprintf(path, sizeof path, "/proc/self/maps");
    std::string text;
    if (!read_text(path, text, err)) return out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        const std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        unsigned long long start, end, off, inode;
        unsigned maj, min;
        char perms[8] = {};
        int name_at = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms, &off,
                        &maj, &min, &inode, &name_at) < 7)
            continue;
        proc_map m;
        m.start = start;
        m.end = end;
        m.offset = off;
        m.perms = perms;
        m.inode = inode;
        if (name_at > 0 && static_cast<size_t>(name_at) < line.size())
            m.path = line.substr(static_cast<size_t>(name_at));
        out.push_back(std::move(m));
    }
    if (out.empty() && err) *err = ESRCH;
    return out;
}

std::optional<uintptr_t> file_offset_to_addr(const std::string &path, uint64_t file_offset)
{
    const std::string want = real_path(path);
    for (const proc_map &m : read_proc_maps())
        if (m.path == want && file_offset >= m.offset && file_offset < m.offset + (m.end - m.start))
            return m.start + (file_offset - m.offset);
    return std::nullopt;
}

bool file_mapped(const std::string &path)
{
    const std::string want = real_path(path);
    for (const proc_map &m : read_proc_maps())
        if (m.path == want) return true;
    return false;
}

} // namespace dprobe
