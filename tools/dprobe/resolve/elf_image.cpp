#include "tools/dprobe/resolve/elf_image.h"

#include "arch/x86_64/entry_insn.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "core/jump_plan.h"
#include "tools/unique_fd.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_set>

namespace dprobe::tools
{

std::unique_ptr<elf_image> elf_image::open(const std::string &path, std::string *err)
{
    auto fail = [&](const std::string &why) -> std::unique_ptr<elf_image> {
        if (err) *err = why;
        return nullptr;
    };
    unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return fail(path + ": " + std::strerror(errno));
    struct stat st {
    };
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        return fail(path + ": not a regular file");
    if (st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr)))
        return fail(path + ": not an ELF file (too short)");
    unique_mapping m(mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd.get(), 0), st.st_size);
    if (!m) return fail(path + ": mmap: " + std::strerror(errno));
    std::unique_ptr<elf_image> img(new elf_image);
    img->view_.img = img.get();
    img->map_ = static_cast<const uint8_t *>(m.get());
    img->size_ = m.size();
    img->mapping_ = std::move(m);
    img->path_ = path;
    char rp[PATH_MAX];
    img->real_ = realpath(path.c_str(), rp) ? rp : path;

    auto *eh = reinterpret_cast<const Elf64_Ehdr *>(img->map_);
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return fail(path + ": not an ELF file");
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_machine != EM_X86_64)
        return fail(path + ": not an x86-64 ELF file");
    if (eh->e_phoff + size_t{eh->e_phnum} * sizeof(Elf64_Phdr) > img->size_)
        return fail(path + ": truncated program headers");
    auto *ph = reinterpret_cast<const Elf64_Phdr *>(img->map_ + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD) continue;
        if (ph[i].p_offset + ph[i].p_filesz > img->size_) continue;
        img->loads_.push_back(
            {ph[i].p_vaddr, ph[i].p_filesz, ph[i].p_offset, (ph[i].p_flags & PF_X) != 0});
    }
    if (eh->e_shoff && eh->e_shentsize == sizeof(Elf64_Shdr) &&
        eh->e_shoff + size_t{eh->e_shnum} * sizeof(Elf64_Shdr) <= img->size_) {
        auto *sh = reinterpret_cast<const Elf64_Shdr *>(img->map_ + eh->e_shoff);
        for (unsigned i = 0; i < eh->e_shnum; i++)
            img->has_symtab_ |= sh[i].sh_type == SHT_SYMTAB;
    }
    std::string why;
    img->obj_ = read_object_file(img->real_, 0, &why);
    if (!img->obj_) return fail(path + ": " + (why.empty() ? "cannot read symbols" : why));
    return img;
}

std::string elf_image::module_name() const
{
    auto slash = real_.rfind('/');
    return slash == std::string::npos ? real_ : real_.substr(slash + 1);
}

const uint8_t *elf_image::code_at(uintptr_t vaddr, size_t *avail) const
{
    for (const load &l : loads_) {
        if (!l.exec || vaddr < l.vaddr || vaddr >= l.vaddr + l.filesz) continue;
        if (avail) *avail = l.vaddr + l.filesz - vaddr;
        return map_ + l.offset + (vaddr - l.vaddr);
    }
    return nullptr;
}

bool elf_image::file_view::read(uintptr_t addr, void *out, size_t len) const noexcept
{
    for (const load &l : img->loads_)
        if (addr >= l.vaddr && addr + len <= l.vaddr + l.filesz) {
            std::memcpy(out, img->map_ + l.offset + (addr - l.vaddr), len);
            return true;
        }
    return false;
}

const char *entry_site_name(entry_site s)
{
    switch (s) {
    case entry_site::fentry:
        return "fentry";
    case entry_site::patchable:
        return "patchable";
    case entry_site::jump:
        return "jump";
    case entry_site::int3:
        return "int3";
    case entry_site::untraced:
        return "untraced";
    }
    return "?";
}

namespace
{

// A function without a compiled-in site: what `dprobe record` gives it (the shared decision
// of core/jump_plan.h, on the file's bytes).
void judge_jump(const elf_image &img, const ksym &sym, func_site_info &out)
{
    if (jump_is_fragment(sym) || jump_never_hooked_name(img.object(), sym)) {
        out.kind = entry_site::untraced;
        out.detail = jump_is_fragment(sym)
                         ? "not a function entry: a cold fragment split off by the compiler"
                         : "dprobe does not hook this function";
        return;
    }
    if (sym.type == STT_GNU_IFUNC) {
        // record traces the implementation the resolver picks at run time (glibc's string
        // functions, hand-written: their siblings jump into them past the entry).
        out.kind = entry_site::int3;
        out.detail = "an IFUNC's implementation, hand-written";
        return;
    }
    jump_plan plan = plan_jump_site(img.object(), sym, img.memory());
    out.site = plan.ip ? plan.ip : sym.addr;
    if (plan.region) {
        out.kind = entry_site::jump;
        out.detail = std::to_string(plan.region->len) + "-byte region";
    } else {
        out.kind = entry_site::int3;
        out.detail = plan.why;
    }
}

} // namespace

std::vector<func_site_info> classify_functions(const elf_image &img)
{
    const loaded_object &obj = img.object();
    std::unordered_set<uintptr_t> got(obj.fentry_got_slots.begin(), obj.fentry_got_slots.end());
    std::unordered_set<uintptr_t> pfe(obj.patchable_entries.begin(), obj.patchable_entries.end());
    uintptr_t own_fentry = 0;
    for (const ksym *s : obj.funcs_named("__fentry__"))
        own_fentry = s->addr;

    std::vector<func_site_info> out;
    uintptr_t last = 0;
    bool have_last = false;
    for (const ksym &sym : obj.funcs) {
        if (have_last && sym.addr == last)
            continue; // an alias: one site per address, under the preferred name
        last = sym.addr;
        have_last = true;
        func_site_info fi;
        fi.sym = &sym;
        fi.site = sym.addr;
        size_t avail = 0;
        const uint8_t *code = img.code_at(sym.addr, &avail);
        if (!code) {
            fi.detail = "not in an executable segment of the file";
            out.push_back(std::move(fi));
            continue;
        }
        // classify_entry reads 16 bytes: copy them, zero-padded at the segment's end.
        uint8_t buf[32] = {};
        std::memcpy(buf, code, std::min<size_t>(avail, sizeof buf));
        size_t skip = 0;
        if (arch::is_endbr64(buf)) skip = arch::ENDBR64_INSN_SIZE;
        uintptr_t ip = sym.addr + skip;
        fi.site = ip;
        const uint8_t *p = buf + skip;
        arch::entry_insn e = arch::classify_entry(reinterpret_cast<uintptr_t>(p));
        // Targets come back relative to the copy: translate them to file addresses.
        auto to_vaddr = [&](uintptr_t a) { return a - reinterpret_cast<uintptr_t>(p) + ip; };
        bool sited = false;
        switch (e.kind) {
        case arch::entry_kind::fentry_call: {
            uintptr_t target = to_vaddr(e.target);
            if (own_fentry && target == own_fentry) {
                sited = true;
            } else if (size_t pav = 0; const uint8_t *plt = img.code_at(target, &pav)) {
                uint8_t pbuf[32] = {};
                std::memcpy(pbuf, plt, std::min<size_t>(pav, sizeof pbuf));
                auto slot = arch::plt_got_slot(reinterpret_cast<uintptr_t>(pbuf));
                if (slot && got.count(*slot - reinterpret_cast<uintptr_t>(pbuf) + target))
                    sited = true;
            }
            if (sited) {
                fi.kind = entry_site::fentry;
                fi.detail = "call __fentry__";
            }
            break;
        }
        case arch::entry_kind::fentry_got:
            if (got.count(to_vaddr(e.target))) {
                sited = true;
                fi.kind = entry_site::fentry;
                fi.detail = "call *__fentry__@GOTPCREL";
            }
            break;
        case arch::entry_kind::nop:
        case arch::entry_kind::nop_sled:
            if (pfe.count(ip) || pfe.count(sym.addr)) {
                sited = true;
                fi.kind = entry_site::patchable;
                fi.detail =
                    e.kind == arch::entry_kind::nop ? "multi-byte NOP" : "one-byte NOP sled";
            }
            break;
        case arch::entry_kind::none:
            break;
        }
        if (!sited) judge_jump(img, sym, fi);
        out.push_back(std::move(fi));
    }
    return out;
}

} // namespace dprobe::tools
