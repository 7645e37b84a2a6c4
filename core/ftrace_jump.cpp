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
#include "core/jump_plan.h"
#include "core/self_objects.h"

#include <algorithm>
#include <cstring>
#include <optional>

extern "C" void dprobe_ftrace_entry(dprobe::ftrace_site *, struct ftrace_regs *);

namespace dprobe
{
namespace
{

bool blacklisted(const loaded_object &obj, const ksym &sym)
{
    // dprobe's own object (libdprobe.so) is never probed.
    if (obj.contains(reinterpret_cast<uintptr_t>(&dprobe_ftrace_entry)) && !obj.is_main)
        return true;
    // Libraries only dprobe needs (Zydis, libfuse3...): their code runs inside dprobe.
    if (loaded_for_dprobe_only(obj)) return true;
    return jump_never_hooked_name(obj, sym);
}

} // namespace

bool ftrace_never_hooked(const loaded_object &obj, const ksym &sym)
{
    return blacklisted(obj, sym);
}

bool ftrace_is_fragment(const ksym &sym)
{
    return jump_is_fragment(sym);
}

namespace
{

struct prepared {
    std::unique_ptr<jump_detour> detour;
    uintptr_t ip = 0;
    uint8_t len = 0;
    std::string why;
};

// The analysis part of prepare(): the entry region a jump would replace, or nullopt with
// the reason in WHY. The checks only a running process can make, then the shared decision
// (core/jump_plan.h) on the live text.
std::optional<arch::detour_region> entry_region(const object_ptr &obj, const ksym &sym,
                                                uintptr_t &ip, std::string &why)
{
    if (!ftrace_is_fragment(sym) && loaded_for_dprobe_only(*obj)) {
        why = "in " + obj->name + ", a library loaded only for dprobe itself";
        return std::nullopt;
    }
    if (!ftrace_is_fragment(sym) && blacklisted(*obj, sym)) {
        why = "dprobe does not hook this function";
        return std::nullopt;
    }
    jump_plan plan = plan_jump_site(*obj, sym, arch::live_memory());
    ip = plan.ip;
    why = std::move(plan.why);
    return std::move(plan.region);
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
