#include "tools/dprobe/record/record_util.h"

#include "core/symbols.h"

#include "tools/trace_reader.h"
#include "tracefs/tracefs_client.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dprobe::tools
{

namespace
{

bool is_exec_file(const std::string &p)
{
    struct stat st {
    };
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

std::string self_dir()
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return ".";
    std::string s(buf, static_cast<size_t>(n));
    return s.substr(0, s.rfind('/'));
}

} // namespace

bool find_program(const std::string &prog, std::string &path)
{
    if (prog.empty()) return false;
    if (prog.find('/') != std::string::npos) {
        path = prog;
        return is_exec_file(prog);
    }
    const char *env = std::getenv("PATH");
    std::string dirs = env ? env : "/usr/local/bin:/usr/bin:/bin";
    size_t pos = 0;
    while (pos <= dirs.size()) {
        size_t c = dirs.find(':', pos);
        std::string d = dirs.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        std::string cand = (d.empty() ? "." : d) + "/" + prog;
        if (is_exec_file(cand)) {
            path = cand;
            return true;
        }
        if (c == std::string::npos) break;
        pos = c + 1;
    }
    return false;
}

bool can_preload(const std::string &path, std::string &why)
{
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        why = std::strerror(errno);
        return false;
    }
    Elf64_Ehdr eh{};
    ssize_t n = ::pread(fd, &eh, sizeof eh, 0);
    if (n >= 2 && std::memcmp(&eh, "#!", 2) == 0) {
        ::close(fd);
        return true; // a script: the interpreter is what gets traced
    }
    if (n != static_cast<ssize_t>(sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        ::close(fd);
        why = "not an ELF executable";
        return false;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
        ::close(fd);
        why = "not an x86-64 program";
        return false;
    }
    bool interp = false;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph{};
        if (::pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) !=
            static_cast<ssize_t>(sizeof ph))
            break;
        interp |= ph.p_type == PT_INTERP;
    }
    ::close(fd);
    if (!interp) {
        why = "statically linked: the dprobe agent cannot be preloaded into it";
        return false;
    }
    return true;
}

bool find_agent(std::string &path)
{
    if (const char *a = std::getenv("DPROBE_AGENT"); a && *a) {
        path = a;
        return access(a, R_OK) == 0;
    }
    std::string dir = self_dir();
    for (const std::string &cand :
         {dir + "/../agent/libdprobe-preload.so", dir + "/libdprobe-preload.so",
          dir + "/../lib/libdprobe-preload.so",
          dir + "/../lib/x86_64-linux-gnu/libdprobe-preload.so",
          std::string(DPROBE_AGENT_INSTALL_PATH)}) {
        char rp[PATH_MAX];
        if (access(cand.c_str(), R_OK) == 0 && realpath(cand.c_str(), rp)) {
            path = rp;
            return true;
        }
    }
    return false;
}

int status_terminal(pid_t pid)
{
    // The controlling terminal's device (/dev/tty itself is a device of its own): tty_nr,
    // field 7 of /proc/self/stat, after the command name in parentheses.
    std::ifstream in("/proc/self/stat");
    std::string stat;
    std::getline(in, stat);
    const size_t rp = stat.rfind(')');
    unsigned long tty_nr = 0;
    if (rp == std::string::npos ||
        std::sscanf(stat.c_str() + rp + 1, " %*c %*d %*d %*d %lu", &tty_nr) != 1 || !tty_nr)
        return -1;
    const unsigned tmaj = (tty_nr >> 8) & 0xfff,
                   tmin = (tty_nr & 0xff) | ((tty_nr >> 12) & 0xfff00);
    for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
        struct stat o {
        };
        const std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
        const int r = pid ? ::stat(link.c_str(), &o) : fstat(fd, &o);
        if (r == 0 && S_ISCHR(o.st_mode) && major(o.st_rdev) == tmaj && minor(o.st_rdev) == tmin)
            return -1;
    }
    return ::open("/dev/tty", O_WRONLY | O_CLOEXEC | O_NOCTTY);
}

bool unmount_if_mounted(const std::string &mountpoint)
{
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    bool mounted = false;
    while (std::getline(in, line)) {
        // Field 5 is the mount point.
        size_t pos = 0;
        for (int f = 0; f < 4 && pos != std::string::npos; f++)
            pos = line.find(' ', pos + (f ? 1 : 0));
        if (pos == std::string::npos) continue;
        size_t end = line.find(' ', pos + 1);
        if (line.substr(pos + 1, end - pos - 1) == mountpoint) mounted = true;
    }
    if (!mounted) return false;
    if (umount2(mountpoint.c_str(), MNT_DETACH) == 0) return true;
    pid_t p = fork();
    if (p == 0) {
        execlp("fusermount3", "fusermount3", "-u", "-z", mountpoint.c_str(), (char *)nullptr);
        _exit(127);
    }
    int st = 0;
    if (p > 0) waitpid(p, &st, 0);
    return true;
}

void remove_runtime_leftovers(const std::string &mountpoint)
{
    const size_t slash = mountpoint.rfind('/');
    const std::string name = mountpoint.substr(slash == std::string::npos ? 0 : slash + 1);
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) return;
    const pid_t pid = static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10));
    if (pid <= 0 || mountpoint != tracefs_default_mountpoint(pid)) return;
    if (kill(pid, 0) == 0 || errno != ESRCH) return; // still there (or not ours to judge)
    ::rmdir(mountpoint.c_str()); // fails, harmlessly, unless empty and unmounted
    ::unlink(tracefs_default_socket(pid).c_str());
}

void print_record_summary(const std::string &file, const char *cmd)
{
    // From the metadata only (STATS and END chunks): the pages are not read.
    tracefile::trace_reader r;
    std::string err;
    if (!r.open(file, &err)) {
        std::fprintf(stderr, "dprobe %s: %s\n", cmd, err.c_str());
        return;
    }
    uint64_t events = 0, lost = 0;
    size_t threads = 0;
    std::set<int32_t> pids;
    bool unfinished = false;
    for (const auto &s : r.sessions) {
        size_t n = 0;
        for (const auto &t : s.stats) {
            events += t.written;
            lost += t.dropped + t.lost;
            n += t.written > 0;
        }
        if (s.has_total) lost += s.total.orphans;
        threads += n;
        if (n) pids.insert(s.pid());
        unfinished |= s.end.empty();
    }
    std::fprintf(stderr,
                 "[ dprobe %s: %llu events (%llu lost) from %zu thread%s in %zu process%s, "
                 "%.3f MB written to %s ]\n",
                 cmd, static_cast<unsigned long long>(events),
                 static_cast<unsigned long long>(lost), threads, threads == 1 ? "" : "s",
                 pids.size(), pids.size() == 1 ? "" : "es", r.bytes / 1048576.0, file.c_str());
    if (!r.warning.empty())
        std::fprintf(stderr, "dprobe %s: warning: %s\n", cmd, r.warning.c_str());
    else if (unfinished)
        std::fprintf(stderr,
                     "dprobe %s: warning: a process ended without its trace being "
                     "closed; its last events may be missing\n",
                     cmd);
}

size_t print_session_hists(const std::string &file, std::FILE *out, pid_t pid)
{
    tracefile::trace_reader r;
    std::string err;
    if (!r.open(file, &err)) return 0;
    size_t n = 0;
    for (const auto &s : r.sessions)
        for (const auto &[event, text] : s.hists) {
            if (pid && s.pid() != pid) continue;
            std::fprintf(out, "# events/%s/hist of %d (%s)\n%s", event.c_str(), s.pid(),
                         s.get("comm").c_str(), text.c_str());
            n++;
        }
    std::fflush(out);
    return n;
}

std::vector<std::string> libraries_never_loaded(const std::string &file,
                                                const std::vector<std::string> &globs)
{
    std::vector<std::string> out;
    tracefile::trace_reader r;
    std::string err;
    if (!r.open(file, &err)) return out;
    for (const std::string &g : globs) {
        // "lib:glob" (a single colon: "ns::f" is a C++ name), as the agent splits it.
        size_t colon = std::string::npos;
        for (size_t i = 0; i < g.size(); i++) {
            if (g[i] != ':') continue;
            if (i + 1 < g.size() && g[i + 1] == ':') {
                i++;
                continue;
            }
            colon = i;
            break;
        }
        if (colon == std::string::npos || colon == 0) continue;
        const std::string lib = g.substr(0, colon);
        bool loaded = false;
        for (const auto &sess : r.sessions)
            for (const auto &o : sess.objects) {
                const std::string base = o.path.substr(o.path.rfind('/') + 1);
                loaded |= object_spec_matches(lib, base, o.path);
            }
        if (!loaded) out.push_back(g + " " + lib);
    }
    return out;
}

} // namespace dprobe::tools
