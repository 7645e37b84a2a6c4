// A program with its own definitions of names that dprobe's libraries define too: zlib's
// inflate, libelf's elf_begin, the C++ runtime's operator new and delete, exported
// (-rdynamic, as a program with a bundled zlib or a custom allocator builds). Each counts
// its calls and works: new and delete on malloc, inflate and elf_begin forward to the
// library's definition when one is in the program's scope (RTLD_NEXT), else fail the way
// the library would. Built -g with compressed debug sections (-gz): dprobe reading its DWARF
// makes libelf inflate them.
//
// What dprobe loads into it must neither call these nor be seen from it: the counts of a
// traced run equal those of an untraced one, and dlsym(RTLD_DEFAULT) finds none of the
// functions of dprobe's libraries (isolation_test.py).
//
//   own_symbols N       N rounds of work, then the counts; exits
//   own_symbols wait    prints "ready PID", then reads commands: "work N" (N rounds), "counts",
//                       "quit"
//   own_symbols dwarf   reads its own DWARF with a libdw it finds in its scope (the control:
//                       under LD_PRELOAD=libdw.so.1, libdw's calls reach the program's
//                       elf_begin and inflate)
//
// Counts line: "counts inflate=N elf_begin=N new=N delete=N visible=NAME,..." (visible: the
// functions of dprobe's libraries dlsym(RTLD_DEFAULT) finds; "-" for none).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace
{

std::atomic<long> n_inflate, n_elf_begin, n_new, n_delete;

template <typename F> F next_definition(const char *name)
{
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

} // namespace

// zlib's inflate(z_streamp, int): Z_STREAM_ERROR without a zlib to forward to.
extern "C" __attribute__((noinline)) int inflate(void *strm, int flush)
{
    n_inflate++;
    using fn = int (*)(void *, int);
    static fn next = next_definition<fn>("inflate");
    return next ? next(strm, flush) : -2;
}

// libelf's elf_begin(int, Elf_Cmd, Elf *): NULL without a libelf to forward to.
extern "C" __attribute__((noinline)) void *elf_begin(int fd, int cmd, void *ref)
{
    n_elf_begin++;
    using fn = void *(*)(int, int, void *);
    static fn next = next_definition<fn>("elf_begin");
    return next ? next(fd, cmd, ref) : nullptr;
}

void *operator new(size_t n)
{
    n_new++;
    if (void *p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void *p) noexcept
{
    if (p) n_delete++;
    std::free(p);
}
void operator delete(void *p, size_t) noexcept
{
    operator delete(p);
}

extern "C" {

long work_step(int round, long total); // own_symbols_step.c

__attribute__((noinline)) long work_leaf(long x)
{
    return x * 3 + 1;
}

// One round: C++ containers (operator new and delete), and the program's own inflate and
// elf_begin, called as a program that uses them would.
__attribute__((noinline)) long work_round(int round, long total)
{
    total = work_step(round, total);
    std::vector<long> v;
    for (int i = 0; i < 8; i++)
        v.push_back(work_leaf(round + i));
    std::string s = "round " + std::to_string(round) + " of the work, long enough to allocate";
    char buf[16] = {};
    if (inflate(buf, 0) == 0) total++;
    if (elf_begin(-1, 0, nullptr)) total++;
    for (long x : v)
        total += x;
    return total + static_cast<long>(s.size());
}

} // extern "C"

namespace
{

// Functions of the libraries dprobe uses (none of which this program defines or needs).
const char *const k_theirs[] = {"dwarf_begin",      "elf_version",      "gelf_getehdr",
                                "inflateInit_",     "deflate",          "lzma_code",
                                "BZ2_bzDecompress", "ZydisDecoderInit", "fuse_session_new",
                                "fuse_new",         "fuse_loop_mt",     "tep_alloc"};

long total = 0;
int rounds = 0;

void work(int n)
{
    for (int i = 0; i < n; i++) {
        total = work_round(rounds, total);
        std::printf("round %d total %ld\n", rounds, total);
        rounds++;
    }
}

void counts()
{
    std::string visible;
    for (const char *name : k_theirs)
        if (dlsym(RTLD_DEFAULT, name)) visible += (visible.empty() ? "" : ",") + std::string(name);
    // The program's own definitions are the ones its scope finds.
    if (dlsym(RTLD_DEFAULT, "inflate") != reinterpret_cast<void *>(&inflate))
        visible += (visible.empty() ? "" : ",") + std::string("inflate!");
    if (dlsym(RTLD_DEFAULT, "elf_begin") != reinterpret_cast<void *>(&elf_begin))
        visible += (visible.empty() ? "" : ",") + std::string("elf_begin!");
    std::printf("counts inflate=%ld elf_begin=%ld new=%ld delete=%ld visible=%s\n",
                n_inflate.load(), n_elf_begin.load(), n_new.load(), n_delete.load(),
                visible.empty() ? "-" : visible.c_str());
    std::fflush(stdout);
}

// The control: libdw, when in the program's scope, binds to the program's elf_begin and
// inflate. Prints whether the DWARF could be read.
int read_own_dwarf()
{
    using begin_fn = void *(*)(int, int);
    using nextcu_fn = int (*)(void *, unsigned long, unsigned long *, size_t *, unsigned long *,
                              unsigned char *, unsigned char *);
    using end_fn = int (*)(void *);
    auto begin = reinterpret_cast<begin_fn>(dlsym(RTLD_DEFAULT, "dwarf_begin"));
    auto nextcu = reinterpret_cast<nextcu_fn>(dlsym(RTLD_DEFAULT, "dwarf_nextcu"));
    auto end = reinterpret_cast<end_fn>(dlsym(RTLD_DEFAULT, "dwarf_end"));
    if (!begin || !nextcu || !end) {
        std::printf("dwarf: no libdw in scope\n");
        return 1;
    }
    int fd = open("/proc/self/exe", O_RDONLY);
    void *dw = begin(fd, 0 /* DWARF_C_READ */);
    unsigned long next = 0;
    size_t header = 0;
    int units = 0;
    while (dw && nextcu(dw, next, &next, &header, nullptr, nullptr, nullptr) == 0)
        units++;
    std::printf("dwarf: %s, %d units\n", dw ? "read" : "unreadable", units);
    if (dw) end(dw);
    close(fd);
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc > 1 && std::strcmp(argv[1], "dwarf") == 0) {
        int r = read_own_dwarf();
        counts();
        return r;
    }
    if (argc > 1 && std::strcmp(argv[1], "wait") == 0) {
        std::printf("ready %d\n", getpid());
        char line[64];
        while (std::fgets(line, sizeof line, stdin)) {
            if (std::strncmp(line, "work ", 5) == 0)
                work(std::atoi(line + 5));
            else if (std::strncmp(line, "counts", 6) == 0)
                counts();
            else if (std::strncmp(line, "quit", 4) == 0)
                break;
        }
        return 0;
    }
    work(argc > 1 ? std::atoi(argv[1]) : 3);
    counts();
    return 0;
}
