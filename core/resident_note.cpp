// The note of a process's resident pages, taken from outside before dprobe touches it (see
// resident_pages.h). Offline: the CLI takes it, from /proc/PID/maps and /proc/PID/pagemap
// (bit 63 of an entry: the page is present).
#include "core/proc_maps.h"
#include "core/resident_pages.h"

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace dprobe
{

std::string resident_pages_note(pid_t pid)
{
    const int fd =
        open(("/proc/" + std::to_string(pid) + "/pagemap").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    const uint64_t pg = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    std::string out;
    std::vector<uint64_t> pm;
    for (const proc_map &m : read_proc_maps(pid)) {
        if (m.writable() || !m.readable() || m.path.empty() || m.path[0] != '/' || !m.inode)
            continue;
        pm.assign((m.end - m.start) / pg, 0);
        const ssize_t want = static_cast<ssize_t>(pm.size() * sizeof(uint64_t));
        if (pread(fd, pm.data(), pm.size() * sizeof(uint64_t),
                  static_cast<off_t>(m.start / pg * sizeof(uint64_t))) != want)
            continue;
        char head[96];
        std::snprintf(head, sizeof head, "%" PRIx64 " %" PRIx64 " %" PRIu64 " %" PRIx64 " ",
                      m.start, m.end, m.inode, m.offset);
        out += head;
        // Four pages a hex digit, the first page in the lowest bit of the first digit.
        for (size_t i = 0; i < pm.size(); i += 4) {
            unsigned d = 0;
            for (size_t b = 0; b < 4 && i + b < pm.size(); b++)
                d |= (pm[i + b] >> 63) << b;
            out += "0123456789abcdef"[d];
        }
        out += '\n';
    }
    close(fd);
    return out;
}

} // namespace dprobe
