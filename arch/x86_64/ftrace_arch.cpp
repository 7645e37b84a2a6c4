#include "arch/x86_64/ftrace_arch.h"

#include "arch/x86_64/ftrace_frame.h"
#include "arch/x86_64/insn_bytes.h"

#include <cpuid.h>
#include <cstring>
#include <dprobe/ptrace.h>

extern "C" {
void dprobe_ftrace_caller_16();
void dprobe_ftrace_caller_32();
void dprobe_ftrace_caller_64();
void dprobe_ftrace_caller_all_16();
void dprobe_ftrace_caller_all_32();
void dprobe_ftrace_caller_all_64();
void dprobe_return_to_handler_16();
void dprobe_return_to_handler_32();
void dprobe_return_to_handler_64();
void dprobe_fgraph_return_16();
void dprobe_fgraph_return_32();
void dprobe_fgraph_return_64();
void dprobe_fgraph_return_light_16();
void dprobe_fgraph_return_light_32();
void dprobe_fgraph_return_light_64();
void dprobe_fgraph_return_direct_16();
void dprobe_fgraph_return_direct_32();
void dprobe_fgraph_return_direct_64();
// Read by the return trampolines (ftrace_tramp.S).
__attribute__((visibility("hidden"))) uint8_t dprobe_ret_keep_all_xmm;
}

static_assert(offsetof(struct pt_regs, r11) == PTR_R11);
static_assert(offsetof(struct pt_regs, flags) == PTR_FLAGS);
static_assert(offsetof(struct pt_regs, ss) == PTR_SS);
static_assert(offsetof(struct ftrace_regs, vec) == FREGS_VEC);
static_assert(offsetof(struct ftrace_regs, vec_size) == FREGS_VEC_SIZE);
static_assert(sizeof(struct ftrace_regs) <= FR_VWIDE);

namespace dprobe::arch
{

void site_nop_bytes(uint8_t len, uint8_t *out) noexcept
{
    fill_nops(out, len);
}

bool site_jmp_bytes(uintptr_t ip, uint8_t len, uintptr_t target, uint8_t *out) noexcept
{
    if (len < 5 || len > 6) return false;
    size_t prefix = len - 5;
    if (prefix)
        out[0] = 0x2e; // CS segment override: ignored in 64-bit mode, pads the jmp to 6 bytes
    auto jmp = make_jmp_rel32(ip + prefix, target);
    if (!jmp) return false;
    std::memcpy(out + prefix, jmp->data(), jmp->size());
    return true;
}

void write_ftrace_stub(uint8_t *rw, const void *site, uintptr_t trampoline) noexcept
{
    static const uint8_t park_r11[] = {0x4c, 0x89, 0x5c, 0x24, 0xf8}; // mov %r11,-8(%rsp)
    static const uint8_t movabs_r11[] = {0x49, 0xbb};                 // movabs $imm64,%r11
    static const uint8_t jmp_rip[] = {0xff, 0x25, 0, 0, 0, 0};        // jmp *0(%rip)
    uint8_t *p = rw;
    std::memcpy(p, park_r11, sizeof park_r11);
    p += sizeof park_r11;
    std::memcpy(p, movabs_r11, sizeof movabs_r11);
    p += sizeof movabs_r11;
    auto s = reinterpret_cast<uintptr_t>(site);
    std::memcpy(p, &s, 8);
    p += 8;
    std::memcpy(p, jmp_rip, sizeof jmp_rip);
    p += sizeof jmp_rip;
    std::memcpy(p, &trampoline, 8);
    p += 8;
    std::memset(p, INT3_INSN_OPCODE, ftrace_stub_size - static_cast<size_t>(p - rw));
}

namespace
{

unsigned detect_vector_size() noexcept
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 16;
    bool osxsave = c & bit_OSXSAVE;
    bool avx = c & bit_AVX;
    if (!osxsave || !avx) return 16;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0x6) != 0x6) return 16; // the OS does not save ymm state
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_AVX512F) && (lo & 0xe0) == 0xe0)
        return 64;
    return 32;
}

} // namespace

unsigned vector_size() noexcept
{
    static const unsigned v = detect_vector_size();
    return v;
}

namespace
{

// The variant of a trampoline for the vector width this CPU has (16, 32 or 64 bytes).
uintptr_t by_vector_size(void (*v16)(), void (*v32)(), void (*v64)()) noexcept
{
    const unsigned v = vector_size();
    return reinterpret_cast<uintptr_t>(v == 64 ? v64 : v == 32 ? v32 : v16);
}

} // namespace

uintptr_t return_to_handler_addr = return_to_handler();
uintptr_t fgraph_return_addr = fgraph_return();
uintptr_t fgraph_return_light_addr = fgraph_return_light();
uintptr_t fgraph_return_direct_addr = fgraph_return_direct();

uintptr_t ftrace_caller() noexcept
{
    return by_vector_size(dprobe_ftrace_caller_16, dprobe_ftrace_caller_32,
                          dprobe_ftrace_caller_64);
}

void return_keeps_all_xmm() noexcept
{
    __atomic_store_n(&dprobe_ret_keep_all_xmm, 1, __ATOMIC_SEQ_CST);
}

uintptr_t ftrace_caller_all() noexcept
{
    return by_vector_size(dprobe_ftrace_caller_all_16, dprobe_ftrace_caller_all_32,
                          dprobe_ftrace_caller_all_64);
}

uintptr_t fgraph_return() noexcept
{
    return by_vector_size(dprobe_fgraph_return_16, dprobe_fgraph_return_32,
                          dprobe_fgraph_return_64);
}

uintptr_t fgraph_return_light() noexcept
{
    return by_vector_size(dprobe_fgraph_return_light_16, dprobe_fgraph_return_light_32,
                          dprobe_fgraph_return_light_64);
}

uintptr_t fgraph_return_direct() noexcept
{
    return by_vector_size(dprobe_fgraph_return_direct_16, dprobe_fgraph_return_direct_32,
                          dprobe_fgraph_return_direct_64);
}

uintptr_t return_to_handler() noexcept
{
    return by_vector_size(dprobe_return_to_handler_16, dprobe_return_to_handler_32,
                          dprobe_return_to_handler_64);
}

} // namespace dprobe::arch
