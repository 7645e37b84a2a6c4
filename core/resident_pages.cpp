// Resident pages after a session (see resident_pages.h), against the note the command took
// before it. Page states come from /proc/self/pagemap: bit 63 present, bit 61 a file page
// (or shared anonymous); a present page of a private file mapping without bit 61 is a
// private copy (written once: patched, or relocated by the loader).
#include "core/resident_pages.h"

#include "core/proc_maps.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

// The pagemap entries of [START, END).
bool pagemap(int fd, uint64_t start, uint64_t end, std::vector<uint64_t> &out)
{
    const size_t pg = page_size();
    out.assign((end - start) / pg, 0);
    const ssize_t want = static_cast<ssize_t>(out.size() * sizeof(uint64_t));
    return pread(fd, out.data(), out.size() * sizeof(uint64_t),
                 static_cast<off_t>(start / pg * sizeof(uint64_t))) == want;
}

// The permissions the pieces found so far have (a range whose pieces differ in them, the
// program's own mprotect, is left alone): M's when none is found yet.
const std::string &maps_perms_of(const std::vector<proc_map> &found, const proc_map &m)
{
    return found.empty() ? m.perms : found.front().perms;
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

namespace
{

// Whether any memory of the process is locked (mlock, mlockall): a mapping made anew is not,
// so then nothing is remapped.
bool any_locked()
{
    const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return true;
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return true;
    buf[n] = '\0';
    const char *l = std::strstr(buf, "VmLck:");
    return !l || std::strtoul(l + 6, nullptr, 10) != 0;
}

// The mappings now over N's range, if they are all still N's file at N's offsets and none
// can be written; empty otherwise (the range is left alone then).
std::vector<proc_map> pieces_of(const noted &n, const std::vector<proc_map> &maps)
{
    std::vector<proc_map> out;
    uint64_t at = n.start;
    for (const proc_map &m : maps) {
        if (m.end <= n.start || m.start >= n.end) continue;
        if (m.start != at || m.inode != n.inode || m.offset != n.offset + (m.start - n.start) ||
            m.writable() || m.perms != maps_perms_of(out, m))
            return {};
        out.push_back(m);
        at = m.end;
    }
    if (at != n.end) return {};
    return out;
}

} // namespace

size_t resident_pages_restore()
{
    std::lock_guard<std::mutex> g(g_lock);
    const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const size_t pg = page_size();
    const bool locked = any_locked();
    const std::vector<proc_map> maps = read_proc_maps();
    size_t dropped = 0;
    std::vector<uint64_t> pm;
    std::vector<char> buf;
    for (const noted &n : snapshot()) {
        const std::vector<proc_map> pieces = pieces_of(n, maps);
        if (pieces.empty() || !pagemap(fd, n.start, n.end, pm)) continue;
        const std::string &path = pieces.front().path;
        bool copies = false;
        for (uint64_t e : pm)
            copies |= (e & k_present) && !(e & k_file);
        // Written to (a page patched and restored is a private copy of its own, and the
        // permission changes split the mapping): when every byte is the file's again, the
        // range is mapped afresh from the file, in one piece, as the loader mapped it.
        if ((copies || pieces.size() > 1) && !locked) {
            const int file = open(path.c_str(), O_RDONLY | O_CLOEXEC);
            bool same = file >= 0;
            for (uint64_t a = n.start; same && a < n.end; a += pg)
                same = same_as_file(file, a, n.offset + (a - n.start), buf);
            if (same) {
                const int prot = pieces.front().prot();
                void *r = mmap(reinterpret_cast<void *>(n.start), n.end - n.start, prot,
                               MAP_PRIVATE | MAP_FIXED, file, static_cast<off_t>(n.offset));
                if (r != MAP_FAILED) dropped += (n.end - n.start) / pg;
            }
            if (file >= 0) close(file);
            if (same) continue;
        }
        // Otherwise: the file's pages this session made resident are dropped again.
        for (size_t i = 0; i < pm.size(); i++) {
            if (!(pm[i] & k_present) || !(pm[i] & k_file) || n.present[i]) continue;
            if (madvise(reinterpret_cast<void *>(n.start + i * pg), pg, MADV_DONTNEED) == 0)
                dropped++;
        }
    }
    close(fd);
    snapshot().clear();
    return dropped;
}

} // namespace dprobe
