// A program's libraries through its dynamic loader's --list mode (see needed_libs.h).
#include "tools/dprobe/resolve/needed_libs.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>

extern char **environ;

namespace dprobe::tools
{

namespace
{

// PT_INTERP of PROG, "" when it has none.
std::string interpreter_of(const std::string &prog)
{
    int fd = ::open(prog.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    std::string interp;
    size_t n = 0;
    if (e && elf_getphdrnum(e, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(e, static_cast<int>(i), &ph) || ph.p_type != PT_INTERP) continue;
            size_t size = 0;
            const char *img = elf_rawfile(e, &size);
            if (img && ph.p_offset + ph.p_filesz <= size && ph.p_filesz > 1)
                interp.assign(img + ph.p_offset, strnlen(img + ph.p_offset, ph.p_filesz));
        }
    }
    if (e) elf_end(e);
    ::close(fd);
    return interp;
}

} // namespace

std::vector<std::string> needed_libraries(const std::string &prog)
{
    std::vector<std::string> out;
    const std::string interp = interpreter_of(prog);
    if (interp.empty()) return out;
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return out;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    const char *argv[] = {interp.c_str(), "--list", prog.c_str(), nullptr};
    pid_t pid = -1;
    int rc = posix_spawn(&pid, interp.c_str(), &fa, nullptr, const_cast<char **>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(pipefd[1]);
    std::string text;
    if (rc == 0) {
        char buf[4096];
        ssize_t r;
        while ((r = ::read(pipefd[0], buf, sizeof buf)) > 0)
            text.append(buf, static_cast<size_t>(r));
        int status = 0;
        waitpid(pid, &status, 0);
    }
    ::close(pipefd[0]);
    // "\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x...)" and
    // "\t/lib64/ld-linux-x86-64.so.2 (0x...)"; the vdso has no file.
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        std::string line = text.substr(pos, nl == std::string::npos ? nl : nl - pos);
        pos = nl == std::string::npos ? text.size() : nl + 1;
        size_t arrow = line.find("=> ");
        size_t start = arrow != std::string::npos ? arrow + 3 : line.find('/');
        if (start == std::string::npos || start >= line.size() || line[start] != '/') continue;
        std::string path = line.substr(start, line.find(" (", start) - start);
        char real[PATH_MAX];
        if (::realpath(path.c_str(), real)) out.emplace_back(real);
    }
    return out;
}

} // namespace dprobe::tools
