// What a lazily bound PLT entry will call, found at load time: see plt_bind.h.
#include "arch/x86_64/plt_bind.h"

#include "arch/x86_64/uaccess.h"

#include <cstring>
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
};

struct find_ctx {
    const char *object; // the file name's ending to match
    bool found = false;
    dyn_info dyn;
};

bool name_ends_with(const char *name, const char *end)
{
    const size_t n = std::strlen(name), e = std::strlen(end);
    return n >= e && std::strcmp(name + n - e, end) == 0 && (n == e || name[n - e - 1] == '/');
}

int find_object(struct dl_phdr_info *info, size_t, void *arg)
{
    auto *c = static_cast<find_ctx *>(arg);
    const uintptr_t base = info->dlpi_addr;
    if (!info->dlpi_name || !name_ends_with(info->dlpi_name, c->object)) return 0;
    const Elf64_Dyn *dynamic = nullptr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const Elf64_Phdr &ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_DYNAMIC)
            dynamic = reinterpret_cast<const Elf64_Dyn *>(base + ph.p_vaddr);
    }
    if (!dynamic) return 0;
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
        default:
            break;
        }
    }
    c->found = true;
    return 1;
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

std::optional<uintptr_t> plt_jump_slot(const char *object, const char *symbol)
{
    find_ctx c{object, false, {}};
    dl_iterate_phdr(find_object, &c);
    const dyn_info &d = c.dyn;
    if (!c.found || !d.jmprel || !d.symtab || !d.strtab) return std::nullopt;
    for (size_t i = 0; i < d.jmprel_size / sizeof(Elf64_Rela); ++i) {
        const Elf64_Rela &r = d.jmprel[i];
        if (ELF64_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT) continue;
        if (std::strcmp(d.strtab + d.symtab[ELF64_R_SYM(r.r_info)].st_name, symbol) == 0)
            return d.base + r.r_offset;
    }
    return std::nullopt;
}

} // namespace dprobe::arch
