// Function-graph recording: one fprobe with entry and exit handlers on the selected
// functions, writing the kernel's funcgraph_entry / funcgraph_exit events into the ring
// buffer; or, for `record -p function` (the kernel's function tracer), an entry handler only,
// writing a function event (the call and its return address). Hot path: noexcept, no
// allocation, no locks.
//
// Which functions: every function the globs match, through its patch site or a jump site;
// an IFUNC symbol (strlen, memcpy) through the implementation the loader selected for it
// (its resolver runs once, at relocation); and a function that can get neither (an indirect
// jump in its first instructions, no symbol size for an IFUNC implementation) through a
// kretprobe, whose entry is an int3 breakpoint - as the kernel falls back from optimized to
// int3 kprobes. Slower (a signal a call), and said in the summary.
#include "tools/agent/agent.h"
#include "tools/agent/funcgraph_record.h"
#include "tools/agent/graph_args.h"

#include "core/compiler.h"
#include "core/ftrace.h"
#include "core/glob.h"
#include "core/ring_buffer.h"
#include "core/self_objects.h"
#include "core/symbols.h"
#include "core/trace_clock.h"
#include "tools/trace_file.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <dlfcn.h>
#include <elf.h>
#include <memory>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>

namespace dprobe::agent
{

namespace
{

DPROBE_NOPROBE int graph_entry(struct fprobe *, unsigned long ip, unsigned long,
                               struct ftrace_regs *, void *data) noexcept
{
    if (t_depth >= g_max_depth) return 1; // no exit wanted either
    auto *gd = static_cast<graph_data *>(data);
    int32_t depth = t_depth++;
    gd->depth = depth;
    gd->func = ip;
    write_graph_event(tracefile::FUNCGRAPH_ENTRY_ID, depth, 0, ip);
    return 0;
}

// -p function: the call of IP, from PARENT_IP. Its return is not hooked.
DPROBE_NOPROBE void write_function_event(unsigned long ip, unsigned long parent_ip) noexcept
{
    void *p = ring_buffer_reserve_small(sizeof(tracefile::function_rec));
    if (!p) return;
    // Field by field, as in write_graph_event.
    const uint32_t head = tracefile::FUNCTION_ID;
    static_assert(offsetof(tracefile::function_rec, ip) == 4 &&
                  offsetof(tracefile::function_rec, parent_ip) == 12);
    std::memcpy(p, &head, sizeof head);
    std::memcpy(static_cast<char *>(p) + 4, &ip, sizeof ip);
    std::memcpy(static_cast<char *>(p) + 12, &parent_ip, sizeof parent_ip);
    ring_buffer_commit(p);
}

DPROBE_NOPROBE int function_entry(struct fprobe *, unsigned long ip, unsigned long parent_ip,
                                  struct ftrace_regs *, void *) noexcept
{
    write_function_event(ip, parent_ip);
    return 0;
}

DPROBE_NOPROBE void graph_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *,
                               void *data) noexcept
{
    write_graph_exit(static_cast<graph_data *>(data), 0);
}

// A call left by longjmp, an exception or thread exit: its exit, marked, where dprobe
// noticed (the catch, or the thread's next hit), as uftrace prints it at the catch.
DPROBE_NOPROBE void graph_unwound(struct fprobe *, void *data) noexcept
{
    write_graph_exit(static_cast<graph_data *>(data), tracefile::FUNCGRAPH_FL_UNWOUND);
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

namespace
{

// kretprobes for the functions that have no site (int3 entries).
DPROBE_NOPROBE int graph_kret_entry(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    if (t_depth >= g_max_depth) return 1;
    auto *gd = reinterpret_cast<graph_data *>(ri->data);
    const int32_t depth = t_depth++;
    gd->depth = depth;
    gd->func = reinterpret_cast<unsigned long>(get_kretprobe(ri)->kp.addr);
    write_graph_event(tracefile::FUNCGRAPH_ENTRY_ID, depth, 0, gd->func);
    return 0;
}

// -p function through an int3 entry: the return address is at the stack pointer; the
// return is not hooked (a nonzero result).
DPROBE_NOPROBE int function_kret_entry(struct kretprobe_instance *ri, struct pt_regs *regs) noexcept
{
    write_function_event(reinterpret_cast<unsigned long>(get_kretprobe(ri)->kp.addr),
                         regs_get_return_address(regs));
    return 1;
}

DPROBE_NOPROBE int graph_kret_exit(struct kretprobe_instance *ri, struct pt_regs *) noexcept
{
    write_graph_exit(reinterpret_cast<const graph_data *>(ri->data), 0);
    return 0;
}

// Never destroyed: calls may still return through these kretprobes while static destructors
// run at exit. (Made at first use: the agent starts from a constructor of its own.)
struct int3_probes {
    std::vector<std::unique_ptr<kretprobe>> probes;
    std::vector<std::unique_ptr<std::string>> names; // their kp.symbol_name
};
int3_probes &int3_set()
{
    static int3_probes *p = new int3_probes;
    return *p;
}

// The implementation the loader selected for the IFUNC symbol SYM of OBJ (what a call of it
// runs), or 0. dlsym runs the resolver as the loader does; not inside the loader.
uintptr_t ifunc_target(const loaded_object &o, const ksym &sym)
{
    void *h = dlopen(o.path.empty() ? nullptr : o.path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
    if (!h) return 0;
    void *fn = dlsym(h, sym.name.c_str());
    dlclose(h);
    return reinterpret_cast<uintptr_t>(fn);
}

bool wildcard(const std::string &glob)
{
    return glob.find_first_of("*?[") != std::string::npos;
}

// The C library and the loader block every signal around some of their work.
bool runs_signals_blocked(const loaded_object &o)
{
    return o.name.rfind("libc.so", 0) == 0 || o.name.rfind("ld-linux", 0) == 0;
}

} // namespace

namespace
{

struct int3_entry {
    uintptr_t addr;
    std::string name;
    std::string ifunc; // "lib:sym" of an IFUNC: the kprobe layer finds its implementation
};

// --follow-loads: the graph's globs, for the functions of objects loaded later that the
// fprobe could not take (funcgraph_objects_added). Under g_follow_lock, which the loader's
// notification only tries (a fork child may find it held forever).
fair_mutex g_follow_lock;
bool g_follow = false, g_follow_function_tracer = false;
std::vector<std::string> g_follow_globs, g_follow_notrace;

// Sorts the functions HITS of glob G matched: into IPS (a usable site), INT3 (an int3 entry)
// or PLAN's left-out list. *MINE counts dprobe's own and those in a library loaded for dprobe
// alone (MINE_OBJ: its name), *OWN (if given) dprobe's own. LOADED_LATER: HITS are in objects being
// loaded (inside the loader: no dlsym, so no IFUNC's implementation) and those with a usable site
// are the fprobe's already.
size_t classify_hits(const std::vector<sym_hit> &hits, const std::string &g,
                     const std::vector<std::string> &notrace, bool loaded_later,
                     std::vector<unsigned long> &ips, std::vector<int3_entry> &int3,
                     graph_plan *plan, size_t *mine, std::string *mine_obj, size_t *own)
{
    size_t matched = 0;
    for (const sym_hit &h : hits) {
        // dprobe's own, or what it alone brought in: said so when nothing else matches.
        auto note_mine = [&] {
            if (h.obj->contains(reinterpret_cast<uintptr_t>(&funcgraph_start))) {
                ++*mine;
                if (own) ++*own;
            } else if (loaded_for_dprobe_only(*h.obj)) {
                ++*mine;
                *mine_obj = h.obj->name;
            }
        };
        const std::string &name = h.sym->name;
        if (std::any_of(notrace.begin(), notrace.end(),
                        [&](const std::string &n) { return glob_match(n, name); }))
            continue;
        matched++;
        if (ftrace_is_fragment(*h.sym)) { // "f.cold": part of f, never called
            note_mine();
            continue;
        }
        uintptr_t addr = h.sym->addr;
        bool ifunc = false;
        if (h.sym->type == STT_GNU_IFUNC) {
            if (loaded_later) {
                plan->left_out.emplace_back(name, "an IFUNC loaded after the start: its "
                                                  "implementation is not known yet");
                continue;
            }
            if (uintptr_t impl = ifunc_target(*h.obj, *h.sym); impl && impl != addr) {
                addr = impl;
                ifunc = true;
            }
        }
        // An IFUNC's implementations are hand-written (glibc's string functions), and
        // their siblings jump into them past their entry (memmove into memcpy): no jump
        // site there, an int3 entry.
        ftrace_site *s = ifunc ? ftrace_location(addr) : ftrace_location_or_jump(addr);
        if (s && s->usable && !s->gone) {
            ips.push_back(s->ip);
            if (ifunc) plan->names.emplace_back(s->ip, name);
            continue;
        }
        // No site: an int3 entry. Not by a wildcard in the C library and the loader,
        // which run with every signal blocked in places (pthread_create, sigaction): a
        // SIGTRAP there kills the program. A glob naming the function exactly is asked
        // for anyway.
        const char *why = s ? s->why : ftrace_site_refusal(addr);
        const std::string reason = ifunc ? "an IFUNC's implementation, hand-written"
                                   : why ? why
                                         : "no site";
        if (!ifunc && (ftrace_never_hooked(*h.obj, *h.sym) || within_kprobe_blacklist(addr))) {
            // dprobe's own, or what it runs on (setjmp, sigaction...): not at all. Said
            // when named; a wildcard passes over them, as the kernel's notrace functions.
            if (!wildcard(g)) plan->left_out.emplace_back(name, reason);
            note_mine();
            continue;
        }
        if (wildcard(g) && runs_signals_blocked(*h.obj)) {
            plan->left_out.emplace_back(name, reason);
            if (plan->left_out_hint.empty())
                plan->left_out_hint = "a function of " + h.obj->name +
                                      " gets an int3 entry only when named: -F '" + h.obj->name +
                                      ":" + name + "'";
            continue;
        }
        plan->int3_why.emplace_back(name, reason);
        int3.push_back({addr, name, ifunc ? h.obj->name + ":" + name : std::string()});
    }
    return matched;
}

// The int3 entries: a kretprobe each (deep recursion: many calls in flight).
void register_int3(const std::vector<int3_entry> &int3, bool function_tracer, graph_plan *plan)
{
    for (const int3_entry &e : int3) {
        const std::string &name = e.name;
        auto rp = std::make_unique<kretprobe>();
        if (!e.ifunc.empty()) {
            int3_set().names.push_back(std::make_unique<std::string>(e.ifunc));
            rp->kp.symbol_name = int3_set().names.back()->c_str();
        } else {
            rp->kp.addr = reinterpret_cast<kprobe_opcode_t *>(e.addr);
        }
        rp->entry_handler = function_tracer ? function_kret_entry : graph_kret_entry;
        rp->handler = graph_kret_exit;
        rp->data_size = sizeof(graph_data);
        rp->maxactive = 4096;
        if (int r = register_kretprobe(rp.get()); r < 0) {
            plan->left_out.emplace_back(name, std::strerror(-r));
            continue;
        }
        plan->int3.push_back(name);
        if (!e.ifunc.empty())
            plan->names.emplace_back(reinterpret_cast<uintptr_t>(rp->kp.addr), name);
        int3_set().probes.push_back(std::move(rp));
    }
}

} // namespace

int funcgraph_start(const std::vector<std::string> &globs, const std::vector<std::string> &notrace,
                    bool follow_loads, unsigned max_depth, bool function_tracer, bool strict,
                    std::string *err, std::string *warn, graph_plan *plan,
                    const graph_args_config *args)
{
    g_max_depth = max_depth && max_depth < INT32_MAX ? static_cast<int32_t>(max_depth) : INT32_MAX;
    ftrace_update_objects();
    std::vector<unsigned long> ips;
    std::vector<int3_entry> int3;
    for (const std::string &g : globs) {
        const auto hits = kallsyms::instance().match_funcs(g, "");
        // MINE: dprobe's own functions (the agent's object), or in a library loaded for
        // dprobe alone (MINE_OBJ, the last one); OWN: of the agent's object.
        size_t mine = 0, own = 0;
        std::string mine_obj;
        const size_t matched =
            classify_hits(hits, g, notrace, false, ips, int3, plan, &mine, &mine_obj, &own);
        // Everything it matched is in a library the program does not use (yet): libz,
        // liblzma... under libdw. Its functions are the program's once a library it loads
        // needs that one (followed with --follow-loads); a dlopen of the library itself by
        // name maps nothing and is not seen.
        if (matched && mine == matched && own == matched) {
            *warn += (warn->empty() ? "" : "; ") +
                     ("-F '" + g + "' matches only dprobe's own functions");
        } else if (matched && mine == matched) {
            const std::string note =
                "-F '" + g + "': " + mine_obj + " is loaded for dprobe itself, not by the program" +
                (own ? ", the other functions it matches are dprobe's own" : "") +
                (follow_loads ? " (its functions are traced once a library "
                                "the program loads needs it)"
                              : " (for a library the program loads later "
                                "that needs it: --follow-loads)");
            *warn += (warn->empty() ? "" : "; ") + note;
        }
        if (!matched && !follow_loads) {
            if (strict) {
                *err = "no function matches -F '" + g +
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
    register_int3(int3, function_tracer, plan);
    const size_t traced = ips.size() + int3_set().probes.size();
    if (args && !args->empty() && !function_tracer && !follow_loads) {
        // The functions that get arguments or a return value go on the arguments' fprobe.
        std::string args_warn;
        if (int r = graph_args_start(*args, ips, &args_warn, err); r < 0) {
            funcgraph_stop();
            return r;
        }
        if (!args_warn.empty())
            *warn += (warn->empty() ? "" : "; ") + ("without arguments: " + args_warn);
    }
    if (!traced && !follow_loads) {
        if (strict) {
            std::string why = "the -F/-N globs leave no function to trace";
            for (const auto &[name, w] : plan->left_out)
                why += "; " + name + ": " + w;
            if (!warn->empty()) why += "; " + *warn;
            *err = why;
            funcgraph_stop();
            return -ENOENT;
        }
        return 0;
    }
    if (ips.empty() && !follow_loads) return static_cast<int>(traced);
    if (function_tracer) {
        g_graph_probe.entry_handler = function_entry;
    } else {
        g_graph_probe.entry_handler = graph_entry;
        g_graph_probe.exit_handler = graph_exit;
        g_graph_probe.unwound_handler = graph_unwound;
        g_graph_probe.entry_data_size = sizeof(graph_data);
    }
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
        funcgraph_stop();
        return ret;
    }
    g_graph_registered = true;
    if (follow_loads) {
        std::lock_guard<fair_mutex> g(g_follow_lock);
        g_follow = true;
        g_follow_function_tracer = function_tracer;
        g_follow_globs = globs;
        g_follow_notrace = notrace;
    }
    return static_cast<int>(traced);
}

void funcgraph_report(const std::string &who, const graph_plan &plan)
{
    // The summary names every function traced through an int3 entry and every one left out,
    // with why: in as many status datagrams as it takes (the recorder reads 8 KB at most),
    // each headed by the kind, who and the count; the recorder joins them.
    auto listing = [&](const char *kind, size_t n,
                       const std::vector<std::pair<std::string, std::string>> &v,
                       const std::string &hint) {
        if (!n) return;
        const std::string head = std::string(kind) + " " + who + " " + std::to_string(n);
        std::string msg = head;
        for (const auto &[name, why] : v) {
            std::string line = "\n" + name + " (" + why + ")";
            if (msg.size() + line.size() > 6000 && msg.size() > head.size()) {
                status_send(msg);
                msg = head;
            }
            msg += line;
        }
        if (!hint.empty()) msg += "\n" + hint;
        status_send(msg);
    };
    listing("int3", plan.int3.size(), plan.int3_why, "");
    listing("leftout", plan.left_out.size(), plan.left_out, plan.left_out_hint);
}

void funcgraph_objects_added(std::span<const object_ptr> added, graph_plan *plan)
{
    if (added.empty()) return;
    std::unique_lock<fair_mutex> g(g_follow_lock, std::try_to_lock);
    if (!g.owns_lock() || !g_follow) return;
    std::vector<unsigned long> ips; // the fprobe's own (it ran first: core/dl_notify.h)
    std::vector<int3_entry> int3;
    size_t mine = 0;
    std::string mine_obj;
    for (const std::string &glob : g_follow_globs)
        classify_hits(kallsyms::instance().match_funcs_in(added, glob, ""), glob, g_follow_notrace,
                      true, ips, int3, plan, &mine, &mine_obj, nullptr);
    register_int3(int3, g_follow_function_tracer, plan);
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
    std::lock_guard<fair_mutex> g(g_follow_lock);
    g_follow = false;
    g_follow_globs.clear();
    g_follow_notrace.clear();
    // Unregistered, not freed: a call may still be on its way back through one.
    for (auto &rp : int3_set().probes)
        unregister_kretprobe(rp.release());
    int3_set().probes.clear();
    graph_args_stop();
    if (!g_graph_registered) return;
    unregister_fprobe(&g_graph_probe);
    g_graph_registered = false;
    g_graph_probe = {};
}

} // namespace dprobe::agent
