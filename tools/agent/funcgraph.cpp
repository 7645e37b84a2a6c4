// Function-graph recording: one fprobe with entry and exit handlers on the selected
// functions, writing the kernel's funcgraph_entry / funcgraph_exit records into the ring
// buffer. Hot path: noexcept, no allocation, no locks.
#include "tools/agent/agent.h"

#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/glob.h"
#include "core/ring_buffer.h"
#include "core/trace_clock.h"
#include "tools/trace_file.h"

#include <dprobe/fprobe.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>

namespace dprobe::agent {

namespace {

__attribute__((tls_model("initial-exec"))) thread_local int32_t t_depth;

struct graph_data {
    unsigned long func; // for an unwound call, whose handler gets no ip
    int32_t depth;
    int32_t pad;
};
static_assert(sizeof(graph_data) <= MAX_FPROBE_DATA_SIZE);

// One 16-byte event (4 bytes of header, the rest tracefile::funcgraph_rec); its time stamp is
// the call's or the return's.
DPROBE_NOPROBE inline void write_graph_event(uint16_t type, int32_t depth, uint16_t flags,
                                             unsigned long func) noexcept
{
    void *p = ring_buffer_reserve_small(sizeof(tracefile::funcgraph_rec));
    if (!p)
        return;
    const uint16_t d = static_cast<uint16_t>(depth < 0 ? 0 : depth > tracefile::FUNCGRAPH_DEPTH_MAX
                                                               ? tracefile::FUNCGRAPH_DEPTH_MAX
                                                               : depth);
    tracefile::funcgraph_rec r{type, static_cast<uint16_t>(d | flags), func};
    std::memcpy(p, &r, sizeof r);
    ring_buffer_commit(p);
}

DPROBE_NOPROBE int graph_entry(struct fprobe *, unsigned long ip, unsigned long,
                               struct ftrace_regs *, void *data) noexcept
{
    auto *gd = static_cast<graph_data *>(data);
    int32_t depth = t_depth++;
    gd->depth = depth;
    gd->func = ip;
    write_graph_event(tracefile::FUNCGRAPH_ENTRY_ID, depth, 0, ip);
    return 0;
}

DPROBE_NOPROBE void write_exit(const graph_data *gd, uint16_t flags) noexcept
{
    // The caller's depth from now on. (Frames left without returning are reported before
    // the next hit of the thread, innermost first, so this stays right after them too.)
    t_depth = gd->depth;
    write_graph_event(tracefile::FUNCGRAPH_EXIT_ID, gd->depth, flags, gd->func);
}

DPROBE_NOPROBE void graph_exit(struct fprobe *, unsigned long, unsigned long,
                               struct ftrace_regs *, void *data) noexcept
{
    write_exit(static_cast<graph_data *>(data), 0);
}

// A call left by longjmp, an exception or thread exit: its exit, marked, where dprobe
// noticed (the catch, or the thread's next hit), as uftrace prints it at the catch.
DPROBE_NOPROBE void graph_unwound(struct fprobe *, void *data) noexcept
{
    write_exit(static_cast<graph_data *>(data), tracefile::FUNCGRAPH_FL_UNWOUND);
}

struct fprobe g_graph_probe = {};
bool g_graph_registered = false;

} // namespace


std::string join(const std::vector<std::string> &v)
{
    std::string out;
    for (const std::string &s : v)
        out += (out.empty() ? "" : " ") + s;
    return out;
}

int funcgraph_start(const std::vector<std::string> &globs, const std::vector<std::string> &notrace,
                    bool follow_loads, bool strict, std::string *err, std::string *warn)
{
    std::vector<unsigned long> ips;
    for (const std::string &g : globs) {
        auto sites = ftrace_match_sites(g, "");
        size_t before = ips.size();
        for (ftrace_site *s : sites) {
            if (!s->usable || s->gone)
                continue;
            const char *name = s->sym ? s->sym->name.c_str() : "";
            if (std::any_of(notrace.begin(), notrace.end(),
                            [&](const std::string &n) { return glob_match(n, name); }))
                continue;
            ips.push_back(s->ip);
        }
        if (ips.size() == before && sites.empty() && !follow_loads) {
            if (strict) {
                *err = "no function that can be traced matches -F '" + g +
                       "' (for a library the program loads later: --follow-loads)";
                return -ENOENT;
            }
            // A program run by the one named (exec, posix_spawn): traced with what applies
            // to it, never stopped for a glob meant for another.
            *warn += (warn->empty() ? "" : "; ") + ("-F '" + g + "' matches no function here");
        }
    }
    std::sort(ips.begin(), ips.end());
    ips.erase(std::unique(ips.begin(), ips.end()), ips.end());
    if (ips.empty() && !follow_loads) {
        if (strict) {
            *err = "the -F/-N globs leave no function to trace";
            return -ENOENT;
        }
        return 0;
    }
    g_graph_probe.entry_handler = graph_entry;
    g_graph_probe.exit_handler = graph_exit;
    g_graph_probe.unwound_handler = graph_unwound;
    g_graph_probe.entry_data_size = sizeof(graph_data);
    int ret;
    if (follow_loads) {
        // One fprobe whose filter is the globs, applied again to each library loaded later
        // (the same functions as the list above now, unusable sites left out).
        g_graph_probe.flags = FPROBE_FL_FOLLOW_LOADS;
        ret = register_fprobe(&g_graph_probe, join(globs).c_str(), join(notrace).c_str());
    } else {
        ret = register_fprobe_ips(&g_graph_probe, ips.data(), static_cast<int>(ips.size()));
    }
    if (ret < 0) {
        *err = follow_loads ? "--follow-loads: " + follow_loads_error(ret)
                            : "register_fprobe_ips: " + std::string(std::strerror(-ret));
        g_graph_probe = {};
        return ret;
    }
    g_graph_registered = true;
    return static_cast<int>(ips.size());
}

std::string follow_loads_error(int err)
{
    if (err == -EBUSY)
        return "a breakpoint is on the loader's _dl_debug_state (was the program started by a "
               "debugger? attach the debugger after dprobe instead)";
    if (err == -EOPNOTSUPP)
        return "this loader's _dl_debug_state is not the function dprobe knows how to hook";
    return std::strerror(-err);
}

void funcgraph_stop()
{
    if (!g_graph_registered)
        return;
    unregister_fprobe(&g_graph_probe);
    g_graph_registered = false;
    g_graph_probe = {};
}

} // namespace dprobe::agent
