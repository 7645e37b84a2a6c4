// Reading one object's segments, symbols and patch-site tables from its ELF file (libelf).
// This is the slow, allocating side of kallsyms: it runs on refresh, never on a probe hit.
#include "core/symbols.h"
#include "core/sym_elf.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <tuple>
#include <unordered_map>

namespace dprobe
{

namespace
{

bool libelf_ready()
{
    static const bool ok = elf_version(EV_CURRENT) != EV_NONE;
    return ok;
}

void set_err(std::string *err, std::string msg)
{
    if (err) *err = std::move(msg);
}

std::string elf_err(const char *what)
{
    return std::string(what) + ": " + elf_errmsg(-1);
}

int bind_rank(uint8_t bind)
{
    switch (bind) {
    case STB_GLOBAL:
        return 0;
    case STB_WEAK:
        return 1;
    case STB_LOCAL:
        return 2;
    default:
        return 3;
    }
}

// Sort by address with the preferred alias first, after dropping exact duplicates (a symbol
// listed twice, e.g. a local and a global entry of one name, keeps its best version and
// binding), and build the address-reach and by-name indexes.
void sort_symbols(std::vector<ksym> &v, std::vector<uintptr_t> &reach, std::vector<uint32_t> &names)
{
    std::sort(v.begin(), v.end(), [](const ksym &a, const ksym &b) {
        return std::tie(a.addr, a.name) < std::tie(b.addr, b.name) ||
               (a.addr == b.addr && a.name == b.name &&
                std::make_pair(a.compat, bind_rank(a.bind)) <
                    std::make_pair(b.compat, bind_rank(b.bind)));
    });
    v.erase(std::unique(
                v.begin(), v.end(),
                [](const ksym &a, const ksym &b) { return a.addr == b.addr && a.name == b.name; }),
            v.end());
    // Among aliases: the default version before a compatibility one (free over cfree, which
    // glibc keeps only as free@GLIBC_2.2.5), then perf's choice: global before weak before
    // local, the fewest leading underscores (malloc over __libc_malloc), then by name for a
    // stable answer.
    std::sort(v.begin(), v.end(), [](const ksym &a, const ksym &b) {
        int ra = bind_rank(a.bind), rb = bind_rank(b.bind);
        size_t ua = a.name.find_first_not_of('_'), ub = b.name.find_first_not_of('_');
        return std::tie(a.addr, a.compat, ra, ua, a.name) <
               std::tie(b.addr, b.compat, rb, ub, b.name);
    });
    reach.resize(v.size());
    uintptr_t hi = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        hi = std::max<uintptr_t>(hi, v[i].addr + std::max<uint64_t>(v[i].size, 1));
        reach[i] = hi;
    }
    names.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        names[i] = static_cast<uint32_t>(i);
    // Stable: among equal names the address order (and so the preferred alias) is kept.
    std::stable_sort(names.begin(), names.end(),
                     [&](uint32_t a, uint32_t b) { return v[a].name < v[b].name; });
}

int prot_of(uint32_t p_flags)
{
    return ((p_flags & PF_R) ? PROT_READ : 0) | ((p_flags & PF_W) ? PROT_WRITE : 0) |
           ((p_flags & PF_X) ? PROT_EXEC : 0);
}

struct section {
    Elf_Scn *scn;
    GElf_Shdr shdr;
    const char *name;
};

// VERSYM: the .gnu.version section of a .dynsym, whose entries mark compatibility versions
// with VERSYM_HIDDEN (a .symtab spells them into the name instead: one '@', not two).
void read_symbols(Elf *elf, const section &symtab, uintptr_t bias, loaded_object &obj,
                  const section *versym = nullptr)
{
    Elf_Data *data = elf_getdata(symtab.scn, nullptr);
    if (!data || symtab.shdr.sh_entsize == 0) return;
    Elf_Data *vdata = versym ? elf_getdata(versym->scn, nullptr) : nullptr;
    size_t n = symtab.shdr.sh_size / symtab.shdr.sh_entsize;
    for (size_t i = 1; i < n; ++i) {
        GElf_Sym s;
        if (!gelf_getsym(data, static_cast<int>(i), &s)) break;
        if (s.st_shndx == SHN_UNDEF || s.st_shndx == SHN_ABS) continue;
        uint8_t type = GELF_ST_TYPE(s.st_info);
        bool func = type == STT_FUNC || type == STT_GNU_IFUNC;
        if (!func && type != STT_OBJECT) continue;
        if (func && s.st_size == 0) continue;
        const char *name = elf_strptr(elf, symtab.shdr.sh_link, s.st_name);
        if (!name || !*name) continue;
        // A .symtab (a debug file's, glibc's) may spell versions into names: "f@@GLIBC_2.34".
        const char *at = std::strchr(name, '@');
        ksym k{static_cast<uintptr_t>(s.st_value + bias), s.st_size, type,
               static_cast<uint8_t>(GELF_ST_BIND(s.st_info)),
               at ? std::string(name, static_cast<size_t>(at - name)) : std::string(name)};
        GElf_Versym vs;
        if (at)
            k.compat = at[1] != '@';
        else if (vdata && gelf_getversym(vdata, static_cast<int>(i), &vs))
            k.compat = (vs & 0x8000) != 0; // VERSYM_HIDDEN
        (func ? obj.funcs : obj.data).push_back(std::move(k));
    }
}

// Dynamic relocations tell two things: which GOT slots receive &__fentry__ (the call sites
// of a PIE -mfentry build go through them) and, for ET_DYN, the link-time value of each
// R_X86_64_RELATIVE word (the addend is authoritative; the file's copy is a convenience).
void read_dynamic_relocs(Elf *elf, const std::vector<section> &secs, uintptr_t bias,
                         loaded_object &obj, std::unordered_map<uint64_t, uint64_t> &relative)
{
    for (const section &rs : secs) {
        if (rs.shdr.sh_type != SHT_RELA || !(rs.shdr.sh_flags & SHF_ALLOC) ||
            rs.shdr.sh_entsize == 0)
            continue;
        Elf_Data *data = elf_getdata(rs.scn, nullptr);
        if (!data) continue;
        // sh_link names the symbol table the relocations refer to (.dynsym).
        Elf_Scn *symscn = elf_getscn(elf, rs.shdr.sh_link);
        GElf_Shdr symshdr;
        Elf_Data *symdata = nullptr;
        if (symscn && gelf_getshdr(symscn, &symshdr)) symdata = elf_getdata(symscn, nullptr);
        size_t n = rs.shdr.sh_size / rs.shdr.sh_entsize;
        for (size_t i = 0; i < n; ++i) {
            GElf_Rela r;
            if (!gelf_getrela(data, static_cast<int>(i), &r)) break;
            uint32_t type = GELF_R_TYPE(r.r_info);
            if (type == R_X86_64_RELATIVE) {
                relative[r.r_offset] = static_cast<uint64_t>(r.r_addend);
                continue;
            }
            if (type != R_X86_64_GLOB_DAT && type != R_X86_64_JUMP_SLOT) continue;
            GElf_Sym s;
            if (!symdata || !gelf_getsym(symdata, static_cast<int>(GELF_R_SYM(r.r_info)), &s))
                continue;
            const char *name = elf_strptr(elf, symshdr.sh_link, s.st_name);
            if (name && std::strcmp(name, "__fentry__") == 0)
                obj.fentry_got_slots.push_back(static_cast<uintptr_t>(r.r_offset + bias));
        }
    }
    std::sort(obj.fentry_got_slots.begin(), obj.fentry_got_slots.end());
    obj.fentry_got_slots.erase(
        std::unique(obj.fentry_got_slots.begin(), obj.fentry_got_slots.end()),
        obj.fentry_got_slots.end());
}

// __patchable_function_entries holds one 8-byte absolute address per sled. In ET_EXEC that
// is the runtime address. In ET_DYN (PIE, shared) each word carries an R_X86_64_RELATIVE
// relocation: its link-time value (the addend, which ld also writes into the word) plus the
// load bias is the runtime address.
void read_patchable_entries(const section &ps, bool dyn, uintptr_t bias,
                            const std::unordered_map<uint64_t, uint64_t> &relative,
                            loaded_object &obj)
{
    if (ps.shdr.sh_type == SHT_NOBITS) return;
    Elf_Data *data = elf_getdata(ps.scn, nullptr);
    if (!data || !data->d_buf) return;
    size_t n = data->d_size / 8;
    for (size_t i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, static_cast<const char *>(data->d_buf) + i * 8, 8);
        if (dyn) {
            auto it = relative.find(ps.shdr.sh_addr + i * 8);
            if (it != relative.end()) v = it->second;
        }
        if (v == 0) // sled of a function the linker discarded
            continue;
        obj.patchable_entries.push_back(static_cast<uintptr_t>(v + (dyn ? bias : 0)));
    }
}

// A stripped object's symbols from its separate debug file, as gdb and perf find it: by
// build id under /usr/lib/debug/.build-id, then by its .gnu_debuglink name next to it, in
// its .debug directory and under /usr/lib/debug. The debug file's .symtab has the same
// addresses. DIR: the object's directory. False when there is none.
bool read_debug_symbols(const std::vector<section> &secs, Elf *elf, const std::string &dir,
                        uintptr_t bias, loaded_object &obj)
{
    std::vector<std::string> cands;
    for (const section &s : secs) {
        if (s.shdr.sh_type == SHT_NOTE && s.name &&
            std::strcmp(s.name, ".note.gnu.build-id") == 0) {
            Elf_Data *d = elf_getdata(s.scn, nullptr);
            GElf_Nhdr nh;
            size_t name_off, desc_off;
            if (d && gelf_getnote(d, 0, &nh, &name_off, &desc_off) &&
                nh.n_type == NT_GNU_BUILD_ID && nh.n_descsz > 1) {
                const auto *id = static_cast<const unsigned char *>(d->d_buf) + desc_off;
                char hex[3];
                std::string h;
                for (size_t i = 0; i < nh.n_descsz; i++) {
                    std::snprintf(hex, sizeof hex, "%02x", id[i]);
                    h += hex;
                }
                cands.push_back("/usr/lib/debug/.build-id/" + h.substr(0, 2) + "/" + h.substr(2) +
                                ".debug");
            }
        }
        if (s.name && std::strcmp(s.name, ".gnu_debuglink") == 0) {
            Elf_Data *d = elf_getdata(s.scn, nullptr);
            if (d && d->d_size > 4) {
                std::string link(static_cast<const char *>(d->d_buf),
                                 strnlen(static_cast<const char *>(d->d_buf), d->d_size));
                if (!link.empty() && link.find('/') == std::string::npos) {
                    cands.push_back(dir + "/" + link);
                    cands.push_back(dir + "/.debug/" + link);
                    cands.push_back("/usr/lib/debug" + dir + "/" + link);
                }
            }
        }
    }
    (void)elf;
    for (const std::string &c : cands) {
        int fd = ::open(c.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        Elf *de = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
        bool found = false;
        size_t shstrndx = 0;
        if (de && elf_kind(de) == ELF_K_ELF && elf_getshdrstrndx(de, &shstrndx) == 0) {
            for (Elf_Scn *scn = elf_nextscn(de, nullptr); scn && !found;
                 scn = elf_nextscn(de, scn)) {
                section s{scn, {}, nullptr};
                if (!gelf_getshdr(scn, &s.shdr) || s.shdr.sh_type != SHT_SYMTAB) continue;
                s.name = elf_strptr(de, shstrndx, s.shdr.sh_name);
                read_symbols(de, s, bias, obj);
                found = true;
            }
        }
        if (de) elf_end(de);
        ::close(fd);
        if (found) return true;
    }
    return false;
}

// DT_SONAME and DT_NEEDED: strings of the section its sh_link names.
void read_dynamic_names(Elf *elf, const section &dynamic, loaded_object &obj)
{
    Elf_Data *data = elf_getdata(dynamic.scn, nullptr);
    if (!data || !dynamic.shdr.sh_entsize) return;
    const size_t n = dynamic.shdr.sh_size / dynamic.shdr.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
        GElf_Dyn d;
        if (!gelf_getdyn(data, static_cast<int>(i), &d) || d.d_tag == DT_NULL) break;
        if (d.d_tag != DT_NEEDED && d.d_tag != DT_SONAME) continue;
        const char *name = elf_strptr(elf, dynamic.shdr.sh_link, d.d_un.d_val);
        if (!name) continue;
        if (d.d_tag == DT_NEEDED)
            obj.needed.emplace_back(name);
        else
            obj.soname = name;
    }
}

std::shared_ptr<loaded_object> read_elf(Elf *elf, uintptr_t load_bias, std::string *err,
                                        const std::string &dir = "")
{
    if (elf_kind(elf) != ELF_K_ELF) {
        set_err(err, "not an ELF file");
        return nullptr;
    }
    GElf_Ehdr eh;
    if (!gelf_getehdr(elf, &eh)) {
        set_err(err, elf_err("gelf_getehdr"));
        return nullptr;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
        set_err(err, "not an x86-64 ELF object");
        return nullptr;
    }
    bool dyn = eh.e_type == ET_DYN;
    uintptr_t bias = dyn ? load_bias : 0;

    auto obj = std::make_shared<loaded_object>();
    obj->id = new_object_id();
    obj->load_bias = load_bias;

    size_t phnum = 0;
    if (elf_getphdrnum(elf, &phnum) == 0) {
        uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
        for (size_t i = 0; i < phnum; ++i) {
            GElf_Phdr ph;
            if (!gelf_getphdr(elf, static_cast<int>(i), &ph) || ph.p_type != PT_LOAD) continue;
            uintptr_t start = (bias + ph.p_vaddr) & ~(page - 1);
            uintptr_t end = (bias + ph.p_vaddr + ph.p_memsz + page - 1) & ~(page - 1);
            obj->segments.push_back({start, end, prot_of(ph.p_flags)});
        }
    }

    size_t shstrndx = 0;
    std::vector<section> secs;
    if (elf_getshdrstrndx(elf, &shstrndx) == 0) {
        for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
            section s{scn, {}, nullptr};
            if (!gelf_getshdr(scn, &s.shdr)) continue;
            s.name = elf_strptr(elf, shstrndx, s.shdr.sh_name);
            secs.push_back(s);
        }
    }

    const section *symtab = nullptr, *dynsym = nullptr;
    for (const section &s : secs) {
        if (s.shdr.sh_type == SHT_SYMTAB && !symtab)
            symtab = &s;
        else if (s.shdr.sh_type == SHT_DYNSYM && !dynsym)
            dynsym = &s;
    }
    // .symtab is a superset of .dynsym when present (it is stripped from most distro
    // libraries, whose separate debug file may have it).
    if (symtab)
        read_symbols(elf, *symtab, bias, *obj);
    else if (!(!dir.empty() && read_debug_symbols(secs, elf, dir, bias, *obj)) && dynsym) {
        const section *versym = nullptr;
        const size_t dynsym_index = elf_ndxscn(dynsym->scn);
        for (const section &s : secs)
            if (s.shdr.sh_type == SHT_GNU_versym && s.shdr.sh_link == dynsym_index) versym = &s;
        read_symbols(elf, *dynsym, bias, *obj, versym);
    }
    sort_symbols(obj->funcs, obj->func_reach, obj->func_names);
    sort_symbols(obj->data, obj->data_reach, obj->data_names);
    for (const section &s : secs)
        if (s.shdr.sh_type == SHT_DYNAMIC) read_dynamic_names(elf, s, *obj);

    std::unordered_map<uint64_t, uint64_t> relative;
    read_dynamic_relocs(elf, secs, bias, *obj, relative);
    for (const section &s : secs)
        if (s.name && std::strcmp(s.name, "__patchable_function_entries") == 0)
            read_patchable_entries(s, dyn, bias, relative, *obj);
    std::sort(obj->patchable_entries.begin(), obj->patchable_entries.end());
    obj->patchable_entries.erase(
        std::unique(obj->patchable_entries.begin(), obj->patchable_entries.end()),
        obj->patchable_entries.end());
    return obj;
}

// The directory a debug link is looked for in: the file's own (through a symbolic link:
// /proc/self/exe is the program's).
std::string object_dir(const std::string &path)
{
    char rp[PATH_MAX];
    std::string p = realpath(path.c_str(), rp) ? std::string(rp) : path;
    size_t slash = p.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
}

std::string basename_of(const std::string &path)
{
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

} // namespace

uint64_t new_object_id() noexcept
{
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<loaded_object> read_object_file(const std::string &path, uintptr_t load_bias,
                                                std::string *err, bool debug_file)
{
    if (!libelf_ready()) {
        set_err(err, "libelf: version mismatch");
        return nullptr;
    }
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        set_err(err, path + ": " + std::strerror(errno));
        return nullptr;
    }
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    std::shared_ptr<loaded_object> obj;
    if (!elf)
        set_err(err, elf_err(path.c_str()));
    else
        obj = read_elf(elf, load_bias, err, debug_file ? object_dir(path) : std::string());
    if (elf) elf_end(elf);
    ::close(fd);
    if (obj) {
        obj->path = path;
        obj->name = basename_of(path);
    }
    return obj;
}

std::shared_ptr<loaded_object> read_object_image(const void *image, size_t size,
                                                 uintptr_t load_bias, std::string *err)
{
    if (!libelf_ready()) {
        set_err(err, "libelf: version mismatch");
        return nullptr;
    }
    // elf_memory may write to its buffer (it converts in place); never hand it mapped code.
    std::vector<char> copy(static_cast<const char *>(image),
                           static_cast<const char *>(image) + size);
    Elf *elf = elf_memory(copy.data(), copy.size());
    if (!elf) {
        set_err(err, elf_err("elf_memory"));
        return nullptr;
    }
    auto obj = read_elf(elf, load_bias, err);
    elf_end(elf);
    return obj;
}

} // namespace dprobe
