/* Stack frames the fentry and return trampolines build (shared by the .S and C++).
 * Each frame starts with a struct ftrace_regs, so its address is handed to C++ as is; the
 * vector registers are saved below it, in an area aligned to 64 bytes. */
#ifndef DPROBE_ARCH_FTRACE_FRAME_H
#define DPROBE_ARCH_FTRACE_FRAME_H

/* struct pt_regs offsets */
#define PTR_R15 0
#define PTR_R14 8
#define PTR_R13 16
#define PTR_R12 24
#define PTR_BP 32
#define PTR_BX 40
#define PTR_R11 48
#define PTR_R10 56
#define PTR_R9 64
#define PTR_R8 72
#define PTR_AX 80
#define PTR_CX 88
#define PTR_DX 96
#define PTR_SI 104
#define PTR_DI 112
#define PTR_ORIG_AX 120
#define PTR_IP 128
#define PTR_CS 136
#define PTR_FLAGS 144
#define PTR_SP 152
#define PTR_SS 160
/* struct ftrace_regs tail */
#define FREGS_VEC 168
#define FREGS_VEC_SIZE 176
/* trampoline-private */
#define FR_VWIDE 184    /* the vector registers were saved at full width (upper state live) */
#define FR_KEEP_ALL 188 /* return: xmm2-15 kept too (0/1) */
#define FR_FUNC 192     /* entry: the probed function's site address, for debuggers */
/* return, direct exit: the shadow frame, across the exit handler's call (orig_ax means
 * nothing in user space, and no ftrace_regs accessor reads it) */
#define FR_DIRECT_FRAME PTR_ORIG_AX

/* Entry frame: ENTRY_FRAME bytes below the probed function's stack pointer at its entry
 * (which points at its caller's return address). Its last three words: where the trampoline
 * jumps when it is done (the function, or dprobe_fgraph_call_* to call it), where the
 * function resumes (its body, or a handler's new regs->ip), and the r11 the stub parked. */
#define ENTRY_FRAME 224
#define FR_NEXT (ENTRY_FRAME - 24)
#define FR_TARGET (ENTRY_FRAME - 16)
/* Return frame: RET_FRAME bytes below the slot the hooked function returned from. */
#define RET_FRAME 192

/* Offsets in core's site record (checked in core/ftrace_sites.cpp): ftrace_site::ip, ::body
 * and ::light. */
#define SITE_BODY 16
#define SITE_IP 0
#define SITE_LIGHT 51
/* ftrace_site::light: the light path is on; its users want a full pt_regs at the entry; the
 * one user's direct handlers are in use (core's ftrace_direct), which the direct dispatch
 * calls (ftrace_direct.inc). */
#define SITE_LIGHT_ON 1
#define SITE_LIGHT_PT_REGS 2
#define SITE_LIGHT_DIRECT 4
/* Not light: the one user has code of its own (ftrace_direct::call, DIRECT_CALL in
 * ftrace_direct.inc), which the trampoline calls first. */
#define SITE_LIGHT_CALL 8
#define SITE_USERS 40

/* What the direct dispatch (ftrace_direct.inc) reads of core's records, checked in
 * core/ftrace_dispatch.cpp: site_users, ftrace_ops (with its ftrace_direct), task_ctx and
 * the shadow frame (words). Nothing of the layers above: an ops' owner gives the direct
 * dispatch its handlers, their first argument and its on/off word through ftrace_direct. */
#define SU_N 0
#define SU_LIGHT 8 /* bool light, then bool pt_regs: one 16-bit word */
#define SU_OPS 16
#define OPS_EXIT 8
#define OPS_PRIV 16
#define OPS_DIRECT_CALL 24
#define OPS_DIRECT_ENTRY 32
#define OPS_DIRECT_EXIT 40
#define OPS_DIRECT_GATE 48
#define OPS_DIRECT_GATE_MASK 56
#define OPS_DATA_WORDS 64
#define OPS_GEN 72
#define OPS_LIGHT 81
#define TC_SEQ 0
#define TC_DISPATCH_KP 16
#define TC_DISPATCH_KPROBE_BUSY 24
#define TC_ENTRY_PENDING 32
#define TC_ENTRY_OPS 40
#define TC_SHADOW_TOP 48
#define TC_CURRENT_KPROBE 64
#define TC_KPROBE_BUSY 80
#define TC_SHADOW 2168
#define TC_SHADOW_WORDS 32768
#define SF_RET 0
#define SF_IP 1
#define SF_RETP 2
#define SF_HOOK 3
#define SF_NUSERS 4
#define SF_USERS 5

/* For debuggers: records (and words per record) of dprobe_return_tramp_layout and
 * dprobe_entry_tramp_layout (ftrace_tramp.S). */
#define RETURN_LAYOUT_WORDS 12
#define RETURN_LAYOUT_COUNT 12
#define ENTRY_LAYOUT_WORDS 12
#define ENTRY_LAYOUT_COUNT 6

#endif
