#include "tools/dprobe/attach/proc_target.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <fstream>
#include <pwd.h>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace dprobe::tools
{

namespace
{

std::string read_text(const std::string &path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string user_name(uid_t uid)
{
    struct passwd *pw = getpwuid(uid);
    return pw ? std::string(pw->pw_name) : std::to_string(uid);
}

bool have_cap_sys_ptrace()
{
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("CapEff:", 0) == 0) {
            unsigned long long caps = std::strtoull(line.c_str() + 7, nullptr, 16);
            return caps & (1ull << 19); // CAP_SYS_PTRACE
        }
    return false;
}

std::string basename_of(const std::string &p)
{
    size_t s = p.rfind('/');
    return s == std::string::npos ? p : p.substr(s + 1);
}

bool starts_with_any(const std::string &name, const std::vector<std::string> &prefixes)
{
    for (const auto &p : prefixes)
        if (name.rfind(p, 0) == 0) return true;
    return false;
}

const char *machine_name(const Elf64_Ehdr &eh)
{
    if (eh.e_ident[EI_CLASS] == ELFCLASS32 && eh.e_machine == EM_X86_64)
        return "x32 (32-bit pointers on x86-64)";
    switch (eh.e_machine) {
    case EM_386:
        return "i386 (32-bit x86)";
    case EM_AARCH64:
        return "AArch64";
    case EM_ARM:
        return "ARM";
    case EM_RISCV:
        return "RISC-V";
    case EM_PPC64:
        return "PowerPC 64";
    case EM_S390:
        return "s390";
    default:
        return nullptr;
    }
}

} // namespace

std::string elf_header_problem(const std::string &who, const void *header, size_t n)
{
    // e_machine sits at the same offset in ELF32 and ELF64 headers.
    Elf64_Ehdr eh{};
    std::memcpy(&eh, header, std::min(n, sizeof eh));
    if (n < offsetof(Elf64_Ehdr, e_machine) + sizeof eh.e_machine ||
        std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
        return who + ": its executable is not an ELF file";
    if (eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_machine == EM_X86_64) return "";
    const char *m = machine_name(eh);
    return who + " is not an x86-64 program (ELF machine " +
           (m ? std::string(m) : std::to_string(eh.e_machine)) +
           "): dprobe traces x86-64 processes only";
}

bool process_alive(pid_t pid)
{
    struct stat st {
    };
    char p[64];
    std::snprintf(p, sizeof p, "/proc/%d/stat", pid);
    if (stat(p, &st) != 0) return false;
    proc_status ps;
    return read_proc_status(pid, ps) && ps.state != 'Z' && ps.state != 'X';
}

bool read_proc_status(pid_t pid, proc_status &out, pid_t tid)
{
    std::string base = "/proc/" + std::to_string(pid);
    if (tid > 0) base += "/task/" + std::to_string(tid);
    std::string stat = read_text(base + "/stat");
    std::string status = read_text(base + "/status");
    if (stat.empty() || status.empty()) return false;
    size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size())
        return false;
    out.comm = stat.substr(open + 1, close - open - 1);
    out.state = stat[close + 2];
    std::istringstream in(status);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("Uid:", 0) == 0)
            out.uid = static_cast<uid_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
        else if (line.rfind("TracerPid:", 0) == 0)
            out.tracer = static_cast<pid_t>(std::strtol(line.c_str() + 10, nullptr, 10));
        else if (line.rfind("PPid:", 0) == 0)
            out.ppid = static_cast<pid_t>(std::strtol(line.c_str() + 5, nullptr, 10));
    }
    return true;
}

std::string ptrace_permission_message(pid_t pid)
{
    proc_status ps;
    if (!read_proc_status(pid, ps)) return "no process " + std::to_string(pid);
    std::string yama = read_text("/proc/sys/kernel/yama/ptrace_scope");
    while (!yama.empty() && (yama.back() == '\n' || yama.back() == ' '))
        yama.pop_back();
    bool yama_restricts = !yama.empty() && yama != "0";
    std::string why;
    uid_t me = geteuid();
    bool cap = have_cap_sys_ptrace();
    // The files of a non-dumpable process belong to root (proc(5)).
    struct stat pst {
    };
    bool root_owned =
        stat(("/proc/" + std::to_string(pid) + "/status").c_str(), &pst) == 0 && pst.st_uid == 0;
    if (ps.uid != me && !cap)
        why = "it runs as user " + user_name(ps.uid) + " (uid " + std::to_string(ps.uid) +
              ") and you are " + user_name(me) + " (uid " + std::to_string(me) +
              ") without CAP_SYS_PTRACE: tracing a process needs its user or CAP_SYS_PTRACE";
    else if (!cap && ((ps.uid != 0 && root_owned) || !yama_restricts))
        why = "it is not dumpable (a set-user-ID program, or prctl(PR_SET_DUMPABLE, 0))" +
              std::string(ps.uid == 0 || !root_owned ? ", or a security module refuses" : "") +
              ": tracing it needs CAP_SYS_PTRACE";
    else if (!cap)
        why = "it runs as your user, but the Yama setting below allows that only with "
              "CAP_SYS_PTRACE";
    else
        why = "refused although you have CAP_SYS_PTRACE (a security module, or another user "
              "namespace?)";
    if (yama.empty()) {
        why += "; kernel.yama.ptrace_scope: not present (no Yama restriction)";
    } else {
        why += "; kernel.yama.ptrace_scope is " + yama;
        if (yama == "0")
            why += " (any process of the same user may trace)";
        else if (yama == "1")
            why += " (only a parent may trace without CAP_SYS_PTRACE; 'sysctl "
                   "kernel.yama.ptrace_scope=0' allows any process of the same user)";
        else if (yama == "2")
            why += " (only CAP_SYS_PTRACE may trace)";
        else if (yama == "3")
            why += " (no process may trace another until reboot)";
    }
    return "cannot trace process " + std::to_string(pid) + " (" + ps.comm +
           "): permission denied: " + why;
}

std::string check_attach_target(pid_t pid)
{
    std::string id = std::to_string(pid);
    proc_status ps;
    if (pid <= 0 || !read_proc_status(pid, ps)) return "no process " + id;
    id += " (" + ps.comm + ")";
    // A tracer that is a child of the process itself is dprobe's stop_machine helper
    // (core/stop_machine.h), which holds the threads for a moment while the agent of a
    // session (or one a killed command left starting or ending) patches code: waited for.
    for (int i = 0; i < 500 && ps.tracer > 0 && ps.tracer != getpid(); i++) {
        proc_status t;
        if (!read_proc_status(ps.tracer, t) || t.ppid != pid) break;
        struct timespec ts {
            0, 10 * 1000 * 1000
        };
        nanosleep(&ts, nullptr);
        if (!read_proc_status(pid, ps)) return "no process " + std::to_string(pid);
    }
    if (ps.state == 'Z' || ps.state == 'X')
        return "process " + id + " has exited (a zombie not yet reaped by its parent)";
    if (ps.tracer > 0 && ps.tracer != getpid()) {
        proc_status t;
        std::string who = std::to_string(ps.tracer);
        if (read_proc_status(ps.tracer, t)) who += " (" + t.comm + ")";
        return "process " + id + " is being traced by process " + who +
               " (a debugger?): a process has one tracer at a time";
    }
    if (ps.state == 'T' || ps.state == 't')
        return "process " + id + " is stopped: continue it first (kill -CONT " +
               std::to_string(pid) + ")";
    std::string exe = "/proc/" + std::to_string(pid) + "/exe";
    int fd = ::open(exe.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == EACCES || e == EPERM) return ptrace_permission_message(pid);
        if (e == ENOENT) {
            char buf[16];
            if (readlink(exe.c_str(), buf, sizeof buf) < 0 && errno == ENOENT && process_alive(pid))
                return "process " + id + " is a kernel thread";
            return process_alive(pid) ? "process " + id + ": its executable was deleted"
                                      : "process " + id + " exited";
        }
        return "process " + id + ": cannot read its executable: " + std::strerror(e);
    }
    Elf64_Ehdr eh{};
    ssize_t n = ::pread(fd, &eh, sizeof eh, 0);
    ::close(fd);
    if (std::string why =
            elf_header_problem("process " + id, &eh, n > 0 ? static_cast<size_t>(n) : 0);
        !why.empty())
        return why;
    if (access(("/proc/" + std::to_string(pid) + "/mem").c_str(), R_OK) != 0 &&
        (errno == EACCES || errno == EPERM))
        return ptrace_permission_message(pid);
    return "";
}

uint64_t remote_object::func(const std::string &name) const
{
    if (!syms) return 0;
    for (const ksym *s : syms->funcs_named(name))
        if (s->addr) return s->addr + bias;
    return 0;
}

namespace
{

// Whether the file mapped at offset 0 by M, read as SYMS, is loaded there with load bias BIAS:
// its first executable segment is mapped where the loader puts it. A process may also map a
// loaded object's file whole, read-only, to read it (libelf's ELF_C_READ_MMAP: dprobe's agent
// does so for libc.so.6 when an event reads function arguments); that mapping also starts at
// offset 0, but nothing executable of the file sits at BIAS + the segment's address.
bool loaded_at(const std::vector<proc_map> &maps, const proc_map &m, const loaded_object &syms,
               uint64_t bias)
{
    for (const auto &seg : syms.segments) {
        if (!(seg.prot & PROT_EXEC)) continue;
        for (const proc_map &x : maps)
            if (x.inode == m.inode && x.path == m.path && (x.prot() & PROT_EXEC) &&
                x.start == bias + seg.start)
                return true;
        return false;
    }
    return true; // no executable segment: nothing tells the two apart
}

} // namespace

namespace
{

// Reads LEN bytes at ADDR of PID's memory. False when they cannot be read.
bool read_remote(int memfd, uint64_t addr, void *out, size_t len)
{
    return ::pread(memfd, out, len, static_cast<off_t>(addr)) == static_cast<ssize_t>(len);
}

// The load biases of the objects of PID's main link-map namespace, from the loader's r_debug
// (found through DT_DEBUG in the program's dynamic section, as debuggers find it). Objects a
// library loaded with dlmopen into a namespace of its own (dprobe's runtime does: libdw,
// libelf, Zydis and their own C library) are not among them. Empty when it cannot be read.
std::vector<uint64_t> main_namespace_biases(pid_t pid)
{
    std::vector<uint64_t> out;
    uint64_t phdr = 0, phnum = 0;
    {
        std::ifstream auxv("/proc/" + std::to_string(pid) + "/auxv", std::ios::binary);
        uint64_t kv[2];
        while (auxv.read(reinterpret_cast<char *>(kv), sizeof kv) && kv[0] != AT_NULL) {
            if (kv[0] == AT_PHDR) phdr = kv[1];
            if (kv[0] == AT_PHNUM) phnum = kv[1];
        }
    }
    const int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || !phdr || !phnum || phnum > 64) {
        if (fd >= 0) ::close(fd);
        return out;
    }
    std::vector<Elf64_Phdr> ph(phnum);
    uint64_t bias = 0, dyn = 0, dynsz = 0;
    if (read_remote(fd, phdr, ph.data(), ph.size() * sizeof ph[0])) {
        for (const Elf64_Phdr &h : ph)
            if (h.p_type == PT_PHDR) bias = phdr - h.p_vaddr;
        for (const Elf64_Phdr &h : ph)
            if (h.p_type == PT_DYNAMIC) {
                dyn = bias + h.p_vaddr;
                dynsz = h.p_memsz;
            }
    }
    uint64_t rdebug = 0;
    for (uint64_t off = 0; dyn && off + sizeof(Elf64_Dyn) <= dynsz; off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn d;
        if (!read_remote(fd, dyn + off, &d, sizeof d) || d.d_tag == DT_NULL) break;
        if (d.d_tag == DT_DEBUG) rdebug = d.d_un.d_ptr;
    }
    // struct r_debug { int r_version; struct link_map *r_map; ... }; struct link_map
    // { ElfW(Addr) l_addr; char *l_name; ElfW(Dyn) *l_ld; struct link_map *l_next, *l_prev; }.
    uint64_t lm = 0;
    if (rdebug) read_remote(fd, rdebug + 8, &lm, sizeof lm);
    for (int n = 0; lm && n < 4096; n++) {
        uint64_t l[5];
        if (!read_remote(fd, lm, l, sizeof l)) break;
        out.push_back(l[0]);
        lm = l[3];
    }
    ::close(fd);
    return out;
}

} // namespace

std::optional<remote_object> find_remote_object(pid_t pid, const std::vector<proc_map> &maps,
                                                const std::vector<std::string> &prefixes,
                                                uint64_t inode, std::string *err)
{
    const std::vector<uint64_t> main_ns = main_namespace_biases(pid);
    for (const proc_map &m : maps) {
        if (m.path.empty() || m.path[0] != '/' || m.offset != 0) continue;
        if (!(inode && m.inode == inode) && !starts_with_any(basename_of(m.path), prefixes))
            continue;
        remote_object o;
        o.path = m.path;
        // The file as the process sees it (its mount namespace, its root).
        o.host_path = "/proc/" + std::to_string(pid) + "/root" + m.path;
        std::string e;
        o.syms = read_object_file(o.host_path, 0, &e);
        if (!o.syms) {
            o.host_path = m.path;
            o.syms = read_object_file(o.host_path, 0, &e);
        }
        if (!o.syms || o.syms->segments.empty()) {
            if (err) *err = "cannot read " + m.path + ": " + e;
            return std::nullopt;
        }
        // The mapping at file offset 0 is the first PT_LOAD segment, if the object is loaded
        // there (and not only mapped to be read: then the next candidate).
        o.bias = m.start - o.syms->segments.front().start;
        if (!loaded_at(maps, m, *o.syms, o.bias)) continue;
        // The program's own copy, not one of a namespace of a library's (the C library of
        // dprobe's private namespace, say, which goes away with it).
        if (!main_ns.empty() && std::find(main_ns.begin(), main_ns.end(), o.bias) == main_ns.end())
            continue;
        return o;
    }
    return std::nullopt;
}

bool addr_in_object(const std::vector<proc_map> &maps, uint64_t addr,
                    const std::vector<std::string> &prefixes)
{
    for (const proc_map &m : maps)
        if (addr >= m.start && addr < m.end)
            return !m.path.empty() && starts_with_any(basename_of(m.path), prefixes);
    return false;
}

} // namespace dprobe::tools
