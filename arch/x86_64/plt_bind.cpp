// What a lazily bound PLT entry will call: see plt_bind.h.
#include "arch/x86_64/plt_bind.h"

#include "arch/x86_64/uaccess.h"

#include <Zydis/Zydis.h>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

namespace dprobe::arch
{

namespace
{

// The dynamic-section facts of one object that the lookup needs. The dynamic linker
// relocates the address-valued entries of a writable .dynamic in place on x86-64; an entry
// still below the load base is an offset from it.
struct dyn_info {
    uintptr_t base = 0;
    const Elf64_Rela *jmprel = nullptr;
    size_t jmprel_size = 0;
    const Elf64_Sym *symtab = nullptr;
    const char *strtab = nullptr;
    const Elf64_Half *versym = nullptr;
    const Elf64_Verneed *verneed = nullptr;
    size_t verneed_num = 0;
    const Elf64_Verdef *verdef = nullptr;
    size_t verdef_num = 0;
};

struct find_ctx {
    uintptr_t slot;
    bool found = false;
    dyn_info dyn;
};

int find_object(struct dl_phdr_info *info, size_t, void *arg)
{
    auto *c = static_cast<find_ctx *>(arg);
    const uintptr_t base = info->dlpi_addr;
    bool contains = false;
    const Elf64_Dyn *dynamic = nullptr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const Elf64_Phdr &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_LOAD && c->slot >= base + ph.p_vaddr &&
            c->slot < base + ph.p_vaddr + ph.p_memsz)
            contains = true;
        if (ph.p_type == PT_DYNAMIC)
            dynamic = reinterpret_cast<const Elf64_Dyn *>(base + ph.p_vaddr);
    }
    if (!contains || !dynamic) return 0;
    const auto addr = [base](Elf64_Addr v) { return v < base ? base + v : v; };
    dyn_info &d = c->dyn;
    d.base = base;
    for (const Elf64_Dyn *e = dynamic; e->d_tag != DT_NULL; ++e) {
        switch (e->d_tag) {
        case DT_JMPREL:
            d.jmprel = reinterpret_cast<const Elf64_Rela *>(addr(e->d_un.d_ptr));
            break;
        case DT_PLTRELSZ:
            d.jmprel_size = e->d_un.d_val;
            break;
        case DT_SYMTAB:
            d.symtab = reinterpret_cast<const Elf64_Sym *>(addr(e->d_un.d_ptr));
            break;
        case DT_STRTAB:
            d.strtab = reinterpret_cast<const char *>(addr(e->d_un.d_ptr));
            break;
        case DT_VERSYM:
            d.versym = reinterpret_cast<const Elf64_Half *>(addr(e->d_un.d_ptr));
            break;
        case DT_VERNEED:
            d.verneed = reinterpret_cast<const Elf64_Verneed *>(addr(e->d_un.d_ptr));
            break;
        case DT_VERNEEDNUM:
            d.verneed_num = e->d_un.d_val;
            break;
        case DT_VERDEF:
            d.verdef = reinterpret_cast<const Elf64_Verdef *>(addr(e->d_un.d_ptr));
            break;
        case DT_VERDEFNUM:
            d.verdef_num = e->d_un.d_val;
            break;
        default:
            break;
        }
    }
    c->found = true;
    return 1;
}

// The name of version index VER: one the object needs from another (the C library's
// GLIBC_2.2.5 in a program), or one it defines itself (its own exported functions, called
// through its own PLT); nullptr if neither.
const char *version_name(const dyn_info &d, Elf64_Half ver)
{
    const Elf64_Verdef *vd = d.verdef;
    for (size_t i = 0; vd && i < d.verdef_num; ++i) {
        if ((vd->vd_ndx & 0x7fff) == ver && vd->vd_cnt) {
            auto *va = reinterpret_cast<const Elf64_Verdaux *>(reinterpret_cast<const char *>(vd) +
                                                               vd->vd_aux);
            return d.strtab + va->vda_name;
        }
        if (!vd->vd_next) break;
        vd = reinterpret_cast<const Elf64_Verdef *>(reinterpret_cast<const char *>(vd) +
                                                    vd->vd_next);
    }
    const Elf64_Verneed *vn = d.verneed;
    for (size_t i = 0; vn && i < d.verneed_num; ++i) {
        auto *va = reinterpret_cast<const Elf64_Vernaux *>(reinterpret_cast<const char *>(vn) +
                                                           vn->vn_aux);
        for (unsigned j = 0; j < vn->vn_cnt; ++j) {
            if ((va->vna_other & 0x7fff) == ver) return d.strtab + va->vna_name;
            if (!va->vna_next) break;
            va = reinterpret_cast<const Elf64_Vernaux *>(reinterpret_cast<const char *>(va) +
                                                         va->vna_next);
        }
        if (!vn->vn_next) break;
        vn = reinterpret_cast<const Elf64_Verneed *>(reinterpret_cast<const char *>(vn) +
                                                     vn->vn_next);
    }
    return nullptr;
}

} // namespace

bool plt_slot_unbound(uintptr_t plt_entry, uintptr_t slot_value) noexcept
{
    if (!slot_value) return false;
    if (slot_value >= plt_entry && slot_value < plt_entry + 16) return true;
    // The IBT layout: the slot leads to `endbr64; push $n; jmp PLT0` in .plt.
    uint8_t buf[16];
    if (copy_from_user_nofault(buf, reinterpret_cast<const void *>(slot_value), sizeof buf) != 0)
        return false;
    size_t at = 0;
    if (buf[0] == 0xf3 && buf[1] == 0x0f && buf[2] == 0x1e && buf[3] == 0xfa) at = 4; // endbr64
    return buf[at] == 0x68 && (buf[at + 5] == 0xe9 || (buf[at + 5] == 0xf2 && buf[at + 6] == 0xe9));
}

std::optional<uintptr_t> plt_lazy_target(uintptr_t got_slot)
{
    find_ctx c{got_slot, false, {}};
    dl_iterate_phdr(find_object, &c);
    const dyn_info &d = c.dyn;
    if (!c.found || !d.jmprel || !d.symtab || !d.strtab) return std::nullopt;
    for (size_t i = 0; i < d.jmprel_size / sizeof(Elf64_Rela); ++i) {
        const Elf64_Rela &r = d.jmprel[i];
        if (d.base + r.r_offset != got_slot) continue;
        if (ELF64_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT) return std::nullopt;
        const uint32_t sym = ELF64_R_SYM(r.r_info);
        const char *name = d.strtab + d.symtab[sym].st_name;
        const Elf64_Half ver = d.versym ? d.versym[sym] & 0x7fff : 0;
        const char *vname = ver > 1 ? version_name(d, ver) : nullptr;
        void *f = vname ? dlvsym(RTLD_DEFAULT, name, vname) : dlsym(RTLD_DEFAULT, name);
        if (!f) return std::nullopt;
        return reinterpret_cast<uintptr_t>(f);
    }
    return std::nullopt;
}

} // namespace dprobe::arch
