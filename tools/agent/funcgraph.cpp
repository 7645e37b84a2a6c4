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

__attribute__((tls_model("initial-exec"))) thread_local int32_t t_tid;
__attribute__((tls_model("initial-exec"))) thread_local int32_t t_depth;

struct graph_data {
    uint64_t calltime;
    unsigned long func; // for an unwound call, whose handler gets no ip
    int32_t depth;
    int32_t pad;
};
static_assert(sizeof(graph_data) <= MAX_FPROBE_DATA_SIZE);

DPROBE_NOPROBE inline int32_t current_tid() noexcept
{
    if (__builtin_expect(t_tid == 0, 0))
        t_tid = static_cast<int32_t>(syscall(SYS_gettid));
    return t_tid;
}

// The records' own timestamps (taken by ring_buffer_reserve) are the call and return times:
// one clock read per event instead of two (a TSC read costs ~10 ns on some machines).
DPROBE_NOPROBE int graph_entry(struct fprobe *, unsigned long ip, unsigned long,
                               struct ftrace_regs *, void *data) noexcept
{
    auto *gd = static_cast<graph_data *>(data);
    int32_t depth = t_depth++;
    gd->depth = depth;
    gd->func = ip;
    void *p = ring_buffer_reserve(sizeof(tracefile::funcgraph_entry_rec));
    if (!p) {
        gd->calltime = trace_clock_now();
        return 0;
    }
    gd->calltime = ring_buffer_event_header(p)->ts;
    auto *r = static_cast<tracefile::funcgraph_entry_rec *>(p);
    r->type = tracefile::FUNCGRAPH_ENTRY_ID;
    r->flags = 0;
    r->preempt_count = 0;
    r->pid = current_tid();
    r->func = ip;
    r->depth = depth;
    r->pad = 0;
    ring_buffer_commit(p);
    return 0;
}

DPROBE_NOPROBE void write_exit(const graph_data *gd, uint8_t flags) noexcept
{
    // The caller's depth from now on. (Frames left without returning are reported before
    // the next hit of the thread, innermost first, so this stays right after them too.)
    t_depth = gd->depth;
    void *p = ring_buffer_reserve(sizeof(tracefile::funcgraph_exit_rec));
    if (!p)
        return;
    auto *r = static_cast<tracefile::funcgraph_exit_rec *>(p);
    r->type = tracefile::FUNCGRAPH_EXIT_ID;
    r->flags = flags;
    r->preempt_count = 0;
    r->pid = current_tid();
    r->func = gd->func;
    r->depth = gd->depth;
    r->overrun = 0;
    r->calltime = gd->calltime;
    r->rettime = ring_buffer_event_header(p)->ts;
    ring_buffer_commit(p);
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

void funcgraph_forget_tid() noexcept { t_tid = 0; }

std::string join(const std::vector<std::string> &v)
{
    std::string out;
    for (const std::string &s : v)
        out += (out.empty() ? "" : " ") + s;
    return out;
}

int funcgraph_start(const std::vector<std::string> &globs, const std::vector<std::string> &notrace,
                    bool follow_loads, std::string *err)
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
            *err = "no function that can be traced matches -F '" + g +
                   "' (for a library the program loads later: --follow-loads)";
            return -ENOENT;
        }
    }
    std::sort(ips.begin(), ips.end());
    ips.erase(std::unique(ips.begin(), ips.end()), ips.end());
    if (ips.empty() && !follow_loads) {
        *err = "the -F/-N globs leave no function to trace";
        return -ENOENT;
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
