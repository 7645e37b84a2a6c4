// The agent's last constructor (see agent.h: constructed). Its object is the last of the
// agent's on the link line (tools/agent/CMakeLists.txt), and .init_array runs in link order:
// when it has run, every static object of the runtime and the agent is constructed.
#include "tools/agent/agent.h"

#include <atomic>

namespace dprobe::agent
{

namespace
{
std::atomic<bool> done{false}; // constant-initialized: false from the moment it is mapped

__attribute__((constructor)) void mark_constructed()
{
    done.store(true, std::memory_order_release);
}
} // namespace

bool constructed() noexcept
{
    return done.load(std::memory_order_acquire);
}

} // namespace dprobe::agent
