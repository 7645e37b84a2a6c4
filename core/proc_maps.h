// /proc/PID/maps, parsed in one place for the project: text patching (which pages to make
// writable), trace events (a file offset's address, whether a file is mapped) and the
// command line tools (another process's objects).
//
// Read with open/read and sscanf only, no iostreams: text_poke reads it while other threads
// of the process are stopped, so nothing here may take a lock they could hold.
#pragma once

#include <sys/mman.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dprobe
{

struct proc_map {
    uint64_t start = 0, end = 0, offset = 0;
    std::string perms; // "r-xp"
    uint64_t inode = 0;
    std::string path; // "" for anonymous mappings, "[stack]", "[vdso]", ... as the kernel says

    bool readable() const { return !perms.empty() && perms[0] == 'r'; }
    bool writable() const { return perms.size() > 1 && perms[1] == 'w'; }
    bool executable() const { return perms.size() > 2 && perms[2] == 'x'; }
    // The PROT_* bits of the permissions, for mprotect.
    int prot() const
    {
        return (readable() ? PROT_READ : 0) | (writable() ? PROT_WRITE : 0) |
               (executable() ? PROT_EXEC : 0);
    }
};

// /proc/PID/maps (PID 0: this process); empty, with *ERR set to an errno, when unreadable.
std::vector<proc_map> read_proc_maps(pid_t pid = 0, int *err = nullptr);

// The address in this process of FILE_OFFSET of the file PATH (compared after realpath),
// or nullopt when that part of the file is not mapped.
std::optional<uintptr_t> file_offset_to_addr(const std::string &path, uint64_t file_offset);

// Whether any part of the file PATH is mapped in this process.
bool file_mapped(const std::string &path);

} // namespace dprobe
