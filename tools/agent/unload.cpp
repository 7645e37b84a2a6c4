// The agent taken out of a process by `dprobe detach`, after its session ended: the last
// step before the command unloads libdprobe-preload.so with dlclose (tools/dprobe/attach).
//
// dprobe_agent_unload runs on a thread the command borrowed with ptrace (never one of the
// agent's). It joins the agent's threads, has the core make sure no thread can run or return
// into dprobe's code and put every byte of code back (core/unload.h), gives the program its
// signal dispositions back and frees the runtime's mappings. Once it returned 0 nothing of
// dprobe runs in the process: dlclose then runs the object's destructors, and its DT_FINI
// (agent.cpp) unmaps the agent's own memory. The kernel's counterpart is a module's unload
// (its exit function, then the memory freed once nobody can be inside).
#include "tools/agent/agent.h"

#include "arch/x86_64/private_ns.h"
#include "core/resident_pages.h"
#include "core/signal_chain.h"
#include "core/sym_cfi.h"
#include "core/unload.h"
#include "tracefs/btf_lookup.h"
#include "tracefs/function_profile.h"
#include "tracefs/trace_task.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace dprobe::agent
{

namespace
{
std::atomic<bool> g_unloading{false};

void copy_out(const std::string &s, char *buf, size_t len)
{
    if (!buf || !len) return;
    const size_t n = s.size() < len - 1 ? s.size() : len - 1;
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
}
} // namespace

bool unloading() noexcept
{
    return g_unloading.load(std::memory_order_acquire);
}

} // namespace dprobe::agent

using namespace dprobe;
using namespace dprobe::agent;

// IP and SP: where the calling thread was when the command borrowed it (it returns there).
// WHY (LEN bytes): what keeps the agent in, when the result is not 0. Returns 0, -EAGAIN (a
// thread is inside dprobe's code or the agent's threads are still ending: try again),
// -EBUSY (a session is still running) or another -errno. 0 again once unloaded.
extern "C" __attribute__((visibility("default"))) int dprobe_agent_unload(uint64_t ip, uint64_t sp,
                                                                          char *why, size_t len)
{
    std::string msg;
    // Unloaded already, by a detach killed before its dlclose: nothing of dprobe runs any more,
    // and this detach's dlclose finishes the job.
    if (g_unloading.load()) return 0;
    if (int r = join_agent_threads(&msg)) {
        copy_out(msg, why, len);
        return r;
    }
    if (int r = unload_quiesce({ip, sp}, &msg)) {
        copy_out(msg, why, len);
        return r;
    }
    // From here on no thread can reach dprobe's code: no trap of dprobe's can come any more,
    // so the program's own signal dispositions can come back.
    std::string left;
    for (int sig : signal_chain_release())
        left += (left.empty() ? "" : ", ") + std::string(strsignal(sig));
    // The profiler's tables first: the threads' blocks point to them.
    function_profile_release_all();
    trace_task_release_all();
    // The files the lookups opened (ELF, DWARF): a session's end closed them, but a session
    // refused while it started, or a lookup of the tree after it, may have opened them again.
    // libelf and libdw close them: before their namespace goes.
    debuginfo_cache_release();
    cfi_cache_release();
    unload_release();
    // libdw, libelf and Zydis: their namespace (and its C library and heap) unloaded.
    arch::private_ns_unbind();
    // The pages of code the session read or patched: resident as before the attach.
    resident_pages_restore();
    g_unloading.store(true, std::memory_order_release);
    if (!left.empty()) {
        copy_out("the program's handler for " + left + " could not be restored", why, len);
        return -EIO;
    }
    return 0;
}
