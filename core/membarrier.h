// Process-wide barriers for the text patcher and quiescence, with membarrier(2) and an
// mprotect fallback where it is missing.
#pragma once

namespace dprobe
{

// Every thread of the process running on another CPU executes a full memory barrier
// (MEMBARRIER_CMD_PRIVATE_EXPEDITED), or with SYNC_CORE also a core-serialising instruction
// (..._SYNC_CORE), before this returns.
void membarrier_everywhere(bool sync_core);

// Whether the plain barrier is membarrier(2) itself (cheap enough to call in a loop), not
// the mprotect fallback.
bool membarrier_expedited_available();

} // namespace dprobe
