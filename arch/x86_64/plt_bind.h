// What a lazily bound PLT entry will call (the x86-64 psABI's R_X86_64_JUMP_SLOT).
//
// A library linked without -z now (the C library itself) leaves each GOT slot of its PLT
// pointing back into the PLT until the first call, when the dynamic linker's resolver looks
// the symbol up and writes the function's address into the slot. Code that wants to know
// what such a call runs before it has ever run (the extended-state scan of a probe's
// handlers, arch/x86_64/ext_state.cpp) can only tell from the slot's relocation, which names
// the symbol. Reading relocations walks the loaded objects under the dynamic linker's lock:
// that is done once, when the runtime is loaded, for the slots the scan needs to know
// (plt_jump_slot), never during a scan, which may run while dprobe holds a lock that the
// loader's notifications take (a dlopen on another thread would then deadlock with it).
#pragma once

#include <elf.h>
#include <link.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace dprobe::arch
{

// Whether the GOT slot's value SLOT_VALUE, for a PLT entry at PLT_ENTRY, still leads to the
// lazy-binding resolver: back into the entry (`jmp *slot; push $n; jmp PLT0`), or to a
// `push $n; jmp` stub of its own (the IBT layout's .plt, reached from .plt.sec). SLOT_VALUE
// must be an address of loaded code (not 0: an undefined weak symbol): it is read.
bool plt_slot_unbound(uintptr_t plt_entry, uintptr_t slot_value) noexcept;

// The symbol bindings of a loaded object, from its dynamic section DYN in memory and its load
// bias BASE: FN(name, slot address) for each R_X86_64_JUMP_SLOT (a PLT entry's GOT slot) and,
// with GLOB_DAT, each R_X86_64_GLOB_DAT (a GOT slot read through a pointer). No allocation,
// no lock: the caller has the object (dl_iterate_phdr, a constructor).
template <class F>
void for_each_got_binding(const ElfW(Dyn) * dyn, uintptr_t base, bool glob_dat, F &&fn);

// The GOT slot of the PLT entry through which the loaded object whose file name ends in
// OBJECT (a soname: "libc.so.6") calls SYMBOL (its JUMP_SLOT relocation), or nothing. Takes
// the dynamic linker's lock: for load time (a constructor), not for a scan.
std::optional<uintptr_t> plt_jump_slot(const char *object, const char *symbol);

// The address an entry of a loaded object's dynamic section names: the dynamic linker
// relocates a writable .dynamic's address entries in place on x86-64; an entry still below
// the load bias BASE is an offset from it.
inline uintptr_t dynamic_addr(uintptr_t base, ElfW(Addr) v)
{
    return v < base ? base + v : v;
}

template <class F>
void for_each_got_binding(const ElfW(Dyn) * dyn, uintptr_t base, bool glob_dat, F &&fn)
{
    const char *strtab = nullptr;
    const ElfW(Sym) *symtab = nullptr;
    const ElfW(Rela) * rela[2] = {nullptr, nullptr}; // DT_JMPREL, DT_RELA
    size_t relsz[2] = {0, 0};
    for (const ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++) {
        const uintptr_t a = dynamic_addr(base, d->d_un.d_ptr);
        switch (d->d_tag) {
        case DT_STRTAB:
            strtab = reinterpret_cast<const char *>(a);
            break;
        case DT_SYMTAB:
            symtab = reinterpret_cast<const ElfW(Sym) *>(a);
            break;
        case DT_JMPREL:
            rela[0] = reinterpret_cast<const ElfW(Rela) *>(a);
            break;
        case DT_PLTRELSZ:
            relsz[0] = d->d_un.d_val;
            break;
        case DT_RELA:
            rela[1] = reinterpret_cast<const ElfW(Rela) *>(a);
            break;
        case DT_RELASZ:
            relsz[1] = d->d_un.d_val;
            break;
        default:
            break;
        }
    }
    if (!strtab || !symtab) return;
    for (int k = 0; k < (glob_dat ? 2 : 1); k++) {
        for (size_t i = 0; rela[k] && i < relsz[k] / sizeof(ElfW(Rela)); i++) {
            const ElfW(Rela) &r = rela[k][i];
            const auto type = ELF64_R_TYPE(r.r_info);
            if (type != R_X86_64_JUMP_SLOT && (!glob_dat || type != R_X86_64_GLOB_DAT)) continue;
            fn(strtab + symtab[ELF64_R_SYM(r.r_info)].st_name, base + r.r_offset);
        }
    }
}

} // namespace dprobe::arch
