// Resident pages after a session (see resident_pages.h), against the note the command took
// before it. Page states come from /proc/self/pagemap: bit 63 present, bit 61 a file page
// (or shared anonymous); a present page of a private file mapping without bit 61 is a
// private copy (written once: patched, or relocated by the loader).
#include "core/resident_pages.h"

#include "core/proc_maps.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace dprobe
{
namespace
{

constexpr uint64_t k_present = uint64_t{1} << 63;
constexpr uint64_t k_file = uint64_t{1} << 61;

struct noted {
    uint64_t start, end, inode, offset;
    std::vector<bool> present;
};

std::mutex g_lock;
std::vector<noted> &snapshot()
{
    static auto *v = new std::vector<noted>; // freed with the runtime's memory
    return *v;
}

size_t page_size()
{
    return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// The file mappings that cannot be written, but dprobe's own object's.
std::vector<proc_map> candidates()
{
    Dl_info self{};
    dladdr(reinterpret_cast<void *>(&candidates), &self);
    std::vector<proc_map> out;
    for (proc_map &m : read_proc_maps()) {
        if (m.writable() || !m.readable() || m.path.empty() || m.path[0] != '/' || !m.inode)
            continue;
        if (self.dli_fname && m.path == self.dli_fname) continue;
        if (m.path.ends_with(" (deleted)")) continue;
        out.push_back(std::move(m));
    }
    return out;
}

// The pagemap entries of [START, END).
bool pagemap(int fd, uint64_t start, uint64_t end, std::vector<uint64_t> &out)
{
    const size_t pg = page_size();
    out.assign((end - start) / pg, 0);
    const ssize_t want = static_cast<ssize_t>(out.size() * sizeof(uint64_t));
    return pread(fd, out.data(), out.size() * sizeof(uint64_t),
                 static_cast<off_t>(start / pg * sizeof(uint64_t))) == want;
}

// Whether the page at ADDR holds the bytes of the file at OFF.
bool same_as_file(int file, uint64_t addr, uint64_t off, std::vector<char> &buf)
{
    buf.resize(page_size());
    const ssize_t n = pread(file, buf.data(), buf.size(), static_cast<off_t>(off));
    if (n <= 0) return false;
    // Past the end of the file the page reads as zeros.
    std::memset(buf.data() + n, 0, buf.size() - static_cast<size_t>(n));
    return std::memcmp(buf.data(), reinterpret_cast<const void *>(addr), buf.size()) == 0;
}

} // namespace

void resident_pages_adopt(const std::string &note)
{
    std::lock_guard<std::mutex> g(g_lock);
    std::vector<noted> &snap = snapshot();
    snap.clear();
    size_t pos = 0;
    while (pos < note.size()) {
        size_t nl = note.find('\n', pos);
        const std::string line = note.substr(pos, nl == std::string::npos ? nl : nl - pos);
        pos = nl == std::string::npos ? note.size() : nl + 1;
        unsigned long long start, end, inode, offset;
        int used = 0;
        if (std::sscanf(line.c_str(), "%llx %llx %llu %llx %n", &start, &end, &inode, &offset,
                        &used) != 4 ||
            end <= start)
            continue;
        noted n{start, end, inode, offset, std::vector<bool>((end - start) / page_size())};
        for (size_t i = 0; i < n.present.size(); i++) {
            const size_t d = static_cast<size_t>(used) + i / 4;
            if (d >= line.size()) break;
            const char c = line[d];
            const unsigned v =
                c >= 'a' ? static_cast<unsigned>(c - 'a' + 10) : static_cast<unsigned>(c - '0');
            n.present[i] = (v >> (i % 4)) & 1;
        }
        snap.push_back(std::move(n));
    }
}

size_t resident_pages_restore()
{
    std::lock_guard<std::mutex> g(g_lock);
    const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const size_t pg = page_size();
    size_t dropped = 0;
    std::vector<uint64_t> pm;
    std::vector<char> buf;
    for (const proc_map &m : candidates()) {
        const noted *before = nullptr;
        for (const noted &n : snapshot())
            if (n.start == m.start && n.end == m.end && n.inode == m.inode && n.offset == m.offset)
                before = &n;
        if (!before || !pagemap(fd, m.start, m.end, pm)) continue;
        int file = -1;
        for (size_t i = 0; i < pm.size(); i++) {
            if (!(pm[i] & k_present)) continue;
            const uint64_t addr = m.start + i * pg;
            bool drop;
            if (pm[i] & k_file) {
                drop = !before->present[i];
            } else {
                // A private copy: dropped when its bytes are the file's again.
                if (file < 0) file = open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
                drop = file >= 0 && same_as_file(file, addr, m.offset + i * pg, buf);
            }
            if (drop && madvise(reinterpret_cast<void *>(addr), pg, MADV_DONTNEED) == 0) dropped++;
        }
        if (file >= 0) close(file);
    }
    close(fd);
    snapshot().clear();
    return dropped;
}

} // namespace dprobe
