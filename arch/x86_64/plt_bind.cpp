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

struct find_ctx {
    const char *object; // the file name's ending to match
    const ElfW(Dyn) *dyn = nullptr;
    uintptr_t base = 0;
};

bool name_ends_with(const char *name, const char *end)
{
    const size_t n = std::strlen(name), e = std::strlen(end);
    return n >= e && std::strcmp(name + n - e, end) == 0 && (n == e || name[n - e - 1] == '/');
}

int find_object(struct dl_phdr_info *info, size_t, void *arg)
{
    auto *c = static_cast<find_ctx *>(arg);
    if (!info->dlpi_name || !name_ends_with(info->dlpi_name, c->object)) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            c->dyn =
                reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    c->base = info->dlpi_addr;
    return c->dyn ? 1 : 0;
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
    find_ctx c{object};
    dl_iterate_phdr(find_object, &c);
    std::optional<uintptr_t> slot;
    for_each_got_binding(c.dyn, c.base, false, [&](const char *name, uintptr_t at) {
        if (!slot && std::strcmp(name, symbol) == 0) slot = at;
    });
    return slot;
}

} // namespace dprobe::arch
