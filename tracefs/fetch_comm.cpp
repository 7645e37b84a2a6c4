// $comm: the calling thread's name (the kernel's current->comm), read once per thread, for
// the fetch interpreter and the event filters. A thread-local cache only: no hook, no
// constructor (offline library).
#include "tracefs/fetch_arg.h"

#include "core/compiler.h"

#include <cstring>
#include <sys/prctl.h>

namespace dprobe
{
namespace
{

constexpr size_t comm_len = 16; // TASK_COMM_LEN

struct comm_cache {
    char name[comm_len];
    bool valid;
    const char *speak_for; // fetch_comm_speak_for()
};
__attribute__((tls_model("initial-exec"))) thread_local comm_cache current_comm;

} // namespace

DPROBE_NOPROBE const char *fetch_current_comm() noexcept
{
    comm_cache &c = current_comm;
    if (__builtin_expect(c.speak_for != nullptr, 0)) return c.speak_for;
    if (__builtin_expect(!c.valid, 0)) {
        char buf[comm_len] = {};
        if (prctl(PR_GET_NAME, buf, 0, 0, 0) != 0) buf[0] = '\0';
        buf[comm_len - 1] = '\0';
        std::memcpy(c.name, buf, comm_len);
        c.valid = true;
    }
    return c.name;
}

void fetch_comm_speak_for(const char *comm) noexcept
{
    current_comm.speak_for = comm;
}

} // namespace dprobe
