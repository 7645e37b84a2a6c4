// The jump-site decision (see jump_plan.h).
#include "core/jump_plan.h"

#include "arch/x86_64/insn_bytes.h"
#include "core/glob.h"

#include <algorithm>
#include <sys/mman.h>

namespace dprobe
{
namespace
{

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

// The first function of OBJ starting after ADDR (0 if none).
uintptr_t next_function(const loaded_object &obj, uintptr_t addr)
{
    auto it = std::upper_bound(obj.funcs.begin(), obj.funcs.end(), addr,
                               [](uintptr_t a, const ksym &k) { return a < k.addr; });
    return it == obj.funcs.end() ? 0 : it->addr;
}

// MEM, limited to OBJ's segments, knowing which bytes are its code: the jump-table scan
// (arch::analyze_function) reads only there and stops where entries leave the code.
struct object_view final : arch::mem_view {
    const loaded_object &obj;
    const arch::mem_view &mem;
    object_view(const loaded_object &o, const arch::mem_view &m) : obj(o), mem(m) {}
    bool read(uintptr_t addr, void *out, size_t len) const noexcept override
    {
        for (const auto &s : obj.segments)
            if ((s.prot & PROT_READ) && addr >= s.start && addr + len <= s.end && addr + len > addr)
                return mem.read(addr, out, len);
        return false;
    }
    bool knows_code() const noexcept override { return true; }
    bool is_code(uintptr_t addr) const noexcept override { return obj.is_text(addr); }
};

} // namespace

bool jump_never_hooked_name(const loaded_object &obj, const ksym &sym)
{
    if (obj.is_vdso || obj.name.rfind("ld-linux", 0) == 0)
        return true; // the dynamic loader runs with half-made state; the vdso is read-only
    for (const char *pat : never_hooked)
        if (glob_match(pat, sym.name)) return true;
    return false;
}

bool jump_is_fragment(const ksym &sym)
{
    return glob_match("*.cold", sym.name) || glob_match("*.cold.*", sym.name);
}

jump_plan plan_jump_site(const loaded_object &obj, const ksym &sym, const arch::mem_view &raw)
{
    const object_view mem(obj, raw);
    jump_plan p;
    if (jump_is_fragment(sym)) {
        p.why = "not a function entry: a cold fragment split off by the compiler";
        return p;
    }
    if (jump_never_hooked_name(obj, sym)) {
        p.why = "dprobe does not hook this function";
        return p;
    }
    if (!obj.is_text(sym.addr) || !obj.is_text(sym.addr + (sym.size ? sym.size - 1 : 0))) {
        p.why = "not in executable code";
        return p;
    }
    std::vector<uint8_t> code(sym.size);
    if (!code.empty() && !mem.read(sym.addr, code.data(), code.size())) {
        p.why = "code not readable";
        return p;
    }
    uintptr_t ip = sym.addr;
    if (sym.size >= 4 && arch::is_endbr64(code.data())) ip += arch::ENDBR64_INSN_SIZE;
    p.ip = ip;
    auto fa = arch::analyze_function(code.data(), sym.addr, sym.size, &mem);
    arch::optimize_refusal refusal{};
    p.region = arch::detour_region_at(fa, code.data(), ip, &p.why, &refusal);
    if (!p.region && refusal == arch::optimize_refusal::crosses_end) {
        // Shorter than the jmp: the padding after it may take the rest, when no other
        // function starts there.
        const uintptr_t room = ip + arch::JMP32_INSN_SIZE;
        const uintptr_t next = next_function(obj, sym.addr);
        if ((!next || next >= room) && obj.is_text(ip + 16))
            p.region = arch::short_function_region(fa, ip, mem);
        if (!p.region) p.why = "function shorter than the 5-byte jump and not followed by padding";
    }
    if (p.region && p.region->insns.size() > 8) {
        p.region.reset();
        p.why = "entry region too long";
    }
    if (p.region) p.why.clear();
    return p;
}

} // namespace dprobe
