// Jump sites: functions built without a patch site (libc, any distribution library) get
// one made of their first instructions, the kernel's optprobe scheme applied to the entry.
// The instructions covering at least 5 bytes after any endbr64 are copied, relocated, to a
// detour that starts with a jump to the site's stub; enabling the site writes a jmp to the
// detour over them.
#include "core/ftrace_internal.h"

#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"
#include "core/glob.h"

#include <algorithm>
#include <cstring>
#include <optional>

extern "C" void dprobe_ftrace_entry(dprobe::ftrace_site *, struct ftrace_regs *);

namespace dprobe {
namespace {

// Functions that must never get a jump site: they return twice, run on borrowed stacks,
// have no ordinary caller, or are what dprobe itself uses while it patches code.
constexpr const char *never_hooked[] = {
    "_start", "_init", "_fini", "__restore_rt", "*setjmp*", "*longjmp*", "getcontext",
    "setcontext", "swapcontext", "makecontext", "__start_context", "__push___start_context",
    "vfork", "__vfork", "clone", "__clone*", "clone3", "__spawni*", "_dl_*", "__libc_start*",
    "_IO_cleanup", "__libc_csu_*", "syscall", "ptrace", "wait4", "waitpid", "mprotect",
    "__mprotect", "_exit", "_Exit", "__morestack", "__stack_chk_fail", "__tls_get_addr",
    "__cxa_begin_catch", "_Unwind_*", "backtrace", "__x86_*", "__fentry__", "mcount",
    "_mcount", "__gmon_start__", "dprobe_*", "register_fprobe*", "unregister_fprobe",
    "*dprobe*", "sigaction", "__sigaction", "__libc_sigaction", "signal", "sigreturn",
};

bool blacklisted(const loaded_object &obj, const ksym &sym)
{
    if (obj.is_vdso || obj.name.rfind("ld-linux", 0) == 0)
        return true; // the dynamic loader runs with half-made state; the vdso is read-only
    // dprobe's own object (libdprobe.so) is never probed.
    if (obj.contains(reinterpret_cast<uintptr_t>(&dprobe_ftrace_entry)) && !obj.is_main)
        return true;
    for (const char *pat : never_hooked)
        if (glob_match(pat, sym.name))
            return true;
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

namespace {

// The first function of OBJ starting after ADDR (0 if none).
uintptr_t next_function(const loaded_object &obj, uintptr_t addr)
{
    auto it = std::upper_bound(obj.funcs.begin(), obj.funcs.end(), addr,
                               [](uintptr_t a, const ksym &k) { return a < k.addr; });
    return it == obj.funcs.end() ? 0 : it->addr;
}

// Whether [from, to) is alignment padding: int3s, or NOP instructions (any length or
// prefix) decoded from FROM; the last NOP may extend past TO.
bool is_padding(uintptr_t from, uintptr_t to)
{
    uintptr_t at = from;
    while (at < to) {
        auto i = arch::insn_decode(reinterpret_cast<const void *>(at), 16, at);
        if (!i)
            return false;
        if (i->k != arch::insn::int3 && std::strcmp(i->mnemonic_name(), "nop") != 0)
            return false;
        at += i->len;
    }
    return true;
}

// A function shorter than the jmp, ending in ret or jmp, followed by alignment padding
// (int3/nop fill that no symbol covers) up to 5 bytes from the site: the whole function is
// the region and the jmp may overwrite padding that is never executed.
std::optional<arch::optimize_check> short_function_region(const loaded_object &obj,
                                                          const ksym &sym, uintptr_t ip)
{
    const uintptr_t end = sym.addr + sym.size;
    if (end >= ip + arch::JMP32_INSN_SIZE)
        return std::nullopt;
    uintptr_t next = next_function(obj, sym.addr);
    if ((next && next < ip + arch::JMP32_INSN_SIZE) || !obj.is_text(ip + 16))
        return std::nullopt;
    if (!is_padding(end, ip + arch::JMP32_INSN_SIZE))
        return std::nullopt;
    auto fa = arch::analyze_function(sym.addr, sym.size);
    if (fa.decode_failed || fa.has_indirect_jump)
        return std::nullopt;
    arch::optimize_check c;
    for (const arch::insn &i : fa.insns) {
        if (i.addr < ip)
            continue;
        if (arch::insn_ool_refusal(i))
            return std::nullopt;
        c.region.push_back(i);
    }
    if (c.region.empty() || !c.region.back().is_unconditional_exit())
        return std::nullopt;
    for (const arch::insn &i : c.region)
        if (&i != &c.region.back() && (i.is_unconditional_exit() || i.k == arch::insn::call_rel ||
                                       i.k == arch::insn::call_indirect))
            return std::nullopt;
    // Nothing may branch into the function after its first instruction.
    for (const auto &e : fa.jump_targets)
        if (e.to > ip)
            return std::nullopt;
    c.addr = ip;
    c.len = arch::JMP32_INSN_SIZE;
    return c;
}

struct prepared {
    std::unique_ptr<jump_detour> detour;
    uintptr_t ip = 0;
    uint8_t len = 0;
    std::string why;
};

prepared prepare(const object_ptr &obj, const ksym &sym)
{
    prepared p;
    if (ftrace_is_fragment(sym)) {
        p.why = "not a function entry: a cold fragment split off by the compiler";
        return p;
    }
    if (blacklisted(*obj, sym)) {
        p.why = "dprobe does not hook this function";
        return p;
    }
    if (!obj->is_text(sym.addr)) {
        p.why = "not in executable code";
        return p;
    }
    uintptr_t ip = sym.addr;
    if (sym.size >= 4 && arch::is_endbr64(reinterpret_cast<const uint8_t *>(ip)))
        ip += arch::ENDBR64_INSN_SIZE;
    auto fa = arch::analyze_function(sym.addr, sym.size);
    auto check = arch::can_optimize_region(fa, ip, arch::JMP32_INSN_SIZE);
    if (check.reason == arch::optimize_refusal::crosses_end) {
        if (auto shorter = short_function_region(*obj, sym, ip)) {
            check = std::move(*shorter);
        } else {
            p.why = "function shorter than the 5-byte jump and not followed by padding";
            return p;
        }
    }
    if (!check.ok()) {
        p.why = check.message;
        return p;
    }
    if (check.len > sizeof(jump_detour::orig) || check.region.size() > 8) {
        p.why = "entry region too long";
        return p;
    }
    // Detour: jmp stub (5) + copy + jmp back; the copy's size is known after relocating.
    auto d = std::make_unique<jump_detour>();
    const size_t budget = 5 + check.region.size() * arch::MAX_RELOCATED_INSN_SIZE + 5;
    d->mem = exec_alloc(ip, ip + check.len, budget);
    if (!d->mem) {
        p.why = "no executable memory within 2 GiB";
        return p;
    }
    // A region ending in ret/jmp needs no jump back (and a short function's region ends
    // in padding, where there is nothing to come back to).
    const bool back = !check.region.back().is_unconditional_exit();
    auto rel = arch::relocate_insns(check.region, d->mem.rx + 5, ip + check.len, back);
    if (!rel) {
        exec_free(d->mem);
        p.why = rel.error.message;
        return p;
    }
    std::memcpy(d->mem.rw + 5, rel.copy->bytes.data(), rel.copy->bytes.size());
    std::memcpy(d->orig, reinterpret_cast<const void *>(ip), check.len);
    d->call_len = 5;
    d->ninsn = static_cast<uint32_t>(check.region.size());
    for (size_t i = 0; i < check.region.size(); ++i) {
        d->orig_off[i] = static_cast<uint32_t>(check.region[i].addr - ip);
        d->copy_off[i] = 5 + rel.copy->insn_offsets[i];
    }
    p.detour = std::move(d);
    p.ip = ip;
    p.len = static_cast<uint8_t>(check.len);
    return p;
}

} // namespace

// Creates the jump site of SYM (st.lock held). nullptr, with the reason remembered, when the
// function cannot take one.
ftrace_site *make_jump_site(const object_ptr &obj, const ksym &sym)
{
    ftrace_state &st = ftrace_st();
    auto list = st.by_object.find(obj->id);
    if (list == st.by_object.end())
        return nullptr; // not recorded (yet, or any more): ftrace_update_objects first
    if (auto it = st.refused.find(sym.addr); it != st.refused.end())
        return nullptr;
    prepared p = prepare(obj, sym);
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
    auto jmp = arch::make_jmp_rel32(s->jump->mem.rx, s->stub.rx);
    std::memcpy(s->jump->mem.rw, jmp->data(), jmp->size());
}

text_poke_req jump_enable_req(const ftrace_site *s)
{
    text_poke_req r;
    r.addr = s->ip;
    r.len = s->len;
    auto jmp = arch::make_jmp_rel32(s->ip, s->jump->mem.rx);
    std::memcpy(r.bytes, jmp->data(), jmp->size());
    // The rest of the region is never executed: nothing jumps into it (checked).
    std::memset(r.bytes + 5, arch::INT3_INSN_OPCODE, s->len - 5);
    r.emu = text_poke_req::emulate::jmp;
    r.target = s->jump->mem.rx;
    return r;
}

text_poke_req jump_disable_req(const ftrace_site *s)
{
    text_poke_req r;
    r.addr = s->ip;
    r.len = s->len;
    std::memcpy(r.bytes, s->jump->orig, s->len);
    // A thread that traps meanwhile runs the relocated copy, i.e. the original instructions.
    r.emu = text_poke_req::emulate::jmp;
    r.target = s->jump->mem.rx + s->jump->call_len;
    return r;
}

void jump_rip_moves(const ftrace_site *s, std::vector<rip_move> &out)
{
    const jump_detour &d = *s->jump;
    for (uint32_t i = 1; i < d.ninsn; ++i) // the first one is the jmp itself: fine
        out.push_back({s->ip + d.orig_off[i], d.mem.rx + d.copy_off[i]});
}

const char *ftrace_site_refusal(uintptr_t func)
{
    ftrace_update_objects();
    ftrace_state &st = ftrace_st();
    std::lock_guard<std::mutex> g(st.lock);
    if (st.by_func.count(func))
        return nullptr;
    auto hit = kallsyms::instance().lookup_addr(func);
    if (!hit || hit->sym->addr != func)
        return "not a function entry";
    if (make_jump_site(hit->obj, *hit->sym))
        return nullptr;
    return st.refused[func].c_str();
}

} // namespace dprobe
