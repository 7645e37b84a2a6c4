// Jump sites: functions built without a patch site (libc, any distribution library) get
// one made of their first instructions, the kernel's optprobe scheme applied to the entry.
// The instructions covering at least 5 bytes after any endbr64 are copied, relocated, to a
// detour (arch/x86_64/detour.h) that starts with a jump to the site's stub; enabling the
// site writes a jmp to the detour over them. This file decides which functions may get one;
// the bytes are the arch verbs'.
#include "core/ftrace_internal.h"

#include "arch/x86_64/detour.h"
#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "core/glob.h"
#include "core/self_objects.h"

#include <algorithm>
#include <cstring>
#include <optional>

extern "C" void dprobe_ftrace_entry(dprobe::ftrace_site *, struct ftrace_regs *);

namespace dprobe
{
namespace
{

// Functions that must never get a jump site: they return twice, run on borrowed stacks,
// have no ordinary caller, or are what dprobe itself uses while it patches code.
constexpr const char *never_hooked[] = {
    "_start",
    "_init",
    "_fini",
    "__restore_rt",
    "*setjmp*",
    "*longjmp*",
    "getcontext",
    "setcontext",
    "swapcontext",
    "makecontext",
    "__start_context",
    "__push___start_context",
    "vfork",
    "__vfork",
    "clone",
    "__clone*",
    "clone3",
    "__spawni*",
    "_dl_*",
    "__libc_start*",
    "_IO_cleanup",
    "__libc_csu_*",
    "syscall",
    "ptrace",
    "wait4",
    "waitpid",
    "mprotect",
    "__mprotect",
    "_exit",
    "_Exit",
    "__morestack",
    "__stack_chk_fail",
    "__tls_get_addr",
    "__cxa_begin_catch",
    "_Unwind_*",
    "backtrace",
    "__x86_*",
    "__fentry__",
    "mcount",
    "_mcount",
    "__gmon_start__",
    "dprobe_*",
    "register_fprobe*",
    "unregister_fprobe",
    "*dprobe*",
    "sigaction",
    "__sigaction",
    "__libc_sigaction",
    "signal",
    "sigreturn",
};

bool blacklisted(const loaded_object &obj, const ksym &sym)
{
    if (obj.is_vdso || obj.name.rfind("ld-linux", 0) == 0)
        return true; // the dynamic loader runs with half-made state; the vdso is read-only
    // dprobe's own object (libdprobe.so) is never probed.
    if (obj.contains(reinterpret_cast<uintptr_t>(&dprobe_ftrace_entry)) && !obj.is_main)
        return true;
    // Libraries only dprobe needs (Zydis, libfuse3...): their code runs inside dprobe.
    if (loaded_for_dprobe_only(obj)) return true;
    for (const char *pat : never_hooked)
        if (glob_match(pat, sym.name)) return true;
    return false;
}

} // namespace

bool ftrace_never_hooked(const loaded_object &obj, const ksym &sym)
{
    return blacklisted(obj, sym);
}

// gcc's hot/cold splitting leaves "f.cold" fragments that are jumped into, never called.
bool ftrace_is_fragment(const ksym &sym)
{
    return glob_match("*.cold", sym.name) || glob_match("*.cold.*", sym.name);
}

namespace
{

// The first function of OBJ starting after ADDR (0 if none).
uintptr_t next_function(const loaded_object &obj, uintptr_t addr)
{
    auto it = std::upper_bound(obj.funcs.begin(), obj.funcs.end(), addr,
                               [](uintptr_t a, const ksym &k) { return a < k.addr; });
    return it == obj.funcs.end() ? 0 : it->addr;
}

// A function shorter than the jmp, ending in ret or jmp, followed by alignment padding
// (int3/nop fill that no symbol covers) up to 5 bytes from the site: the whole function is
// the region and the jmp may overwrite padding that is never executed.
std::optional<arch::detour_region> short_function_region(const loaded_object &obj, const ksym &sym,
                                                         uintptr_t ip,
                                                         const arch::func_analysis &fa)
{
    const uintptr_t room = ip + arch::JMP32_INSN_SIZE;
    uintptr_t next = next_function(obj, sym.addr);
    if ((next && next < room) || !obj.is_text(ip + 16)) return std::nullopt;
    return arch::short_function_region(fa, ip);
}

struct prepared {
    std::unique_ptr<jump_detour> detour;
    uintptr_t ip = 0;
    uint8_t len = 0;
    std::string why;
};

// The analysis part of prepare(): the entry region a jump would replace, or nullopt with
// the reason in WHY.
std::optional<arch::detour_region> entry_region(const object_ptr &obj, const ksym &sym,
                                                uintptr_t &ip, std::string &why)
{
    if (ftrace_is_fragment(sym)) {
        why = "not a function entry: a cold fragment split off by the compiler";
        return std::nullopt;
    }
    if (loaded_for_dprobe_only(*obj)) {
        why = "in " + obj->name + ", a library loaded only for dprobe itself";
        return std::nullopt;
    }
    if (blacklisted(*obj, sym)) {
        why = "dprobe does not hook this function";
        return std::nullopt;
    }
    if (!obj->is_text(sym.addr)) {
        why = "not in executable code";
        return std::nullopt;
    }
    ip = sym.addr;
    if (sym.size >= 4 && arch::is_endbr64(reinterpret_cast<const uint8_t *>(ip)))
        ip += arch::ENDBR64_INSN_SIZE;
    auto fa = arch::analyze_function(sym.addr, sym.size);
    arch::optimize_refusal refusal{};
    auto region =
        arch::detour_region_at(fa, reinterpret_cast<const uint8_t *>(sym.addr), ip, &why, &refusal);
    if (!region && refusal == arch::optimize_refusal::crosses_end) {
        region = short_function_region(*obj, sym, ip, fa);
        if (!region) {
            why = "function shorter than the 5-byte jump and not followed by padding";
            return std::nullopt;
        }
    }
    if (!region) return std::nullopt;
    if (region->insns.size() > 8) {
        why = "entry region too long";
        return std::nullopt;
    }
    return region;
}

prepared prepare(const object_ptr &obj, const ksym &sym)
{
    prepared p;
    uintptr_t ip = 0;
    auto region = entry_region(obj, sym, ip, p.why);
    if (!region) return p;
    // Detour: jmp stub + copy + jmp back.
    auto d = std::make_unique<jump_detour>();
    d->mem = exec_alloc(ip, ip + region->len, arch::detour_size(*region, arch::JUMP_DETOUR_HEAD));
    if (!d->mem) {
        p.why = "no executable memory within 2 GiB";
        return p;
    }
    if (!arch::detour_build(*region, d->mem.rw, d->mem.rx, arch::JUMP_DETOUR_HEAD, &d->d, &p.why)) {
        exec_free(d->mem);
        return p;
    }
    p.why.clear();
    p.detour = std::move(d);
    p.ip = ip;
    p.len = region->len;
    return p;
}

} // namespace

bool jump_site_possible(const object_ptr &obj, const ksym &sym)
{
    ftrace_state &st = ftrace_st();
    if (st.jump_ok.count(sym.addr)) return true;
    if (st.refused.count(sym.addr)) return false;
    uintptr_t ip = 0;
    std::string why;
    if (!entry_region(obj, sym, ip, why)) {
        st.refused.emplace(sym.addr, std::move(why));
        return false;
    }
    st.jump_ok.insert(sym.addr);
    return true;
}

namespace
{
std::atomic<ftrace_text_busy_fn> g_text_busy{nullptr};

bool text_busy(uintptr_t lo, uintptr_t hi)
{
    ftrace_text_busy_fn f = g_text_busy.load(std::memory_order_acquire);
    return f && f(lo, hi);
}
} // namespace

void ftrace_set_text_busy(ftrace_text_busy_fn busy)
{
    g_text_busy.store(busy, std::memory_order_release);
}

bool jump_site_busy(const ftrace_site *s)
{
    return s->kind == site_kind::jump && text_busy(s->ip, s->ip + s->len);
}

// Creates the jump site of SYM (st.lock held). nullptr, with the reason remembered, when the
// function cannot take one; nullptr, remembering nothing, while a kprobe holds bytes of its
// entry (that passes: ftrace_site_refusal says k_entry_holds_a_kprobe).
ftrace_site *make_jump_site(const object_ptr &obj, const ksym &sym)
{
    ftrace_state &st = ftrace_st();
    auto list = st.by_object.find(obj->id);
    if (list == st.by_object.end())
        return nullptr; // not recorded (yet, or any more): ftrace_update_objects first
    if (auto it = st.refused.find(sym.addr); it != st.refused.end()) return nullptr;
    // Before reading the entry: a probe's int3 or jmp there is not the function's code.
    if (text_busy(sym.addr, sym.addr + arch::DETOUR_MAX_REGION)) return nullptr;
    prepared p = prepare(obj, sym);
    st.jump_ok.erase(sym.addr);
    if (!p.detour) {
        st.refused.emplace(sym.addr, std::move(p.why));
        return nullptr;
    }
    auto site = std::make_unique<ftrace_site>();
    site->ip = p.ip;
    site->func = sym.addr;
    site->len = p.len;
    site->kind = site_kind::jump;
    site->usable = true;
    site->sym = &sym;
    site->obj = obj;
    site->jump = std::move(p.detour);
    site->unreached = list->second.unreached;
    ftrace_site *raw = site.get();
    st.by_ip[raw->ip] = raw;
    st.by_func[raw->func] = raw;
    list->second.sites.push_back(std::move(site));
    return raw;
}

// The detour's first instruction jumps to the site's stub, which exists once the site has
// been enabled for the first time (stubs are made before enabling).
void jump_site_link_stub(ftrace_site *s)
{
    arch::detour_write_jmp_head(s->jump->d, s->jump->mem.rw, s->stub.rx); // stubs are near
}

text_poke_req jump_enable_req(const ftrace_site *s)
{
    return arch::detour_arm_req(s->jump->d);
}

// A thread that traps meanwhile runs the relocated copy, i.e. the original instructions.
text_poke_req jump_disable_req(const ftrace_site *s)
{
    return arch::detour_disarm_req(s->jump->d, false);
}

void jump_rip_moves(const ftrace_site *s, std::vector<rip_move> &out)
{
    s->jump->d.moves(out); // the first instruction is the jmp itself: fine
}

const char *ftrace_site_refusal(uintptr_t func)
{
    ftrace_update_objects();
    ftrace_state &st = ftrace_st();
    std::lock_guard<fair_mutex> g(st.lock);
    if (st.by_func.count(func)) return nullptr;
    auto hit = kallsyms::instance().lookup_addr(func);
    if (!hit || hit->sym->addr != func) return "not a function entry";
    if (make_jump_site(hit->obj, *hit->sym)) return nullptr;
    if (auto it = st.refused.find(func); it != st.refused.end()) return it->second.c_str();
    return k_entry_holds_a_kprobe;
}

} // namespace dprobe
