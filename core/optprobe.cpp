#include "core/optprobe.h"

#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"
#include "core/compiler.h"

#include <cpuid.h>
#include <cstring>

extern "C" void dprobe_optprobe_caller();

// Read by the trampoline: the XSAVE area size for this CPU's enabled state, and whether the
// compacted form (xsavec) is available.
extern "C" {
__attribute__((visibility("hidden"))) unsigned long dprobe_xsave_size;
__attribute__((visibility("hidden"))) unsigned char dprobe_have_xsavec;
}

namespace dprobe {
namespace {

__attribute__((constructor)) void detect_xsave()
{
    unsigned a, b, c, d;
    // CPUID.(EAX=0DH, ECX=0): EBX = bytes needed by XSAVE for the features enabled in XCR0.
    dprobe_xsave_size = __get_cpuid_count(0xd, 0, &a, &b, &c, &d) ? b : 1024;
    dprobe_xsave_size = (dprobe_xsave_size + 63) & ~63UL;
    dprobe_have_xsavec = __get_cpuid_count(0xd, 1, &a, &b, &c, &d) && (a & 2);
}

// lea -128(%rsp),%rsp ; mov %r11,-8(%rsp) ; movabs $op,%r11 ; call *8(%rip) ; jmp +8 ;
// .quad dprobe_optprobe_caller ; lea 128(%rsp),%rsp
size_t write_head(uint8_t *p, optprobe *op)
{
    size_t n = 0;
    auto put = [&](std::initializer_list<uint8_t> b) {
        for (uint8_t x : b)
            p[n++] = x;
    };
    put({0x48, 0x8d, 0x64, 0x24, 0x80});   // lea -0x80(%rsp),%rsp
    put({0x4c, 0x89, 0x5c, 0x24, 0xf8});   // mov %r11,-0x8(%rsp)
    put({0x49, 0xbb});                     // movabs $op,%r11
    auto v = reinterpret_cast<uintptr_t>(op);
    std::memcpy(p + n, &v, 8);
    n += 8;
    put({0xff, 0x15, 0x02, 0, 0, 0});      // call *2(%rip)
    put({0xeb, 0x08});                     // jmp over the address
    auto t = reinterpret_cast<uintptr_t>(&dprobe_optprobe_caller);
    std::memcpy(p + n, &t, 8);
    n += 8;
    put({0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0}); // lea 0x80(%rsp),%rsp
    return n;
}

} // namespace

std::unique_ptr<optprobe> optprobe_prepare(uintptr_t func, size_t size, const uint8_t *code,
                                           uintptr_t addr, optprobe_handler fn, void *arg,
                                           std::string *why)
{
    auto fa = arch::analyze_function(code, func, size);
    auto check = arch::can_optimize_region(fa, addr, arch::JMP32_INSN_SIZE);
    if (!check.ok()) {
        *why = check.message;
        return nullptr;
    }
    if (check.len > sizeof(optprobe::orig)) {
        *why = "region too long";
        return nullptr;
    }
    auto op = std::make_unique<optprobe>();
    op->addr = addr;
    op->len = static_cast<uint8_t>(check.len);
    std::memcpy(op->orig, code + (addr - func), check.len);
    op->fn = fn;
    op->arg = arg;
    const size_t head = 48;
    op->mem = exec_alloc(addr, addr + check.len,
                         head + check.region.size() * arch::MAX_RELOCATED_INSN_SIZE + 5);
    if (!op->mem) {
        *why = "no executable memory within 2 GiB";
        return nullptr;
    }
    size_t n = write_head(op->mem.rw, op.get());
    const bool back = !check.region.back().is_unconditional_exit();
    auto rel = arch::relocate_insns(check.region, op->mem.rx + n, addr + check.len, back);
    if (!rel) {
        exec_free(op->mem);
        *why = rel.error.message;
        return nullptr;
    }
    std::memcpy(op->mem.rw + n, rel.copy->bytes.data(), rel.copy->bytes.size());
    op->copy_off = static_cast<uint32_t>(n);
    for (size_t i = 1; i < check.region.size(); ++i)
        op->moves.push_back({check.region[i].addr, op->mem.rx + n + rel.copy->insn_offsets[i]});
    return op;
}

int optprobe_arm(optprobe &op)
{
    text_poke_req r;
    r.addr = op.addr;
    r.len = op.len;
    auto jmp = arch::make_jmp_rel32(op.addr, op.mem.rx);
    std::memcpy(r.bytes, jmp->data(), jmp->size());
    std::memset(r.bytes + 5, arch::INT3_INSN_OPCODE, op.len - 5u);
    // A thread sitting right after the first byte (it trapped on a kprobe int3 that is
    // being replaced) is handled by the kprobe layer's SIGTRAP handling, which is delivered
    // when the thread resumes.
    int err = text_poke_stopped({&r, 1}, op.moves);
    if (err == 0)
        op.armed = true;
    return err;
}

int optprobe_disarm(optprobe &op, const uint8_t *bytes)
{
    text_poke_req r;
    r.addr = op.addr;
    r.len = op.len;
    std::memcpy(r.bytes, bytes, op.len);
    r.emu = bytes[0] == arch::INT3_INSN_OPCODE ? text_poke_req::emulate::trap
                                                : text_poke_req::emulate::jmp;
    r.target = op.mem.rx + op.copy_off; // the original instructions, relocated
    int err = text_poke_batch({&r, 1});
    if (err == 0)
        op.armed = false;
    return err;
}

void optprobe_free(std::unique_ptr<optprobe> op)
{
    if (op && !op->armed)
        exec_free(op->mem);
}

} // namespace dprobe

extern "C" DPROBE_NOPROBE void dprobe_optprobe_dispatch(dprobe::optprobe *op,
                                                        struct pt_regs *regs) noexcept
{
    // Handlers see the same ip as on the int3 path (just past the int3); changes to it are
    // ignored, as with the kernel's optimized probes.
    regs->ip = op->addr + 1;
    op->fn(op->arg, regs);
}
