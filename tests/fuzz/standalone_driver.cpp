// The fuzz targets' main() where libFuzzer is not available (gcc builds):
//   <target> FILE|DIR...  runs the target on each file (each file of a directory), like
//                         libFuzzer given -runs=0: the corpus replay ctest runs;
//   <target> [SEED]       runs it on dprobe_fuzz_generate()'s inputs for DPROBE_FUZZ_SECONDS
//                         seconds (default 3).
// A broken invariant aborts inside the target, which fails the test; the input that did it
// is written to ./crash-input first (keep it in the corpus once the bug is fixed).
#include "tests/fuzz/fuzz_driver.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace
{

const std::vector<uint8_t> *current; // the input being run, for the crash handler

void save_input(int sig)
{
    if (current) {
        int fd = open("crash-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            if (write(fd, current->data(), current->size()) < 0) {
            }
            close(fd);
            static const char msg[] = "fuzz driver: input written to ./crash-input\n";
            if (write(2, msg, sizeof msg - 1) < 0) {
            }
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void run(const std::vector<uint8_t> &in)
{
    current = &in;
    LLVMFuzzerTestOneInput(in.data(), in.size());
    current = nullptr;
}

bool run_file(const std::string &path)
{
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    std::vector<uint8_t> in((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "running %s (%zu bytes)\n", path.c_str(), in.size());
    run(in);
    return true;
}

// Every regular file under PATH (sorted, for a stable order); PATH itself when it is a file.
void collect(const std::string &path, std::vector<std::string> &out)
{
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        out.push_back(path);
        return;
    }
    DIR *d = opendir(path.c_str());
    if (!d) return;
    std::vector<std::string> names;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto &n : names)
        collect(path + "/" + n, out);
}

} // namespace

int main(int argc, char **argv)
{
    signal(SIGABRT, save_input);
    signal(SIGSEGV, save_input);
    if (argc > 1 && !std::isdigit(static_cast<unsigned char>(argv[1][0]))) {
        std::vector<std::string> files;
        for (int i = 1; i < argc; ++i) {
            const size_t before = files.size();
            collect(argv[i], files);
            if (files.size() == before) {
                std::fprintf(stderr, "%s: no input at %s\n", argv[0], argv[i]);
                return 1;
            }
        }
        for (const auto &f : files)
            if (!run_file(f)) {
                std::fprintf(stderr, "%s: cannot read %s\n", argv[0], f.c_str());
                return 1;
            }
        std::printf("%s: %zu inputs replayed, all invariants held\n", argv[0], files.size());
        return 0;
    }
    double seconds = 3;
    if (const char *s = std::getenv("DPROBE_FUZZ_SECONDS")) seconds = std::atof(s);
    fuzz_rng rng{0x9e3779b97f4a7c15ULL};
    if (argc > 1) rng.x ^= std::strtoull(argv[1], nullptr, 0);
    const auto start = std::chrono::steady_clock::now();
    unsigned long runs = 0;
    std::vector<uint8_t> in;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
           seconds) {
        in.clear();
        dprobe_fuzz_generate(in, rng);
        run(in);
        ++runs;
    }
    std::printf("%s: %lu generated inputs in %.1f s, all invariants held\n", argv[0], runs,
                seconds);
    return 0;
}
