// kallsyms for a process: the object list, symbols, address lookups, %pS, globs over
// function names, dlopen/dlclose tracking, and the patch-site tables read from ELF files
// built for the purpose (tests/symdata/).
#include "core/symbols.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace dprobe;

// Functions and data of the main program with known addresses. Called through volatile
// pointers so they stay out of line and keep their symbols.
extern "C" {
__attribute__((noinline)) int symtest_add(int a, int b)
{
    volatile int x = a;
    for (int i = 0; i < b; ++i)
        x = x + 1;
    return x;
}
__attribute__((noinline)) int symtest_mul(int a, int b)
{
    volatile int x = a * b;
    return x + 1;
}
__attribute__((noinline)) int symtest_sub(int a, int b)
{
    volatile int x = a - b;
    return x - 1;
}
int symtest_add_alias(int a, int b) noexcept __attribute__((alias("symtest_add")));
long symtest_table[16] = {1, 2, 3};
}

namespace
{

int (*volatile keep_add)(int, int) = symtest_add;
int (*volatile keep_mul)(int, int) = symtest_mul;
int (*volatile keep_sub)(int, int) = symtest_sub;

uintptr_t addr_of(const void *p)
{
    return reinterpret_cast<uintptr_t>(p);
}

template <class F> uintptr_t fn_addr(F *f)
{
    return reinterpret_cast<uintptr_t>(reinterpret_cast<void *>(f));
}

std::string real_path(const char *p)
{
    char buf[PATH_MAX];
    return ::realpath(p, buf) ? std::string(buf) : std::string();
}

std::string program_name()
{
    std::string p = real_path("/proc/self/exe");
    return p.substr(p.rfind('/') + 1);
}

std::string sprint(uintptr_t addr, bool with_object = false)
{
    char buf[256];
    size_t n = sprint_symbol(buf, sizeof buf, addr, with_object);
    EXPECT_EQ(n, std::strlen(buf));
    return buf;
}

std::string hex(uint64_t v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

const ksym *only_func(const loaded_object &o, std::string_view name)
{
    auto v = o.funcs_named(name);
    return v.size() == 1 ? v[0] : nullptr;
}

// The link-time file bytes at a virtual address, for checking what a patch site holds in
// a file we only parse.
std::vector<unsigned char> file_bytes_at(const char *path, uint64_t vaddr, size_t n)
{
    std::vector<unsigned char> out;
    elf_version(EV_CURRENT);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
    size_t phnum = 0;
    if (elf && elf_getphdrnum(elf, &phnum) == 0) {
        for (size_t i = 0; i < phnum; ++i) {
            GElf_Phdr ph;
            if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
            if (vaddr >= ph.p_vaddr && vaddr + n <= ph.p_vaddr + ph.p_filesz) {
                out.resize(n);
                if (::pread(fd, out.data(), n,
                            static_cast<off_t>(ph.p_offset + vaddr - ph.p_vaddr)) !=
                    static_cast<ssize_t>(n))
                    out.clear();
                break;
            }
        }
    }
    if (elf) elf_end(elf);
    ::close(fd);
    return out;
}

bool is_endbr64(const unsigned char *p)
{
    static const unsigned char endbr[] = {0xf3, 0x0f, 0x1e, 0xfa};
    return std::memcmp(p, endbr, 4) == 0;
}

const std::set<std::string> symdata_funcs = {"symdata_alpha", "symdata_beta", "symdata_local",
                                             "symdata_gamma"};

// Every patchable entry is the entry of one of the symdata functions (right at the symbol,
// or right after its endbr64), each of those functions has exactly one, and the sled there
// is 5 one-byte NOPs (gcc). read(addr, n) gives the bytes the object holds at addr.
template <class Read> void expect_pfe_sites(const loaded_object &o, Read &&read)
{
    std::set<std::string> seen;
    for (uintptr_t e : o.patchable_entries) {
        const ksym *f = o.func_at(e);
        ASSERT_NE(f, nullptr) << hex(e);
        EXPECT_TRUE(symdata_funcs.count(f->name) || f->name == "main") << f->name;
        if (e != f->addr) {
            ASSERT_EQ(e, f->addr + 4) << f->name;
            auto pad = read(f->addr, 4);
            ASSERT_EQ(pad.size(), 4u);
            EXPECT_TRUE(is_endbr64(pad.data())) << f->name;
        }
        auto sled = read(e, 5);
        ASSERT_EQ(sled.size(), 5u);
        for (unsigned char b : sled)
            EXPECT_EQ(b, 0x90) << f->name << " at " << hex(e);
        EXPECT_TRUE(seen.insert(f->name).second) << "two entries in " << f->name;
    }
    for (const std::string &n : symdata_funcs)
        EXPECT_TRUE(seen.count(n)) << n << " has no patchable entry";
}

} // namespace

TEST(kallsyms, main_program_is_first)
{
    auto &ks = kallsyms::instance();
    ks.refresh();
    auto objs = ks.objects();
    ASSERT_FALSE(objs->empty());
    const loaded_object &m = *objs->front();
    EXPECT_TRUE(m.is_main);
    EXPECT_FALSE(m.is_vdso);
    EXPECT_EQ(m.path, real_path("/proc/self/exe"));
    EXPECT_EQ(m.name, m.path.substr(m.path.rfind('/') + 1));
    EXPECT_EQ(
        std::count_if(objs->begin(), objs->end(), [](const object_ptr &o) { return o->is_main; }),
        1);
    EXPECT_EQ(ks.object_of(fn_addr(keep_add)), objs->front());

    // Ids are distinct.
    std::set<uint64_t> ids;
    for (const object_ptr &o : *objs)
        EXPECT_TRUE(ids.insert(o->id).second);
}

TEST(kallsyms, finds_own_functions)
{
    auto &ks = kallsyms::instance();
    auto hits = ks.lookup_func("symtest_add");
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_TRUE(hits[0].obj->is_main);
    EXPECT_EQ(hits[0].sym->addr, fn_addr(keep_add));
    EXPECT_EQ(hits[0].sym->type, STT_FUNC);
    EXPECT_EQ(hits[0].sym->bind, STB_GLOBAL);
    EXPECT_GT(hits[0].sym->size, 8u);

    auto mul = ks.lookup_func("symtest_mul");
    ASSERT_EQ(mul.size(), 1u);
    EXPECT_EQ(mul[0].sym->addr, fn_addr(keep_mul));

    // The alias has its own name and the same address.
    auto alias = ks.lookup_func("symtest_add_alias");
    ASSERT_EQ(alias.size(), 1u);
    EXPECT_EQ(alias[0].sym->addr, fn_addr(keep_add));

    // Qualified by the main program's name.
    EXPECT_EQ(ks.lookup_func(program_name() + ":symtest_sub").size(), 1u);
    EXPECT_TRUE(ks.lookup_func("libc:symtest_sub").empty());
    EXPECT_TRUE(ks.lookup_func("symtest_no_such_function").empty());
}

TEST(kallsyms, libc_functions)
{
    auto &ks = kallsyms::instance();
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(libc, nullptr);
    uintptr_t real_malloc = addr_of(dlsym(libc, "malloc"));
    dlclose(libc);
    ASSERT_NE(real_malloc, 0u);

    auto q = ks.lookup_func("libc:malloc");
    ASSERT_EQ(q.size(), 1u);
    EXPECT_EQ(q[0].obj->name, "libc.so.6");
    EXPECT_EQ(q[0].sym->addr, real_malloc);
    EXPECT_TRUE(q[0].obj->is_text(real_malloc));
    EXPECT_EQ(ks.lookup_func("libc.so.6:malloc").size(), 1u);
    EXPECT_EQ(ks.lookup_func(q[0].obj->path + ":malloc").size(), 1u);
    EXPECT_TRUE(ks.lookup_func("libc.so.7:malloc").empty());
    EXPECT_TRUE(ks.lookup_func("lib:malloc").empty());

    auto any = ks.lookup_func("malloc");
    EXPECT_TRUE(std::any_of(any.begin(), any.end(), [&](const sym_hit &h) {
        return h.obj == q[0].obj && h.sym->addr == real_malloc;
    }));

    // Aliases collapse to the name perf would pick: malloc, not __libc_malloc.
    auto at = ks.lookup_addr(real_malloc);
    ASSERT_TRUE(at);
    EXPECT_EQ(at->sym->name, "malloc");
    EXPECT_EQ(at->obj, q[0].obj);
}

// glibc keeps cfree as a compatibility version of free (cfree@GLIBC_2.2.5, free@@...): the
// name of the address is the one new programs link against.
TEST(kallsyms, compatibility_versions_name_last)
{
    auto &ks = kallsyms::instance();
    auto f = ks.lookup_func("libc.so.6:free");
    ASSERT_EQ(f.size(), 1u);
    auto c = ks.lookup_func("libc.so.6:cfree");
    if (c.empty() || c[0].sym->addr != f[0].sym->addr)
        GTEST_SKIP() << "this libc has no cfree alias of free";
    EXPECT_TRUE(c[0].sym->compat);
    EXPECT_FALSE(f[0].sym->compat);
    auto at = ks.lookup_addr(f[0].sym->addr);
    ASSERT_TRUE(at);
    EXPECT_EQ(at->sym->name, "free");
}

TEST(kallsyms, lookup_addr_with_offset)
{
    auto &ks = kallsyms::instance();
    uintptr_t a = fn_addr(keep_add);
    auto hit = ks.lookup_addr(a + 3);
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->sym->name, "symtest_add"); // the alias loses on name order
    EXPECT_EQ(a + 3 - hit->sym->addr, 3u);

    auto last = ks.lookup_addr(a + hit->sym->size - 1);
    ASSERT_TRUE(last);
    EXPECT_EQ(last->sym->addr, a);

    // Data symbols answer for addresses inside them.
    auto d = ks.lookup_addr(addr_of(&symtest_table[2]));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->sym->name, "symtest_table");
    EXPECT_EQ(d->sym->type, STT_OBJECT);
    EXPECT_EQ(d->sym->size, sizeof symtest_table);

    auto data = ks.lookup_data("symtest_table");
    ASSERT_EQ(data.size(), 1u);
    EXPECT_EQ(data[0].sym->addr, addr_of(symtest_table));
    EXPECT_TRUE(ks.lookup_data("symtest_add").empty());

    EXPECT_FALSE(ks.lookup_addr(0x10));
}

TEST(kallsyms, object_of_and_is_text)
{
    auto &ks = kallsyms::instance();
    auto m = ks.object_of(fn_addr(keep_add));
    ASSERT_TRUE(m);
    EXPECT_TRUE(m->is_main);
    EXPECT_TRUE(m->contains(fn_addr(keep_add)));
    EXPECT_TRUE(m->is_text(fn_addr(keep_add)));
    EXPECT_TRUE(m->contains(addr_of(symtest_table)));
    EXPECT_FALSE(m->is_text(addr_of(symtest_table)));
    EXPECT_EQ(ks.object_of(addr_of(symtest_table)), m);
    EXPECT_FALSE(ks.object_of(0x10));
    int on_stack = 0;
    EXPECT_FALSE(ks.object_of(addr_of(&on_stack)));
    for (const auto &s : m->segments) {
        EXPECT_EQ(s.start % 4096, 0u);
        EXPECT_EQ(s.end % 4096, 0u);
        EXPECT_LT(s.start, s.end);
    }
}

TEST(kallsyms, vdso)
{
    auto objs = kallsyms::instance().objects();
    auto it =
        std::find_if(objs->begin(), objs->end(), [](const object_ptr &o) { return o->is_vdso; });
    ASSERT_NE(it, objs->end());
    const loaded_object &v = **it;
    EXPECT_EQ(v.name, "[vdso]");
    EXPECT_EQ(v.path, "");
    const ksym *cg = only_func(v, "__vdso_clock_gettime");
    ASSERT_NE(cg, nullptr);
    EXPECT_TRUE(v.is_text(cg->addr));
    // The vdso's clock_gettime is what libc calls; it must be where the symbol says.
    void *vdso = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (vdso) {
        EXPECT_EQ(addr_of(dlsym(vdso, "__vdso_clock_gettime")), cg->addr);
        dlclose(vdso);
    }
    EXPECT_FALSE(kallsyms::instance().lookup_func("vdso:__vdso_clock_gettime").empty());
    EXPECT_EQ(sprint(cg->addr, true), "__vdso_clock_gettime+0x0/" + hex(cg->size) + " [vdso]");
}

TEST(kallsyms, sprint_symbol_format)
{
    uintptr_t a = fn_addr(keep_add);
    auto hit = kallsyms::instance().lookup_addr(a);
    ASSERT_TRUE(hit);
    std::string size = hex(hit->sym->size);
    EXPECT_EQ(sprint(a + 3), "symtest_add+0x3/" + size);
    EXPECT_EQ(sprint(a), "symtest_add+0x0/" + size);
    EXPECT_EQ(sprint(a + 3, true), "symtest_add+0x3/" + size); // no [module] for the program
    EXPECT_EQ(sprint(0x10), "0x10");
    EXPECT_EQ(sprint(0xdeadbeef000), "0xdeadbeef000");

    auto q = kallsyms::instance().lookup_func("libc:malloc");
    ASSERT_EQ(q.size(), 1u);
    EXPECT_EQ(sprint(q[0].sym->addr + 0x10, true),
              "malloc+0x10/" + hex(q[0].sym->size) + " [libc.so.6]");
    EXPECT_EQ(sprint(q[0].sym->addr + 0x10, false), "malloc+0x10/" + hex(q[0].sym->size));

    // Truncation keeps a NUL-terminated prefix and reports what was written.
    char small[8];
    std::memset(small, 'X', sizeof small);
    EXPECT_EQ(sprint_symbol(small, sizeof small, a + 3), 7u);
    EXPECT_EQ(std::string(small), std::string("symtest_add").substr(0, 7));
    char one[1] = {'X'};
    EXPECT_EQ(sprint_symbol(one, 1, a), 0u);
    EXPECT_EQ(one[0], '\0');
    EXPECT_EQ(sprint_symbol(nullptr, 0, a), 0u);
}

TEST(kallsyms, match_funcs_globs)
{
    auto &ks = kallsyms::instance();
    auto names = [](const std::vector<sym_hit> &v) {
        std::set<std::string> s;
        for (const sym_hit &h : v)
            s.insert(h.sym->name);
        return s;
    };
    // The alias shares symtest_add's address, so it collapses into it.
    EXPECT_EQ(names(ks.match_funcs("symtest_*", "")),
              (std::set<std::string>{"symtest_add", "symtest_mul", "symtest_sub"}));
    EXPECT_EQ(ks.match_funcs("symtest_*", "").size(), 3u);
    EXPECT_EQ(names(ks.match_funcs("symtest_*", "symtest_m*")),
              (std::set<std::string>{"symtest_add", "symtest_sub"}));
    EXPECT_EQ(names(ks.match_funcs("symtest_[ms]*", "")),
              (std::set<std::string>{"symtest_mul", "symtest_sub"}));
    EXPECT_EQ(names(ks.match_funcs("symtest_?ul", "")), (std::set<std::string>{"symtest_mul"}));
    EXPECT_EQ(names(ks.match_funcs(program_name() + ":symtest_[!a]*", "*sub")),
              (std::set<std::string>{"symtest_mul"}));
    // One name per address, the kernel's rule: a pattern sees the preferred name only, so
    // one that matches the alias alone selects nothing; the alias's plain name selects the
    // function, under its one name (which the notfilter sees the same way).
    EXPECT_TRUE(ks.match_funcs("symtest_add_*", "").empty());
    EXPECT_EQ(names(ks.match_funcs("symtest_add_alias", "")),
              (std::set<std::string>{"symtest_add"}));
    EXPECT_TRUE(ks.match_funcs("symtest_add", "symtest_add_alias").empty());
    EXPECT_EQ(names(ks.match_funcs("symtest_add", "symtest_add_*")),
              (std::set<std::string>{"symtest_add"}));
    EXPECT_TRUE(ks.match_funcs("libc:symtest_*", "").empty());
    EXPECT_TRUE(ks.match_funcs("", "").empty());
    EXPECT_TRUE(ks.match_funcs("symtest_*", "*").empty());

    auto libc = ks.match_funcs("libc:mall*", "");
    EXPECT_EQ(names(libc).count("malloc"), 1u);
    for (const sym_hit &h : libc)
        EXPECT_EQ(h.obj->name, "libc.so.6");
}

TEST(kallsyms, dlopen_and_dlclose_are_tracked)
{
    auto &ks = kallsyms::instance();
    ks.refresh();
    EXPECT_TRUE(ks.refresh().added.empty()); // nothing moved: nothing to report

    void *h = dlopen(SYMDATA_PFE_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    auto up = ks.refresh();
    ASSERT_EQ(up.added.size(), 1u);
    EXPECT_TRUE(up.removed.empty());
    object_ptr lib = up.added[0];
    EXPECT_EQ(real_path(lib->path.c_str()), real_path(SYMDATA_PFE_LIB));
    EXPECT_EQ(lib->name, "libsymdata_pfe.so");
    EXPECT_FALSE(lib->is_main);
    EXPECT_EQ(ks.objects()->back(), lib);

    uintptr_t beta = addr_of(dlsym(h, "symdata_beta"));
    auto hits = ks.lookup_func("libsymdata_pfe:symdata_beta");
    ASSERT_EQ(hits.size(), 1u);
    EXPECT_EQ(hits[0].sym->addr, beta);
    EXPECT_EQ(hits[0].obj, lib);
    EXPECT_EQ(ks.object_of(beta), lib);
    EXPECT_EQ(sprint(beta + 1, true),
              "symdata_beta+0x1/" + hex(hits[0].sym->size) + " [libsymdata_pfe.so]");
    const ksym *local = only_func(*lib, "symdata_local");
    ASSERT_NE(local, nullptr);
    EXPECT_EQ(local->bind, STB_LOCAL);
    auto counter = ks.lookup_data("libsymdata_pfe:symdata_counter");
    ASSERT_EQ(counter.size(), 1u);
    EXPECT_EQ(counter[0].sym->addr, addr_of(dlsym(h, "symdata_counter")));

    // The NOP sleds, read from the live mapping.
    ASSERT_EQ(lib->patchable_entries.size(), symdata_funcs.size());
    expect_pfe_sites(*lib, [](uintptr_t a, size_t n) {
        auto *p = reinterpret_cast<const unsigned char *>(a);
        return std::vector<unsigned char>(p, p + n);
    });
    EXPECT_TRUE(lib->fentry_got_slots.empty());

    // Parsing the file at the same bias gives the same tables.
    auto parsed = read_object_file(SYMDATA_PFE_LIB, lib->load_bias);
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->patchable_entries, lib->patchable_entries);
    EXPECT_EQ(parsed->funcs.size(), lib->funcs.size());
    EXPECT_NE(parsed->id, lib->id);

    // Unchanged objects keep their object_ptr across refreshes.
    auto before = ks.objects();
    uint64_t id = lib->id;
    dlclose(h);
    ASSERT_EQ(dlopen(SYMDATA_PFE_LIB, RTLD_NOW | RTLD_NOLOAD), nullptr) << "library still loaded";
    up = ks.refresh();
    EXPECT_TRUE(up.added.empty());
    ASSERT_EQ(up.removed.size(), 1u);
    EXPECT_EQ(up.removed[0], lib);
    auto after = ks.objects();
    EXPECT_EQ(after->size() + 1, before->size());
    for (size_t i = 0; i < after->size(); ++i)
        EXPECT_EQ((*after)[i], (*before)[i]);
    EXPECT_TRUE(ks.lookup_func("symdata_beta").empty());
    EXPECT_FALSE(ks.object_of(beta));
    // The old snapshot and object stay readable.
    EXPECT_EQ(only_func(*lib, "symdata_beta")->addr, beta);

    // Loading again is a new object with a new id.
    h = dlopen(SYMDATA_PFE_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr);
    up = ks.refresh();
    ASSERT_EQ(up.added.size(), 1u);
    EXPECT_GT(up.added[0]->id, id);
    dlclose(h);
    up = ks.refresh();
    ASSERT_EQ(up.removed.size(), 1u);
}

TEST(read_object_file, patchable_entries_in_pie)
{
    const uintptr_t bias = 0x7f1234560000;
    std::string err;
    auto o = read_object_file(SYMDATA_PIE_EXE, bias, &err);
    ASSERT_TRUE(o) << err;
    EXPECT_EQ(o->load_bias, bias);
    EXPECT_EQ(o->name, "symdata_pie");
    const ksym *alpha = only_func(*o, "symdata_alpha");
    ASSERT_NE(alpha, nullptr);
    EXPECT_GT(alpha->addr, bias);
    EXPECT_TRUE(o->is_text(alpha->addr));
    ASSERT_EQ(o->patchable_entries.size(), symdata_funcs.size() + 1); // + main
    expect_pfe_sites(
        *o, [&](uintptr_t a, size_t n) { return file_bytes_at(SYMDATA_PIE_EXE, a - bias, n); });
}

TEST(read_object_file, patchable_entries_in_non_pie)
{
    // ET_EXEC is loaded where it was linked: the bias is ignored.
    auto o = read_object_file(SYMDATA_NOPIE_EXE, 0x7f0000000000);
    ASSERT_TRUE(o);
    const ksym *alpha = only_func(*o, "symdata_alpha");
    ASSERT_NE(alpha, nullptr);
    EXPECT_LT(alpha->addr, 0x7f0000000000u);
    ASSERT_EQ(o->patchable_entries.size(), symdata_funcs.size() + 1);
    expect_pfe_sites(*o,
                     [&](uintptr_t a, size_t n) { return file_bytes_at(SYMDATA_NOPIE_EXE, a, n); });
}

TEST(read_object_file, fentry_got_slots)
{
    const uintptr_t bias = 0x100000000;
    auto o = read_object_file(SYMDATA_FENTRY_LIB, bias);
    ASSERT_TRUE(o);
    EXPECT_TRUE(o->patchable_entries.empty());
    ASSERT_FALSE(o->fentry_got_slots.empty());
    for (uintptr_t slot : o->fentry_got_slots) {
        EXPECT_TRUE(o->contains(slot));
        EXPECT_FALSE(o->is_text(slot));
    }
    // Every symdata function starts (after any endbr64) with call *__fentry__@GOTPCREL(%rip),
    // whose slot must be one of those found.
    for (const std::string &n : symdata_funcs) {
        const ksym *f = only_func(*o, n);
        ASSERT_NE(f, nullptr) << n;
        auto b = file_bytes_at(SYMDATA_FENTRY_LIB, f->addr - bias, 10);
        ASSERT_EQ(b.size(), 10u);
        size_t at = is_endbr64(b.data()) ? 4 : 0;
        ASSERT_EQ(b[at], 0xff) << n;
        ASSERT_EQ(b[at + 1], 0x15) << n;
        int32_t disp;
        std::memcpy(&disp, &b[at + 2], 4);
        uintptr_t slot = f->addr + at + 6 + static_cast<intptr_t>(disp);
        EXPECT_TRUE(
            std::binary_search(o->fentry_got_slots.begin(), o->fentry_got_slots.end(), slot))
            << n << " calls through " << hex(slot);
    }
}

TEST(read_object_file, stripped_object_takes_its_debug_files_symbols)
{
    // A stripped copy of the PIE test program with its symbols in a separate debug file,
    // found through its .gnu_debuglink next to it (as gdb and perf look), then in .debug/.
    char dir[] = "/tmp/symbols_debug_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string d = dir, exe = d + "/prog", dbg = d + "/prog.debug";
    const std::string cmd = "objcopy --only-keep-debug " SYMDATA_PIE_EXE " " + dbg +
                            " && objcopy --strip-all --add-gnu-debuglink=" + dbg + " " +
                            SYMDATA_PIE_EXE " " + exe;
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    auto stripped_only = [&] {
        auto o = read_object_file(exe, 0x500000000, nullptr, true);
        return o && !only_func(*o, "symdata_alpha");
    };
    // Asked for only.
    auto plain = read_object_file(exe, 0x500000000);
    ASSERT_TRUE(plain);
    EXPECT_EQ(only_func(*plain, "symdata_alpha"), nullptr);
    auto o = read_object_file(exe, 0x500000000, nullptr, true);
    ASSERT_TRUE(o);
    const ksym *alpha = only_func(*o, "symdata_alpha");
    ASSERT_NE(alpha, nullptr);
    auto full = read_object_file(SYMDATA_PIE_EXE, 0x500000000);
    ASSERT_TRUE(full);
    EXPECT_EQ(alpha->addr, only_func(*full, "symdata_alpha")->addr);
    EXPECT_EQ(o->funcs.size(), full->funcs.size());
    ASSERT_EQ(std::system(("mkdir " + d + "/.debug && mv " + dbg + " " + d + "/.debug/").c_str()),
              0);
    o = read_object_file(exe, 0x500000000, nullptr, true);
    ASSERT_TRUE(o);
    EXPECT_NE(only_func(*o, "symdata_alpha"), nullptr);
    ASSERT_EQ(std::system(("rm -r " + d + "/.debug").c_str()), 0);
    EXPECT_TRUE(stripped_only()); // without it: .dynsym only
    std::system(("rm -rf " + d).c_str());
}

TEST(read_object_file, errors)
{
    std::string err;
    EXPECT_FALSE(read_object_file("/nonexistent/libnothing.so", 0, &err));
    EXPECT_NE(err.find("/nonexistent/libnothing.so"), std::string::npos);
    err.clear();
    char path[] = "/tmp/symbols_test_XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "not an elf file", 15), 15);
    close(fd);
    EXPECT_FALSE(read_object_file(path, 0, &err));
    EXPECT_FALSE(err.empty());
    unlink(path);
}

TEST(kallsyms, concurrent_lookups_during_refresh)
{
    auto &ks = kallsyms::instance();
    std::atomic<bool> stop{false};
    std::atomic<long> bad{0};
    uintptr_t a = fn_addr(keep_add);
    std::vector<std::thread> readers;
    for (int t = 0; t < 2; ++t)
        readers.emplace_back([&] {
            char buf[128];
            while (!stop.load()) {
                auto hit = ks.lookup_addr(a + 3);
                if (!hit || hit->sym->name != "symtest_add") bad++;
                sprint_symbol(buf, sizeof buf, a + 3);
                if (std::strncmp(buf, "symtest_add+0x3/", 16) != 0) bad++;
                if (ks.match_funcs("symdata_*", "").size() > 4) bad++;
            }
        });
    for (int i = 0; i < 50; ++i) {
        void *h = dlopen(SYMDATA_PFE_LIB, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(h, nullptr);
        ks.refresh();
        dlclose(h);
        ks.refresh();
    }
    stop = true;
    for (auto &t : readers)
        t.join();
    EXPECT_EQ(bad.load(), 0);
}

TEST(object_spec, names_a_library_by_name_prefix_path_or_glob)
{
    using dprobe::object_spec_matches;
    const char *name = "libpython3.11.so.1.0", *path = "/usr/lib/libpython3.11.so.1.0";
    EXPECT_TRUE(object_spec_matches("libpython3.11.so.1.0", name, path));
    EXPECT_TRUE(object_spec_matches("libpython3.11", name, path)); // up to a dot
    EXPECT_TRUE(object_spec_matches("libpython3.11.so", name, path));
    EXPECT_TRUE(object_spec_matches(path, name, path));
    EXPECT_TRUE(object_spec_matches("libpython3", name, path)); // "libpython3" + ".11..."
    EXPECT_FALSE(object_spec_matches("libpython", name, path)); // not up to a dot
    EXPECT_FALSE(object_spec_matches("libpython3.1", name, path));
    // Globs: on the name, or on the path when they hold a '/'.
    EXPECT_TRUE(object_spec_matches("libpython3*", name, path));
    EXPECT_TRUE(object_spec_matches("libpython3.1?.so*", name, path));
    EXPECT_TRUE(object_spec_matches("/usr/lib/*", name, path));
    EXPECT_FALSE(object_spec_matches("*/lib64/*", name, path));
    EXPECT_FALSE(object_spec_matches("libperl*", name, path));
    EXPECT_FALSE(object_spec_matches("libpython3*", "libz.so.1", "/usr/lib/libz.so.1"));
}
