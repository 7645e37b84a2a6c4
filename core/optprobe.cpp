#include "core/optprobe.h"

#include "arch/x86_64/insn_analysis.h"
#include "arch/x86_64/insn_bytes.h"
#include "arch/x86_64/relocate.h"
#include "core/compiler.h"

#include <Zydis/Mnemonic.h>

#include <cstring>
#include <vector>

extern "C" void dprobe_optprobe_caller();
extern "C" void dprobe_optprobe_caller_light();

namespace dprobe {
namespace {

// lea -128(%rsp),%rsp ; mov %r11,-16(%rsp) ; movabs $op,%r11 ; call *6(%rip) ; jmp +12 ;
// (4 bytes of padding) ; .quad dprobe_optprobe_caller[_light] ; lea 128(%rsp),%rsp
// The caller's address sits at k_caller_slot, 8-byte aligned (chunks are 16-aligned), so
// switching between the full and the light caller is one atomic store.
constexpr size_t k_caller_slot = 32;
constexpr size_t k_head_size = 48;

uintptr_t caller_for(bool light)
{
    return reinterpret_cast<uintptr_t>(light ? &dprobe_optprobe_caller_light
                                             : &dprobe_optprobe_caller);
}

size_t write_head(uint8_t *p, optprobe *op)
{
    size_t n = 0;
    auto put = [&](std::initializer_list<uint8_t> b) {
        for (uint8_t x : b)
            p[n++] = x;
    };
    put({0x48, 0x8d, 0x64, 0x24, 0x80});   // lea -0x80(%rsp),%rsp
    // r11 goes below the slot the call's return address takes: the caller's frame top.
    put({0x4c, 0x89, 0x5c, 0x24, 0xf0});   // mov %r11,-0x10(%rsp)
    put({0x49, 0xbb});                     // movabs $op,%r11
    auto v = reinterpret_cast<uintptr_t>(op);
    std::memcpy(p + n, &v, 8);
    n += 8;
    put({0xff, 0x15, 0x06, 0, 0, 0});      // call *6(%rip): the slot at 32
    put({0xeb, 0x0c});                     // jmp over the padding and the slot, to 40
    put({0xcc, 0xcc, 0xcc, 0xcc});
    const uintptr_t t = caller_for(false);
    std::memcpy(p + n, &t, 8);
    n += 8;
    put({0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0}); // lea 0x80(%rsp),%rsp
    return n;
}

// Whether the function may set DF (std, or flags popped from memory): the light caller
// saves the arithmetic flags only and runs handlers with DF as it finds it.
bool may_set_df(const arch::func_analysis &fa)
{
    for (const arch::insn &i : fa.insns)
        if (i.mnemonic == ZYDIS_MNEMONIC_STD || i.pops_flags)
            return true;
    return false;
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
    op->df_safe = !may_set_df(fa);
    const size_t head = k_head_size;
    op->mem = exec_alloc(addr, addr + check.len,
                         head + check.region.size() * arch::MAX_RELOCATED_INSN_SIZE + 5);
    if (!op->mem) {
        *why = "no executable memory within 2 GiB";
        return nullptr;
    }
    size_t n = write_head(op->mem.rw, op.get());
    static_assert(k_caller_slot % 8 == 0);
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

namespace {

text_poke_req jmp_req(const optprobe &op)
{
    text_poke_req r;
    r.addr = op.addr;
    r.len = op.len;
    auto jmp = arch::make_jmp_rel32(op.addr, op.mem.rx);
    std::memcpy(r.bytes, jmp->data(), jmp->size());
    std::memset(r.bytes + 5, arch::INT3_INSN_OPCODE, op.len - 5u);
    return r;
}

text_poke_req restore_req(const optprobe &op, const uint8_t *bytes)
{
    text_poke_req r;
    r.addr = op.addr;
    r.len = op.len;
    std::memcpy(r.bytes, bytes, op.len);
    r.emu = bytes[0] == arch::INT3_INSN_OPCODE ? text_poke_req::emulate::trap
                                                : text_poke_req::emulate::jmp;
    r.target = op.mem.rx + op.copy_off; // the original instructions, relocated
    return r;
}

} // namespace

int optprobe_arm(optprobe &op)
{
    optprobe *one[1] = {&op};
    return optprobe_arm_many(one, {});
}

int optprobe_arm_many(std::span<optprobe *const> ops, std::span<const rip_move> extra)
{
    std::vector<text_poke_req> reqs;
    std::vector<rip_move> moves(extra.begin(), extra.end());
    reqs.reserve(ops.size());
    for (const optprobe *op : ops) {
        reqs.push_back(jmp_req(*op));
        moves.insert(moves.end(), op->moves.begin(), op->moves.end());
    }
    // A thread sitting right after the first byte (it trapped on a kprobe int3 that is
    // being replaced) is handled by the kprobe layer's SIGTRAP handling, which is delivered
    // when the thread resumes.
    int err = text_poke_stopped(reqs, moves);
    if (err == 0)
        for (optprobe *op : ops)
            op->armed = true;
    return err;
}

int optprobe_disarm(optprobe &op, const uint8_t *bytes)
{
    text_poke_req r = restore_req(op, bytes);
    int err = text_poke_batch({&r, 1});
    if (err == 0)
        op.armed = false;
    return err;
}

int optprobe_disarm_many(std::span<optprobe *const> ops, bool keep_int3)
{
    std::vector<text_poke_req> reqs;
    reqs.reserve(ops.size());
    for (const optprobe *op : ops) {
        uint8_t bytes[sizeof op->orig];
        std::memcpy(bytes, op->orig, op->len);
        if (keep_int3)
            bytes[0] = arch::INT3_INSN_OPCODE;
        reqs.push_back(restore_req(*op, bytes));
    }
    int err = text_poke_batch(reqs);
    if (err == 0)
        for (optprobe *op : ops)
            op->armed = false;
    return err;
}

bool optprobe_set_light(optprobe &op, optprobe_light_handler light_fn)
{
    const bool light = light_fn && op.df_safe;
    // The light handler is read by the light caller only: set it before switching to it
    // (a thread already in the full caller keeps using op.fn).
    if (light)
        __atomic_store_n(&op.light_fn, light_fn, __ATOMIC_RELEASE);
    __atomic_store_n(reinterpret_cast<uintptr_t *>(op.mem.rw + k_caller_slot), caller_for(light),
                     __ATOMIC_RELEASE);
    op.light = light;
    return light;
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

extern "C" DPROBE_NOPROBE int dprobe_optprobe_dispatch_light(dprobe::optprobe *op,
                                                            struct pt_regs *regs) noexcept
{
    regs->ip = op->addr + 1;
    return __atomic_load_n(&op->light_fn, __ATOMIC_ACQUIRE)(op->arg, regs);
}
