// dprobe's probe kinds on the common workload. Every handler counts its hits with a plain
// load and store (one thread), which is also what the peers' handlers do.
#include "bench/peers/peers.h"

#include "core/ring_buffer.h"
#include "tracefs/trace_events.h"

#include <dprobe/fprobe.h>
#include <dprobe/kprobes.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace peers
{

namespace
{

struct counter {
    uint64_t n = 0;
    void bump()
    {
        __atomic_store_n(&n, __atomic_load_n(&n, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    }
    uint64_t get() const { return __atomic_load_n(&n, __ATOMIC_RELAXED); }
};

counter entries, exits;

int count_entry(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    entries.bump();
    return 0;
}
void count_exit(struct fprobe *, unsigned long, unsigned long, struct ftrace_regs *, void *)
{
    exits.bump();
}
int count_pre(struct kprobe *, struct pt_regs *)
{
    entries.bump();
    return 0;
}
// Touches the vector registers (SSE arithmetic, as most handlers doing floating point):
// its optimized probe's detour saves the vector registers 0-15 and the MXCSR.
int count_pre_fp(struct kprobe *, struct pt_regs *)
{
    static volatile double d;
    d = d + 1.0;
    entries.bump();
    return 0;
}
// Touches the x87 stack (long double arithmetic): its detour saves the whole extended state
// (xsavec/xrstor), as for any handler whose code the scan cannot follow.
int count_pre_x87(struct kprobe *, struct pt_regs *)
{
    static volatile long double d;
    d = d + 1.0L;
    entries.bump();
    return 0;
}
int count_ret(struct kretprobe_instance *, struct pt_regs *)
{
    entries.bump();
    return 0;
}

uint64_t entry_exit_hits()
{
    return std::min(entries.get(), exits.get());
}
uint64_t entry_hits()
{
    return entries.get();
}

std::string err_text(const char *what, int err)
{
    return std::string(what) + ": " + std::strerror(err < 0 ? -err : err);
}

// An fprobe with entry and exit handlers on SYM.
void add_fprobe(std::vector<mode> &modes, const char *key, const char *name, const char *sym,
                caller_fn f, unsigned long calls)
{
    auto fp = std::make_shared<struct fprobe>();
    mode m;
    m.tool = "dprobe";
    m.key = key;
    m.name = name;
    m.calls = calls;
    m.untraced = m.traced = f;
    m.arm = [fp, sym]() -> std::string {
        *fp = {};
        fp->entry_handler = count_entry;
        fp->exit_handler = count_exit;
        int err = register_fprobe(fp.get(), sym, nullptr);
        return err ? err_text("register_fprobe", err) : "";
    };
    m.disarm = [fp] { unregister_fprobe(fp.get()); };
    m.hits = entry_exit_hits;
    modes.push_back(std::move(m));
}

// A kprobe at ADDR, jump-optimized or an int3 (boosted: the copy runs out of line and
// jumps back).
void add_kprobe(std::vector<mode> &modes, const char *key, const char *name, void *addr,
                bool optimized, unsigned long calls, kprobe_pre_handler_t pre = count_pre)
{
    auto kp = std::make_shared<struct kprobe>();
    mode m;
    m.tool = "dprobe";
    m.key = key;
    m.name = name;
    m.calls = calls;
    m.untraced = m.traced = caller_plain;
    m.arm = [kp, addr, optimized, pre]() -> std::string {
        *kp = {};
        kp->addr = static_cast<kprobe_opcode_t *>(addr);
        kp->pre_handler = pre;
        // The int3 row runs with the optimization knob off (as after
        // `echo 0 > kprobes/optimization`): turning it on again would optimize the probe.
        kprobes_set_optimization(optimized);
        int err = register_kprobe(kp.get());
        if (err) {
            kprobes_set_optimization(1);
            return err_text("register_kprobe", err);
        }
        if (!kprobe_optimized(kp.get()) != !optimized) {
            std::string why = dprobe::kprobe_optimization_status(kp.get());
            unregister_kprobe(kp.get());
            kprobes_set_optimization(1);
            return "the probe is " + why + ", not the mechanism this row measures";
        }
        return "";
    };
    m.disarm = [kp] {
        unregister_kprobe(kp.get());
        kprobes_set_optimization(1);
    };
    m.hits = entry_hits;
    modes.push_back(std::move(m));
}

void add_kretprobe(std::vector<mode> &modes, unsigned long calls)
{
    auto rp = std::make_shared<struct kretprobe>();
    mode m;
    m.tool = "dprobe";
    m.key = "kretprobe";
    m.name = "kretprobe (entry: jump site)";
    m.calls = calls;
    m.untraced = m.traced = caller_plain;
    m.arm = [rp]() -> std::string {
        *rp = {};
        rp->kp.symbol_name = "leaf_plain";
        rp->handler = count_ret;
        int err = register_kretprobe(rp.get());
        return err ? err_text("register_kretprobe", err) : "";
    };
    m.disarm = [rp] { unregister_kretprobe(rp.get()); };
    m.hits = entry_hits;
    modes.push_back(std::move(m));
}

// An `f` dynamic event with two fetch args on the patch site, recorded into the ring buffer
// (overwrite mode, nobody reading, as with a tracer that fell behind).
void add_trace_event(std::vector<mode> &modes, unsigned long calls)
{
    mode m;
    m.tool = "dprobe";
    m.key = "event";
    m.name = "trace event, 2 fetch args, to the ring buffer";
    m.calls = calls;
    m.untraced = m.traced = caller_pfe;
    m.arm = []() -> std::string {
        auto &ev = dprobe::trace_events::instance();
        if (!ev.has_event("peers", "leaf_ev") &&
            ev.write_commands("f:peers/leaf_ev leaf_pfe x=$arg1:u64 y=$arg2:u32",
                              dprobe::ACCEPT_DYNAMIC))
            return "cannot create the event: " + ev.errors().read();
        dprobe::ring_buffer_set_overwrite(true);
        dprobe::ring_buffer_set_tracing_on(true);
        int err = ev.set_enabled("peers", "leaf_ev", true);
        return err ? err_text("enable", err) : "";
    };
    m.disarm = [] { dprobe::trace_events::instance().set_enabled("peers", "leaf_ev", false); };
    m.hits = [] { return dprobe::ring_buffer_stats().written; };
    modes.push_back(std::move(m));
}

// The floor of an int3 probe: an int3 written over a 5-byte NOP by hand and a SIGTRAP
// handler that counts and skips the NOP - the trap and the signal round trip alone. The NOP
// is leaf_pfe's, the twin of the one the int3 kprobe row probes in leaf_plain (an address
// dprobe has probed keeps its record, whose hook would take the trap).
counter raw_traps;
uint8_t raw_saved;
void raw_trap_handler(int, siginfo_t *, void *ucv)
{
    auto *uc = static_cast<ucontext_t *>(ucv);
    if (uc->uc_mcontext.gregs[REG_RIP] - 1 != reinterpret_cast<greg_t>(leaf_pfe_nop)) return;
    raw_traps.bump();
    uc->uc_mcontext.gregs[REG_RIP] += 4; // after the int3: the rest of the NOP
}

bool write_code_byte(void *at, uint8_t b)
{
    const long pg = sysconf(_SC_PAGESIZE);
    auto *page = reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(at) & ~(pg - 1));
    if (mprotect(page, pg, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return false;
    __atomic_store_n(static_cast<uint8_t *>(at), b, __ATOMIC_SEQ_CST);
    mprotect(page, pg, PROT_READ | PROT_EXEC);
    return true;
}

void add_raw_int3(std::vector<mode> &modes, unsigned long calls)
{
    mode m;
    m.tool = "baseline";
    m.key = "raw_int3";
    m.name = "raw int3 + SIGTRAP handler that skips the NOP (no probe)";
    m.calls = calls;
    m.untraced = m.traced = caller_pfe;
    m.arm = []() -> std::string {
        struct sigaction sa = {};
        sa.sa_sigaction = raw_trap_handler;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGTRAP, &sa, nullptr) != 0) return "sigaction failed";
        raw_saved = *reinterpret_cast<uint8_t *>(leaf_pfe_nop);
        if (!write_code_byte(leaf_pfe_nop, 0xcc)) return "cannot write the int3 (mprotect refused)";
        return "";
    };
    m.disarm = [] {
        write_code_byte(leaf_pfe_nop, raw_saved);
        signal(SIGTRAP, SIG_DFL);
    };
    m.hits = [] { return raw_traps.get(); };
    modes.push_back(std::move(m));
}

} // namespace

void add_dprobe_modes(std::vector<mode> &modes, double scale)
{
    auto n = [scale](double c) { return static_cast<unsigned long>(std::max(1000.0, c * scale)); };
    {
        mode m;
        m.tool = "dprobe";
        m.key = "idle";
        m.name = "idle patch site (-fpatchable-function-entry=5)";
        m.calls = n(4e6);
        m.untraced = caller_plain;
        m.traced = caller_pfe;
        modes.push_back(std::move(m));
    }
    add_fprobe(modes, "fprobe", "fprobe entry+exit, patch site", "leaf_pfe", caller_pfe, n(2e6));
    add_fprobe(modes, "fprobe_nosite", "fprobe entry+exit, uninstrumented function (jump site)",
               "leaf_plain", caller_plain, n(2e6));
    add_kprobe(modes, "kprobe_opt", "optimized kprobe on ordinary instructions (lea; imul)",
               leaf_plain_insn, true, n(1e6));
    add_kprobe(modes, "kprobe_opt_nop", "optimized kprobe on a 5-byte NOP", leaf_plain_nop, true,
               n(1e6));
    add_kprobe(modes, "kprobe_opt_full",
               "optimized kprobe, handler using vector registers (vector registers saved)",
               leaf_plain_insn, true, n(5e5), count_pre_fp);
    add_kprobe(modes, "kprobe_opt_xsave",
               "optimized kprobe, handler using the x87 stack (whole state saved)", leaf_plain_insn,
               true, n(5e5), count_pre_x87);
    add_kprobe(modes, "kprobe_int3", "int3 kprobe on ordinary instructions (boosted)",
               leaf_plain_insn, false, n(2e4));
    add_kprobe(modes, "kprobe_int3_nop", "int3 kprobe on the 5-byte NOP (emulated)", leaf_plain_nop,
               false, n(2e4));
    add_raw_int3(modes, n(2e4));
    add_kretprobe(modes, n(1e6));
    add_trace_event(modes, n(1e6));
}

} // namespace peers
