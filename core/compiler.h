// Internal attributes.
#pragma once

// Code that runs when a probe fires: kept in its own section, which dprobe never probes
// (the kernel's NOKPROBE_SYMBOL / .kprobes.text). The name is a C identifier so that the
// linker keeps it as its own output section and defines __start_/__stop_ symbols for it,
// which the kprobe blacklist reads (a .text.* name would be merged into .text).
#define DPROBE_NOPROBE __attribute__((section("dprobe_noprobe_text")))

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#include <cstdint>

namespace dprobe
{

// A return-address slot of a shadow frame that may be gone (left by longjmp, an exception
// or a signal handler's siglongjmp) or on another stack: the memory is mapped, but it may
// now be part of a newer frame, which the address sanitizer poisons as a redzone. Reading
// and restoring such a slot is dprobe's job, not a bug in the program: the kernel's
// unwinders use READ_ONCE_NOCHECK for the same reason. Inlined in normal builds.
__attribute__((no_sanitize_address)) inline uintptr_t stack_slot_read(uintptr_t slot) noexcept
{
    return *reinterpret_cast<const volatile uintptr_t *>(slot);
}

__attribute__((no_sanitize_address)) inline void stack_slot_write(uintptr_t slot,
                                                                  uintptr_t v) noexcept
{
    *reinterpret_cast<volatile uintptr_t *>(slot) = v;
}

} // namespace dprobe
