// dprobe-census: for each library given (default: libc.so.6 libstdc++.so.6), how many
// function entries can be probed: with a compiled-in patch site, or with a jump site (an
// optimized probe over the entry instructions); and why the others cannot.
//
//   dprobe-census [--verbose] [LIB...]
#include "core/ftrace.h"
#include "core/symbols.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <string>
#include <vector>

namespace
{

// "a branch in the function targets the inside of the region (at 0x1234)" -> the part
// before any address, so messages group into reasons.
std::string reason_of(const char *why)
{
    std::string s(why);
    for (const char *cut : {" (at 0x", " at 0x", ": 0x", " 0x"})
        if (auto p = s.find(cut); p != std::string::npos) s.resize(p);
    if (auto p = s.find(": "); p != std::string::npos && s.rfind("instruction cannot", 0) == 0)
        s.resize(p + 2), s += "<mnemonic>";
    return s;
}

int census(const char *lib, bool verbose)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        std::fprintf(stderr, "dprobe-census: cannot load %s: %s\n", lib, dlerror());
        return 1;
    }
    dprobe::ftrace_update_objects();
    auto objs = dprobe::kallsyms::instance().objects();
    const dprobe::loaded_object *obj = nullptr;
    dprobe::object_ptr keep;
    for (auto &o : *objs)
        if (o->name == lib || o->path.find(lib) != std::string::npos) {
            keep = o;
            obj = o.get();
        }
    if (!obj) {
        std::fprintf(stderr, "dprobe-census: %s is not among the loaded objects\n", lib);
        return 1;
    }
    size_t total = 0, compiled = 0, jump = 0;
    std::map<std::string, size_t> refused;
    std::map<std::string, std::vector<std::string>> examples;
    uintptr_t last = 0;
    for (const dprobe::ksym &f : obj->funcs) {
        if (f.addr == last) continue; // aliases share one entry
        last = f.addr;
        ++total;
        dprobe::ftrace_site *s = dprobe::ftrace_location(f.addr);
        if (s && s->kind != dprobe::site_kind::jump) {
            ++compiled;
            continue;
        }
        const char *why = dprobe::ftrace_site_refusal(f.addr);
        if (!why) {
            ++jump;
            continue;
        }
        std::string r = reason_of(why);
        ++refused[r];
        if (examples[r].size() < 3) examples[r].push_back(f.name);
    }
    size_t ok = compiled + jump;
    std::printf("%s (%s): %zu function entries, %zu accept a probe (%.1f%%): %zu with a "
                "compiled-in site, %zu with an optimized entry probe; %zu refused\n",
                obj->name.c_str(), obj->path.c_str(), total, ok,
                total ? 100.0 * static_cast<double>(ok) / static_cast<double>(total) : 0.0,
                compiled, jump, total - ok);
    std::vector<std::pair<size_t, std::string>> rows;
    for (auto &[r, n] : refused)
        rows.emplace_back(n, r);
    std::sort(rows.rbegin(), rows.rend());
    for (auto &[n, r] : rows) {
        std::printf("  %6zu  %s", n, r.c_str());
        if (verbose) {
            std::printf("  (e.g.");
            for (auto &e : examples[r])
                std::printf(" %s", e.c_str());
            std::printf(")");
        }
        std::printf("\n");
    }
    return 0;
}

} // namespace

int main(int argc, char **argv)
{
    bool verbose = false;
    std::vector<const char *> libs;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--verbose") || !std::strcmp(argv[i], "-v"))
            verbose = true;
        else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
            std::printf("usage: dprobe-census [--verbose] [LIB...]\n"
                        "  For each shared library (default libc.so.6 libstdc++.so.6): how\n"
                        "  many function entries accept an fprobe/kretprobe, and why the\n"
                        "  others are refused.\n");
            return 0;
        } else
            libs.push_back(argv[i]);
    }
    if (libs.empty()) libs = {"libc.so.6", "libstdc++.so.6"};
    int rc = 0;
    for (const char *l : libs)
        rc |= census(l, verbose);
    return rc;
}
