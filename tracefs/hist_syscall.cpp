// Syscall names for .syscall hist keys (the kernel's get_syscall_name(), which reads its
// syscall metadata): the table is generated at configure time from the system's
// <asm/unistd_64.h> (tracefs/CMakeLists.txt), names prefixed "sys_" as the kernel's are.
// A number the header does not name gives nullptr (printed "unknown_syscall").
#include "tracefs/trace_events_hist.h"

namespace dprobe
{
namespace
{

struct syscall_name {
    unsigned nr;
    const char *name;
};

constexpr syscall_name syscall_names[] = {
#include "hist_syscalls.inc"
    {~0u, nullptr},
};

} // namespace

const char *hist_syscall_name(uint64_t nr) noexcept
{
    for (const auto &s : syscall_names)
        if (s.name && s.nr == nr) return s.name;
    return nullptr;
}

} // namespace dprobe
