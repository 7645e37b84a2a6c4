#include "tracefs/dwarf/debuginfo.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace dprobe
{

namespace
{

bool has_code(Dwarf_Die *die, uint64_t *entry)
{
    if (dwarf_hasattr(die, DW_AT_declaration)) return false;
    Dwarf_Addr pc = 0;
    if (dwarf_entrypc(die, &pc) != 0) return false;
    *entry = pc;
    return true;
}

dwarf_function make_function(Dwarf_Die *cu, Dwarf_Die *die, bool inlined, uint64_t entry)
{
    dwarf_function f;
    f.cu = *cu;
    f.die = *die;
    f.inlined = inlined;
    f.entry = entry;
    const char *n = dwarf_diename(die);
    f.name = n ? n : "";
    f.decl_file = dwarf_decl_file(die);
    dwarf_decl_line(die, &f.decl_line);
    return f;
}

// Calls FN on every child of DIE, descending into the DIEs that can hold functions: C++
// namespaces and classes, and (when BODIES) function bodies, blocks and inlined copies.
void walk_children(Dwarf_Die *die, bool bodies, const std::function<void(Dwarf_Die *)> &fn)
{
    Dwarf_Die child;
    if (dwarf_child(die, &child) != 0) return;
    do {
        fn(&child);
        switch (dwarf_tag(&child)) {
        case DW_TAG_namespace:
        case DW_TAG_class_type:
        case DW_TAG_structure_type:
        case DW_TAG_union_type:
            walk_children(&child, bodies, fn);
            break;
        case DW_TAG_subprogram:
        case DW_TAG_lexical_block:
        case DW_TAG_inlined_subroutine:
            if (bodies) walk_children(&child, bodies, fn);
            break;
        default:
            break;
        }
    } while (dwarf_siblingof(&child, &child) == 0);
}

std::string array_dims(Dwarf_Die *array)
{
    std::string s;
    Dwarf_Die sub;
    if (dwarf_child(array, &sub) != 0) return "[]";
    do {
        if (dwarf_tag(&sub) != DW_TAG_subrange_type) continue;
        Dwarf_Attribute a;
        Dwarf_Word v;
        if (dwarf_attr_integrate(&sub, DW_AT_count, &a) && dwarf_formudata(&a, &v) == 0)
            s += "[" + std::to_string(v) + "]";
        else if (dwarf_attr_integrate(&sub, DW_AT_upper_bound, &a) && dwarf_formudata(&a, &v) == 0)
            s += "[" + std::to_string(v + 1) + "]";
        else
            s += "[]";
    } while (dwarf_siblingof(&sub, &sub) == 0);
    return s;
}

bool type_of(Dwarf_Die *die, Dwarf_Die *out)
{
    Dwarf_Attribute a;
    return dwarf_attr_integrate(die, DW_AT_type, &a) && dwarf_formref_die(&a, out);
}

} // namespace

bool file_matches(std::string_view full, std::string_view spec)
{
    if (spec.empty() || full.size() < spec.size()) return false;
    if (full.substr(full.size() - spec.size()) != spec) return false;
    return full.size() == spec.size() || spec[0] == '/' ||
           full[full.size() - spec.size() - 1] == '/';
}

// Where distributions install the DWARF of stripped files (the -dbg / -dbgsym packages), by
// build id, then by .gnu_debuglink name, as gdb and perf look for it.
std::vector<std::string> separate_debug_files(Elf *elf, const std::string &path)
{
    std::vector<std::string> out;
    const void *id = nullptr;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    if (n > 1) {
        static const char hexd[] = "0123456789abcdef";
        std::string hex;
        for (ssize_t i = 0; i < n; i++) {
            unsigned char b = static_cast<const unsigned char *>(id)[i];
            hex += hexd[b >> 4];
            hex += hexd[b & 15];
        }
        out.push_back("/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) +
                      ".debug");
    }
    GElf_Word crc;
    if (const char *link = dwelf_elf_gnu_debuglink(elf, &crc)) {
        char buf[PATH_MAX];
        std::string real = ::realpath(path.c_str(), buf) ? buf : path;
        std::string dir = real.substr(0, real.rfind('/') + 1);
        out.push_back(dir + link);
        out.push_back(dir + ".debug/" + link);
        out.push_back("/usr/lib/debug" + dir + link);
    }
    return out;
}

namespace
{

// CRC-32 (IEEE 802.3, reflected) of the file FD, the checksum .gnu_debuglink records.
bool file_crc32(int fd, uint32_t &crc)
{
    static const auto table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    uint32_t c = 0xffffffffu;
    unsigned char buf[65536];
    off_t off = 0;
    for (;;) {
        ssize_t n = ::pread(fd, buf, sizeof buf, off);
        if (n < 0) return false;
        if (n == 0) break;
        for (ssize_t i = 0; i < n; i++)
            c = table[(c ^ buf[i]) & 0xff] ^ (c >> 8);
        off += n;
    }
    crc = c ^ 0xffffffffu;
    return true;
}

// Whether the file DBG_FD holds the debug information of ELF, as gdb checks it: the same
// build id when ELF has one, else the CRC its .gnu_debuglink records. A debug file left by
// another build of the same name would give wrong addresses, offsets and types.
bool debug_file_matches(Elf *elf, int dbg_fd)
{
    const void *id = nullptr;
    const ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    if (n > 0) {
        Elf *dbg = elf_begin(dbg_fd, ELF_C_READ_MMAP, nullptr);
        if (!dbg) return false;
        const void *did = nullptr;
        const ssize_t dn = dwelf_elf_gnu_build_id(dbg, &did);
        const bool same = dn == n && std::memcmp(id, did, static_cast<size_t>(n)) == 0;
        elf_end(dbg);
        return same;
    }
    GElf_Word want = 0;
    uint32_t crc = 0;
    return dwelf_elf_gnu_debuglink(elf, &want) && file_crc32(dbg_fd, crc) && crc == want;
}

} // namespace

std::unique_ptr<debuginfo> debuginfo::open(const std::string &path, std::string *err)
{
    std::unique_ptr<debuginfo> d(new debuginfo);
    d->path_ = path;
    d->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (d->fd_ < 0) {
        *err = path + ": " + std::strerror(errno);
        return nullptr;
    }
    elf_version(EV_CURRENT);
    d->elf_ = elf_begin(d->fd_, ELF_C_READ_MMAP, nullptr);
    if (!d->elf_) {
        *err = path + ": not an ELF file";
        return nullptr;
    }
    d->dw_ = dwarf_begin_elf(d->elf_, DWARF_C_READ, nullptr);
    if (!d->dw_) {
        for (const std::string &dbg : separate_debug_files(d->elf_, path)) {
            int fd = ::open(dbg.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            if (!debug_file_matches(d->elf_, fd)) {
                ::close(fd);
                continue;
            }
            if (Dwarf *dw = dwarf_begin(fd, DWARF_C_READ)) {
                d->dw_ = dw;
                d->debug_fd_ = fd;
                d->debug_path_ = dbg;
                break;
            }
            ::close(fd);
        }
    }
    if (!d->dw_) {
        *err = path + " has no debug info (build it with -g, or install its debug symbols)";
        return nullptr;
    }
    // The call-frame information of the file itself: .eh_frame is what every x86-64 binary
    // has (a separate debug file has only its headers); .debug_frame only some.
    d->cfi_eh_ = dwarf_getcfi_elf(d->elf_);
    d->cfi_dbg_ = dwarf_getcfi(d->dw_);
    return d;
}

debuginfo::~debuginfo()
{
    if (cfi_eh_) dwarf_cfi_end(cfi_eh_);
    if (dw_) dwarf_end(dw_);
    if (elf_) elf_end(elf_);
    if (debug_fd_ >= 0) ::close(debug_fd_);
    if (fd_ >= 0) ::close(fd_);
}

std::vector<Dwarf_Die> debuginfo::units() const
{
    std::vector<Dwarf_Die> out;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dwarf_nextcu(dw_, off, &next, &hsize, nullptr, nullptr, nullptr) == 0) {
        Dwarf_Die cu;
        if (dwarf_offdie(dw_, off + hsize, &cu)) out.push_back(cu);
        off = next;
    }
    return out;
}

std::vector<dwarf_function> debuginfo::find_functions(std::string_view name,
                                                      std::string_view file) const
{
    std::vector<dwarf_function> out, inlined;
    auto units_ = units();
    auto matches = [&](Dwarf_Die *d) {
        const char *n = dwarf_diename(d);
        if (!n || name != n) return false;
        const char *f = dwarf_decl_file(d);
        return file.empty() || (f && file_matches(f, file));
    };
    for (Dwarf_Die &cu : units_) {
        walk_children(&cu, false, [&](Dwarf_Die *d) {
            uint64_t entry;
            if (dwarf_tag(d) == DW_TAG_subprogram && matches(d) && has_code(d, &entry))
                out.push_back(make_function(&cu, d, false, entry));
        });
    }
    if (!out.empty()) return out;
    // Only inlined copies: look inside every function body.
    for (Dwarf_Die &cu : units_) {
        walk_children(&cu, true, [&](Dwarf_Die *d) {
            uint64_t entry;
            if (dwarf_tag(d) == DW_TAG_inlined_subroutine && matches(d) && has_code(d, &entry))
                inlined.push_back(make_function(&cu, d, true, entry));
        });
    }
    return inlined;
}

std::optional<dwarf_function> debuginfo::function_at(uint64_t addr) const
{
    Dwarf_Die cu;
    if (!dwarf_addrdie(dw_, addr, &cu)) return std::nullopt;
    std::optional<dwarf_function> found;
    walk_children(&cu, false, [&](Dwarf_Die *d) {
        uint64_t entry;
        if (!found && dwarf_tag(d) == DW_TAG_subprogram && dwarf_haspc(d, addr) > 0 &&
            has_code(d, &entry))
            found = make_function(&cu, d, false, entry);
    });
    return found;
}

std::vector<dwarf_line> debuginfo::lines(Dwarf_Die *cu) const
{
    std::vector<dwarf_line> out;
    Dwarf_Lines *lines;
    size_t n;
    if (dwarf_getsrclines(cu, &lines, &n) != 0) return out;
    out.reserve(n);
    for (size_t i = 0; i < n; i++) {
        Dwarf_Line *l = dwarf_onesrcline(lines, i);
        bool end = false, stmt = false;
        if (!l || dwarf_lineendsequence(l, &end) != 0 || end) continue;
        dwarf_line r;
        Dwarf_Addr a;
        if (dwarf_lineaddr(l, &a) != 0 || dwarf_lineno(l, &r.line) != 0) continue;
        r.addr = a;
        r.file = dwarf_linesrc(l, nullptr, nullptr);
        dwarf_linebeginstatement(l, &stmt);
        r.is_stmt = stmt;
        out.push_back(r);
    }
    return out;
}

std::vector<std::pair<uint64_t, uint64_t>> debuginfo::inlined_ranges(Dwarf_Die *func) const
{
    std::vector<std::pair<uint64_t, uint64_t>> out;
    std::function<void(Dwarf_Die *)> walk = [&](Dwarf_Die *die) {
        Dwarf_Die child;
        if (dwarf_child(die, &child) != 0) return;
        do {
            int tag = dwarf_tag(&child);
            if (tag == DW_TAG_inlined_subroutine) {
                Dwarf_Addr base, start, end;
                ptrdiff_t off = 0;
                while ((off = dwarf_ranges(&child, off, &base, &start, &end)) > 0)
                    out.emplace_back(start, end);
            } else if (tag == DW_TAG_lexical_block) {
                walk(&child);
            }
        } while (dwarf_siblingof(&child, &child) == 0);
    };
    walk(func);
    return out;
}

std::vector<dwarf_line> debuginfo::function_lines(const dwarf_function &f) const
{
    std::vector<dwarf_line> out;
    Dwarf_Die cu = f.cu, die = f.die;
    auto excluded = inlined_ranges(&die);
    for (const dwarf_line &row : lines(&cu)) {
        if (!row.is_stmt || !row.file || !f.decl_file ||
            (row.file != f.decl_file && std::strcmp(row.file, f.decl_file) != 0))
            continue;
        // An inlined copy may have an empty range, its code merged into the caller's: its
        // entry is still where its lines start.
        if (dwarf_haspc(&die, row.addr) <= 0 && row.addr != f.entry) continue;
        bool inl = false;
        for (const auto &r : excluded)
            inl |= row.addr >= r.first && row.addr < r.second;
        if (!inl) out.push_back(row);
    }
    return out;
}

bool debuginfo::cfa_at(uint64_t pc, std::vector<Dwarf_Op> &ops) const
{
    for (Dwarf_CFI *cfi : {cfi_eh_, cfi_dbg_}) {
        if (!cfi) continue;
        Dwarf_Frame *frame = nullptr;
        if (dwarf_cfi_addrframe(cfi, pc, &frame) != 0) continue;
        Dwarf_Op *o = nullptr;
        size_t n = 0;
        bool ok = dwarf_frame_cfa(frame, &o, &n) == 0 && n > 0;
        if (ok) ops.assign(o, o + n);
        std::free(frame);
        if (ok) return true;
    }
    return false;
}

std::string debuginfo::source_path(Dwarf_Die *cu, const char *file) const
{
    if (!file) return "";
    if (file[0] == '/') return file;
    Dwarf_Attribute a;
    const char *dir = dwarf_attr(cu, DW_AT_comp_dir, &a) ? dwarf_formstring(&a) : nullptr;
    return dir ? std::string(dir) + "/" + file : std::string(file);
}

std::string dwarf_type_name(Dwarf_Die *type)
{
    if (!type) return "void";
    Dwarf_Die inner;
    bool has_inner = type_of(type, &inner);
    const char *n = dwarf_diename(type);
    std::string name = n ? n : "";
    switch (dwarf_tag(type)) {
    case DW_TAG_base_type:
    case DW_TAG_typedef:
        return name;
    case DW_TAG_structure_type:
        return "struct " + (name.empty() ? "{...}" : name);
    case DW_TAG_class_type:
        return "class " + (name.empty() ? "{...}" : name);
    case DW_TAG_union_type:
        return "union " + (name.empty() ? "{...}" : name);
    case DW_TAG_enumeration_type:
        return "enum " + (name.empty() ? "{...}" : name);
    case DW_TAG_pointer_type:
        return (has_inner ? dwarf_type_name(&inner) : "void") + "*";
    case DW_TAG_reference_type:
        return (has_inner ? dwarf_type_name(&inner) : "void") + "&";
    case DW_TAG_rvalue_reference_type:
        return (has_inner ? dwarf_type_name(&inner) : "void") + "&&";
    case DW_TAG_const_type:
        return "const " + (has_inner ? dwarf_type_name(&inner) : "void");
    case DW_TAG_volatile_type:
        return "volatile " + (has_inner ? dwarf_type_name(&inner) : "void");
    case DW_TAG_restrict_type:
    case DW_TAG_atomic_type:
        return has_inner ? dwarf_type_name(&inner) : "void";
    case DW_TAG_array_type:
        return (has_inner ? dwarf_type_name(&inner) : "void") + array_dims(type);
    case DW_TAG_subroutine_type:
        return "(function)";
    default:
        return name.empty() ? "?" : name;
    }
}

} // namespace dprobe
