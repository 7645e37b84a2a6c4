// Function extents from .eh_frame / .debug_frame FDEs (see sym_cfi.h).
#include "core/sym_cfi.h"

#include "core/symbols.h"

#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace dprobe
{

namespace
{

// One object's call-frame information, open for good (the cache never shrinks: an object
// id is never reused, and a dlclose'd object's file stays readable or fails harmlessly).
struct object_cfi {
    int fd = -1;
    Elf *elf = nullptr;
    Dwarf *dw = nullptr;
    Dwarf_CFI *eh = nullptr;  // .eh_frame (freed by dwarf_cfi_end)
    Dwarf_CFI *dbg = nullptr; // .debug_frame (owned by dw)
};

std::mutex cfi_mutex;

std::map<uint64_t, std::unique_ptr<object_cfi>> &cfi_cache()
{
    static auto *cache = new std::map<uint64_t, std::unique_ptr<object_cfi>>;
    return *cache;
}

object_cfi *cfi_of(const loaded_object &o)
{
    auto *cache = &cfi_cache();
    auto it = cache->find(o.id);
    if (it != cache->end()) return it->second.get();
    auto c = std::make_unique<object_cfi>();
    if (!o.path.empty()) {
        c->fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (c->fd >= 0) {
            elf_version(EV_CURRENT);
            c->elf = elf_begin(c->fd, ELF_C_READ_MMAP, nullptr);
        }
        if (c->elf) {
            c->eh = dwarf_getcfi_elf(c->elf);
            c->dw = dwarf_begin_elf(c->elf, DWARF_C_READ, nullptr);
            if (c->dw) c->dbg = dwarf_getcfi(c->dw);
        }
    }
    object_cfi *p = c.get();
    cache->emplace(o.id, std::move(c));
    return p;
}

} // namespace

std::optional<cfi_range> cfi_function_at(uintptr_t addr)
{
    object_ptr obj = kallsyms::instance().object_of(addr);
    if (!obj || obj->is_vdso) return std::nullopt;
    std::lock_guard<std::mutex> g(cfi_mutex);
    object_cfi *c = cfi_of(*obj);
    const uint64_t vaddr = addr - obj->load_bias;
    for (Dwarf_CFI *cfi : {c->eh, c->dbg}) {
        if (!cfi) continue;
        Dwarf_Frame *frame = nullptr;
        if (dwarf_cfi_addrframe(cfi, vaddr, &frame) != 0) continue;
        Dwarf_Addr start = 0, end = 0;
        bool signalp = false;
        int ok = dwarf_frame_info(frame, &start, &end, &signalp);
        std::free(frame);
        if (ok >= 0 && end > start && vaddr >= start && vaddr < end)
            return cfi_range{static_cast<uintptr_t>(start + obj->load_bias), end - start};
    }
    return std::nullopt;
}

void cfi_cache_release()
{
    std::lock_guard<std::mutex> g(cfi_mutex);
    for (auto &[id, c] : cfi_cache()) {
        if (c->eh) dwarf_cfi_end(c->eh);
        if (c->dw) dwarf_end(c->dw);
        if (c->elf) elf_end(c->elf);
        if (c->fd >= 0) ::close(c->fd);
    }
    cfi_cache().clear();
}

} // namespace dprobe
