#include "core/membarrier.h"

#include <cstdint>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dprobe {
namespace {

bool registered(bool sync_core)
{
    static const bool plain =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    static const bool core =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
    return sync_core ? core : plain;
}

} // namespace

void membarrier_everywhere(bool sync_core)
{
    const int cmd = sync_core ? MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE
                              : MEMBARRIER_CMD_PRIVATE_EXPEDITED;
    if (registered(sync_core) && syscall(SYS_membarrier, cmd, 0, 0) == 0)
        return;
    // Fallback: an mprotect that changes protections shoots down TLBs with IPIs on every CPU
    // running this process; the IPI orders their earlier stores before we continue, and
    // returning from it serialises their instruction streams.
    static uint8_t page[4096] __attribute__((aligned(4096)));
    mprotect(page, sizeof page, PROT_READ);
    mprotect(page, sizeof page, PROT_READ | PROT_WRITE);
}

} // namespace dprobe
