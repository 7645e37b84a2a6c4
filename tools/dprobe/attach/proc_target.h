// Another process, seen from outside through /proc: whether `dprobe attach` can trace it
// (and, when not, a message that says why), its mappings, and where a function of one of
// its loaded objects is.
#pragma once

#include "core/proc_maps.h"

#include "core/symbols.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace dprobe::tools
{

struct proc_status {
    std::string comm;
    char state = 0; // R S D T t Z X ... (/proc/PID/stat)
    uid_t uid = 0;  // real uid
    pid_t tracer = 0;
    pid_t ppid = 0;
};

// /proc/PID/status of a process (or of thread TID of it when TID > 0). False when gone.
bool read_proc_status(pid_t pid, proc_status &out, pid_t tid = 0);

// "" when PID looks traceable by us: it exists, is not a zombie, kernel thread, stopped or
// traced process, we may ptrace it, and it is an x86-64 program. Otherwise the message.
std::string check_attach_target(pid_t pid);

// Whether the first N bytes of an executable (its ELF header) are those of a program dprobe
// can trace: "" for a 64-bit x86-64 ELF file, else the message about WHO ("process 12
// (prog)"), e.g. "WHO is not an x86-64 program (ELF machine i386 (32-bit x86)): ...".
std::string elf_header_problem(const std::string &who, const void *header, size_t n);

// Why ptrace(PID) failed with EPERM/EACCES: the user and capability rule, dumpability, the
// Yama ptrace_scope setting.
std::string ptrace_permission_message(pid_t pid);

// "no such process" / "the process exited" wording for ESRCH at different moments.
bool process_alive(pid_t pid);

// /proc/PID/maps (core/proc_maps.h).
using dprobe::proc_map;
using dprobe::read_proc_maps;

// An object mapped in the process: its file (readable from here), and its load bias.
struct remote_object {
    std::string path;      // as mapped in the process
    std::string host_path; // where this process reads it (/proc/PID/root/...)
    uint64_t bias = 0;
    std::shared_ptr<loaded_object> syms; // symbols at bias 0
    // The runtime address of function NAME, or 0.
    uint64_t func(const std::string &name) const;
};

// The first mapped object whose file name (basename) starts with one of PREFIXES
// ("libc.so.6", ...) or whose inode is INODE (when non-zero). nullopt when none; *ERR says
// why when it was found but could not be read.
std::optional<remote_object> find_remote_object(pid_t pid, const std::vector<proc_map> &maps,
                                                const std::vector<std::string> &prefixes,
                                                uint64_t inode = 0, std::string *err = nullptr);

// True when ADDR lies in a mapping of a file whose basename starts with one of PREFIXES.
bool addr_in_object(const std::vector<proc_map> &maps, uint64_t addr,
                    const std::vector<std::string> &prefixes);

} // namespace dprobe::tools
