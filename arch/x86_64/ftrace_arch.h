// What the site machinery in core needs to know about x86 (the kernel's ftrace_make_call /
// ftrace_make_nop family): how a function's entry looks (entry_insn.h), which bytes turn a
// site on and off, and the per-site stub that leads to the trampolines.
#pragma once

#include "arch/x86_64/entry_insn.h"

#include <dprobe/ptrace.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace dprobe::arch
{

// Bytes of a site turned off: one NOP of LEN bytes.
void site_nop_bytes(uint8_t len, uint8_t *out) noexcept;
// Bytes of a site turned on: `jmp target` as one instruction of exactly LEN bytes (5, or 6
// with a CS prefix: no thread ever runs the NOP's second half).
bool site_jmp_bytes(uintptr_t ip, uint8_t len, uintptr_t target, uint8_t *out) noexcept;

// The per-site stub: park r11, load the site record into r11, jump to the trampoline. The
// site jumps to it, so the trampoline starts with the function's stack as at its entry.
constexpr size_t ftrace_stub_size = 32;
void write_ftrace_stub(uint8_t *rw, const void *site, uintptr_t trampoline) noexcept;

// The fentry and return trampolines for this CPU's vector registers. ftrace_caller() keeps
// the argument registers xmm0-7 (patch sites: their code was built with -fipa-ra off);
// ftrace_caller_all() keeps all sixteen (jump sites, in plain functions whose callers may
// keep values in the registers such a function leaves alone).
uintptr_t ftrace_caller() noexcept;
uintptr_t ftrace_caller_all() noexcept;
// What a return-address slot holds while its function is hooked: the return trampoline,
// when dprobe replaced the return address (return_to_handler), or the return point of the
// trampoline that called the function's body (fgraph_return; fgraph_return_light when the
// light entry dispatch ran: its return tries the light exit dispatch first;
// fgraph_return_direct when the direct one did: its return tries the direct exit first).
uintptr_t return_to_handler() noexcept;
uintptr_t fgraph_return() noexcept;
uintptr_t fgraph_return_light() noexcept;
uintptr_t fgraph_return_direct() noexcept;
// From now on the return trampoline keeps xmm2-15 too: call before hooking the return of a
// plain function (a jump site's, a kretprobe's on an instruction), whose callers may keep
// values there (-fipa-ra). Never turned off.
void return_keeps_all_xmm() noexcept;
// The same, as variables for the hot path (set before any site is enabled; named for the
// trampolines, ftrace_direct.inc).
extern uintptr_t return_to_handler_addr __asm__("dprobe_return_to_handler_addr");
extern uintptr_t fgraph_return_addr __asm__("dprobe_fgraph_return_addr");
extern uintptr_t fgraph_return_light_addr __asm__("dprobe_fgraph_return_light_addr");
extern uintptr_t fgraph_return_direct_addr __asm__("dprobe_fgraph_return_direct_addr");
// Whether A is one of the four: a slot holding it belongs to a hooked function.
inline bool is_return_hook(uintptr_t a) noexcept
{
    return a == fgraph_return_addr || a == fgraph_return_light_addr ||
           a == fgraph_return_direct_addr || a == return_to_handler_addr;
}
// Bytes saved per vector register (16 xmm, 32 ymm, 64 zmm).
unsigned vector_size() noexcept;

} // namespace dprobe::arch

extern "C" {
// Pops the values on the x87 stack (at most two: a complex long double result) into BUF,
// 16 bytes each; returns how many. dprobe_x87_push() pushes them back (ftrace_tramp.S).
unsigned dprobe_x87_pop(void *buf);
void dprobe_x87_push(const void *buf, unsigned n);
}

namespace dprobe::arch
{

// The x87 stack of a hooked return, set aside at most once while exit handlers run. Not
// noexcept, like the dispatch code that uses it: a thread cancelled asynchronously in there
// must unwind through it (core/ftrace_dispatch.cpp).
struct x87_stack {
    alignas(16) unsigned char buf[32];
    unsigned n = 0;
    bool aside = false;
    void set_aside()
    {
        if (!aside) {
            n = dprobe_x87_pop(buf);
            aside = true;
        }
    }
    void put_back()
    {
        if (aside) dprobe_x87_push(buf, n);
    }
};

// The trampolines' ftrace_regs holds a struct pt_regs that lacks only the flags in EFLAGS
// form (ftrace_tramp.S keeps a lahf/seto snapshot), cs, ss and orig_ax: these make it one handlers
// can use in place, and undo that (changes of the flags by a handler are not applied).
inline unsigned long fregs_flags_to_eflags(unsigned long snap) noexcept
{
    const unsigned long ah = (snap >> 8) & 0xd5; // SF ZF AF PF CF
    const unsigned long of = (snap & 0xff) ? 0x800 : 0;
    return ah | of | 0x202; // IF and the always-one bit
}
inline unsigned long fregs_make_pt_regs(struct ftrace_regs *fregs) noexcept
{
    struct pt_regs &r = fregs->regs;
    const unsigned long snap = r.flags;
    r.flags = fregs_flags_to_eflags(snap);
    r.orig_ax = ~0UL;
    r.cs = 0x33; // __USER_CS
    r.ss = 0x2b; // __USER_DS
    return snap;
}
inline void fregs_undo_pt_regs(struct ftrace_regs *fregs, unsigned long snap) noexcept
{
    fregs->regs.flags = snap;
}

} // namespace dprobe::arch

// Where each return and fentry trampoline keeps its frame, for debuggers (ftrace_tramp.S):
// RETURN_LAYOUT_COUNT records of RETURN_LAYOUT_WORDS words, and ENTRY_LAYOUT_COUNT of
// ENTRY_LAYOUT_WORDS (ftrace_frame.h).
extern "C" const uintptr_t dprobe_return_tramp_layout[];
extern "C" const uintptr_t dprobe_entry_tramp_layout[];
