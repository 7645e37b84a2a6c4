#include "core/membarrier.h"

#include <atomic>
#include <cstdint>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dprobe
{
namespace
{

// Per command: 0 not tried yet, 1 registered, -1 refused. Not function-local statics: their
// initialisation guard, held by a thread of the parent when another thread forks, is never
// released in the child, and the child's first barrier then waited forever (seen with bash
// under a libc-wide trace). Two threads registering at once is harmless: it is idempotent.
std::atomic<int> registration[2];

bool registered(bool sync_core)
{
    std::atomic<int> &r = registration[sync_core];
    int v = r.load(std::memory_order_relaxed);
    if (v == 0) {
        const int cmd = sync_core ? MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE
                                  : MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
        v = syscall(SYS_membarrier, cmd, 0, 0) == 0 ? 1 : -1;
        r.store(v, std::memory_order_relaxed);
    }
    return v > 0;
}

} // namespace

void membarrier_everywhere(bool sync_core)
{
    const int cmd =
        sync_core ? MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE : MEMBARRIER_CMD_PRIVATE_EXPEDITED;
    if (registered(sync_core) && syscall(SYS_membarrier, cmd, 0, 0) == 0) return;
    // Fallback: an mprotect that changes protections shoots down TLBs with IPIs on every CPU
    // running this process; the IPI orders their earlier stores before we continue, and
    // returning from it serialises their instruction streams.
    static uint8_t page[4096] __attribute__((aligned(4096)));
    mprotect(page, sizeof page, PROT_READ);
    mprotect(page, sizeof page, PROT_READ | PROT_WRITE);
}

bool membarrier_expedited_available()
{
    return registered(false);
}

} // namespace dprobe
